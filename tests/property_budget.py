"""How many examples a property test tries: a quarter in ``make test``, all in ``make stress``.

``make test`` stays under two minutes on two cores, so a property test whose settings say
``max_examples=examples(300)`` tries a quarter of them there (at least 10, never more than
asked); ``make stress`` runs every property test again (they carry the ``properties`` mark,
tests/conftest.py) with ``FRAMEWORK_AGENTS_PROPERTIES=full``, at the full count. Runs
under ``CI`` are derandomized, so the quick run tries the first examples of the full one.
"""

from __future__ import annotations

import os

#: ``True`` when the property tests try every example they ask for (``make stress``).
FULL = os.environ.get("FRAMEWORK_AGENTS_PROPERTIES") == "full"


def examples(count: int) -> int:
    """``count`` under ``make stress``, a quarter of it (at least 10) under ``make test``."""
    return count if FULL else min(count, max(10, count // 4))
