"""The index works out only what can reach the k best: the k best are those of scoring all.

A search for ``k`` reads postings and lifts neighbours only as far as the ``k`` best need
(MaxScore over the terms, a floor for the neighbours); a search for ``k=1000`` over fewer
records reads everything. The first ``k`` of the full ranking must be the ``k``-search's,
score for score, with words alone and fused with meaning, under every filter.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from async_helper import arun
from framework_agents import Message
from framework_agents.bank import MemoryBank

WORDS = [
    "dog",
    "puppy",
    "vet",
    "walk",
    "park",
    "city",
    "move",
    "flat",
    "rent",
    "job",
    "work",
    "office",
    "team",
    "boss",
    "car",
    "drive",
    "garage",
    "sister",
    "brother",
    "call",
    "visit",
    "cello",
    "piano",
    "lesson",
    "teacher",
    "race",
    "run",
    "training",
    "knee",
    "doctor",
    "book",
    "novel",
    "train",
    "holiday",
    "beach",
    "sea",
    "town",
]


def _texts(rng: random.Random, count: int) -> list[str]:
    """Texts of 1-12 words, a quarter of them repeated (ties in score)."""
    out: list[str] = []
    for _ in range(count):
        if out and rng.random() < 0.25:
            out.append(rng.choice(out))
        else:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))))
    return out


def _embedder(texts: list[str]) -> list[list[float]]:
    """A deterministic stand-in for a model: a vector of word counts (meaning by words)."""
    return [[float(t.split().count(w)) + 0.01 for w in WORDS] for t in texts]


async def _bank(seed: int, embedder: object) -> MemoryBank:
    rng = random.Random(seed)
    bank = MemoryBank(embedder=embedder)  # type: ignore[arg-type]
    texts = iter(_texts(rng, 400))
    for person in ("ana", "ben"):
        for session in range(12):
            turns = [
                Message(
                    "user" if i % 2 == 0 else "assistant", next(texts), id=f"{person}{session}-{i}"
                )
                for i in range(rng.randint(2, 10))
            ]
            await bank.remember_messages(turns, namespace=("t", person))
        start = datetime(2026, 1, 1, tzinfo=UTC)
        for month in range(6):
            await bank.remember(
                next(texts),
                namespace=("t", person),
                key=rng.choice(["home", "job"]),
                valid_from=start + timedelta(days=30 * month),
            )
    return bank


@pytest.mark.parametrize("fused", [False, True], ids=["words", "fusion"])
def test_the_k_best_are_the_first_k_of_the_full_ranking(fused: bool) -> None:
    async def main() -> None:
        for seed in range(3):
            bank = await _bank(seed, _embedder if fused else None)
            rng = random.Random(100 + seed)
            filters: list[dict[str, object]] = [
                {"namespace": ("t",)},
                {"namespace": ("t", "ana")},
                {"namespace": ("t",), "kinds": ["episode"]},
                {"namespace": ("t",), "as_of": datetime(2026, 3, 15, tzinfo=UTC)},
                {"namespace": ("t", "ben"), "include_past": True},
            ]
            for _ in range(40):
                query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
                for options in filters:
                    everything = await bank.search(query, k=1000, **options)  # type: ignore[arg-type]
                    for k in (1, 3, 10):
                        best = await bank.search(query, k=k, **options)  # type: ignore[arg-type]
                        got = [(h.record.id, h.score) for h in best]
                        want = [(h.record.id, h.score) for h in everything[:k]]
                        assert got == want, (query, options, k)

    arun(main())
