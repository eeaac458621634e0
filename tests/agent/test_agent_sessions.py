"""Agent + SessionManager: restore before seeding, save after every run, snapshots."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    AgentBusyError,
    FunctionModel,
    InMemoryMemory,
    InMemoryStorage,
    LocalFileStorage,
    Message,
    NullConversationManager,
    ScriptedModel,
    SessionManager,
    Snapshot,
    SnapshotData,
    ToolCall,
    is_well_formed,
    tool,
)
from framework_agents.agent import ToolContext
from framework_agents.errors import (
    InvalidArgumentError,
    SnapshotCorruptError,
    SnapshotFieldError,
)
from framework_agents.sessions import Storage


class CountingStorage(InMemoryStorage):
    """InMemoryStorage that counts writes of a key (puts and appends) and gets."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[str] = []
        self.gets: list[str] = []

    async def put(self, key: str, data: bytes) -> None:
        self.puts.append(key)
        await super().put(key, data)

    async def get(self, key: str) -> bytes | None:
        self.gets.append(key)
        return await super().get(key)

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        self.puts.append(key)  # a save that appends its delta is a write of the key too
        return await super().append_logged(key, record, expected)


def echo_model() -> FunctionModel:
    return FunctionModel(lambda messages, tools: f"re: {messages[-1].text}")


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def saved(sm: SessionManager) -> Snapshot:
    snap = arun(sm.load_latest())
    assert snap is not None
    return snap


OLD = [Message("user", "old question", id="u0"), Message("assistant", "old answer", id="a0")]


def test_session_wins_over_initial_messages() -> None:
    sm = SessionManager("s", InMemoryStorage())
    arun(sm.save_latest(Snapshot(SnapshotData(messages=OLD, state={"k": 1}))))
    model = echo_model()
    agent = Agent(model, session_manager=sm, initial_messages=[Message("user", "seed")])
    arun(agent.run("new"))
    sent = model.calls[0].messages
    assert texts(sent) == ["old question", "old answer", "new"]
    assert dict(agent.state) == {"k": 1}
    assert texts(agent.messages) == ["old question", "old answer", "new", "re: new"]
    assert [m.id for m in agent.messages[:2]] == ["u0", "a0"]
    assert texts(arun(agent.memory.load())) == texts(agent.messages)


def test_a_snapshot_with_an_empty_history_still_wins_over_the_seed() -> None:
    sm = SessionManager("s", InMemoryStorage())
    arun(sm.save_latest(Snapshot(SnapshotData(messages=[], state={}))))
    model = echo_model()
    agent = Agent(model, session_manager=sm, initial_messages=[Message("user", "seed")])
    arun(agent.run("new"))
    assert texts(model.calls[0].messages) == ["new"]


def test_without_a_snapshot_the_seed_is_used_and_saved() -> None:
    sm = SessionManager("s", InMemoryStorage())
    model = echo_model()
    agent = Agent(model, session_manager=sm, initial_messages=[Message("user", "seed")])
    arun(agent.run("new"))
    assert texts(model.calls[0].messages) == ["seed", "new"]
    assert texts(saved(sm).data.messages or []) == ["seed", "new", "re: new"]


def test_every_run_ends_with_save_latest() -> None:
    storage = CountingStorage()
    sm = SessionManager("s", storage)
    agent = Agent(echo_model(), session_manager=sm)
    for i in range(3):
        agent.state["n"] = i
        arun(agent.run(f"q{i}"))
        assert storage.puts.count(sm.latest_key) == i + 1
        snap = saved(sm)
        assert snap.data.state == {"n": i}
        assert snap.data.messages == agent.messages
        assert snap.data.fields == {"messages", "state"}  # no system prompt
    # Restored exactly once: later runs do not read the session again.
    assert storage.gets.count(sm.latest_key) == 1 + 3  # 1 restore + 3 reads by this test


def test_state_changed_by_a_tool_is_saved() -> None:
    @tool
    def remember(ctx: ToolContext, fact: str) -> str:
        """Remember a fact."""
        ctx.agent.state["fact"] = fact
        return "ok"

    model = ScriptedModel(
        [
            Message("assistant", "", tool_calls=[ToolCall("c1", "remember", {"fact": "blue"})]),
            "done",
        ]
    )
    sm = SessionManager("s", InMemoryStorage())
    agent = Agent(model, tools=[remember], session_manager=sm)
    arun(agent.run("remember blue"))
    snap = saved(sm)
    assert snap.data.state == {"fact": "blue"}
    assert snap.data.messages is not None and is_well_formed(snap.data.messages)
    assert len(snap.data.messages) == 4


def test_a_restarted_process_continues_the_conversation(tmp_path: Path) -> None:
    def make() -> tuple[Agent, FunctionModel]:
        model = echo_model()
        sm = SessionManager("user-42", LocalFileStorage(tmp_path))
        return Agent(model, session_manager=sm), model

    first, _ = make()
    first.state["name"] = "Ada"
    arun(first.run("hello"))
    arun(first.run("again"))
    second, model = make()  # a new process: new storage, manager, agent, memory
    arun(second.run("still there?"))
    assert texts(model.calls[0].messages) == ["hello", "re: hello", "again", "re: again",
                                              "still there?"]  # fmt: skip
    assert dict(second.state) == {"name": "Ada"}
    # On disk: snapshot_latest.json plus the deltas appended since, read by a new process.
    stored = arun(SessionManager("user-42", LocalFileStorage(tmp_path)).load_latest())
    assert stored is not None and stored.data.messages is not None
    assert stored.data.messages[-1].text == "re: still there?"


def test_restored_history_is_repaired() -> None:
    broken = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=[ToolCall("c9", "lost", {})]),  # never answered
        Message("tool", "orphan", tool_call_id="zzz", name="x"),
    ]
    sm = SessionManager("s", InMemoryStorage())
    arun(sm.save_latest(Snapshot(SnapshotData(messages=broken))))
    model = echo_model()
    agent = Agent(model, session_manager=sm)
    arun(agent.run("next"))
    assert is_well_formed(model.calls[0].messages)
    assert is_well_formed(saved(sm).data.messages or [])


def test_corrupt_latest_fails_the_run_and_is_left_untouched() -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    arun(storage.put(sm.latest_key, b'{"schema_version": 1, "data": {"messages": 5}}'))
    model = echo_model()
    agent = Agent(model, session_manager=sm)
    with pytest.raises(SnapshotCorruptError):
        arun(agent.run("hi"))
    assert model.calls == []
    assert arun(storage.get(sm.latest_key)) == b'{"schema_version": 1, "data": {"messages": 5}}'
    # save_latest() refuses to replace it too (a corrupt store is left as it is).
    with pytest.raises(SnapshotCorruptError):
        arun(sm.save_latest(Snapshot(SnapshotData(messages=OLD))))
    assert arun(storage.get(sm.latest_key)) == b'{"schema_version": 1, "data": {"messages": 5}}'
    # Fixed by a person (in the storage itself): the next run restores it.
    good = SessionManager("s", InMemoryStorage())
    arun(good.save_latest(Snapshot(SnapshotData(messages=OLD))))
    fixed = arun(good.storage.get(good.latest_key))
    assert fixed is not None
    arun(storage.put(sm.latest_key, fixed))
    arun(agent.run("hi"))
    assert texts(model.calls[0].messages) == ["old question", "old answer", "hi"]


def test_a_failed_run_saves_nothing() -> None:
    storage = CountingStorage()
    sm = SessionManager("s", storage)
    agent = Agent(ScriptedModel(["fine", RuntimeError("model down")]), session_manager=sm)
    arun(agent.run("one"))
    with pytest.raises(RuntimeError):
        arun(agent.run("two"))
    assert storage.puts.count(sm.latest_key) == 1
    assert texts(saved(sm).data.messages or []) == ["one", "fine"]


def test_app_data_of_the_session_rides_along() -> None:
    sm = SessionManager("s", InMemoryStorage())
    arun(sm.save_latest(Snapshot(SnapshotData(messages=OLD), app_data={"theme": "dark"})))
    agent = Agent(echo_model(), session_manager=sm)
    arun(agent.run("x"))
    arun(agent.run("y"))
    assert saved(sm).app_data == {"theme": "dark"}


def test_a_system_prompt_stored_in_the_session_is_restored_but_never_written() -> None:
    sm = SessionManager("s", InMemoryStorage())
    arun(sm.save_latest(Snapshot(SnapshotData(messages=OLD, system_prompt="stored prompt"))))
    model = echo_model()
    agent = Agent(model, session_manager=sm, system_prompt="code prompt")
    arun(agent.run("x"))
    assert model.calls[0].system_prompt == "stored prompt"
    assert agent.system_prompt == "stored prompt"
    assert saved(sm).data.system_prompt is None
    # The agent's own saves carry no prompt, so a new agent uses its code's prompt.
    model2 = echo_model()
    arun(Agent(model2, session_manager=sm, system_prompt="code prompt").run("y"))
    assert model2.calls[0].system_prompt == "code prompt"


def test_two_agents_of_one_session_keep_apart() -> None:
    storage = InMemoryStorage()
    a = Agent(echo_model(), session_manager=SessionManager("s", storage, agent_id="a"))
    b = Agent(echo_model(), session_manager=SessionManager("s", storage, agent_id="b"))
    arun(a.run("to a"))
    arun(b.run("to b"))
    keys = arun(storage.list("session/s/"))
    assert keys == [
        "session/s/scopes/agent/a/snapshots/snapshot_latest.json",
        "session/s/scopes/agent/b/snapshots/snapshot_latest.json",
    ]


# -- take_snapshot / load_snapshot --------------------------------------------------------


def _agent_with_history(**kwargs: Any) -> Agent:
    agent = Agent(echo_model(), **kwargs)
    agent.state["n"] = 1
    arun(agent.run("first"))
    return agent


def test_take_snapshot_default_is_the_session_preset() -> None:
    agent = _agent_with_history(system_prompt="p")
    snap = agent.take_snapshot()
    assert snap.data.fields == {"messages", "state"}
    assert snap.data.messages == agent.messages
    assert snap.data.state == {"n": 1}
    assert snap.app_data is None
    last = agent.timeline[-1]
    assert last.kind == "snapshot" and last.label == f"take:{snap.snapshot_id}"
    assert last.rev == agent.timeline[-2].rev + 1


@pytest.mark.parametrize(
    ("kwargs", "fields"),
    [
        ({"include": ["system_prompt"]}, {"messages", "state", "system_prompt"}),
        ({"exclude": ["messages"]}, {"state"}),
        ({"preset": None, "include": ["system_prompt"]}, {"system_prompt"}),
        ({"preset": None}, set()),
    ],
    ids=["include", "exclude", "include-only", "nothing"],
)
def test_take_snapshot_field_selection(kwargs: dict[str, Any], fields: set[str]) -> None:
    agent = _agent_with_history(system_prompt="p")
    assert agent.take_snapshot(**kwargs).data.fields == fields


def test_take_snapshot_rejects_unknown_fields_and_records_nothing() -> None:
    agent = _agent_with_history()
    before = len(agent.timeline)
    with pytest.raises(SnapshotFieldError):
        agent.take_snapshot(include=["memory"])
    with pytest.raises(SnapshotFieldError):
        agent.take_snapshot(preset="all")
    assert len(agent.timeline) == before


def test_take_snapshot_does_no_io_and_is_independent() -> None:
    storage = CountingStorage()
    agent = _agent_with_history(session_manager=SessionManager("s", storage))
    puts, gets = len(storage.puts), len(storage.gets)
    snap = agent.take_snapshot(app_data={"ui": [1]})
    assert (len(storage.puts), len(storage.gets)) == (puts, gets)
    assert snap.data.messages is not None
    snap.data.messages[0].metadata["x"] = 1
    assert "x" not in agent.messages[0].metadata
    agent.state["n"] = 2
    assert snap.data.state == {"n": 1}


def test_load_snapshot_restores_only_present_fields() -> None:
    agent = _agent_with_history(system_prompt="p")
    before_messages = agent.messages
    arun(agent.load_snapshot(Snapshot(SnapshotData(state={"n": 9}))))
    assert dict(agent.state) == {"n": 9}
    assert agent.messages == before_messages
    assert agent.system_prompt == "p"
    last = agent.timeline[-1]
    assert last.kind == "snapshot" and last.label is not None and last.label.startswith("load:")


def test_load_snapshot_round_trip_through_the_session_manager() -> None:
    sm = SessionManager("s", InMemoryStorage())
    agent = _agent_with_history(session_manager=sm)
    snap = agent.take_snapshot(include=["system_prompt"], app_data={"tab": 2})
    sid = arun(sm.save_snapshot(snap.data, app_data=snap.app_data))
    arun(agent.run("second"))
    agent.state["n"] = 5
    restored = arun(sm.restore_snapshot(sid))
    assert restored.app_data == {"tab": 2}
    arun(agent.load_snapshot(restored))
    assert texts(agent.messages) == ["first", "re: first"]
    assert dict(agent.state) == {"n": 1}
    assert texts(arun(agent.memory.load())) == ["first", "re: first"]  # memory in sync
    assert texts(saved(sm).data.messages or []) == ["first", "re: first"]  # session in sync


def test_load_snapshot_messages_keep_memory_in_sync_and_are_repaired() -> None:
    agent = _agent_with_history(memory=InMemoryMemory())
    history = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "t", {})]),
    ]
    arun(agent.load_snapshot(Snapshot(SnapshotData(messages=history))))
    assert is_well_formed(agent.messages)
    assert agent.messages[-1].kind == "interrupted"
    assert arun(agent.memory.load()) == agent.messages
    model = agent.model
    assert isinstance(model, FunctionModel)
    arun(agent.run("next"))
    assert texts(model.calls[-1].messages)[:1] == ["q"]


def test_load_snapshot_system_prompt_reaches_the_model() -> None:
    agent = _agent_with_history(system_prompt="old")
    arun(agent.load_snapshot(Snapshot(SnapshotData(system_prompt="new prompt"))))
    assert agent.system_prompt == "new prompt"
    arun(agent.run("x"))
    model = agent.model
    assert isinstance(model, FunctionModel)
    assert model.calls[-1].system_prompt == "new prompt"


def test_load_snapshot_before_the_first_run_is_not_clobbered_by_the_restore() -> None:
    sm = SessionManager("s", InMemoryStorage())
    arun(sm.save_latest(Snapshot(SnapshotData(messages=OLD, state={"from": "session"}))))
    model = echo_model()
    agent = Agent(model, session_manager=sm)
    arun(agent.load_snapshot(Snapshot(SnapshotData(state={"from": "loaded"}))))
    arun(agent.run("go"))
    assert dict(agent.state) == {"from": "loaded"}
    assert texts(model.calls[0].messages) == ["old question", "old answer", "go"]


def test_load_snapshot_takes_a_snapshot() -> None:
    agent = Agent(echo_model())
    with pytest.raises(InvalidArgumentError):
        arun(agent.load_snapshot(SnapshotData(state={})))  # type: ignore[arg-type]


def test_snapshot_calls_during_a_run_are_busy() -> None:
    async def body() -> None:
        entered, release = asyncio.Event(), asyncio.Event()

        async def slow(messages: list[Message], tools: object) -> str:
            entered.set()
            await release.wait()
            return "done"

        agent = Agent(FunctionModel(slow), memory=InMemoryMemory())
        task = asyncio.create_task(agent.run("x"))
        await entered.wait()
        with pytest.raises(AgentBusyError):
            await agent.load_snapshot(Snapshot(SnapshotData(state={})))
        with pytest.raises(AgentBusyError):
            await agent.edit_message(0, "y")
        release.set()
        await task

    arun(body())


def test_null_manager_session_keeps_the_whole_history(tmp_path: Path) -> None:
    storage: Storage = LocalFileStorage(tmp_path)
    sm = SessionManager("s", storage)
    agent = Agent(
        echo_model(),
        session_manager=sm,
        memory=InMemoryMemory(max_messages=1000),
        conversation_manager=NullConversationManager(),
    )
    for i in range(30):
        arun(agent.run(f"q{i}"))
    assert len(saved(sm).data.messages or []) == 60


def test_an_interrupted_run_saves_the_history_it_commits() -> None:
    from framework_agents import HitlInterrupt

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish the text."""
        return "published"

    model = ScriptedModel(
        [Message("assistant", "", tool_calls=[ToolCall("c1", "publish", {"text": "t"})])]
    )
    sm = SessionManager("s", InMemoryStorage())
    agent = Agent(model, tools=[publish], session_manager=sm)
    agent.state["draft"] = "t"
    with pytest.raises(HitlInterrupt):
        arun(agent.run("publish it"))
    snap = saved(sm)
    assert texts(snap.data.messages or []) == ["publish it"]  # up to the interrupted turn
    assert snap.data.state == {"draft": "t"}
