"""The term model of the graph: entities (:class:`IRI`) and values (:class:`Literal`).

Plain Python values are accepted wherever a term is expected and turned into terms by
:func:`to_term` with a small, predictable rule set:

* an :class:`IRI` or :class:`Literal` is taken as it is;
* ``bool``, ``int`` and ``float`` become typed literals (``xsd:boolean``, ``xsd:integer``,
  ``xsd:double``);
* a string in angle brackets (``"<http://example.org/a>"``) is an IRI;
* a string shaped like a CURIE or an absolute IRI -- ``prefix:rest`` with a letter first
  and no whitespace (``"ex:Alice"``, ``"rdfs:subClassOf"``, ``"http://x.org/a"``) -- is an
  IRI;
* in the subject and predicate positions any other string without whitespace (a bare
  name such as ``"Alice"``) is an IRI too; in the object position it is a plain literal,
  as is every string with whitespace.

IRIs are stored in a canonical form: full IRIs in a known namespace are compacted to a
CURIE (``http://www.w3.org/2000/01/rdf-schema#label`` becomes ``rdfs:label``), and the
Turtle shorthand ``a`` in the predicate position means ``rdf:type``. The graph does not
expand CURIEs: ``ex:Alice`` is the IRI ``ex:Alice`` unless a prefix table maps ``ex``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from typing import Literal as TypingLiteral

from ..errors import GraphTermError

__all__ = [
    "DEFAULT_PREFIXES",
    "IRI",
    "MAX_TERM_LENGTH",
    "Literal",
    "Position",
    "Term",
    "TermInput",
    "term_from_json",
    "term_to_json",
    "to_term",
]

#: Namespaces every store knows; full IRIs in them are stored as CURIEs.
DEFAULT_PREFIXES: Mapping[str, str] = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
}

#: Longest accepted IRI or literal text, in characters.
MAX_TERM_LENGTH = 2000

Position = TypingLiteral["subject", "predicate", "object", "graph"]

_CURIE = re.compile(r"^[A-Za-z][A-Za-z0-9._+-]*:\S*$")
_IRI_FORBIDDEN = re.compile(r'[\s<>"{}|\\^`\x00-\x1f]')
_LANG = re.compile(r"^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$")
# A lone surrogate is not text: UTF-8 (SQLite, JSON for a model) cannot encode it.
_SURROGATE = re.compile("[\ud800-\udfff]")
# More bits than MAX_TERM_LENGTH decimal digits can hold (log2(10) < 3.33).
_MAX_INT_BITS = int(MAX_TERM_LENGTH * 3.33)


@dataclass(frozen=True, slots=True, order=True)
class IRI:
    """An entity, class or property, named by an IRI or a CURIE such as ``ex:Alice``."""

    value: str

    def __str__(self) -> str:
        """The IRI as written."""
        return self.value

    @property
    def key(self) -> str:
        """The canonical string used for storage, ordering and display."""
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class Literal:
    """A value: text with an optional datatype IRI (CURIE) or language tag, never both."""

    value: str
    datatype: str | None = None
    lang: str | None = None

    def __str__(self) -> str:
        """The canonical string (:attr:`key`)."""
        return self.key

    @property
    def key(self) -> str:
        """The canonical string (Turtle-like: ``"text"``, ``"1"^^xsd:integer``, ``"hi"@en``)."""
        quoted = '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if self.lang:
            return f"{quoted}@{self.lang}"
        if self.datatype:
            return f"{quoted}^^{self.datatype}"
        return quoted

    def python(self) -> str | int | float | bool:
        """The value as Python: ints, floats and booleans for those datatypes, else text."""
        try:
            if self.datatype == "xsd:integer":
                return int(self.value)
            if self.datatype in ("xsd:double", "xsd:decimal", "xsd:float"):
                return float(self.value)
        except ValueError:
            return self.value
        if self.datatype == "xsd:boolean":
            return self.value == "true"
        return self.value


Term = IRI | Literal
TermInput = IRI | Literal | str | int | float | bool


def _fail(position: str, message: str) -> GraphTermError:
    return GraphTermError(f"{position}: {message}")


def _compact(value: str, prefixes: Mapping[str, str]) -> str:
    for prefix, namespace in prefixes.items():
        if value.startswith(namespace) and len(value) > len(namespace):
            return f"{prefix}:{value[len(namespace) :]}"
    return value


def _iri(value: str, position: str, prefixes: Mapping[str, str]) -> IRI:
    if not value:
        raise _fail(position, "an entity name must not be empty")
    if len(value) > MAX_TERM_LENGTH:
        raise _fail(position, f"an entity name is limited to {MAX_TERM_LENGTH} characters")
    if _SURROGATE.search(value):
        raise _fail(position, "an entity name must be valid Unicode (a lone surrogate is not)")
    if _IRI_FORBIDDEN.search(value):
        raise _fail(
            position,
            f"{value[:60]!r} is not an entity name: no spaces, quotes or <>{{}}|\\^` "
            "(write names like ex:AliceSmith)",
        )
    return IRI(_compact(value, prefixes))


def _literal(value: str, datatype: str | None, lang: str | None, position: str) -> Literal:
    if len(value) > MAX_TERM_LENGTH:
        raise _fail(position, f"a literal is limited to {MAX_TERM_LENGTH} characters")
    if _SURROGATE.search(value):
        raise _fail(position, "a literal must be valid Unicode (a lone surrogate is not)")
    if datatype is not None and lang is not None:
        raise _fail(position, "a literal has a datatype or a language tag, not both")
    if lang is not None and not _LANG.match(lang):
        raise _fail(position, f"{lang!r} is not a language tag")
    if datatype is not None and (not datatype or _IRI_FORBIDDEN.search(datatype)):
        raise _fail(position, f"{datatype!r} is not a datatype IRI")
    return Literal(value, datatype, lang.lower() if lang else None)


def to_term(
    value: object,
    position: Position = "object",
    *,
    prefixes: Mapping[str, str] = DEFAULT_PREFIXES,
) -> Term:
    """Turn ``value`` into a term for ``position`` (rules in the module docstring).

    Raises :class:`~framework_agents.errors.GraphTermError` (``GRAPH_TERM_INVALID``) for
    empty or over-long terms, literals outside the object position and unsupported types.
    """
    term: Term
    if isinstance(value, IRI):
        term = _iri(value.value, position, prefixes)
    elif isinstance(value, Literal):
        term = _literal(value.value, value.datatype, value.lang, position)
    elif isinstance(value, bool | int | float):
        term = _number(value, position)
    elif isinstance(value, str):
        term = _term_from_text(value, position, prefixes)
    else:
        raise _fail(position, f"unsupported term type {type(value).__name__}")
    if isinstance(term, Literal) and position != "object":
        raise _fail(position, "a literal may only be the object of a fact")
    return term


def _number(value: bool | int | float, position: Position) -> Literal:
    """The typed literal of a bool (``xsd:boolean``), int or float."""
    if isinstance(value, bool):
        return Literal("true" if value else "false", "xsd:boolean")
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            raise _fail(position, f"a number is limited to {MAX_TERM_LENGTH} digits")
        return _literal(str(value), "xsd:integer", None, position)
    if not math.isfinite(value):
        raise _fail(position, "a number must be finite")
    return Literal(repr(value), "xsd:double")


def _term_from_text(value: str, position: Position, prefixes: Mapping[str, str]) -> Term:
    """A string as a term: ``<iri>``, ``a``, a CURIE or entity name, else a plain literal."""
    text = value.strip()
    if not text:
        raise _fail(position, "a term must not be empty")
    if text.startswith("<") and text.endswith(">"):
        return _iri(text[1:-1], position, prefixes)
    if position == "predicate" and text == "a":
        return IRI("rdf:type")
    if _CURIE.match(text) or (position != "object" and not re.search(r"\s", text)):
        return _iri(text, position, prefixes)
    if position == "object":
        return _literal(value, None, None, position)
    raise _fail(
        position,
        f"{text[:60]!r} is not an entity name: no spaces (write names like ex:AliceSmith)",
    )


def term_to_json(term: Term) -> str | dict[str, str]:
    """The stored JSON form: an IRI is its string, a literal is ``{"literal": ...}``."""
    if isinstance(term, IRI):
        return term.value
    out = {"literal": term.value}
    if term.datatype:
        out["datatype"] = term.datatype
    if term.lang:
        out["lang"] = term.lang
    return out


def term_from_json(data: Any, position: Position = "object") -> Term:
    """Parse the stored JSON form back (strict: unknown keys or types are an error)."""
    if isinstance(data, str):
        if not data:
            raise _fail(position, "a stored entity name must not be empty")
        return _iri(data, position, {})
    if isinstance(data, dict):
        unknown = set(data) - {"literal", "datatype", "lang"}
        if unknown or not isinstance(data.get("literal"), str):
            raise _fail(position, f"malformed stored literal {data!r}")
        datatype, lang = data.get("datatype"), data.get("lang")
        if not isinstance(datatype, str | None) or not isinstance(lang, str | None):
            raise _fail(position, f"malformed stored literal {data!r}")
        if position != "object":
            raise _fail(position, "a literal may only be the object of a fact")
        return _literal(data["literal"], datatype, lang, position)
    raise _fail(position, f"malformed stored term {data!r}")
