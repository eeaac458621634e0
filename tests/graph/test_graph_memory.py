"""GraphMemory without an agent: grounding, save filtering, tools, state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from async_helper import arun
from framework_agents import InMemoryMemory, Message
from framework_agents.errors import InvalidArgumentError
from framework_agents.graph import GraphMemory, GraphStore, GroundingMemory, is_grounding
from framework_agents.history import is_well_formed
from framework_agents.tools import ToolArgumentsError


async def _memory(facts: int = 8) -> GraphMemory:
    store = GraphStore()
    await store.add_many(
        [
            ("ex:Engineer", "rdfs:subClassOf", "ex:Person"),
            ("ex:aliceSmith", "rdf:type", "ex:Engineer"),
            ("ex:aliceSmith", "ex:worksFor", "ex:acmeCorp"),
            ("ex:bobJones", "ex:likes", "ex:jazz"),
        ]
    )
    return GraphMemory(store, InMemoryMemory(), facts=facts)


def test_is_a_grounding_memory() -> None:
    memory = arun(_memory())
    assert isinstance(memory, GroundingMemory)
    assert [t.name for t in memory.tools] == ["graph_add", "graph_query"]


def test_load_grounds_on_the_latest_user_turn() -> None:
    async def main() -> None:
        memory = await _memory()
        assert await memory.load() == []  # nothing asked yet: no grounding
        await memory.save([Message("user", "what about bob?"), Message("assistant", "hm")])
        await memory.save([Message("user", "Where does Alice work?"), Message("assistant", "?")])
        loaded = await memory.load()
        assert len(loaded) == 5 and is_well_formed(loaded)
        grounding = loaded[0]
        assert sum(is_grounding(m) for m in loaded) == 1
        assert grounding.role == "system" and grounding.kind == "grounding"
        assert "ex:aliceSmith ex:worksFor ex:acmeCorp" in grounding.text
        assert "ex:aliceSmith rdf:type ex:Person (inferred)" in grounding.text
        assert "jazz" not in grounding.text
        assert loaded[1:] == await memory.inner.load()
        assert await memory.load() == loaded  # deterministic, same id too

    arun(main())


def test_ground_replaces_grounding_with_one_for_the_incoming_prompt() -> None:
    async def main() -> None:
        memory = await _memory()
        await memory.save([Message("user", "Where does Alice work?"), Message("assistant", "Acme")])
        history = await memory.load()
        grounded = await memory.ground(history, "Does Bob like jazz?")
        assert sum(is_grounding(m) for m in grounded) == 1
        assert "ex:bobJones ex:likes ex:jazz" in grounded[0].text
        assert grounded[1:] == history[1:]
        assert await memory.ground(history, "unrelated words only") == history[1:]

    arun(main())


def test_grounding_is_never_saved() -> None:
    async def main() -> None:
        memory = await _memory()
        await memory.save([Message("user", "Where does Alice work?")])
        loaded = await memory.load()
        await memory.clear()
        await memory.save([*loaded, Message("assistant", "At Acme.")])
        stored = await memory.inner.load()
        assert [m.role for m in stored] == ["user", "assistant"]
        assert not any(is_grounding(m) for m in stored)
        assert memory.store.closure_size > 0  # clear() left the graph alone

    arun(main())


def test_facts_bounds_the_grounding() -> None:
    async def main() -> None:
        memory = await _memory(facts=2)
        grounding = await memory.grounding_for("alice")
        assert grounding is not None and grounding.metadata["facts"] == 2
        assert grounding.text.count("\n- ") == 2
        none = await _memory(facts=0)
        assert await none.grounding_for("alice") is None

    arun(main())


def test_user_role_grounding() -> None:
    async def main() -> None:
        memory = GraphMemory((await _memory()).store, InMemoryMemory(), role="user")
        grounding = await memory.grounding_for("alice")
        assert grounding is not None and grounding.role == "user"

    arun(main())


@pytest.mark.parametrize(
    "kwargs",
    [{"store": "nope"}, {"inner": "nope"}, {"facts": -1}, {"facts": True}, {"role": "tool"}],
    ids=["store", "inner", "negative-facts", "bool-facts", "role"],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"store": GraphStore(), "inner": InMemoryMemory(), **kwargs}
    with pytest.raises(InvalidArgumentError):
        GraphMemory(**args)


def test_graph_add_records_and_reports_entailments() -> None:
    async def main() -> None:
        memory = await _memory()
        add = memory.tools[0]
        out = await add.invoke(
            {"subject": "ex:carol", "predicate": "rdf:type", "object": "ex:Engineer"}
        )
        assert out.startswith("Recorded: ex:carol rdf:type ex:Engineer.")
        assert "ex:carol rdf:type ex:Person (inferred)" in out
        again = await add.invoke(
            {"subject": "ex:carol", "predicate": "rdf:type", "object": "ex:Engineer"}
        )
        assert again.startswith("Already known")
        assert await add.invoke({"subject": "ex:carol", "predicate": "ex:age", "object": 33}) == (
            'Recorded: ex:carol ex:age "33"^^xsd:integer. Inferred about ex:carol: '
            "ex:carol rdf:type ex:Person (inferred)."
        )
        assert memory.store.contains("ex:carol", "ex:age", 33)

    arun(main())


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"subject": "", "predicate": "ex:p", "object": "x"}, ToolArgumentsError),
        ({"subject": "ex:s", "predicate": "ex:p", "object": ""}, ToolArgumentsError),
        ({"subject": "ex:s" * 200, "predicate": "ex:p", "object": "x"}, ToolArgumentsError),
        ({"subject": "ex:s", "predicate": "ex:p", "object": "y" * 501}, ToolArgumentsError),
        ({"subject": "ex:s", "predicate": "ex:p"}, ToolArgumentsError),
        ({"subject": "   ", "predicate": "ex:p", "object": "x"}, Exception),
        ({"subject": "?!", "predicate": "ex:p", "object": "x"}, Exception),
        ({"subject": "ex:s", "predicate": "-- --", "object": "x"}, Exception),
        ({"subject": 'ex:a"b', "predicate": "ex:p", "object": "x"}, Exception),
    ],
    ids=[
        "empty-subject",
        "empty-object",
        "long-subject",
        "long-object",
        "missing-object",
        "blank-subject",
        "subject-without-letters",
        "predicate-without-letters",
        "quoted-curie",
    ],
)
def test_graph_add_rejects_bad_terms_clearly(args: dict[str, Any], error: type[Exception]) -> None:
    async def main() -> None:
        memory = await _memory()
        before = memory.export_state()
        with pytest.raises(error) as info:
            await memory.tools[0].invoke(args)
        text = str(info.value)
        assert "subject" in text or "predicate" in text or "object" in text
        if error is Exception:
            assert getattr(info.value, "code", None) == "GRAPH_TERM_INVALID"
        assert memory.export_state() == before

    arun(main())


def test_graph_query_by_text_and_by_pattern() -> None:
    async def main() -> None:
        memory = await _memory()
        query = memory.tools[1]
        by_text = await query.invoke({"text": "alice", "limit": 3})
        assert by_text.splitlines()[0].startswith("ex:aliceSmith")
        by_pattern = await query.invoke({"subject": "ex:aliceSmith", "predicate": "rdf:type"})
        assert by_pattern.splitlines() == [
            "ex:aliceSmith rdf:type ex:Engineer",
            "ex:aliceSmith rdf:type ex:Person (inferred)",
        ]
        assert await query.invoke({"text": "zzz"}) == "No matching facts."
        with pytest.raises(InvalidArgumentError):
            await query.invoke({})
        with pytest.raises(ToolArgumentsError):
            await query.invoke({"text": "alice", "limit": 0})

    arun(main())


def test_state_round_trip_through_json() -> None:
    async def main() -> None:
        memory = await _memory()
        state = json.loads(json.dumps(memory.export_state()))
        other = GraphMemory(GraphStore(), InMemoryMemory())
        await other.import_state(state)
        assert other.store.quads() == memory.store.quads()

    arun(main())


def test_replace_is_atomic_through_the_inner_memory_and_drops_grounding() -> None:
    async def main() -> None:
        memory = await _memory()
        await memory.save([Message("user", "old")])
        grounded = await memory.ground([Message("user", "Where does Alice work?")], "alice")
        assert is_grounding(grounded[0])
        await memory.replace(grounded)
        assert [m.text for m in await memory.inner.load()] == ["Where does Alice work?"]

    arun(main())


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.save(["not a message"]),
        lambda m: m.save(None),
        lambda m: m.save("text"),
        lambda m: m.replace([1]),
        lambda m: m.ground(["not a message"], "alice"),
        lambda m: m.ground([], None),
        lambda m: m.grounding_for(5),
        lambda m: m.relevant_facts(b"alice"),
    ],
    ids=[
        "save-item",
        "save-none",
        "save-str",
        "replace-item",
        "ground-item",
        "ground-prompt",
        "grounding_for-text",
        "relevant_facts-bytes",
    ],
)
def test_bad_arguments_are_invalid_argument(call: Any) -> None:
    async def main() -> None:
        memory = await _memory()
        await memory.save([Message("user", "kept")])
        with pytest.raises(InvalidArgumentError) as info:
            await call(memory)
        assert info.value.code == "INVALID_ARGUMENT"
        assert [m.text for m in await memory.inner.load()] == ["kept"]

    arun(main())
