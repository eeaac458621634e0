"""agent."""

__all__: list[str] = []
