"""The store conformance suite: its tests of storage (mixed into ``StoreConformance``)."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pytest

from ..errors import AgentError
from ..messages import Message
from ..sessions._base import as_logged, digest
from ..sessions.manager import SessionManager
from ..sessions.snapshot import Snapshot, SnapshotData
from ..stores._base import Store
from ._suite import HOSTILE_KEYS, StoreFactory, error_code, present, rich_history, run_on_store

__all__ = ["StorageSuite"]


class StorageSuite:
    """Conformance tests of storage and sessions."""

    # -- storage ------------------------------------------------------------------------

    def test_storage_round_trip_and_sorted_listing(self, store_factory: StoreFactory) -> None:
        """put/get/delete/list behave like the file backend (bytes exact, keys sorted)."""

        async def body(store: Store) -> None:
            s = store.storage
            values = {"b/2": b"\x00\xff two", "a": b"", "b/1": bytes(range(256)), "c.d/e_f-g": b"x"}
            for key, value in values.items():
                await s.put(key, value)
            assert await s.list() == sorted(values)
            assert await s.list("b/") == ["b/1", "b/2"]
            assert await s.list("b") == ["b/1", "b/2"]
            for key, value in values.items():
                assert await s.get(key) == value
            await s.put("a", b"again")
            assert await s.get("a") == b"again"
            await s.delete("b/1")
            await s.delete("missing")
            assert await s.get("b/1") is None
            assert await s.list() == ["a", "b/2", "c.d/e_f-g"]

        run_on_store(store_factory, body)

    def test_storage_key_is_a_value_or_a_directory(self, store_factory: StoreFactory) -> None:
        """Storing ``a`` under ``a/b`` (or the reverse) is STORAGE_KEY_INVALID."""

        async def body(store: Store) -> None:
            s = store.storage
            await s.put("a/b", b"1")
            assert await error_code(lambda: s.put("a", b"2"))() == "STORAGE_KEY_INVALID"
            await s.put("c", b"1")
            assert await error_code(lambda: s.put("c/d", b"2"))() == "STORAGE_KEY_INVALID"
            assert await s.list() == ["a/b", "c"]

        run_on_store(store_factory, body)

    @pytest.mark.parametrize("key", HOSTILE_KEYS, ids=repr)
    def test_storage_refuses_hostile_keys(self, store_factory: StoreFactory, key: str) -> None:
        """Every method refuses a hostile key before touching anything."""

        async def body(store: Store) -> None:
            s = store.storage
            for call in (lambda: s.put(key, b"x"), lambda: s.get(key), lambda: s.delete(key)):
                assert await error_code(call)() == "STORAGE_KEY_INVALID"
            with pytest.raises(AgentError) as info:
                store.memory(key)
            assert info.value.code == "STORAGE_KEY_INVALID"
            assert await s.list() == []

        run_on_store(store_factory, body)

    def test_session_manager_round_trip_and_corrupt_snapshot(
        self, store_factory: StoreFactory
    ) -> None:
        """SessionManager works on the storage; bytes that are no snapshot: SNAPSHOT_CORRUPT."""

        async def body(store: Store) -> None:
            manager = SessionManager("s1", store.storage)
            snapshot = Snapshot(SnapshotData(messages=rich_history(), state={"k": 1}))
            await manager.save_latest(snapshot)
            loaded = await manager.load_latest()
            assert loaded is not None and loaded.to_json() == snapshot.to_json()
            await store.storage.put(manager.latest_key, b'{"schema_version": 1, "dat')
            with pytest.raises(AgentError) as info:
                await manager.load_latest()
            assert info.value.code == "SNAPSHOT_CORRUPT"

        run_on_store(store_factory, body)

    def test_storage_compare_and_put(self, store_factory: StoreFactory) -> None:
        """compare_and_put writes only over the expected value; else CHECKPOINT_CONFLICT."""

        async def body(store: Store) -> None:
            cas = present(
                getattr(store.storage, "compare_and_put", None), "storage.compare_and_put"
            )
            await cas("k", b"1", expected=None)
            assert (
                await error_code(lambda: cas("k", b"x", expected=None))() == "CHECKPOINT_CONFLICT"
            )
            await cas("k", b"2", expected=b"1")
            assert (
                await error_code(lambda: cas("k", b"x", expected=b"1"))() == "CHECKPOINT_CONFLICT"
            )
            assert await store.storage.get("k") == b"2"
            assert await error_code(lambda: cas("k/sub", b"x", expected=None))() in {
                "STORAGE_KEY_INVALID",
                "CHECKPOINT_CONFLICT",
            }
            assert await store.storage.list() == ["k"]

        run_on_store(store_factory, body)

    def test_storage_prune(self, store_factory: StoreFactory) -> None:
        """prune(older_than) removes what was not written since, and keeps the rest."""

        async def body(store: Store) -> None:
            prune = present(getattr(store.storage, "prune", None), "storage.prune")
            await store.storage.put("old", b"1")
            assert await prune(timedelta(days=1)) == 0
            assert await prune(timedelta(0)) == 1
            assert await store.storage.list() == []

        run_on_store(store_factory, body)

    def test_storage_logged_values(self, store_factory: StoreFactory) -> None:
        """Records appended to a value: tags move on, a stale tag is refused, a store resets."""

        async def body(store: Store) -> None:
            s = present(as_logged(store.storage), "logged values (read_logged/append_logged/swap)")
            assert await s.read_logged("v") == (None, [], None)
            assert (
                await error_code(lambda: s.append_logged("v", b"r", "x"))() == "CHECKPOINT_CONFLICT"
            )
            await s.put("v", b"base")
            tag0 = digest(b"base")
            assert await s.read_logged("v") == (b"base", [], tag0)
            tag1 = await s.append_logged("v", b"r1", tag0)
            tag2 = await s.append_logged("v", b"\x00r2\n", tag1)
            assert len({tag0, tag1, tag2}) == 3
            assert await s.read_logged("v") == (b"base", [b"r1", b"\x00r2\n"], tag2)
            assert await s.get("v") == b"base"  # the value alone is what was stored
            for stale in (tag0, tag1):  # a writer that missed an append writes nothing
                append = error_code(functools.partial(s.append_logged, "v", b"x", stale))
                assert await append() == "CHECKPOINT_CONFLICT"
                assert await error_code(functools.partial(s.swap, "v", b"x", stale))() == (
                    "CHECKPOINT_CONFLICT"
                )
            assert await error_code(lambda: s.swap("v", b"x", None))() == "CHECKPOINT_CONFLICT"
            cas: Any = getattr(s, "compare_and_put", None)
            if callable(cas):  # a value with records holds more than its bytes
                assert await error_code(lambda: cas("v", b"x", expected=b"base"))() == (
                    "CHECKPOINT_CONFLICT"
                )
            assert (await s.read_logged("v"))[1] == [b"r1", b"\x00r2\n"]
            await s.swap("v", b"folded", tag2)  # storing a value starts a new log
            assert await s.read_logged("v") == (b"folded", [], digest(b"folded"))
            tag3 = await s.append_logged("v", b"r3", digest(b"folded"))
            await s.put("v", b"plain")
            assert await s.read_logged("v") == (b"plain", [], digest(b"plain"))
            assert await error_code(lambda: s.append_logged("v", b"x", tag3))() == (
                "CHECKPOINT_CONFLICT"
            )
            await s.append_logged("v", b"r4", digest(b"plain"))
            await s.delete("v")  # the log goes with the value
            assert await s.read_logged("v") == (None, [], None)
            await s.swap("v", b"new", None)
            assert await s.read_logged("v") == (b"new", [], digest(b"new"))
            assert await s.list() == ["v"]

        run_on_store(store_factory, body)

    def test_session_saves_append_what_is_new(self, store_factory: StoreFactory) -> None:
        """On a logging storage a grown session is one record; another writer is refused."""

        async def body(store: Store) -> None:
            s = present(as_logged(store.storage), "logged values (read_logged/append_logged/swap)")
            manager = SessionManager("s1", store.storage)
            history = rich_history()
            await manager.save_latest(Snapshot(SnapshotData(messages=history[:2])))
            for n in range(3, len(history) + 1):
                await manager.save_latest(Snapshot(SnapshotData(messages=history[:n])))
            value, records, _ = await s.read_logged(manager.latest_key)
            assert value is not None and len(records) == len(history) - 2
            assert max(map(len, records)) < len(value) + 400  # a record holds one message
            other = SessionManager("s1", store.storage)
            loaded = await other.load_latest()
            assert loaded is not None
            assert loaded.data.messages is not None
            assert [m.model_dump() for m in loaded.data.messages] == [
                m.model_dump() for m in history
            ]
            grown = [*history, Message("user", "more")]
            await other.save_latest(Snapshot(SnapshotData(messages=grown)))
            with pytest.raises(AgentError) as info:  # it did not see the other's save
                await manager.save_latest(Snapshot(SnapshotData(messages=[*history, history[0]])))
            assert info.value.code == "CHECKPOINT_CONFLICT"
            again = await manager.load_latest()
            assert again is not None and again.data.messages is not None
            assert [m.text for m in again.data.messages][-1] == "more"

        run_on_store(store_factory, body)
