"""What a run returns: :class:`RunResult` and its :class:`Usage`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..messages import Message

__all__ = ["RunResult", "Usage"]


@dataclass(slots=True)
class Usage:
    """Model calls and tokens of one run (tokens as the model reported them, else 0).

    A model reports tokens in the assistant message's ``metadata["usage"]`` as a mapping
    with ``input_tokens`` and ``output_tokens``.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, message: Message) -> None:
        """Count one model call that answered ``message``."""
        self.requests += 1
        usage = message.metadata.get("usage")
        if isinstance(usage, dict):
            for name in ("input_tokens", "output_tokens"):
                value = usage.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    setattr(self, name, getattr(self, name) + value)


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of a finished run.

    ``messages`` is the whole managed history after the run (what memory now holds and
    ``agent.messages`` returns); ``new_messages`` the part this run added. ``text`` is the
    final assistant turn's text, ``output`` the validated ``response_format`` instance
    (``None`` without one). ``stop_reason`` is ``"end_turn"`` unless the model's final
    message says otherwise in ``metadata["stop_reason"]``.
    """

    text: str
    messages: list[Message]
    stop_reason: str
    output: Any = None
    usage: Usage = field(default_factory=Usage)
    new_messages: list[Message] = field(default_factory=list)
    run_id: str = ""
    turns: int = 0
