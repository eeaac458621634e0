"""``SnapshotData.timeline``: its stored form, its checks, and how ``save_latest`` appends it.

The timeline is optional (absent when ``None``): snapshots without one are stored and read
as before. A log record holds the entries appended since the stored snapshot, so a save
writes the new entries only; a timeline that does not extend the stored one is stored
whole.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from async_helper import some
from framework_agents import Message, TimelineEntry, ToolCall
from framework_agents.errors import AgentError, SnapshotCorruptError, StateNotJsonError
from framework_agents.sessions import InMemoryStorage, LocalFileStorage, SessionManager, Storage
from framework_agents.sessions.snapshot import Snapshot, SnapshotData

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def entries(*revs: int, ran: tuple[ToolCall, ...] = ()) -> list[TimelineEntry]:
    return [TimelineEntry(rev=r, kind="run", label=f"r{r}", at=WHEN, ran=ran) for r in revs]


def history(n: int) -> list[Message]:
    return [Message("user", f"m{i}", id=f"m{i}") for i in range(n)]


def _storage(kind: str, root: Path) -> Storage:
    return InMemoryStorage() if kind == "memory" else LocalFileStorage(root)


# -- the stored form ----------------------------------------------------------------------


def test_a_snapshot_without_a_timeline_is_stored_as_before() -> None:
    raw = Snapshot(SnapshotData(history(1), {"k": 1}, "p")).to_json()
    assert b"timeline" not in raw
    assert Snapshot.from_json(raw).data.timeline is None
    assert SnapshotData().timeline is None


def test_the_timeline_is_stored_after_the_other_fields_and_reads_back_equal() -> None:
    ran = (ToolCall("c1", "transfer", {"to": "bob", "amount": 10}),)
    snap = Snapshot(SnapshotData(history(2), {"k": 1}, timeline=entries(1, 3, ran=ran)))
    raw = snap.to_json()
    data = json.loads(raw)["data"]
    assert list(data) == ["messages", "state", "timeline"]
    assert data["timeline"][1] == {
        "rev": 3,
        "kind": "run",
        "label": "r3",
        "at": "2026-01-02T03:04:05.678901Z",
        "ran": [{"id": "c1", "name": "transfer", "args": {"to": "bob", "amount": 10}}],
    }
    back = Snapshot.from_json(raw)
    assert back == snap and back.data.timeline == entries(1, 3, ran=ran)
    # Written another way (spaces), the strict reader reads the same.
    assert Snapshot.from_json(json.dumps(json.loads(raw), indent=1)) == snap


@pytest.mark.parametrize("fields", ["messages-only", "all"], ids=["messages-only", "all"])
def test_a_large_snapshot_with_a_timeline_reads_back_equal(fields: str) -> None:
    # Past 256 KiB the messages are parsed in slices: the timeline may follow them directly.
    messages = [Message("user", "x" * 1000, id=f"m{i}") for i in range(400)]
    extra: dict[str, Any] = {} if fields == "messages-only" else {"state": {}, "system_prompt": "p"}
    snap = Snapshot(SnapshotData(messages, timeline=entries(*range(1, 200)), **extra))
    raw = snap.to_json()
    assert len(raw) > 256 << 10
    assert Snapshot.from_json(raw) == snap
    assert Snapshot._canonical_sliced(raw) == snap  # in slices, not parsed whole again


def test_timeline_revs_must_grow() -> None:
    with pytest.raises(ValidationError) as info:
        SnapshotData(timeline=entries(1, 3, 2))
    assert getattr(info.value, "code", None) == "INVALID_ARGUMENT"
    raw = Snapshot(SnapshotData(timeline=entries(1, 2))).to_json()
    with pytest.raises(SnapshotCorruptError):
        Snapshot.from_json(raw.replace(b'"rev":2', b'"rev":1'))


def test_the_arguments_an_entry_says_ran_must_be_plain_json() -> None:
    bad = (ToolCall("c1", "t", {"x": float("nan")}),)
    with pytest.raises(StateNotJsonError) as info:
        SnapshotData(timeline=[*entries(1), *entries(2, ran=bad)])
    assert "timeline[1].ran[0].args" in str(info.value)


# -- save_latest appends the new entries ------------------------------------------------


def _record_revs(storage: InMemoryStorage, key: str) -> list[list[int]]:
    _value, records, _tag = asyncio.run(storage.read_logged(key))
    return [
        [e["rev"] for e in json.loads(r.partition(b"\n")[2])["data"].get("timeline", [])]
        for r in records
    ]


def test_a_log_record_holds_only_the_entries_added_since() -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)

    async def main() -> None:
        for n in range(1, 6):
            await sm.save_latest(Snapshot(SnapshotData(history(n), timeline=entries(*range(1, n)))))

    asyncio.run(main())
    # The first save is stored whole (no timeline yet); each later one appends its entry.
    assert _record_revs(storage, sm.latest_key) == [[1], [2], [3], [4]]
    latest = some(asyncio.run(SessionManager("s", storage).load_latest()))
    assert latest.data.timeline == entries(1, 2, 3, 4)


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_timeline_that_does_not_extend_the_stored_one_is_stored_whole(
    kind: str, tmp_path: Path
) -> None:
    storage = _storage(kind, tmp_path)
    sm = SessionManager("s", storage)

    async def main() -> None:
        await sm.save_latest(Snapshot(SnapshotData(history(1), timeline=entries(1))))
        await sm.save_latest(Snapshot(SnapshotData(history(2), timeline=entries(1, 2))))
        other = [TimelineEntry(rev=1, kind="edit", at=WHEN)]  # not the stored rev 1
        await sm.save_latest(Snapshot(SnapshotData(history(3), timeline=other)))
        latest = some(await SessionManager("s", storage).load_latest())
        assert latest.data.timeline == other
        await sm.save_latest(Snapshot(SnapshotData(history(4))))  # no timeline: none stored
        latest = some(await SessionManager("s", storage).load_latest())
        assert latest.data.timeline is None and len(latest.data.messages or []) == 4

    asyncio.run(main())


def test_a_log_record_whose_timeline_goes_back_is_corrupt() -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    asyncio.run(sm.save_latest(Snapshot(SnapshotData(history(1), timeline=entries(1, 2)))))
    back = Snapshot(SnapshotData([], timeline=entries(2))).to_json()

    async def main() -> None:
        _value, _records, tag = await storage.read_logged(sm.latest_key)
        assert tag is not None
        await storage.append_logged(sm.latest_key, b"1\n" + back, tag)
        with pytest.raises(SnapshotCorruptError, match="goes back to rev 2"):
            await SessionManager("s", storage).load_latest()

    asyncio.run(main())


def _records(storage: InMemoryStorage, key: str) -> list[bytes]:
    return asyncio.run(storage.read_logged(key))[1]


def test_a_window_that_slid_appends_only_what_it_added() -> None:
    # A window drops messages from the front: with a timeline to keep, the record keeps
    # stored messages D to N (``D:N``) and holds only the new ones.
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    msgs = history(8)
    timeline = entries(*range(1, 60))

    async def main() -> None:
        await sm.save_latest(Snapshot(SnapshotData(msgs[:4], timeline=timeline)))
        await sm.save_latest(Snapshot(SnapshotData(msgs[2:6], timeline=entries(*range(1, 61)))))
        pinned = [msgs[0], *msgs[3:7]]  # a pinned first message: not a slide
        await sm.save_latest(Snapshot(SnapshotData(pinned, timeline=entries(*range(1, 62)))))

    asyncio.run(main())
    first, second = _records(storage, sm.latest_key)
    head, _, body = first.partition(b"\n")
    assert head == b"2:4"
    assert [m["id"] for m in json.loads(body)["data"]["messages"]] == ["m4", "m5"]
    assert second.partition(b"\n")[0] == b"0"  # the messages whole, the new entry only
    latest = some(asyncio.run(SessionManager("s", storage).load_latest()))
    assert [m.id for m in latest.data.messages or []] == ["m0", "m3", "m4", "m5", "m6"]
    assert latest.data.timeline == entries(*range(1, 62))


@pytest.mark.parametrize(
    "head",
    [b"x", b"1:", b":1", b"x:1", b"2:1", b"0:9"],
    ids=["not-a-count", "no-keep", "no-drop", "bad-drop", "drop-past-keep", "keep-past-stored"],
)
def test_a_log_record_with_a_bad_message_count_is_corrupt(head: bytes) -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    asyncio.run(sm.save_latest(Snapshot(SnapshotData(history(2), timeline=entries(1)))))
    body = Snapshot(SnapshotData([], timeline=entries(2))).to_json()

    async def main() -> None:
        tag = (await storage.read_logged(sm.latest_key))[2]
        assert tag is not None
        await storage.append_logged(sm.latest_key, head + b"\n" + body, tag)
        with pytest.raises(SnapshotCorruptError, match="log record"):
            await SessionManager("s", storage).load_latest()

    asyncio.run(main())


def test_a_log_record_dropping_messages_without_a_timeline_is_corrupt() -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    asyncio.run(sm.save_latest(Snapshot(SnapshotData(history(2)))))
    body = Snapshot(SnapshotData([])).to_json()

    async def main() -> None:
        tag = (await storage.read_logged(sm.latest_key))[2]
        assert tag is not None
        await storage.append_logged(sm.latest_key, b"1:2\n" + body, tag)
        with pytest.raises(SnapshotCorruptError, match="no timeline"):
            await SessionManager("s", storage).load_latest()

    asyncio.run(main())


_TAILS: dict[str, list[Any]] = {
    "nothing": [],
    "entries": entries(7, 8),
    "a dict": [{"rev": 7, "kind": "edit", "at": "2026-01-02T03:04:05Z"}],
    "not an entry": [*entries(7), 5],
    "going back": entries(3),
    "bad arguments": entries(7, ran=(ToolCall("c", "t", {"v": float("inf")}),)),
}


@pytest.mark.parametrize("tail", _TAILS.values(), ids=_TAILS.keys())
def test_snapshot_data_validates_the_new_entries_as_the_constructor_does(tail: list[Any]) -> None:
    # SessionManager.snapshot_data skips the stored entries: same entries, same errors as
    # SnapshotData(...) itself.
    stored = entries(1, 2, 3, 4)
    manager = SessionManager("s", InMemoryStorage())
    asyncio.run(manager.save_latest(Snapshot(manager.snapshot_data([], timeline=stored))))

    def build(make: Any) -> Any:
        try:
            return make([], {}, timeline=[*stored, *tail])
        except (ValidationError, AgentError) as exc:
            return type(exc), str(exc)

    fast, full = build(manager.snapshot_data), build(SnapshotData)
    assert fast == full
    if not isinstance(full, tuple):
        assert all(a is b for a, b in zip(fast.timeline, stored, strict=False))
