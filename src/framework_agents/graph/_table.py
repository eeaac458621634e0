"""The term table: interns terms as integer ids (IRIs positive, literals negative)."""

from __future__ import annotations

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
