"""The one JSON rule of every persisted document: strict reading and "is this plain JSON".

Reading is strict because a document a store accepted would later be rewritten: anything
that would not read back equal once saved again (invalid UTF-8 or JSON, a duplicate key,
NaN or an infinite number, an escaped lone surrogate, nesting past the parser's bound) is
refused. Writing checks free-form values (metadata, tool-call args, agent state, app data)
with :func:`json_problem`, which every store applies with the same depth limit
(:data:`MAX_JSON_DEPTH`), so memory, checkpoints and snapshots accept exactly the same
values.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "PARSER_INT_DIGITS",
    "int_digit_limit",
    "json_problem",
    "json_type",
    "overlong_int",
    "reads_back_as_is",
    "strict_loads",
]

#: Deepest nesting of a free-form value (a scalar at the top is depth 0). Every store
#: refuses deeper values on save, so none accepts what another would refuse.
MAX_JSON_DEPTH = 200

# A \uD800-\uDFFF escape: the only way valid UTF-8 JSON can produce an unencodable string.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (for messages about wrong shapes)."""
    if value is None:
        return "null"
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}
    return names.get(type(value), "object")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        dup = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"duplicate key {dup!r}")
    return obj


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


#: One decoder for every strict read (``json.loads`` with hooks would make one per call).
_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_finite)


def strict_loads(data: bytes) -> Any:
    """Parse UTF-8 JSON, refusing duplicate keys, NaN/Infinity and out-of-range numbers.

    Raises:
        ValueError: not strict JSON (including ``UnicodeDecodeError``, ``JSONDecodeError``
            and an escaped lone surrogate).
        RecursionError: input nested too deeply for the parser.
    """
    value = _DECODER.decode(data.decode("utf-8"))
    if _SURROGATE_ESCAPE.search(data):
        # Escaped surrogate pairs decode to one character; lone ones cannot be stored.
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"lone surrogate escape: {exc}") from None
    return value


#: The most digits an integer in a stored document may have: the JSON parser behind every
#: one-pass read (pydantic's) refuses a longer one whatever the interpreter allows (a
#: canary test), so a save refuses it too.
PARSER_INT_DIGITS = 4300

#: Integers this short have fewer digits than the lowest limit Python allows (640).
_SHORT_INT_BITS = 2000


def int_digit_limit() -> int:
    """The most digits a stored integer may have: the interpreter's limit, at most the parser's."""
    limit = sys.get_int_max_str_digits()
    return PARSER_INT_DIGITS if limit == 0 else min(limit, PARSER_INT_DIGITS)


@functools.lru_cache(maxsize=4)
def _power_of_ten(digits: int) -> int:
    power: int = 10**digits  # int ** int is typed Any (a negative power is a float)
    return power


def _too_many_digits(value: int) -> bool:
    """Whether ``value`` has more digits than :func:`int_digit_limit` (no ``str()``: quadratic)."""
    return abs(value) >= _power_of_ten(int_digit_limit())


def overlong_int(data: bytes) -> str | None:
    """Why ``data`` holds an integer this interpreter refuses to read, or ``None``.

    The one-pass readers parse with pydantic, whose bound is :data:`PARSER_INT_DIGITS`
    digits; an interpreter whose limit was lowered below it
    (``sys.set_int_max_str_digits``, ``PYTHONINTMAXSTRDIGITS``) refuses what lies in
    between: the strict reader and every save do, so a one-pass read must not accept it
    (a loaded value could not be saved again). Free unless the limit was lowered; then,
    when a run of that many digits is found, the document's integers are looked at (a
    parse with a hook on integers: the run may be in a string, which is fine). ``data``
    that is not JSON gives ``None``: the reader's own checks refuse it.
    """
    limit = int_digit_limit()
    if limit == PARSER_INT_DIGITS:  # the parser's own bound: nothing between the two
        return None
    if re.search(rb"[0-9]{%d}" % (limit + 1), data) is None:
        return None
    try:
        json.loads(data, parse_int=_digits_within(limit))
    except _LongInteger:
        return f"an integer of more than {limit} digits (sys.get_int_max_str_digits)"
    except (ValueError, RecursionError):
        pass
    return None


class _LongInteger(Exception):
    """An integer of more digits than the limit, met by :func:`overlong_int`'s parse."""


def _digits_within(limit: int) -> Callable[[str], int]:
    def parse_int(text: str) -> int:
        if len(text) - text.startswith("-") > limit:
            raise _LongInteger
        return 0  # the value is not needed

    return parse_int


def json_problem(value: Any, path: str, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Where ``value`` stops being plain JSON, or ``None`` when it is plain JSON.

    Plain JSON is ``None``, ``bool``, ``int`` (of no more digits than the interpreter
    converts: a longer one is written, then refused by every reader), finite ``float``,
    ``str``, ``list`` (a ``tuple`` is accepted: it is written as the same array) and
    ``dict`` with ``str`` keys, nested at most ``max_depth`` deep. Iterative: no
    recursion limit to hit.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if item is None or isinstance(item, bool | str):
            continue
        if isinstance(item, int | float):
            problem = _number_problem(item, where)
        elif depth >= max_depth:
            problem = f"{where} is nested deeper than {max_depth} levels"
        else:
            problem = _push_items(stack, item, where, depth + 1)
        if problem is not None:
            return problem
    return None


def _number_problem(item: int | float, where: str) -> str | None:
    """Why number ``item`` is not plain JSON (too long, not finite), or ``None``."""
    if isinstance(item, int):
        if item.bit_length() > _SHORT_INT_BITS and _too_many_digits(item):
            return (
                f"{where} is an integer of more than {int_digit_limit()} digits, "
                "which a JSON reader refuses (sys.get_int_max_str_digits, at most "
                f"{PARSER_INT_DIGITS})"
            )
        return None
    if not math.isfinite(item):
        return f"{where} is {item!r}, which JSON cannot hold"
    return None


def _push_items(stack: list[tuple[Any, str, int]], item: Any, where: str, depth: int) -> str | None:
    """Push the items of array or object ``item`` onto ``stack`` at ``depth``.

    Returns why ``item`` is not plain JSON (not a container, a non-string key), or ``None``.
    """
    if isinstance(item, list | tuple):
        stack.extend((v, f"{where}[{i}]", depth) for i, v in enumerate(item))
    elif isinstance(item, dict):
        for key, v in item.items():
            if not isinstance(key, str):
                return f"{where} has the non-string key {key!r}"
            stack.append((v, f"{where}[{key!r}]", depth))
    else:
        return f"{where} is a {type(item).__name__}, not a JSON value"
    return None


_EXACT = frozenset({type(None), bool, int, float, str})


def reads_back_as_is(value: Any) -> bool:
    """Whether plain-JSON ``value`` reads back as the very same types (no tuple, no subclass).

    :func:`json_problem` accepts a tuple (written as an array) and subclasses of ``int``,
    ``str``, ``list`` or ``dict``; JSON gives those back as plain lists, ints, strings and
    dicts. A store that keeps a saved value instead of reading its JSON back may do so only
    when this holds. Iterative; assumes ``value`` passed :func:`json_problem`.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _EXACT:
            continue
        if kind is list:
            stack.extend(item)
        elif kind is dict:
            for key, v in item.items():
                if type(key) is not str:
                    return False
                stack.append(v)
        else:
            return False
    return True
