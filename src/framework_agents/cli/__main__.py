"""``python -m framework_agents.cli``: the same as the ``framework-agents`` command."""

from . import main

__all__: list[str] = []

main()
