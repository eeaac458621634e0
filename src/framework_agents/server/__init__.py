"""Serve agents over A2A 1.0, AG-UI 1.0 and a JSON API from one Starlette application.

``create_app(agent_factory, store=..., token=...)`` returns the ASGI app; ``framework-agents
serve`` runs it under uvicorn. Every protocol shares one thread namespace in the store's
checkpointer. Needs the ``server`` extra (a2a-sdk, ag-ui-protocol, starlette, uvicorn).
See ``docs/server.md``. Without that extra, importing this package is an ``ImportError``
that says what to install.
"""

from .._install import EXTRAS, install_hint

try:
    from ._app import DEFAULT_MAX_BODY, create_app
except ImportError as _exc:
    if (_exc.name or "").split(".")[0] not in EXTRAS["server"].modules:
        raise
    raise ImportError(
        f"framework_agents.server needs the 'server' extra ({_exc.name} is missing): "
        f"{install_hint('server')}",
        name=_exc.name,
    ) from _exc
from ._builtin import builtin_factory
from ._errors import STATUS_BY_CLASS, STATUS_BY_CODE
from ._runner import AgentFactory, ThreadRunner
from ._shapes import Pending
from ._store import DEFAULT_STORE, ServerStore, resolve_store

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_STORE",
    "STATUS_BY_CLASS",
    "STATUS_BY_CODE",
    "AgentFactory",
    "Pending",
    "ServerStore",
    "ThreadRunner",
    "builtin_factory",
    "create_app",
    "resolve_store",
]
