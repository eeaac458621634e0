"""SmolLM2-135M-Instruct (Q4_1 GGUF) packaged for framework-agents' ``LocalModel``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["GGUF_NAME", "gguf_path"]

#: File name of the model inside this package.
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """Where the GGUF lies (raises ``FileNotFoundError`` if the wheel was built without it)."""
    path = Path(__file__).with_name(GGUF_NAME)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall framework-agents-smollm2")
    return path
