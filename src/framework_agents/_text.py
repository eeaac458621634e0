"""The text analyser every lexical index shares: the graph's retrieval and the memory bank.

:func:`tokenize` turns a text into search tokens: Unicode normalised (NFKC), case and
diacritics folded, camelCase, snake_case, CURIEs and IRIs split, common English stop
words and clitics (``'s``) dropped, stemmed lightly (plural, ``-ing``, ``-ed``) and
Chinese, Japanese and Korean runs cut into characters and character pairs. Both sides of
a match (the stored text and the query) go through it, so it only has to be consistent.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["tokenize"]

_STOP = frozenset(
    """a about above after all also an and any are as at be been being but by can could did
    do does doing for from had has have having he her here hers him his how i if in into is
    it its me my no nor not of off on once only or other our out over own please same she
    should so some such than that the their them then there these they this those through
    to too under until up very was we were what when where which while who whom why will
    with would you your yours tell know don doesn didn isn aren wasn weren hasn haven hadn
    shouldn wouldn couldn""".split()  # noqa: SIM905
)
# A clitic after an apostrophe ("Alice's", "doesn't", "we're"): dropped, never a token.
_CLITIC = re.compile(r"(?<=\w)['\u2019](?:s|t|d|ll|re|ve|m)\b", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)")
_WORD = re.compile(r"[^\W_]+")
# Scripts written without spaces between words: Han, kana, Hangul (and their extensions).
_CJK_CHARS = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0002fa1f"
)
_CJK_RUN = re.compile(f"([{_CJK_CHARS}]+)")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")
_DOUBLED = re.compile(r"([b-df-hj-np-tv-z])\1$")


def _stem(token: str) -> str:
    """A light English stemmer: plural, ``-ing``/``-ed`` and a final ``e`` go.

    Both sides of a match go through it, so it only has to be consistent: ``works``,
    ``worked``, ``working`` and ``work`` all become ``work``; ``likes``, ``liked`` and
    ``like`` become ``lik``. Tokens of three characters or fewer are left alone.
    """
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    token = _strip_verb_ending(_strip_plural(token))
    if len(token) > 3 and token.endswith("e") and not token.endswith("ee"):
        token = token[:-1]
    return token


def _strip_plural(token: str) -> str:
    """``token`` without a plural ``-es`` (after s, sh, ch, x) or ``-s``."""
    if len(token) > 4 and token.endswith(("sses", "shes", "ches", "xes")):
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def _strip_verb_ending(token: str) -> str:
    """``token`` without ``-ing`` or ``-ed`` (and a consonant doubled before it)."""
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            if _DOUBLED.search(token) and token[-1] not in "lsz":
                token = token[:-1]
            return token
    return token


def _fold(token: str) -> str:
    """Case-folded, with diacritics removed (``Zoë`` -> ``zoe``, ``Ärger`` -> ``arger``)."""
    folded = token.casefold()
    if folded.isascii():
        return folded
    bare = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", bare)


def _cjk_grams(run: str) -> list[str]:
    """Characters and character pairs of a CJK run, so a part of a name matches it."""
    if len(run) == 1:
        return [run]
    # Kana alone are mostly grammar (particles, endings): only their pairs are kept.
    chars = [c for c in run if not _KANA.match(c)]
    return [*chars, *(run[i : i + 2] for i in range(len(run) - 1))]


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text``: words split, folded and stemmed; CJK as n-grams.

    The text is NFKC-normalised first, so composed and decomposed accents, full-width
    letters and ligatures match their plain forms, and diacritics are folded (``Zoë``
    matches ``Zoe``); possessive and contracted endings (``'s``, ``n't``) are dropped.
    camelCase and snake_case split into words; stop words go and the rest is stemmed
    lightly (``worksFor`` gives ``work``). Runs of Chinese, Japanese or Korean characters
    give their characters and character pairs (``東京大学`` gives ``東``, ``東京``,
    ``京大``, ...), so any part of a name matches it.
    """
    out: list[str] = []
    for word in _WORD.findall(_CLITIC.sub("", unicodedata.normalize("NFKC", text))):
        for i, chunk in enumerate(_CJK_RUN.split(word)):
            if i % 2:
                out.extend(_cjk_grams(chunk))
                continue
            for part in _CAMEL.split(chunk):
                token = _fold(part)
                if token and token not in _STOP:
                    out.append(_stem(token))
    return out
