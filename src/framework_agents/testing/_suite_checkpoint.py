"""The store conformance suite: its tests of checkpoint (mixed into ``StoreConformance``)."""

from __future__ import annotations

import functools
from datetime import timedelta

import pytest

from ..checkpoint._base import save_progress, thread_lock
from ..checkpoint.model import ThreadCheckpoint
from ..errors import AgentError
from ..messages import Message, ToolCall
from ..stores._base import Store
from ._suite import (
    HOSTILE_THREAD_IDS,
    StoreFactory,
    error_code,
    needs,
    present,
    rich_history,
    run_on_store,
)

__all__ = ["CheckpointSuite"]


class CheckpointSuite:
    """Conformance tests of checkpointers and thread locks."""

    # -- checkpointer -------------------------------------------------------------------

    def test_checkpoint_round_trip_keeps_every_field(self, store_factory: StoreFactory) -> None:
        """Every field of ThreadCheckpoint comes back equal (JSON-equal), ids sorted."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            history = rich_history()
            pending = ToolCall("c9", "pay", {"amount": 10.5})
            saved = ThreadCheckpoint(
                "t-2",
                None,
                history,
                {"nested": {"a": [1, "two"]}},
                pending,
                decisions={"pay": "approve"},
            )
            await cp.save(saved)
            await cp.save(ThreadCheckpoint("t-1", None, [], {}))
            loaded = await cp.load("t-2")
            assert loaded is not None
            assert loaded.model_dump_json() == saved.model_dump_json()
            assert await cp.list_threads() == ["t-1", "t-2"]
            assert await cp.load("nobody") is None
            await cp.delete("t-1")
            await cp.delete("t-1")
            assert await cp.list_threads() == ["t-2"]

        run_on_store(store_factory, body)

    def test_a_question_and_its_turn_round_trip(self, store_factory: StoreFactory) -> None:
        """A pending question (its turn, landed results, the elicitation) round-trips.

        A full save comes back equal; a progress save after it clears the question.
        """

        async def body(store: Store) -> None:
            cp = store.checkpointer
            asking, done = ToolCall("a", "book", {"city": "Oslo"}), ToolCall("n", "note", {})
            turn = Message("assistant", "", tool_calls=[asking, done])
            result = Message("tool", "noted", tool_call_id="n", name="note")
            question = {
                "message": "How many nights?",
                "schema": {"type": "object", "properties": {"nights": {"type": "integer"}}},
                "state": {"request_state": "opaque", "questions": {}, "answers": {}},
            }
            saved = ThreadCheckpoint(
                "t-q",
                None,
                [Message("user", "book")],
                {},
                asking,
                turn=turn,
                results=[result],
                interrupt_id="interrupt-0123456789abcdef0123456789abcdef",
                elicitation=question,
            )
            await cp.save(saved)
            loaded = await cp.load("t-q")
            assert loaded is not None
            assert loaded.model_dump_json() == saved.model_dump_json()
            progress = saved.model_copy(update={"pending": None, "elicitation": None})
            await save_progress(cp, progress)
            again = await cp.load("t-q")
            assert again is not None and again.elicitation is None and again.pending is None
            assert again.results == [result]

        run_on_store(store_factory, body)

    def test_an_inconsistent_checkpoint_is_refused_and_nothing_stored(
        self, store_factory: StoreFactory
    ) -> None:
        """Turn fields that disagree (made with ``model_copy``, which skips validators)."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            base = ThreadCheckpoint("t1", None, [Message("user", "q", id="q")], {})
            await cp.save(base)
            orphan = Message("tool", "r", tool_call_id="nobody", name="f")
            turn = Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})])
            for bad in (
                base.model_copy(update={"in_flight": [ToolCall("c1", "f", {})]}),
                base.model_copy(update={"turn": turn, "results": [orphan]}),
            ):
                assert await error_code(functools.partial(cp.save, bad))() == "INVALID_ARGUMENT"
            loaded = await cp.load("t1")
            assert loaded is not None and loaded.model_dump_json() == base.model_dump_json()

        run_on_store(store_factory, body)

    def test_checkpoint_append_edit_and_truncate(self, store_factory: StoreFactory) -> None:
        """A grown, an edited and a shortened history each load back exactly."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            history = [Message("user", f"u{i}") for i in range(6)]
            await cp.save(ThreadCheckpoint("t", None, history[:3], {"n": 1}))
            await cp.save(ThreadCheckpoint("t", None, history, {"n": 2}))
            edited = [
                *history[:2],
                history[2].model_copy(update={"content": "edited"}),
                *history[3:],
            ]
            await cp.save(ThreadCheckpoint("t", None, edited, {"n": 3}))
            loaded = await cp.load("t")
            assert loaded is not None and [m.text for m in loaded.messages] == [
                m.text for m in edited
            ]
            await cp.save(ThreadCheckpoint("t", None, edited[:2], {"n": 4}))
            again = await cp.load("t")
            assert again is not None and again.messages == edited[:2] and again.state == {"n": 4}
            if store_factory.cross_process:  # what another process reads, not a cache
                other = store_factory.open()
                try:
                    fresh = await other.checkpointer.load("t")
                finally:
                    await other.close()
                assert fresh is not None and fresh.messages == edited[:2]

        run_on_store(store_factory, body)

    @pytest.mark.parametrize("thread_id", HOSTILE_THREAD_IDS, ids=repr)
    def test_checkpointer_refuses_hostile_thread_ids(
        self, store_factory: StoreFactory, thread_id: str
    ) -> None:
        """load/delete/thread_lock refuse a hostile thread id (THREAD_ID_INVALID)."""

        async def body(store: Store) -> None:
            cp = store.checkpointer

            async def lock() -> None:
                async with thread_lock(cp, thread_id):
                    pass

            for call in (lambda: cp.load(thread_id), lambda: cp.delete(thread_id), lock):
                assert await error_code(call)() == "THREAD_ID_INVALID"

        run_on_store(store_factory, body)

    def test_thread_lock_excludes_a_second_run(self, store_factory: StoreFactory) -> None:
        """A second hold of a held thread waits, then THREAD_BUSY; saves inside still work."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            needs(callable(getattr(cp, "thread_lock", None)), "checkpointer.thread_lock")
            other = store_factory.open() if store_factory.cross_process else store
            try:
                async with cp.thread_lock("t"):  # type: ignore[attr-defined]
                    await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {}))
                    with pytest.raises(AgentError) as info:
                        async with other.checkpointer.thread_lock("t", timeout=0.1):  # type: ignore[attr-defined]
                            pass
                    assert info.value.code == "THREAD_BUSY"
                async with other.checkpointer.thread_lock("t", timeout=5):  # type: ignore[attr-defined]
                    pass
            finally:
                if other is not store:
                    await other.close()

        run_on_store(store_factory, body)

    def test_thread_lock_is_not_reentrant(self, store_factory: StoreFactory) -> None:
        """A run that holds a thread and asks for it again waits, then THREAD_BUSY."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            needs(callable(getattr(cp, "thread_lock", None)), "checkpointer.thread_lock")
            async with cp.thread_lock("t"):  # type: ignore[attr-defined]
                with pytest.raises(AgentError) as info:
                    async with cp.thread_lock("t", timeout=0.1):  # type: ignore[attr-defined]
                        pass
                assert info.value.code == "THREAD_BUSY"
                await cp.save(ThreadCheckpoint("t", None, [Message("user", "still mine")], {}))
            loaded = await cp.load("t")
            assert loaded is not None and loaded.messages[0].text == "still mine"

        run_on_store(store_factory, body)

    def test_stale_version_is_a_conflict(self, store_factory: StoreFactory) -> None:
        """A writer whose view of the thread is stale gets CHECKPOINT_CONFLICT, writes nothing."""
        needs(store_factory.cross_process, "two opens sharing data")

        async def body(store: Store) -> None:
            cp = store.checkpointer
            needs(callable(getattr(cp, "fence", None)), "fenced writes (checkpointer.fence)")
            await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {"v": 1}))
            other = store_factory.open()
            try:
                assert await other.checkpointer.load("t") is not None
                assert await cp.load("t") is not None
                await cp.save(ThreadCheckpoint("t", None, [Message("user", "b")], {"v": 2}))
                late = ThreadCheckpoint("t", None, [Message("user", "c")], {"v": 3})
                assert (
                    await error_code(lambda: other.checkpointer.save(late))()
                    == "CHECKPOINT_CONFLICT"
                )
                # Someone else's live lock refuses an unlocked write as well.
                async with cp.thread_lock("t"):  # type: ignore[attr-defined]
                    code = await error_code(lambda: other.checkpointer.save(late))()
                    assert code == "CHECKPOINT_CONFLICT"
            finally:
                await other.close()
            loaded = await cp.load("t")
            assert loaded is not None and loaded.state == {"v": 2}

        run_on_store(store_factory, body)

    def test_checkpointer_prune_keeps_held_and_pending_threads(
        self, store_factory: StoreFactory
    ) -> None:
        """prune() removes idle threads, never a held one or one with a pending approval."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            prune = present(getattr(cp, "prune", None), "checkpointer.prune")
            pending = ToolCall("c1", "pay", {})
            await cp.save(ThreadCheckpoint("idle", None, [Message("user", "a")], {}))
            await cp.save(ThreadCheckpoint("pending", None, [], {}, pending))
            await cp.save(ThreadCheckpoint("held", None, [], {}))
            async with thread_lock(cp, "held"):
                assert await prune(timedelta(days=1)) == 0
                assert await prune(timedelta(0)) == 1
            assert await cp.list_threads() == ["held", "pending"]

        run_on_store(store_factory, body)

    def test_corrupt_checkpoint_is_reported(self, store_factory: StoreFactory) -> None:
        """Unreadable stored data: CHECKPOINT_CORRUPT on load, left as it is."""
        corrupter = present(store_factory.corrupter, "a corrupter in the factory")

        async def body(store: Store) -> None:
            cp = store.checkpointer
            await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {}))
            await corrupter.corrupt_checkpoint("t")
            for _ in range(2):
                assert await error_code(lambda: cp.load("t"))() == "CHECKPOINT_CORRUPT"

        run_on_store(store_factory, body)
