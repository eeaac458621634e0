"""A server whose store is sealed at rest: ``create_app(cipher=...)`` and ``serve --keys FILE``.

Every thread, approval, server record (timeline, thread list, A2A task) and bank memory the
server writes is sealed: no plaintext of a prompt, an answer, a tool argument or a memory
appears in any byte of the store; the same cipher reads it all back; a server without it
reads nothing (``STORE_INTEGRITY``: sealed, open it with the cipher), and the store is left
as it is.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import pytest
from server_support import make_agent, start_server

from framework_agents import Cipher
from framework_agents._crypto import read_keys_file
from framework_agents.errors import InvalidArgumentError
from framework_agents.server import create_app

pytest.importorskip("cryptography", reason="needs the crypto extra (cryptography)")
pytest.importorskip("framework_agents.stores", reason="needs the stores package")

JSON = {"Accept": "application/json"}
KEY = bytes(range(32))
CANARY = "Zq7canaryWx4"


def _cipher() -> Cipher:
    return Cipher(keys={"2026-12": KEY}, current="2026-12")


def _files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def _no_canary(root: Path) -> None:
    seen = [path for path in _files(root) if CANARY.encode() in path.read_bytes()]
    assert seen == [], seen


@pytest.fixture(params=["directory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """A store URL and the directory that holds every byte of it."""
    root = tmp_path / "store"
    if request.param == "directory":
        return str(root), root
    root.mkdir()
    return f"sqlite:///{root / 'agents.db'}", root


def _converse(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60, headers=JSON) as client:
        ran = client.post("/api/threads/t1/runs", json={"prompt": f"hello {CANARY}"})
        assert ran.status_code == 200, ran.text
        asked = client.post("/api/threads/t2/runs", json={"prompt": f"publish {CANARY}"})
        pending = asked.json()["pending"]
        assert pending["tool"] == "publish"
        decided = client.post(
            "/api/threads/t2/resume",
            json={"decisions": {pending["tool_call_id"]: "approve"}},
        )
        assert decided.status_code == 200, decided.text
        sent = client.post(
            "/a2a",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": "m1",
                        "role": "ROLE_USER",
                        "parts": [{"text": f"task {CANARY}"}],
                    },
                    "configuration": {"blocking": True},
                },
            },
        )
        assert "result" in sent.json(), sent.text


def test_a_sealed_server_writes_no_plaintext_and_reads_only_with_its_cipher(
    store: tuple[str, Path],
) -> None:
    url, root = store
    bank_url = url
    with_bank = _cipher()

    async def remember() -> None:
        from framework_agents.stores import open_store

        async with open_store(bank_url, cipher=with_bank) as opened:
            await opened.bank().remember(f"likes {CANARY} tea", namespace=("users", "u1"))

    asyncio.run(remember())
    served = start_server(
        create_app(make_agent, store=url, cipher=_cipher(), bank=bank_url, console=False)
    )
    try:
        _converse(served.url)
        with httpx.Client(base_url=served.url, timeout=60) as client:
            found = client.get("/api/memories", params={"namespace": "users/u1"}).json()
            assert CANARY in str(found), found
    finally:
        served.stop()
    _no_canary(root)
    before = {path: path.read_bytes() for path in _files(root)}

    reopened = start_server(create_app(make_agent, store=url, cipher=_cipher(), console=False))
    try:
        with httpx.Client(base_url=reopened.url, timeout=60) as client:
            thread = client.get("/api/threads/t2").json()
            assert f"publish {CANARY}" in str(thread["messages"]), thread
            assert thread["pending"] is None
    finally:
        reopened.stop()

    plain = start_server(create_app(make_agent, store=url, console=False))
    try:
        with httpx.Client(base_url=plain.url, timeout=60) as client:
            refused = client.get("/api/threads/t1")
            # Refused as sealed (not called corrupt), never the thread's text.
            assert refused.status_code >= 500
            assert refused.json()["error"]["code"] == "STORE_INTEGRITY", refused.text
            assert "opened without cipher=" in refused.json()["error"]["message"]
            assert CANARY not in refused.text
    finally:
        plain.stop()
    after = {path: path.read_bytes() for path in _files(root) if path in before}
    assert after == before  # reads left every sealed byte as it was


def test_memory_store_refuses_a_cipher() -> None:
    with pytest.raises(InvalidArgumentError, match="cannot encrypt at rest"):
        create_app(make_agent, store="memory:", cipher=_cipher())


def _keys_line(key_id: str, key: bytes) -> str:
    return f"{key_id} {base64.b64encode(key).decode()}"


def test_a_keys_file_names_its_last_key_current(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(
        "# old first\n" + _keys_line("2026-11", bytes(32)) + "\n\n" + _keys_line("2026-12", KEY)
    )
    cipher = read_keys_file(path)
    assert cipher.key_ids == ("2026-11", "2026-12")
    assert cipher.current == "2026-12"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("justone\n", "line 1: expected 'KEY_ID BASE64_KEY'"),
        ("\nk1 not*base64\n", "line 2: the key is not standard base64"),
        ("k1 " + base64.b64encode(b"short-secret-key").decode() + "\n", "line 1: cipher key"),
        (_keys_line("k1", KEY) + "\n" + _keys_line("k1", KEY) + "\n", "line 2: key id 'k1'"),
        ("# nothing\n", "holds no 'KEY_ID BASE64_KEY' line"),
    ],
)
def test_a_bad_keys_file_names_its_line_never_its_key(
    tmp_path: Path, content: str, says: str
) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    with pytest.raises(InvalidArgumentError) as caught:
        read_keys_file(path)
    assert says in caught.value.message
    assert base64.b64encode(KEY).decode() not in caught.value.message
    assert "c2hvcnQtc2VjcmV0LWtleQ" not in caught.value.message  # the short key's base64


def test_a_missing_keys_file_is_invalid_argument(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="cannot read the keys file"):
        read_keys_file(tmp_path / "absent")
