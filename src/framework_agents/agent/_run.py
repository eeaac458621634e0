"""The types of one run of the loop: its frozen setup, its state, its hooks (see ``_loop``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..conversation._base import ConversationManager
from ..elicitation import Elicitation, ElicitationAnswer
from ..errors import InvalidArgumentError
from ..history import CheckedHistory
from ..hitl import DecideCallback, DecisionBook, HitlInterrupt, ResolvedDecision
from ..messages import Message, ToolCall, new_id
from ..models._base import Model, ToolSpec
from ..tools import Tool
from .middleware import MiddlewareChain
from .result import Usage

__all__ = ["Asked", "LoopRun", "Replay", "RunHooks", "RunSetup", "ToolProgress"]


@dataclass(frozen=True, slots=True)
class RunSetup:
    """Everything the loop needs that does not change during a run (built per run).

    ``owner`` is what middleware and tools see as ``ctx.agent`` (the ``Agent`` that made
    this setup, or anything else when the loop is driven on its own).
    """

    model: Model
    tools: Mapping[str, Tool] = field(default_factory=dict)
    tool_specs: tuple[ToolSpec, ...] = ()
    middleware: MiddlewareChain = field(default_factory=lambda: MiddlewareChain(()))
    system_prompt: str | None = None
    conversation_manager: ConversationManager | None = None
    max_turns: int = 25
    output_retries: int = 2
    response_format: type[BaseModel] | None = None
    output_version: str = "v0"
    decide: DecideCallback | None = None
    owner: Any = None

    def manager(self) -> ConversationManager:
        """The conversation manager (a null one when none was given)."""
        if self.conversation_manager is not None:
            return self.conversation_manager
        from ..conversation.null import NullConversationManager

        return NullConversationManager()


@dataclass(frozen=True, slots=True)
class Replay:
    """An assistant turn the loop runs first instead of calling the model.

    The turn of an interrupt resumed with ``reissue=False``: its calls run as they were
    shown. After a question (an elicitation), ``landed`` holds the results of the calls
    that finished before it (not run again) and ``answers`` the answer each asking call
    runs again with (by call id).
    """

    turn: Message
    landed: Mapping[str, Message] = field(default_factory=dict)
    answers: Mapping[str, ElicitationAnswer] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Asked:
    """A tool turn stopped by a call's question: what an elicitation interrupt saves.

    ``history`` is the transcript before ``assistant``; ``results`` the results of the
    turn's other calls, in call order (every call but the asking ones finished).
    """

    interrupt: HitlInterrupt
    elicitation: Elicitation
    history: list[Message]
    assistant: Message
    results: list[Message]


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """One finished call of a tool turn, with the turn as it stands (for checkpointing).

    ``results`` holds the results finished so far, in call order; calls still running
    are missing, so ``messages()`` may not be well formed (``repair_history`` marks the
    missing ones interrupted).
    """

    history: list[Message]
    assistant: Message
    call: ToolCall
    result: Message
    results: list[Message]

    def messages(self) -> list[Message]:
        """The history before the turn, the assistant turn and the results so far."""
        return [*self.history, self.assistant, *self.results]


@dataclass(slots=True)
class RunHooks:
    """Async seams of one run (all optional); checkpointing and sessions plug in here.

    * ``on_start()``: the run begins (inside the busy section), before anything is read:
      a session restores its latest snapshot here (or carries its app data along).
    * ``prepare()``: the starting history, or ``None`` for the agent's own start (its
      memory, seeded on the first run): a thread's checkpoint gives it here.
    * ``on_turn_start(history, assistant)``: a tool turn is about to run its calls;
      ``history`` is the transcript before ``assistant``, a new list the hook may keep
      (checkpointing records it).
    * ``on_tool_start(call, decision)``: just before a tool actually runs.
    * ``on_tool_result(progress)``: after each result, before the loop goes on.
    * ``on_tool_turn(messages)``: after a whole tool turn is in the transcript.
    * ``on_interrupt(interrupt, messages, turn)``: before :class:`HitlInterrupt` is
      raised; ``messages`` exclude the interrupted assistant turn ``turn``.
    * ``on_asked(asked)``: before the :class:`HitlInterrupt` of a call's question
      (``kind == "elicitation"``) is raised, every other call of the turn finished.
    * ``on_commit(history, finished)``: after memory holds what the run commits: its
      managed transcript (``finished``), or what an interrupted run keeps, as a
      :class:`~framework_agents.history.CheckedHistory` (shared: never copied to hand over).
    * ``on_pause(messages)``: not called by the loop itself: :meth:`LoopRun.pause` (a
      tool's or middleware's ``ctx.pause()``) asks the run's thread to save now, with the
      run's well-formed history so far; only a thread provides it.

    Sessions and threads are hook providers: :meth:`compose` joins theirs into one.
    """

    on_start: Callable[[], Awaitable[None]] | None = None
    prepare: Callable[[], Awaitable[Sequence[Message] | None]] | None = None
    on_turn_start: Callable[[list[Message], Message], Awaitable[None]] | None = None
    on_tool_start: Callable[[ToolCall, ResolvedDecision | None], Awaitable[None]] | None = None
    on_tool_result: Callable[[ToolProgress], Awaitable[None]] | None = None
    on_tool_turn: Callable[[list[Message]], Awaitable[None]] | None = None
    on_interrupt: Callable[[HitlInterrupt, list[Message], Message], Awaitable[None]] | None = None
    on_asked: Callable[[Asked], Awaitable[None]] | None = None
    on_commit: Callable[[CheckedHistory, bool], Awaitable[None]] | None = None
    on_pause: Callable[[list[Message]], Awaitable[None]] | None = None

    @classmethod
    def compose(cls, *providers: RunHooks) -> RunHooks:
        """One set of hooks calling each provider's in order (``prepare``: the last one's).

        A seam only one provider fills is that provider's callable itself.
        """
        if len(providers) == 1:
            return providers[0]
        joined: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            found = [f for p in providers if (f := getattr(p, name)) is not None]
            if name == "prepare" or len(found) <= 1:
                joined[name] = found[-1] if found else None
            else:
                joined[name] = _in_order(found)
        return cls(**joined)


def _in_order(hooks: list[Callable[..., Awaitable[None]]]) -> Callable[..., Awaitable[None]]:
    """A hook that awaits each of ``hooks`` in order with the same arguments."""

    async def each(*args: Any) -> None:
        for hook in hooks:
            await hook(*args)

    return each


@dataclass(slots=True)
class LoopRun:
    """Input and mutable state of one pass through the loop.

    ``decisions`` is what the run was given; ``book`` is the live copy that the turns
    spend (the very object when ``decisions`` already is a :class:`DecisionBook`, so a
    checkpointed run saves what is left of it).
    """

    history: Sequence[Message]
    prompt: Message | None = None
    decisions: Mapping[str, Any] | None = None
    thread_id: str | None = None
    run_id: str = field(default_factory=new_id)
    hooks: RunHooks = field(default_factory=RunHooks)
    transcript: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    final: Message | None = None
    output: Any = None
    kept: list[Message] | None = None
    retry_ids: set[str] = field(default_factory=set)
    started: bool = False  # run_loop has built the transcript
    #: An assistant turn to run as the first turn instead of calling the model (see
    #: :class:`Replay`).
    replay: Replay | None = None
    #: Approval calls that ran, with the arguments they ran with (for the timeline).
    ran: list[ToolCall] = field(default_factory=list)
    book: DecisionBook = field(init=False)
    #: The transcript as last checked: each check looks only at what was added since.
    checked: CheckedHistory = field(default_factory=CheckedHistory)
    #: The transcript list ``checked`` was taken from (the loop only appends to it).
    _source: list[Message] | None = field(default=None, repr=False)
    #: The checked history the run started from, while the transcript has only grown from
    #: it (``None`` once a manager or a reduction replaced the transcript).
    grown_from: CheckedHistory | None = None

    def __post_init__(self) -> None:
        given = self.decisions
        self.book = given if isinstance(given, DecisionBook) else DecisionBook(given)

    def kept_on_interrupt(self) -> list[Message]:
        """What an interrupted run commits: up to, and excluding, the interrupted turn.

        ``kept`` when the loop suspended a call itself; otherwise (an interrupt raised by
        a hook or middleware) the transcript without a tool turn still running, or the
        starting history when the loop had not begun.
        """
        if self.kept is not None:
            return self.kept
        if not self.started:
            return list(self.history)
        messages = self.visible()
        if messages and messages[-1].role == "assistant" and messages[-1].tool_calls:
            messages.pop()  # the turn whose calls were running: its results are missing
        return messages

    # Sent ahead of the transcript on every model call, never part of it (so never stored,
    # snapshotted or checkpointed): e.g. the grounding message of a GraphMemory.
    context: list[Message] = field(default_factory=list)

    def checked_transcript(self) -> CheckedHistory:
        """The transcript (well formed, an invariant of the loop) as a checked history.

        The loop only appends to its transcript list, so when it is still the list last
        checked, only the messages appended since are checked.
        """
        transcript, checked = self.transcript, self.checked
        if transcript is self._source and len(transcript) >= len(checked):
            self.checked = checked.extend(transcript[len(checked) :])
        else:
            self.grown_from = None
            self.checked = CheckedHistory.of(transcript, checked)
        self._source = transcript
        return self.checked

    def set_transcript(self, checked: CheckedHistory) -> None:
        """Make ``checked`` the transcript (a new list the loop goes on appending to)."""
        self.checked = checked
        self.transcript = self._source = checked.to_list()
        self.grown_from = None

    async def pause(self) -> None:
        """Save the run's thread now (``ctx.pause()``), without waiting for its lock.

        What is saved is the run's history so far, well formed: up to, and excluding, a
        tool turn whose calls are still running (as an interrupt keeps it), with the
        agent's state. ``INVALID_ARGUMENT`` for a run without a thread (no checkpointer).
        """
        if self.hooks.on_pause is None:
            raise InvalidArgumentError(
                "this run has no thread to pause: pausing from a tool or middleware needs "
                "a run with checkpointer= and thread_id="
            )
        await self.hooks.on_pause(self.kept_on_interrupt())

    def visible(self) -> list[Message]:
        """The transcript without the corrective exchanges of structured-output retries."""
        if not self.retry_ids:
            return list(self.transcript)
        return [m for m in self.transcript if m.id not in self.retry_ids]
