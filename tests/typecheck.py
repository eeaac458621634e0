"""Type-check the test suite with mypy --strict, the way pytest imports it (``make lint``).

pytest imports each test directory's modules by their bare names (the directory is put
on ``sys.path``), so mypy gets every such directory on its search path. Two conftests of
those directories would then share the module name ``conftest``: each is checked in a
run of its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mypy import api

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SKIP = {"fixtures", "js", "__pycache__", "node_modules"}


def _run(files: list[Path], path: list[Path]) -> int:
    os.environ["MYPYPATH"] = os.pathsep.join(str(p) for p in path)
    out, err, status = api.run(["--strict", *[str(f) for f in files]])
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


def main() -> int:
    dirs = sorted(d for d in TESTS.iterdir() if d.is_dir() and d.name not in SKIP)
    # A directory with __init__.py is a package under tests/ (telemetry), not a path entry.
    flat = [d for d in dirs if not (d / "__init__.py").exists()]
    search = [ROOT / "src", TESTS, *flat]
    conftests = [d / "conftest.py" for d in flat if (d / "conftest.py").exists()]
    files = [
        f
        for f in sorted(TESTS.rglob("*.py"))
        if not SKIP.intersection(f.relative_to(TESTS).parts) and f not in conftests
    ]
    status = _run(files, search)
    for conftest in conftests:
        status = max(status, _run([conftest], [ROOT / "src", TESTS, conftest.parent]))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
