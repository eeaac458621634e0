"""Lazy exports for the package ``__init__`` files (PEP 562).

A package's ``__init__`` names, for the type checkers, what it exports under
``if TYPE_CHECKING:`` and, at run time, hands :func:`install` the same names grouped by
the module that defines them. A name is imported the first time it is asked for (an
attribute, a ``from ... import``, a star import) and kept in the package's namespace, so
a process that needs one class does not pay for its siblings (``import framework_agents``
builds no pydantic model; the CLI loads only what its command uses).
``tests/test_lazy_exports.py`` checks that the two lists agree.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

__all__ = ["install"]


def install(namespace: dict[str, Any], sources: Mapping[str, tuple[str, ...]]) -> None:
    """Give a package's ``namespace`` a ``__getattr__`` and ``__dir__`` over ``sources``.

    ``sources`` maps a module, relative to the package (``".file"``, ``"..tools"``), to
    the names the package takes from it. A name that is not in ``sources`` but is a
    submodule of the package (``framework_agents.stores``) is imported too, as it would
    have been by an eager ``__init__``.
    """
    package: str = namespace["__name__"]
    where = {name: module for module, names in sources.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module, package), name)
            namespace[name] = value
            return value
        if (
            name.isidentifier()
            and not name.startswith("__")
            and importlib.util.find_spec(f"{package}.{name}")
        ):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
