"""The pieces of tenancy on their own: the token table, the tokens file, the scoped store.

No server here: the scoped checkpointer and storage over the in-process backends, the
token table's comparisons counted, and the tokens file's refusals.
"""

from __future__ import annotations

import asyncio
import hmac
from pathlib import Path

import pytest

from framework_agents import Message
from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.checkpoint.model import ThreadCheckpoint
from framework_agents.errors import InvalidArgumentError, ThreadIdInvalidError
from framework_agents.server._store import ServerStore
from framework_agents.server._tenants import (
    LoggedTenantStorage,
    NoTenantError,
    TokenTable,
    bank_namespace,
    client_namespace,
    read_tokens_file,
    serving_tenant,
    tenant_store,
)
from framework_agents.sessions import InMemoryStorage

TOKENS = {"tok-a": "alpha", "tok-b": "beta", "tok-a2": "alpha"}


def test_the_token_table_finds_each_tenant_and_compares_every_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = TokenTable(TOKENS)
    calls: list[int] = []
    real = hmac.compare_digest

    def counted(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counted)  # the module _tenants calls
    for header, tenant in [
        (b"Bearer tok-a", "alpha"),
        (b"Bearer tok-a2", "alpha"),
        (b"Bearer tok-b", "beta"),
        (b"Bearer tok-", None),
        (b"Bearer tok-a ", None),
        (b"tok-a", None),
        (b"", None),
    ]:
        calls.clear()
        assert table.tenant_of(header) == tenant
        assert len(calls) == len(TOKENS)  # every token, whichever matched: no early exit
    assert table.tenants == ["alpha", "beta"]


def test_a_tokens_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# comment\n\n  tok-a   alpha  \ntok-b\tbeta\r\n   # indented comment\n")
    assert read_tokens_file(path) == {"tok-a": "alpha", "tok-b": "beta"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tok-a alpha\ntok-a beta\n", "line 2: this token is already on line 1"),
        ("tok-a\n", "line 1: expected 'TOKEN TENANT' (two fields), found 1"),
        ("\n\ntok-a al pha\n", "line 3: expected 'TOKEN TENANT' (two fields), found 3"),
        ("tok-a -alpha\n", "line 1: tenant '-alpha' is not a tenant name"),
        ("tok-a COM1\n", "line 1: tenant 'COM1' is not a tenant name"),
        ("tok-\x01a alpha\n", "line 1: a token must be"),
    ],
    ids=["repeated", "one-field", "three-fields", "leading-dash", "device", "control-char"],
)
def test_a_bad_tokens_file_names_the_line_not_the_token(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError) as refused:
        read_tokens_file(path)
    assert says in str(refused.value)
    assert "tok-a" not in str(refused.value).split(": ", 1)[1].replace("tokens file", "")


def _store() -> ServerStore:
    return tenant_store(ServerStore(InMemoryCheckpointer(), InMemoryStorage()))


def test_the_scoped_store_keeps_one_thread_id_apart_per_tenant() -> None:
    store = _store()
    inner_cp = store.checkpointer.inner

    async def scenario() -> None:
        for tenant in ("alpha", "beta"):
            with serving_tenant(tenant):
                text = f"{tenant} says"
                await store.checkpointer.save(
                    ThreadCheckpoint("t.1", None, [Message("user", text)])
                )
                await store.storage.put("server/threads/t.1/timeline.json", tenant.encode())
        assert sorted(await inner_cp.list_threads()) == ["alpha.t.1", "beta.t.1"]
        assert sorted(await store.storage.inner.list("")) == [
            "tenants/alpha/server/threads/t.1/timeline.json",
            "tenants/beta/server/threads/t.1/timeline.json",
        ]
        for tenant in ("alpha", "beta"):
            with serving_tenant(tenant):
                loaded = await store.checkpointer.load("t.1")
                assert loaded is not None and loaded.thread_id == "t.1"
                assert loaded.messages[0].text == f"{tenant} says"
                assert await store.checkpointer.list_threads() == ["t.1"]
                assert await store.storage.get("server/threads/t.1/timeline.json") == (
                    tenant.encode()
                )
                assert await store.storage.list("server/") == ["server/threads/t.1/timeline.json"]
        with serving_tenant("alpha"):
            await store.checkpointer.delete("t.1")
            assert await store.checkpointer.load("t.1") is None
            async with store.checkpointer.hold_thread("t.1") as held:  # the agent's path
                assert held.checkpoint is None
                await held.save_last(ThreadCheckpoint("t.1", None, [Message("user", "again")]))
            async with store.checkpointer.thread_lock("t.1", timeout=0):
                pass
        with serving_tenant("beta"):
            kept = await store.checkpointer.load("t.1")
            assert kept is not None and kept.messages[0].text == "beta says"
        assert sorted(await inner_cp.list_threads()) == ["alpha.t.1", "beta.t.1"]

    asyncio.run(scenario())
    assert isinstance(store.storage, LoggedTenantStorage)  # the in-memory storage keeps logs


def test_the_scoped_store_refuses_without_a_tenant_and_touches_nothing() -> None:
    store = _store()

    async def scenario() -> None:
        with pytest.raises(NoTenantError):
            await store.checkpointer.load("t1")
        with pytest.raises(NoTenantError):
            await store.storage.put("k", b"v")
        with pytest.raises(NoTenantError):
            bank_namespace(("mcp",))
        assert await store.storage.inner.list("") == []

    asyncio.run(scenario())


def test_a_thread_id_too_long_with_the_prefix_is_refused_by_its_own_length() -> None:
    store = _store()

    async def scenario() -> None:
        with serving_tenant("alpha"):
            assert await store.checkpointer.load("x" * 122) is None  # 'alpha.' + 122 = 128
            with pytest.raises(ThreadIdInvalidError, match="at most 122 characters"):
                await store.checkpointer.load("x" * 123)
            with pytest.raises(ThreadIdInvalidError):
                await store.checkpointer.load("../alpha")

    asyncio.run(scenario())


def test_bank_namespaces_carry_the_tenant_and_come_back_without_it() -> None:
    with serving_tenant("alpha"):
        assert bank_namespace(("a", "b")) == ("tenant:alpha", "a", "b")
        assert client_namespace(("tenant:alpha", "a", "b")) == ("a", "b")
        assert client_namespace(("tenant:beta", "a")) is None
        assert client_namespace(("a",)) is None
        with pytest.raises(InvalidArgumentError, match="1 to 7 parts"):
            bank_namespace(tuple("abcdefgh"))
