"""Turning the names a model writes into graph terms (for the ``graph_add`` tool).

Models, small ones above all, do not write CURIEs: they call ``graph_add`` with
``{"subject": "Alice Smith", "predicate": "works at", "object": "Acme Corp"}``. This
module maps such arguments onto terms, with fixed rules the tool reports back:

* A CURIE, an absolute IRI or ``<...>`` is taken as it is (:mod:`.terms`).
* A **name** (any other text in the subject position, or an object that must be a
  resource) becomes an entity IRI in the default namespace: its words, case-folded and
  capitalised, joined (``Alice Smith`` and ``alice smith`` -> ``ex:AliceSmith``), so one
  entity is one IRI however it is cased (an apostrophe joins: ``St Mary's`` ->
  ``ex:StMarys``). An entity that already carries the text as its
  ``rdfs:label`` (``ex:alice rdfs:label "Alice Smith"``) is that entity. A name of
  several words gets the original text as its ``rdfs:label`` when the entity has none.
* A **relation phrase** becomes a predicate: ``is a``, ``is an``, ``type`` and the like
  are ``rdf:type``; ``subclass of``, ``is a kind of`` are ``rdfs:subClassOf``; ``same
  as`` is ``owl:sameAs``; ``is called`` is ``rdfs:label``; any other phrase is a
  camelCase IRI (``works at`` -> ``ex:worksAt``) labelled with the phrase.
* The **object** of ``rdf:type``, ``rdfs:subClassOf`` and the other schema properties
  is a class or entity name (a leading article dropped: ``an Engineer`` ->
  ``ex:Engineer``). The object of ``rdfs:label`` is text. Any other text object is an
  entity when it names one the graph already knows, or when it is written like a proper
  name (every word capitalised, at most six words, no ``,;:!?"``: ``Acme Corp``,
  ``St. Mary's Hospital``, ``Paris``); otherwise it is stored as text.

Nothing here reads conversation text: it only maps what ``graph_add`` receives, and the
tool's answer says what was stored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import GraphTermError
from .terms import IRI, Literal, Term, TermInput, to_term

__all__ = ["DEFAULT_NAMESPACE", "NaturalFact", "Resolver", "entity_iri", "predicate_iri"]

#: The namespace of entities and predicates made from plain names.
DEFAULT_NAMESPACE = "ex:"

LABEL = IRI("rdfs:label")
TYPE = IRI("rdf:type")

_CURIE = re.compile(r"^[A-Za-z][A-Za-z0-9._+-]*:\S*$")
# Letters and digits, with the combining marks that follow them (casefold() can make one).
_WORDS = re.compile(r"[^\W_](?:[^\W_]|[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff])*")
_APOSTROPHE = re.compile("['\u2019]")
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
_SENTENCE = re.compile(r"[,;:!?\"]")

_PHRASES: dict[str, str] = {
    **dict.fromkeys(
        (
            "a",
            "an",
            "is a",
            "is an",
            "isa",
            "type",
            "is of type",
            "has type",
            "instance of",
            "is instance of",
            "is an instance of",
        ),
        "rdf:type",
    ),
    **dict.fromkeys(
        (
            "subclass of",
            "sub class of",
            "subclassof",
            "is a subclass of",
            "kind of",
            "a kind of",
            "is a kind of",
            "are a kind of",
            "type of",
            "is a type of",
            "is a sort of",
        ),
        "rdfs:subClassOf",
    ),
    **dict.fromkeys(
        ("subproperty of", "sub property of", "is a subproperty of"), "rdfs:subPropertyOf"
    ),
    **dict.fromkeys(("same as", "is the same as", "is same as"), "owl:sameAs"),
    **dict.fromkeys(("label", "is called", "called", "is named", "named"), "rdfs:label"),
    **dict.fromkeys(("inverse of", "is the inverse of"), "owl:inverseOf"),
}
# Objects that name a class (PascalCase) or a property (camelCase), never text.
_CLASS_OBJECT = frozenset(
    {"rdf:type", "rdfs:subClassOf", "rdfs:domain", "rdfs:range", "owl:equivalentClass"}
)
_PROPERTY_OBJECT = frozenset({"rdfs:subPropertyOf", "owl:inverseOf", "owl:equivalentProperty"})
_ENTITY_OBJECT = frozenset({"owl:sameAs"})


def _words(text: str) -> list[str]:
    # An apostrophe joins (Mary's -> Marys), anything else that is not a letter splits.
    return _WORDS.findall(unicodedata.normalize("NFC", _APOSTROPHE.sub("", text)))


def _fold(word: str) -> str:
    # casefold() alone is not stable under upper(): U+0131 (dotless i) upper-cases to "I".
    return word.casefold().upper().casefold()


def _capital(word: str) -> str:
    folded = _fold(word)
    return folded[:1].upper() + folded[1:]


def entity_iri(name: str, namespace: str = DEFAULT_NAMESPACE, position: str = "subject") -> IRI:
    """The IRI of the entity or class called ``name`` (``alice smith`` -> ``ex:AliceSmith``)."""
    words = _words(name)
    if not words:
        raise GraphTermError(
            f"{position}: {name[:60]!r} is not a name: it has no letters or digits"
        )
    return IRI(namespace + unicodedata.normalize("NFC", "".join(_capital(w) for w in words)))


def predicate_iri(phrase: str, namespace: str = DEFAULT_NAMESPACE) -> IRI:
    """The IRI of a relation phrase (``works at`` -> ``ex:worksAt``)."""
    words = _words(phrase)
    if not words:
        raise GraphTermError(
            f"predicate: {phrase[:60]!r} is not a relation: it has no letters or digits"
        )
    first, *rest = words
    local = _fold(first) + "".join(_capital(w) for w in rest)
    return IRI(namespace + unicodedata.normalize("NFC", local))


def _is_explicit(text: str) -> bool:
    """A CURIE, an absolute IRI or ``<...>``: a term spelt out, taken as it is."""
    return bool(_CURIE.match(text)) or (text.startswith("<") and text.endswith(">"))


def _proper_name(text: str) -> bool:
    words = text.split()
    if not 1 <= len(words) <= 6 or _SENTENCE.search(text):
        return False
    return all(w[:1].isupper() or w[:1].isdigit() for w in words)


@dataclass
class NaturalFact:
    """A ``graph_add`` call mapped onto terms: the fact, labels to add, and what was done.

    ``notes`` lists each mapping in words (``"Alice Smith" -> ex:AliceSmith``) for the
    tool's answer; ``labels`` holds the ``rdfs:label`` facts that name new entities.
    """

    subject: Term
    predicate: Term
    object: Term
    labels: list[tuple[IRI, IRI, Literal]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def triple(self) -> tuple[Term, Term, Term]:
        """The fact itself, ``(subject, predicate, object)``."""
        return (self.subject, self.predicate, self.object)


class Resolver:
    """Maps ``graph_add`` arguments onto terms, looking names up in the graph.

    ``known(term)`` tells whether the graph mentions a term; ``labelled(text)`` returns
    the entities whose ``rdfs:label`` is exactly ``text``; ``has_label(iri)`` whether an
    entity has any label. All three are read from the store (in a worker thread).
    """

    def __init__(
        self,
        known: Callable[[Term], bool],
        labelled: Callable[[str], list[IRI]],
        has_label: Callable[[IRI], bool],
        *,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> None:
        """Bind the store look-ups and the namespace of new names."""
        self._known = known
        self._labelled = labelled
        self._has_label = has_label
        self.namespace = namespace

    def fact(self, subject: TermInput, predicate: TermInput, object: TermInput) -> NaturalFact:
        """Map one ``graph_add`` call; bad names raise ``GRAPH_TERM_INVALID``."""
        out = NaturalFact(IRI(""), IRI(""), IRI(""))
        out.subject = self._entity(subject, "subject", out)
        out.predicate = self._predicate(predicate, out)
        out.object = self._object(object, out)
        return out

    def pattern(self, subject: str, predicate: str, object: str) -> tuple[Term | None, ...]:
        """A ``graph_query`` pattern: names resolved like ``fact()``'s, ``""`` for any.

        Nothing is created: an object name that is not an entity of the graph is text.
        """
        scratch = NaturalFact(IRI(""), IRI(""), IRI(""))
        s = self._entity(subject, "subject", scratch) if subject.strip() else None
        p = self._predicate(predicate, scratch) if predicate.strip() else None
        if not object.strip():
            return (s, p, None)
        if _is_explicit(object.strip()):
            return (s, p, to_term(object, "object"))
        text = " ".join(object.split())
        iri = self._resolve(text) if _words(text) else None
        return (s, p, iri if iri is not None and self._known(iri) else to_term(object, "object"))

    def _entity(self, value: TermInput, position: str, out: NaturalFact) -> Term:
        if not isinstance(value, str) or _is_explicit(value.strip()):
            return to_term(value, "subject" if position == "subject" else "object")
        text = " ".join(value.split())
        if not text:
            raise GraphTermError(f"{position}: a name must not be empty")
        iri = self._resolve(text, position)
        out.notes.append(f"{text!r} -> {iri.key}")
        if len(text.split()) > 1 and not self._has_label(iri) and not self._labelled_as(iri, text):
            self._label(iri, text, out)
        return iri

    def _resolve(self, text: str, position: str = "object") -> IRI:
        """The IRI for a name: its own if known, else an entity labelled so, else new."""
        iri = entity_iri(text, self.namespace, position)
        if self._known(iri):
            return iri
        variants = dict.fromkeys((text, text.casefold(), text.title(), text.lower()))
        found = sorted({e for v in variants for e in self._labelled(v)}, key=lambda e: e.key)
        return found[0] if found else iri

    def _labelled_as(self, iri: IRI, text: str) -> bool:
        return iri in self._labelled(text)

    def _label(self, iri: IRI, text: str, out: NaturalFact) -> None:
        label = (iri, LABEL, Literal(text))
        if label not in out.labels:
            out.labels.append(label)

    def _predicate(self, value: TermInput, out: NaturalFact) -> Term:
        if not isinstance(value, str) or _is_explicit(value.strip()):
            return to_term(value, "predicate")
        text = " ".join(value.split())
        phrase = text.casefold().rstrip(":.")
        known = _PHRASES.get(phrase)
        if known is not None:
            if phrase != "a":
                out.notes.append(f"{text!r} -> {known}")
            return IRI(known)
        iri = predicate_iri(text, self.namespace)
        out.notes.append(f"{text!r} -> {iri.key}")
        if len(text.split()) > 1 and not self._has_label(iri):
            self._label(iri, text, out)
        return iri

    def _object(self, value: TermInput, out: NaturalFact) -> Term:
        if not isinstance(value, str) or _is_explicit(value.strip()):
            return to_term(value, "object")
        text = " ".join(value.split())
        predicate = out.predicate.key if isinstance(out.predicate, IRI) else ""
        if predicate in _CLASS_OBJECT or predicate in _ENTITY_OBJECT:
            name = _ARTICLE.sub("", text) or text
            return self._entity(name, "object", out)
        if predicate in _PROPERTY_OBJECT:
            return self._predicate(text, out)
        if predicate == LABEL.key or not text:
            return to_term(value, "object")
        return self._plain_object(value, text, out)

    def _plain_object(self, value: str, text: str, out: NaturalFact) -> Term:
        """An object the predicate says nothing about: a known entity, or else text."""
        if _proper_name(text) or (_words(text) and self._known(entity_iri(text, self.namespace))):
            return self._entity(text, "object", out)
        if _words(text) and (found := self._labelled(text)):
            iri = sorted(found, key=lambda e: e.key)[0]
            out.notes.append(f"{text!r} -> {iri.key}")
            return iri
        out.notes.append(f"{text[:60]!r} stored as text")
        return to_term(value, "object")
