"""GraphMemory in agent runs: the model records facts, later runs are grounded on them."""

from __future__ import annotations

from pathlib import Path

from async_helper import arun
from framework_agents import Agent, InMemoryMemory, Message, ScriptedModel, ToolCall
from framework_agents.graph import GraphMemory, GraphStore, is_grounding
from framework_agents.history import is_well_formed


def _record(subject: str, predicate: str, obj: str) -> Message:
    args = {"subject": subject, "predicate": predicate, "object": obj}
    return Message("assistant", "", tool_calls=[ToolCall("c1", "graph_add", args)])


async def _schema(store: GraphStore) -> None:
    await store.add_many(
        [
            ("ex:Engineer", "rdfs:subClassOf", "ex:Person"),
            ("ex:worksFor", "rdfs:range", "ex:Organization"),
            ("ex:bob", "ex:likes", "ex:jazz"),
        ]
    )


def test_model_records_a_fact_and_a_later_run_is_grounded_on_it(tmp_path: Path) -> None:
    async def main() -> None:
        store = GraphStore(tmp_path / "graph")
        await _schema(store)
        inner = InMemoryMemory()
        memory = GraphMemory(store, inner)
        first = ScriptedModel([_record("ex:alice", "rdf:type", "ex:Engineer"), "Noted."])
        agent = Agent(first, memory=memory, tools=memory.tools)
        result = await agent.run("Remember this: Alice is an engineer.")
        assert result.text == "Noted."
        tool_result = next(m for m in result.messages if m.role == "tool")
        assert tool_result.text.startswith("Recorded: ex:alice rdf:type ex:Engineer.")
        assert "ex:alice rdf:type ex:Person (inferred)" in tool_result.text
        await store.close()

        # A later run, in a "new process": the store reopened from disk.
        reopened = GraphStore(tmp_path / "graph")
        later = GraphMemory(reopened, inner)
        second = ScriptedModel(["Alice is an engineer, so a person."])
        agent2 = Agent(second, memory=later, tools=later.tools)
        await agent2.run("What do you know about Alice?")
        sent = second.calls[0].messages
        grounding = [m for m in sent if is_grounding(m)]
        assert len(grounding) == 1 and sent[0] is grounding[0]
        assert "ex:alice rdf:type ex:Engineer" in grounding[0].text
        assert "ex:alice rdf:type ex:Person (inferred)" in grounding[0].text
        assert sent[-1].text == "What do you know about Alice?"
        assert is_well_formed(sent)

        stored = await inner.load()
        assert not any(is_grounding(m) for m in stored)
        roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
        assert [m.role for m in stored] == roles
        assert [m.text for m in stored if m.role == "user"] == [
            "Remember this: Alice is an engineer.",
            "What do you know about Alice?",
        ]

    arun(main())


def test_grounding_follows_the_incoming_prompt_not_the_previous_turn() -> None:
    async def main() -> None:
        store = GraphStore()
        await _schema(store)
        await store.add("ex:alice", "rdf:type", "ex:Engineer")
        memory = GraphMemory(store, InMemoryMemory())
        model = ScriptedModel(["Alice is a person.", "Bob likes jazz."])
        agent = Agent(model, memory=memory, tools=memory.tools)
        await agent.run("Tell me about Alice.")
        await agent.run("What does Bob like?")
        first, second = (call.messages for call in model.calls)
        assert "ex:alice" in first[0].text and is_grounding(first[0])
        assert is_grounding(second[0]) and "ex:bob ex:likes ex:jazz" in second[0].text
        assert sum(is_grounding(m) for m in second) == 1  # the old grounding was replaced
        assert not any(is_grounding(m) for m in await memory.inner.load())

    arun(main())


def test_tool_errors_reach_the_model_and_store_nothing() -> None:
    async def main() -> None:
        store = GraphStore()
        memory = GraphMemory(store, InMemoryMemory())
        model = ScriptedModel(
            [_record("?!", "ex:worksFor", "ex:acme"), _record("", "ex:p", "x"), "ok"]
        )
        agent = Agent(model, memory=memory, tools=memory.tools)
        result = await agent.run("Alice Smith works at Acme.")
        errors = [m.text for m in result.messages if m.role == "tool"]
        assert "GRAPH_TERM_INVALID" in errors[0] and "no letters or digits" in errors[0]
        assert "subject" in errors[1]
        assert store.closure_size == 0

    arun(main())


def test_grounding_is_sent_but_never_persisted_anywhere(tmp_path: Path) -> None:
    """Grounding reaches the model only: not the transcript, snapshots or checkpoints."""
    from framework_agents import FileCheckpointer, InMemoryStorage, SessionManager

    async def main() -> None:
        store = GraphStore()
        await _schema(store)
        await store.add("ex:alice", "rdf:type", "ex:Engineer")
        memory = GraphMemory(store, InMemoryMemory())
        session = SessionManager("s1", InMemoryStorage())
        model = ScriptedModel(["Alice is a person.", "Bob likes jazz."])
        agent = Agent(model, memory=memory, session_manager=session)
        result = await agent.run("Who is Alice?")
        assert any(is_grounding(m) for m in model.calls[0].messages)
        assert not any(is_grounding(m) for m in result.messages)
        assert not any(is_grounding(m) for m in agent.messages)
        latest = await session.load_latest()
        assert latest is not None and latest.data.messages is not None
        assert not any(is_grounding(m) for m in latest.data.messages)
        snapshot = agent.take_snapshot()
        assert snapshot.data.messages is not None
        assert not any(is_grounding(m) for m in snapshot.data.messages)

        checkpointer = FileCheckpointer(tmp_path / "cp")
        threaded = Agent(model, memory=memory)
        await threaded.run("What does Bob like?", checkpointer=checkpointer, thread_id="t1")
        assert "ex:bob ex:likes ex:jazz" in next(
            m.text for m in model.calls[1].messages if is_grounding(m)
        )
        saved = await checkpointer.load("t1")
        assert saved is not None
        assert not any(is_grounding(m) for m in saved.messages)
        assert is_well_formed(saved.messages)

    arun(main())


def test_every_model_call_of_a_tool_run_is_grounded_and_nothing_stores_it(
    tmp_path: Path,
) -> None:
    """A multi-turn tool run: each call carries one grounding first; no state keeps it."""
    from framework_agents import FileMemory, InMemoryStorage, SessionManager

    async def main() -> None:
        store = GraphStore(tmp_path / "graph")
        await _schema(store)
        await store.add("ex:alice", "rdf:type", "ex:Engineer")
        inner = FileMemory(tmp_path / "chat")
        memory = GraphMemory(store, inner)
        query = ToolCall("c2", "graph_query", {"text": "alice"})
        model = ScriptedModel(
            [
                _record("ex:alice", "ex:worksFor", "ex:acme"),
                Message("assistant", "", tool_calls=[query]),
                "Alice is an engineer at Acme.",
                "Bob likes jazz.",
            ]
        )
        session = SessionManager("s1", InMemoryStorage())
        agent = Agent(model, memory=memory, tools=memory.tools, session_manager=session)
        await agent.run("Who is Alice?")
        await agent.run("And Bob?")
        assert len(model.calls) == 4
        for call in model.calls:
            grounding = [m for m in call.messages if is_grounding(m)]
            assert len(grounding) == 1 and call.messages[0] is grounding[0]
            assert is_well_formed(call.messages)
        first_run = [call.messages[0].text for call in model.calls[:3]]
        assert all("ex:alice rdf:type ex:Person (inferred)" in text for text in first_run)
        assert "ex:bob ex:likes ex:jazz" in model.calls[3].messages[0].text
        # The transcript each call saw grew by the tool turns, grounding aside.
        assert [len(c.messages) for c in model.calls] == [2, 4, 6, 8]
        assert not any(is_grounding(m) for m in agent.messages)
        assert not any(is_grounding(m) for m in await inner.load())
        latest = await session.load_latest()
        assert latest is not None and latest.data.messages is not None
        assert not any(is_grounding(m) for m in latest.data.messages)
        assert latest.data.messages == agent.messages
        snapshot = agent.take_snapshot()
        assert snapshot.data.messages is not None
        assert not any(is_grounding(m) for m in snapshot.data.messages)
        await store.close()

    arun(main())


def test_natural_arguments_are_stored_and_a_later_run_is_grounded_on_the_entailment(
    tmp_path: Path,
) -> None:
    """A model that writes names, not CURIEs: facts stored, the subclass inference grounded."""

    async def main() -> None:
        store = GraphStore(tmp_path / "graph")
        inner = InMemoryMemory()
        memory = GraphMemory(store, inner)
        first = ScriptedModel(
            [
                _record("Engineer", "is a kind of", "Person"),
                _record("Alice Smith", "is an", "Engineer"),
                _record("alice smith", "works at", "Acme Corp"),
                _record("Alice Smith", "favorite color", "green"),
                "Noted.",
            ]
        )
        agent = Agent(first, memory=memory, tools=memory.tools)
        result = await agent.run("Alice Smith is an engineer at Acme Corp; she likes green.")
        answers = [m.text for m in result.messages if m.role == "tool"]
        assert answers[0].startswith("Recorded: ex:Engineer rdfs:subClassOf ex:Person.")
        assert answers[1].startswith("Recorded: ex:AliceSmith rdf:type ex:Engineer.")
        assert "'Alice Smith' -> ex:AliceSmith" in answers[1]
        assert "ex:AliceSmith rdf:type ex:Person (inferred)" in answers[1]
        assert answers[2].startswith("Recorded: ex:AliceSmith ex:worksAt ex:AcmeCorp.")
        assert "'alice smith' -> ex:AliceSmith" in answers[2]
        assert 'ex:worksAt "works at"' in answers[2]
        assert "'green' stored as text" in answers[3]
        assert store.contains("ex:AliceSmith", "rdfs:label", "Alice Smith")
        assert [q.object.key for q in store.quads("ex:AliceSmith", "rdfs:label")] == [
            '"Alice Smith"'
        ]
        await store.close()

        reopened = GraphStore(tmp_path / "graph")
        later = GraphMemory(reopened, inner)
        second = ScriptedModel(["Alice is a person who works at Acme Corp."])
        await Agent(second, memory=later, tools=later.tools).run("Who is alice smith?")
        grounding = second.calls[0].messages[0]
        assert is_grounding(grounding)
        assert "ex:AliceSmith rdf:type ex:Person (inferred)" in grounding.text
        assert "ex:AliceSmith ex:worksAt ex:AcmeCorp" in grounding.text
        third = ScriptedModel(["Green."])
        await Agent(third, memory=later).run("what is her favorite color?")
        assert 'ex:AliceSmith ex:favoriteColor "green"' in third.calls[0].messages[0].text
        await reopened.close()

    arun(main())
