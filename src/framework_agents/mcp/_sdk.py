"""The official ``mcp`` SDK, imported once, with an error naming the extra when it is missing."""

from __future__ import annotations

from .._install import install_hint

try:
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from mcp import Client, StdioServerParameters
except ImportError as exc:  # pragma: no cover - the test environment has every extra
    raise ImportError(
        f"framework_agents.mcp needs the 'mcp' extra (the official MCP SDK): {install_hint('mcp')}"
    ) from exc

__all__ = ["Client", "MCPError", "StdioServerParameters", "types"]
