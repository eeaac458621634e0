"""One conformance suite for every Storage backend: each test runs on all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from async_helper import arun
from framework_agents.errors import StorageKeyInvalidError
from framework_agents.sessions import InMemoryStorage, LocalFileStorage, Storage

T = TypeVar("T")


BACKENDS: dict[str, Callable[[Path], Storage]] = {
    "memory": lambda _tmp: InMemoryStorage(),
    "local": lambda tmp: LocalFileStorage(tmp / "store"),
}


@pytest.fixture(params=list(BACKENDS), ids=list(BACKENDS))
def make_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Storage]:
    factory = BACKENDS[request.param]
    counter = iter(range(10**6))
    return lambda: factory(tmp_path / f"s{next(counter)}")


@pytest.fixture
def storage(make_storage: Callable[[], Storage]) -> Storage:
    return make_storage()


def test_backends_satisfy_the_protocol(storage: Storage) -> None:
    assert isinstance(storage, Storage)


def test_put_get_round_trip(storage: Storage) -> None:
    async def body() -> None:
        await storage.put("a/b/c.json", b'{"x": 1}')
        assert await storage.get("a/b/c.json") == b'{"x": 1}'
        await storage.put("top", b"")
        assert await storage.get("top") == b""

    arun(body())


def test_missing_key_is_none(storage: Storage) -> None:
    async def body() -> None:
        assert await storage.get("nope") is None
        assert await storage.get("deep/er/nope") is None
        await storage.put("deep/x", b"1")
        assert await storage.get("deep/nope") is None

    arun(body())


def test_put_replaces(storage: Storage) -> None:
    async def body() -> None:
        await storage.put("k", b"one")
        await storage.put("k", b"two")
        assert await storage.get("k") == b"two"
        assert await storage.list() == ["k"]

    arun(body())


def test_binary_data_round_trips(storage: Storage) -> None:
    payload = bytes(range(256)) * 1000

    async def body() -> None:
        await storage.put("bin", payload)
        assert await storage.get("bin") == payload
        await storage.put("ba", bytearray(b"xyz"))  # type: ignore[arg-type]  # bytes-like
        await storage.put("mv", memoryview(b"abc"))  # type: ignore[arg-type]  # bytes-like
        assert await storage.get("ba") == b"xyz"
        assert await storage.get("mv") == b"abc"

    arun(body())


def test_non_bytes_data_is_refused(storage: Storage) -> None:
    with pytest.raises(TypeError, match="bytes"):
        arun(storage.put("k", "text"))  # type: ignore[arg-type]
    assert arun(storage.list()) == []


def test_delete(storage: Storage) -> None:
    async def body() -> None:
        await storage.put("a/b", b"1")
        await storage.put("a/c", b"2")
        await storage.delete("a/b")
        assert await storage.get("a/b") is None
        assert await storage.get("a/c") == b"2"
        await storage.delete("a/b")  # missing: no-op
        await storage.delete("never/was")
        assert await storage.list() == ["a/c"]

    arun(body())


def test_delete_of_a_directory_is_a_no_op(storage: Storage) -> None:
    async def body() -> None:
        await storage.put("a/b", b"1")
        await storage.delete("a")
        assert await storage.get("a/b") == b"1"
        assert await storage.get("a") is None

    arun(body())


def test_list_is_sorted_and_filters_by_string_prefix(storage: Storage) -> None:
    keys = ["b", "a/2", "a/1", "a/10/x", "ab", "a.json", "z/y/x/w"]

    async def body() -> None:
        for k in keys:
            await storage.put(k, k.encode())
        assert await storage.list() == sorted(keys)
        assert await storage.list("") == sorted(keys)
        assert await storage.list("a") == ["a.json", "a/1", "a/10/x", "a/2", "ab"]
        assert await storage.list("a/") == ["a/1", "a/10/x", "a/2"]
        assert await storage.list("a/1") == ["a/1", "a/10/x"]
        assert await storage.list("a/10/") == ["a/10/x"]
        assert await storage.list("z/y/") == ["z/y/x/w"]
        assert await storage.list("missing/") == []
        assert await storage.list("b/") == []  # "b" is a value, not a directory
        assert await storage.list("a.") == ["a.json"]

    arun(body())


def test_a_key_is_never_both_a_value_and_a_directory(storage: Storage) -> None:
    async def body() -> None:
        await storage.put("a/b", b"1")
        with pytest.raises(StorageKeyInvalidError, match="stored under it"):
            await storage.put("a", b"x")
        await storage.put("v", b"1")
        with pytest.raises(StorageKeyInvalidError, match="already holds a value"):
            await storage.put("v/w", b"x")
        with pytest.raises(StorageKeyInvalidError, match="already holds a value"):
            await storage.put("v/w/deeper", b"x")
        assert await storage.list() == ["a/b", "v"]
        # Once the children are gone the name is free again (and the reverse).
        await storage.delete("a/b")
        await storage.put("a", b"x")
        await storage.delete("v")
        await storage.put("v/w", b"y")
        assert await storage.list() == ["a", "v/w"]

    arun(body())


def test_legitimate_dotted_keys_work(storage: Storage) -> None:
    async def body() -> None:
        await storage.put("a..b.json", b"1")
        await storage.put("x/a..b/c", b"2")
        assert await storage.get("a..b.json") == b"1"
        assert await storage.list() == ["a..b.json", "x/a..b/c"]

    arun(body())


BAD_KEYS = ["", "/abs", "..", "a/../b", "a\x00", "a\\b", "a//b", "a/", ".hidden", "CON", "\u2025"]


@pytest.mark.parametrize("key", BAD_KEYS, ids=[repr(k) for k in BAD_KEYS])
def test_every_method_refuses_invalid_keys(storage: Storage, key: str) -> None:
    calls: tuple[Callable[[], Coroutine[Any, Any, object]], ...] = (
        lambda: storage.put(key, b"x"),
        lambda: storage.get(key),
        lambda: storage.delete(key),
    )
    for call in calls:
        with pytest.raises(StorageKeyInvalidError) as info:
            arun(call())
        assert info.value.code == "STORAGE_KEY_INVALID"
    assert arun(storage.list()) == []


@pytest.mark.parametrize("prefix", ["/", "../", "a\\", "\x00"], ids=["abs", "up", "bs", "nul"])
def test_list_refuses_invalid_prefixes(storage: Storage, prefix: str) -> None:
    with pytest.raises(StorageKeyInvalidError):
        arun(storage.list(prefix))


def test_concurrent_puts_of_one_key_leave_one_whole_value(storage: Storage) -> None:
    values = [bytes([i]) * 50_000 for i in range(20)]

    async def body() -> None:
        await asyncio.gather(*(storage.put("hot/key", v) for v in values))
        assert await storage.get("hot/key") in values
        assert await storage.list() == ["hot/key"]

    arun(body())


def test_concurrent_put_and_delete_in_one_directory(storage: Storage) -> None:
    async def body() -> None:
        for round_ in range(10):
            ops = []
            for i in range(8):
                ops.append(storage.put(f"d/k{i}", b"v"))
                ops.append(storage.delete(f"d/k{(i + round_) % 8}"))
            await asyncio.gather(*ops)
        keys = await storage.list("d/")
        for k in keys:
            assert await storage.get(k) == b"v"

    arun(body())


_ALPHABET = "ab.-_/"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["put", "delete"]),
            st.text(_ALPHABET, min_size=1, max_size=8),
            st.binary(max_size=8),
        ),
        max_size=25,
    )
)
def test_backends_agree_with_each_other(tmp_path: Path, ops: list[tuple[str, str, bytes]]) -> None:
    """Random put/delete sequences: both backends accept, refuse and store exactly alike."""
    memory = InMemoryStorage()
    local = LocalFileStorage(tmp_path / f"agree-{len(list(tmp_path.iterdir()))}")

    async def apply(store: Storage, op: str, key: str, data: bytes) -> object:
        try:
            if op == "put":
                await store.put(key, data)
            else:
                await store.delete(key)
        except StorageKeyInvalidError:
            return "invalid"
        return "ok"

    async def body() -> None:
        for op, key, data in ops:
            assert await apply(memory, op, key, data) == await apply(local, op, key, data), key
        keys = await memory.list()
        assert await local.list() == keys
        for k in keys:
            assert await local.get(k) == await memory.get(k)

    arun(body())
