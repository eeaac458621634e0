"""checkpoint."""

__all__: list[str] = []
