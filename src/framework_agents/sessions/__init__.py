"""sessions."""

__all__: list[str] = []
