"""The term table: interns terms as integer ids (IRIs positive, literals negative)."""

from __future__ import annotations

from typing import Any

from .rules import VOCAB
from .terms import IRI, Literal, Term

__all__ = ["TermTable"]


class TermTable:
    """Maps terms to ids and back; the rule vocabulary holds its reserved ids.

    Ids are never reused while the table lives (a term whose last fact is removed keeps
    its id); a store rebuilt from disk or from an exported state starts a fresh table.
    """

    def __init__(self) -> None:
        self._ids: dict[Term, int] = {}
        self._iris: list[IRI] = [IRI("")]
        self._literals: list[Literal] = [Literal("")]
        self._iri_keys: list[str] = [""]
        self._literal_keys: list[str] = [""]
        for name, reserved in sorted(VOCAB.items(), key=lambda kv: kv[1]):
            assert self.intern(IRI(name)) == reserved

    def intern(self, term: Term) -> int:
        """The id of ``term``, allocating one when it is new."""
        found = self._ids.get(term)
        if found is not None:
            return found
        if isinstance(term, IRI):
            new = len(self._iris)
            self._iris.append(term)
            self._iri_keys.append(term.key)
        else:
            new = -len(self._literals)
            self._literals.append(term)
            self._literal_keys.append(term.key)
        self._ids[term] = new
        return new

    def lookup(self, term: Term) -> int | None:
        """The id of ``term`` if it was ever interned."""
        return self._ids.get(term)

    def term(self, ident: int) -> Term:
        """The term of an id."""
        return self._iris[ident] if ident > 0 else self._literals[-ident]

    def key(self, ident: int) -> str:
        """The canonical string of an id's term (for ordering and display)."""
        return self._iri_keys[ident] if ident > 0 else self._literal_keys[-ident]

    def dump(self) -> tuple[list[str], list[tuple[str, str | None, str | None]]]:
        """Plain data for a snapshot: IRI keys and literal parts, in id order."""
        literals = [(t.value, t.datatype, t.lang) for t in self._literals[1:]]
        return self._iri_keys[1:], literals

    @classmethod
    def restore(cls, data: Any) -> TermTable:
        """The table :meth:`dump` described (same ids); bad data raises ``ValueError``."""
        iris, literals = data
        table = cls.__new__(cls)
        table._iris = [IRI(""), *(IRI(key) for key in iris)]
        table._iri_keys = ["", *iris]
        table._literals = [Literal(""), *(Literal(v, d, lang) for v, d, lang in literals)]
        table._literal_keys = [t.key for t in table._literals]
        ids: dict[Term, int] = {t: i for i, t in enumerate(table._iris) if i}
        ids.update((t, -i) for i, t in enumerate(table._literals) if i)
        table._ids = ids
        if any(ids.get(IRI(name)) != reserved for name, reserved in VOCAB.items()):
            raise ValueError("the snapshot's term table does not reserve the rule vocabulary")
        if len(ids) != len(iris) + len(literals):
            raise ValueError("the snapshot's term table repeats a term")
        return table
