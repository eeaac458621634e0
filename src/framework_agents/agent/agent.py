"""``Agent``: a model, tools and a memory, driven by one loop for ``run()`` and ``stream()``.

A run (:meth:`Agent._drive`): take the busy flag (``AGENT_BUSY`` if taken), get the
starting history (memory, the session's snapshot on the first run, else the
``initial_messages`` seed; a thread's checkpoint when a checkpointer is given), append the
prompt, run the loop (``_loop.run_loop`` with the frozen ``RunSetup`` of this agent), then
commit: ``conversation_manager.apply``, the memory replaced by the managed transcript
(clear-then-save), ``agent.messages`` and a timeline entry. A run that fails commits
nothing; an interrupted run commits the history up to, and excluding, the interrupted
assistant turn.

Threads (``checkpointer`` + ``thread_id``, ``pause``, ``resume``) live in ``_threads``:
it takes the thread lock, loads the checkpoint, binds decisions to the open interrupt
and plugs the at-most-once protocol into the run through ``RunHooks``. Sessions,
snapshots, edits and branches live in ``_sessions`` (see ``docs/sessions.md`` and
``docs/checkpoints.md``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from .._telemetry import trace_run, trace_store
from .._util import implements
from ..checkpoint._base import Checkpointer
from ..conversation._base import ConversationManager
from ..errors import HitlDecisionError, InvalidArgumentError
from ..history import CheckedHistory
from ..hitl import DecideCallback, HitlInterrupt, check_decisions, is_interrupt_id
from ..memory._base import AppendableMemory, Memory, replace_history
from ..memory.grounding import GroundingMemory, is_grounding
from ..messages import Message, ToolCall, new_id
from ..models._base import Model, ToolSpec
from ..sessions.snapshot import Snapshot
from ..tools import Tool, as_tool
from . import _sessions, _threads
from ._busy import BusyFlag
from ._loop import LoopRun, RunHooks, RunSetup, kept_checked, run_loop
from ._output import output_instruction
from ._sessions import SessionStore
from .events import (
    AgentEvent,
    InterruptEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from .middleware import MiddlewareChain
from .result import RunResult
from .state import AgentState
from .timeline import Timeline, TimelineEntry, TimelineKind

__all__ = ["DEFAULT_MAX_TURNS", "Agent", "OutputVersion", "Prompt"]

logger = logging.getLogger(__name__)

OutputVersion = Literal["v0", "v1"]

#: A user turn: its text, or a ready ``role="user"`` message.
Prompt = str | Message

#: Default bound on model calls per run.
DEFAULT_MAX_TURNS = 25


def _latest_user(history: Sequence[Message]) -> Message | None:
    return next((m for m in reversed(history) if m.role == "user"), None)


def _default_memory() -> Memory:
    from ..memory.in_memory import InMemoryMemory

    return InMemoryMemory()


def _default_manager() -> ConversationManager:
    from ..conversation.sliding import SlidingWindowConversationManager

    return SlidingWindowConversationManager()


class Agent:
    """An LLM agent: ``await run(prompt)`` or ``async for event in stream(prompt)``.

    One run at a time per instance (a concurrent run raises ``AGENT_BUSY``). The
    constructor's arguments are kept as attributes with the defaults filled in
    (``InMemoryMemory()``, ``SlidingWindowConversationManager()``).
    """

    def __init__(
        self,
        model: Model,
        *,
        tools: Sequence[Tool | Any] = (),
        system_prompt: str | None = None,
        memory: Memory | None = None,
        conversation_manager: ConversationManager | None = None,
        session_manager: SessionStore | None = None,
        initial_messages: Sequence[Message] | None = None,
        state: Mapping[str, Any] | None = None,
        middleware: Sequence[object] = (),
        response_format: type[BaseModel] | None = None,
        output_version: OutputVersion = "v0",
        decide: DecideCallback | None = None,
        agent_id: str = "default",
        max_turns: int = DEFAULT_MAX_TURNS,
        output_retries: int = 2,
    ) -> None:
        if not callable(getattr(model, "complete", None)):
            raise InvalidArgumentError(f"model must have an async complete(), got {model!r:.100}")
        self.model: Model = model
        self.tools: tuple[Tool, ...] = tuple(as_tool(t) for t in _items(tools, "tools"))
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidArgumentError(f"duplicate tool names: {duplicates}")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise InvalidArgumentError("system_prompt must be a str or None")
        self.system_prompt: str | None = system_prompt
        _check_methods(memory, "memory", ("load", "save", "clear"))
        self.memory: Memory = memory if memory is not None else _default_memory()
        _check_methods(
            conversation_manager, "conversation_manager", ("apply", "before_model", "reduce")
        )
        self.conversation_manager: ConversationManager = (
            conversation_manager if conversation_manager is not None else _default_manager()
        )
        # Checked here, and again where it is used: the attribute may be replaced.
        self.session_manager: SessionStore | None = _sessions.check_session_manager(session_manager)
        seed = _items(initial_messages, "initial_messages")
        if not all(isinstance(m, Message) for m in seed):
            raise InvalidArgumentError("initial_messages must be Message objects")
        self.initial_messages: list[Message] = list(seed)
        self.middleware: tuple[object, ...] = _items(middleware, "middleware")
        if response_format is not None and not (
            isinstance(response_format, type) and issubclass(response_format, BaseModel)
        ):
            raise InvalidArgumentError("response_format must be a pydantic model class")
        self.response_format: type[BaseModel] | None = response_format
        if output_version not in ("v0", "v1"):
            raise InvalidArgumentError(
                f'output_version must be "v0" or "v1", not {output_version!r}'
            )
        self.output_version: OutputVersion = output_version
        if decide is not None and not callable(decide):
            raise InvalidArgumentError("decide must be a callable or None")
        self.decide: DecideCallback | None = decide
        if not isinstance(agent_id, str) or not agent_id:
            raise InvalidArgumentError("agent_id must be a non-empty str")
        self.agent_id: str = agent_id
        for label, value, low in (
            ("max_turns", max_turns, 1),
            ("output_retries", output_retries, 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise InvalidArgumentError(f"{label} must be an int >= {low}, not {value!r}")
        self.max_turns: int = max_turns
        self.output_retries: int = output_retries

        self._state = AgentState(state)
        self._messages: Sequence[Message] = list(self.initial_messages)
        # The memory's revision and the history it held then, when this agent last read or
        # wrote an AppendableMemory: while the revision holds, runs start from it and
        # commit only their new messages (no reload, no rewrite of the history).
        self._memory_view: tuple[int, CheckedHistory] | None = None
        # The history memory held when this agent last read or wrote it: the base of a
        # commit, so turns another agent committed meanwhile are kept, not overwritten.
        self._memory_start: Sequence[Message] | None = None
        # The thread this agent last committed and its history: the thread's next run
        # starts from its checkpoint, checked only past what this agent committed.
        self._thread_view: tuple[Checkpointer, str, CheckedHistory] | None = None
        self._timeline = Timeline()
        self._busy = BusyFlag(agent_id)
        self._session_link = _sessions.SessionLink()  # session restore bookkeeping
        self._tools_by_name: dict[str, Tool] = {t.name: t for t in self.tools}
        self._tool_specs: list[ToolSpec] = [t.spec for t in self.tools]
        self._middleware = MiddlewareChain(self.middleware)
        prompt_parts = [system_prompt] if system_prompt else []
        if response_format is not None:
            prompt_parts.append(output_instruction(response_format))
        self._effective_prompt: str | None = "\n\n".join(prompt_parts) or None

    # -- public attributes -------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """Dict-like agent state; JSON values only (``STATE_NOT_JSON`` otherwise)."""
        return self._state

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._state.replace(value)

    @property
    def messages(self) -> list[Message]:
        """The current history (a copy): what the last run left, or the seed before one."""
        return list(self._messages)

    @property
    def timeline(self) -> list[TimelineEntry]:
        """Every run (and later edit, branch, resume, snapshot), oldest first."""
        return self._timeline.entries()

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._busy.held

    # -- running ----------------------------------------------------------------------

    async def run(
        self,
        prompt: Prompt | None,
        *,
        checkpointer: Checkpointer | None = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run the loop on ``prompt`` and return its result (``None``: continue as is).

        ``decisions`` pre-answers approval calls (keys: ``hitl_key`` or a tool name).
        Raises :class:`HitlInterrupt` when a call needs a decision nobody gave.
        """
        result: RunResult | None = None
        events = trace_run(
            self,
            self._drive(
                prompt, checkpointer=checkpointer, thread_id=thread_id, decisions=decisions
            ),
            thread_id=thread_id,
        )
        try:
            async for event in events:
                if isinstance(event, RunFinishedEvent):
                    result = event.result
        finally:
            await events.aclose()
        assert result is not None  # _drive ends with RunFinished or raises
        return result

    async def stream(
        self,
        prompt: Prompt | None,
        *,
        checkpointer: Checkpointer | None = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run like :meth:`run`, yielding events as they happen.

        The stream ends with ``RunFinishedEvent``, or ``InterruptEvent`` (the interrupt
        is not raised), or ``RunErrorEvent`` after which the error is raised. The agent
        is busy from the first ``__anext__`` until the terminal event; if you stop
        early, close the stream (``contextlib.aclosing``) to free it at once.
        """
        events = trace_run(
            self,
            self._drive(
                prompt, checkpointer=checkpointer, thread_id=thread_id, decisions=decisions
            ),
            thread_id=thread_id,
        )
        try:
            async for event in events:
                yield event
        except HitlInterrupt:
            return
        finally:
            await events.aclose()

    async def pause(self, thread_id: str, *, checkpointer: Checkpointer) -> None:
        """Save ``messages`` and ``state`` as the thread's checkpoint (``pending=None``).

        ``CHECKPOINT_MISSING`` when the thread has no checkpoint and the agent no message.
        """

        async def history() -> Sequence[Message]:
            if not self._busy.held:
                # Before a first run, agent.messages is only the seed: what that run would
                # start from (the session's snapshot, else the stored memory, else the
                # seed) is what a pause must save, or a resume would overwrite the stored
                # history with it.
                await _sessions.ensure_restored(self)
            return self._messages

        await _threads.pause_thread(checkpointer, thread_id, self._thread_host(), history)

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Checkpointer,
        reissue: bool = True,
    ) -> RunResult:
        """Continue a checkpointed thread (no new user message); ``CHECKPOINT_MISSING`` if unknown.

        Restores state, messages and memory from the checkpoint and goes on with the loop;
        ``decisions`` answer the interrupted approval calls (keys: ``hitl_key``, a tool
        name, or the open interrupt's ``interrupt_id``) and add to those given to earlier
        resumes of the same interrupt.

        ``reissue=True`` (the default) asks the model again, and a bare tool name approves
        whatever arguments the re-issued call carries; ``reissue=False`` runs the stored
        interrupted turn, so the call runs with exactly the arguments the human saw (or
        the edited ones). Decisions on a thread with nothing pending: ``HITL_DECISION``
        (nothing runs); a decision naming a closed interrupt re-raises the open one.
        """
        result: RunResult | None = None
        events = self._resume_events(thread_id, decisions, checkpointer, reissue)
        try:
            async for event in events:
                if isinstance(event, RunFinishedEvent):
                    result = event.result
        finally:
            await events.aclose()
        assert result is not None  # the driver ends with RunFinished or raises
        return result

    async def resume_stream(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Checkpointer,
        reissue: bool = True,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Continue a checkpointed thread like :meth:`resume`, yielding events as they happen.

        The events and their end are those of :meth:`stream`: ``RunFinishedEvent``, or
        ``InterruptEvent`` (the interrupt is not raised), or ``RunErrorEvent`` after which
        the error is raised. A server streams a resumed run's tokens with it.
        """
        events = self._resume_events(thread_id, decisions, checkpointer, reissue)
        try:
            async for event in events:
                yield event
        except HitlInterrupt:
            return
        finally:
            await events.aclose()

    def _resume_events(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None,
        checkpointer: Checkpointer,
        reissue: bool,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The traced event stream of a resume (arguments checked first)."""
        if not isinstance(reissue, bool):
            raise InvalidArgumentError(f"reissue must be a bool, not {reissue!r:.60}")
        _threads.check_target(checkpointer, thread_id)  # THREAD_ID_INVALID comes first
        return trace_run(
            self,
            self._drive(
                None,
                checkpointer=checkpointer,
                thread_id=thread_id,
                decisions=self._checked_decisions(decisions),
                resume=True,
                reissue=reissue,
            ),
            thread_id=thread_id,
            resume=True,
        )

    def _checked_decisions(self, decisions: object) -> Mapping[str, Any] | None:
        """``decisions`` with every key naming a tool of this agent or an interrupt id.

        A decision for a misspelled tool name (or one that needs no approval) would be
        silently ignored and the call would interrupt again: it is ``HITL_DECISION``.
        """
        checked = check_decisions(decisions)
        for key in checked or ():
            name = key.split(":", 1)[0] if ":" in key else key
            tool = self._tools_by_name.get(key) or self._tools_by_name.get(name)
            if tool is None and ":" not in key and is_interrupt_id(key):
                continue
            if tool is None:
                known = sorted(t.name for t in self.tools if t.requires_approval)
                raise HitlDecisionError(
                    f"decision key {key!r} names no tool of agent {self.agent_id!r} "
                    f"(approval tools: {known}) and no interrupt id"
                )
            if not tool.requires_approval:
                raise HitlDecisionError(
                    f"decision key {key!r}: tool {tool.name!r} needs no approval, "
                    "so a decision for it would never be used"
                )
        return checked

    async def _drive(
        self,
        prompt: Prompt | None,
        *,
        checkpointer: Checkpointer | None = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
        resume: bool | None = None,
        reissue: bool = True,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The one driver: check the arguments, open what the run needs, run the loop.

        With a checkpointer, the thread is opened first (its lock held, its checkpoint
        loaded, the decisions bound to its open interrupt) and its hooks join the run;
        ``resume`` (default: ``prompt is None``, so ``run(None)`` on a thread continues
        it exactly as ``resume()`` does) and ``reissue`` say how it goes on.
        """
        if checkpointer is not None:
            _threads.check_target(checkpointer, thread_id)  # THREAD_ID_INVALID first
        decisions = self._checked_decisions(decisions)
        if checkpointer is None and thread_id is not None:
            raise InvalidArgumentError(
                "thread_id needs a checkpointer (the thread would not be saved)"
            )
        message = _as_prompt(prompt)
        # Every nested stream is closed explicitly: a consumer that stops early frees the
        # agent and the thread at once, not when the garbage collector finds them.
        if checkpointer is None:
            run_events = self._busy_run(message, decisions, None, self._hooks(), "run")
            async with contextlib.aclosing(run_events):
                async for event in run_events:
                    yield event
            return
        resuming = prompt is None if resume is None else resume
        self._busy.check()  # before waiting for the thread: one run at a time per instance
        async with _threads.open_thread(
            self._thread_host(),
            checkpointer,
            thread_id,
            decisions=decisions,
            resume=resuming,
            reissue=reissue,
        ) as start:
            run = start.run
            if start.surface is not None:
                events = self._surface(start, resume=resuming, prompt=message)
            else:
                events = self._busy_run(
                    message,
                    run.decisions,
                    run.thread_id,
                    self._hooks(run.hooks()),
                    "resume" if resuming else "run",
                    run.replay,
                )
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event

    async def _busy_run(
        self,
        message: Message | None,
        decisions: Mapping[str, Any] | None,
        thread_id: str | None,
        hooks: RunHooks,
        timeline_kind: TimelineKind,
        replay: Message | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """One run inside the agent's busy flag (released before the terminal event)."""
        with self._busy.hold() as release:
            events = self._run_events(
                message, decisions, thread_id, hooks, timeline_kind, replay, release
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event

    async def _surface(
        self, start: _threads.ThreadStart, *, resume: bool, prompt: Message | None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Raise the interrupt a thread opened on (the agent takes the thread's state)."""
        base, call = start.base, start.surface
        assert base is not None and call is not None
        with self._busy.hold():
            interrupt = await _threads.surface_interrupt(
                start.run.checkpointer, base, call, stale=start.stale, carry=start.carry
            )
            self._state.replace(base.state)
            await self._set_history(base.messages)
            label = "outcome_unknown" if interrupt.outcome_unknown else "interrupted"
            self._record("resume" if resume else "run", label)
        run_id = new_id()
        yield RunStartedEvent(
            run_id=run_id, agent_id=self.agent_id, thread_id=base.thread_id, prompt=prompt
        )
        yield InterruptEvent(run_id=run_id, interrupt=interrupt)
        raise interrupt

    def _thread_host(self) -> _threads.ThreadHost:
        """What a thread needs from this agent (the thread module never touches it)."""
        return _threads.ThreadHost(
            agent_id=self.agent_id,
            state=self._state,
            memory=self.memory,
            tools=self._tools_by_name,
            setup=self._setup,
            start_history=self._start_history,
            carry_session=lambda: _sessions.carry_app_data(self),
            recall=self._recall_thread,
            remember=self._remember_thread,
        )

    def _recall_thread(self, checkpointer: Checkpointer, thread_id: str) -> CheckedHistory | None:
        """The history this agent last committed to the thread, if it was the last one."""
        view = self._thread_view
        if view is None or view[0] is not checkpointer or view[1] != thread_id:
            return None
        return view[2]

    def _remember_thread(
        self, checkpointer: Checkpointer, thread_id: str, history: CheckedHistory
    ) -> None:
        self._thread_view = (checkpointer, thread_id, history)

    def _hooks(self, *providers: RunHooks) -> RunHooks:
        """The run's hooks: the session's, then each provider's (a thread's)."""
        return RunHooks.compose(_sessions.session_hooks(self), *providers)

    async def _run_events(
        self,
        message: Message | None,
        decisions: Mapping[str, Any] | None,
        thread_id: str | None,
        hooks: RunHooks,
        timeline_kind: TimelineKind,
        replay: Message | None,
        release: Callable[[], None],
    ) -> AsyncGenerator[AgentEvent, None]:
        """Start, loop, commit and the terminal event of one run (inside the busy flag)."""
        run = LoopRun([], message, decisions, thread_id, hooks=hooks, replay=replay)
        try:
            yield RunStartedEvent(
                run_id=run.run_id, agent_id=self.agent_id, thread_id=thread_id, prompt=message
            )
            run.history = await (hooks.prepare or self._start_history)()
            if message is None and not run.history:
                raise InvalidArgumentError(
                    "run(None) continues the current history, which is empty: "
                    "give a prompt (the model is never called with no message)"
                )
            await self._ground(run, message)
            start = run.history
            # Closed explicitly: a consumer that stops early must not leave the loop (and a
            # tool task it awaits) running until the garbage collector finds it.
            async with contextlib.aclosing(run_loop(self._setup(), run)) as loop_events:
                async for event in loop_events:
                    yield event
            assert run.final is not None
            if run.retry_ids:
                managed, base = await self._commit(run.visible(), run.checked)
            else:
                checked = run.checked_transcript()
                managed, base = await self._commit(
                    run.transcript, run.checked, checked, run.grown_from
                )
            if hooks.on_commit is not None:
                await hooks.on_commit(managed, True)
            self._record(timeline_kind, ran=run.ran)
            logger.debug("run %s of %r (thread %s): finished", run.run_id, self.agent_id, thread_id)
            result = RunResult(
                text=run.final.text,
                messages=managed.to_list(),
                stop_reason=str(run.final.metadata.get("stop_reason") or "end_turn"),
                output=run.output,
                usage=run.usage,
                new_messages=(
                    list(managed[len(start) :]) if base is start else _added(managed, start)
                ),
                run_id=run.run_id,
                turns=run.turns,
            )
        except HitlInterrupt as interrupt:
            kept, _ = await self._commit(run.kept_on_interrupt(), run.checked)
            if hooks.on_commit is not None:
                await hooks.on_commit(kept, False)
            self._record(timeline_kind, "interrupted", ran=run.ran)
            logger.debug(
                "run %s of %r (thread %s): interrupted", run.run_id, self.agent_id, thread_id
            )
            release()
            yield InterruptEvent(run_id=run.run_id, interrupt=interrupt)
            raise
        except Exception as exc:
            code = getattr(exc, "code", type(exc).__name__)
            self._record(timeline_kind, f"error:{code}", ran=run.ran)
            logger.debug("run %s of %r (thread %s): %s", run.run_id, self.agent_id, thread_id, code)
            release()
            yield RunErrorEvent(run_id=run.run_id, error=exc)
            raise
        release()
        yield RunFinishedEvent(run_id=run.run_id, result=result)

    async def _ground(self, run: LoopRun, message: Message | None) -> None:
        """Ask a grounding memory for context on what the user asks now (outside the history).

        A resume grounds on the latest user turn. Grounding rides along with each model
        call of the run and is never part of the transcript.
        """
        if not implements(self.memory, GroundingMemory):
            return
        run.history = [m for m in run.history if not is_grounding(m)]
        asked = message if message is not None else _latest_user(run.history)
        if asked is not None:
            run.context = await self.memory.ground([], asked.text)

    # -- seams ------------------------------------------------------------------------

    def _setup(self) -> RunSetup:
        """The frozen setup the loop runs with (built per run: attributes may change)."""
        return RunSetup(
            model=self.model,
            tools=self._tools_by_name,
            tool_specs=tuple(self._tool_specs),
            middleware=self._middleware,
            system_prompt=self._effective_prompt,
            conversation_manager=self.conversation_manager,
            max_turns=self.max_turns,
            output_retries=self.output_retries,
            response_format=self.response_format,
            output_version=self.output_version,
            decide=self.decide,
            owner=self,
        )

    async def _start_history(self) -> Sequence[Message]:
        """The history a run starts from: memory, seeded on the first run (repaired later)."""
        # The session's latest snapshot is restored before seeding and wins over the seed.
        # Also after the first run: a run whose session save was refused as stale
        # (CHECKPOINT_CONFLICT) marks the session unread, and the next run starts from the
        # latest stored snapshot instead of failing forever.
        from_session = await _sessions.restore_session(self)
        started = self._session_link.committed
        memory, view = self.memory, self._memory_view
        revision: int | None = None
        if implements(memory, AppendableMemory):
            if started and view is not None and await memory.unchanged(view[0]):
                self._memory_start = view[1]
                return view[1]  # the memory still holds what this agent left there
            revision = memory.revision
        history = await trace_store("memory", "load", memory, memory.load())
        self._memory_start = history
        if not started and not from_session and not history and self.initial_messages:
            history = list(self.initial_messages)
        elif implements(memory, AppendableMemory) and memory.revision == revision:
            checked = CheckedHistory.repaired(history)
            self._memory_view = (memory.revision, checked)
            return checked
        return history  # the loop repairs whatever it starts from

    async def _commit(
        self,
        transcript: list[Message],
        known: CheckedHistory,
        checked: CheckedHistory | None = None,
        grown_from: CheckedHistory | None = None,
    ) -> tuple[CheckedHistory, CheckedHistory | None]:
        """Manage the transcript, save it to memory, make it ``agent.messages``.

        ``known`` is a checked history the transcript usually begins with (the loop keeps
        one), so only what the run added is checked again; ``checked`` is the transcript
        already checked, when the loop has it, and ``grown_from`` the history it only
        grew from. Returns the committed history and what it grew from (``None`` when a
        manager changed it).
        """
        if checked is None:
            try:
                checked = CheckedHistory.of(transcript, known)
            except InvalidArgumentError:  # the loop keeps it well formed; repair anyway
                checked = CheckedHistory.repaired(transcript)
        managed = await self.conversation_manager.apply(checked)
        # A manager that keeps everything hands back the transcript's messages: compare
        # list to list (one C-level pass) before anything is checked or copied again.
        if isinstance(managed, list) and managed == transcript:
            history = checked
        else:
            history, grown_from = kept_checked(managed, checked), None
        await self._store(history, grown_from)
        self._session_link.origin = _sessions.HistoryOrigin.COMMITTED
        return history, grown_from

    async def _store(self, history: CheckedHistory, grown_from: CheckedHistory | None) -> None:
        """Commit ``history`` to memory and make it ``agent.messages``.

        When the memory still holds the history this agent last read or wrote there and
        ``history`` extends it (``grown_from`` says so, or a comparison), only the new
        messages are appended (``save_if``); otherwise the whole history replaces the
        stored one, atomically.
        """
        memory, view = self.memory, self._memory_view
        if view is not None and implements(memory, AppendableMemory):
            revision, held = view
            at = _held_at(held, history, grown_from)
            if at is not None:
                new = history[at + len(held) :]
                appended = await trace_store(
                    "memory", "save", memory, memory.save_if(new, revision=revision)
                )
                if appended is not None:
                    self._memory_view = (appended.revision, history.suffix(at + appended.dropped))
                    self._memory_start = self._memory_view[1]
                    self._messages = history
                    return
        await self._set_history(history)
        if implements(memory, AppendableMemory):  # what it holds now, for the next commit
            revision = memory.revision
            stored = await trace_store("memory", "load", memory, memory.load())
            if memory.revision == revision:
                self._memory_view = (revision, CheckedHistory.repaired(stored))

    async def _set_history(self, messages: Sequence[Message]) -> None:
        """Replace memory and ``agent.messages`` with ``messages`` (clear-then-save).

        Atomic where the memory offers ``replace()`` (every shipped backend does), so a
        crash here leaves either the old history or the new one, never an empty memory.
        A memory with ``commit`` merges: messages another writer (another agent, also one
        sharing this memory object) stored since this agent read the history are kept.
        """
        history = list(messages)
        self._memory_view = None  # read again before the fast path is taken
        start = self._memory_start
        base = None if start is None else {m.id for m in start}
        await trace_store(
            "memory", "save", self.memory, replace_history(self.memory, history, base=base)
        )
        self._memory_start = history
        self._messages = history

    def _record(
        self, kind: TimelineKind, label: str | None = None, ran: Sequence[ToolCall] = ()
    ) -> TimelineEntry:
        """Append a timeline entry (runs, edits, branches, resumes, snapshots)."""
        return self._timeline.record(kind, label, ran)

    def _constructor_kwargs(self) -> dict[str, Any]:
        """This agent's constructor arguments (for clones and branches)."""
        return {
            "model": self.model,
            "tools": self.tools,
            "system_prompt": self.system_prompt,
            "memory": self.memory,
            "conversation_manager": self.conversation_manager,
            "session_manager": self.session_manager,
            "initial_messages": self.initial_messages,
            "state": self._state.to_dict(),
            "middleware": self.middleware,
            "response_format": self.response_format,
            "output_version": self.output_version,
            "decide": self.decide,
            "agent_id": self.agent_id,
            "max_turns": self.max_turns,
            "output_retries": self.output_retries,
        }

    # -- snapshots, editing, branches (implemented in _sessions) -----------------------

    def take_snapshot(
        self,
        preset: str | None = "session",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        app_data: Any = None,
    ) -> Snapshot:
        """A snapshot of the selected fields (sync, no I/O); records a ``"snapshot"`` entry."""
        return _sessions.take_snapshot(self, preset, include, exclude, app_data)

    async def load_snapshot(self, snapshot: Snapshot) -> None:
        """Restore the fields present in ``snapshot``; absent ones keep their values."""
        await _sessions.load_snapshot(self, snapshot)

    async def edit_message(self, id_or_index: str | int, content: Any) -> Message:
        """Replace one message's content, by id or index (negative: from the end)."""
        return await _sessions.edit_message(self, id_or_index, content)

    def branch(self, label: str, overrides: Mapping[str, Any] | None = None) -> Agent:
        """An independent fork: shared model/tools, copied state, fresh seeded memory."""
        return _sessions.branch(self, label, overrides)

    def with_tools(self, *extra: Tool | Any) -> Agent:
        """A clone with ``extra`` tools added: fresh memory, no session manager, fresh state."""
        kwargs = self._constructor_kwargs()
        kwargs.update(tools=(*self.tools, *extra), memory=None, session_manager=None, state=None)
        return Agent(**kwargs)

    def __repr__(self) -> str:
        return (
            f"Agent(agent_id={self.agent_id!r}, model={self.model!r:.60}, tools={len(self.tools)})"
        )


def _items(value: object, label: str) -> tuple[Any, ...]:
    """``value`` as a tuple (``None``: empty); ``INVALID_ARGUMENT`` unless a collection."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping | Message) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{label} must be a list or tuple, not {value!r:.100}")
    return tuple(value)


def _check_methods(value: object, label: str, methods: Sequence[str]) -> None:
    """``INVALID_ARGUMENT`` unless ``value`` is ``None`` or has every one of ``methods``."""
    missing = [m for m in methods if not callable(getattr(value, m, None))]
    if value is not None and missing:
        raise InvalidArgumentError(
            f"{label} must have async {', '.join(methods)} methods; {value!r:.100} lacks "
            f"{', '.join(missing)}"
        )


def _as_prompt(prompt: Prompt | None) -> Message | None:
    if prompt is None:
        return None
    if isinstance(prompt, str):
        return Message("user", prompt)
    if isinstance(prompt, Message) and prompt.role == "user":
        return prompt
    raise InvalidArgumentError(f"a prompt is a str or a role='user' Message, got {prompt!r:.100}")


def _held_at(
    held: CheckedHistory, history: CheckedHistory, grown_from: CheckedHistory | None
) -> int | None:
    """Where in ``history`` the messages memory holds (``held``) begin, if they do.

    Memory holds the history's beginning (the usual case), or the tail of the history the
    run grew from (a windowed memory under a thread, whose checkpoint keeps it all).
    """
    if held is grown_from or held.starts(history):
        return 0
    if grown_from is not None:
        return held.tail_offset(grown_from)
    return None


def _added(managed: CheckedHistory, start: Sequence[Message]) -> list[Message]:
    """The messages of ``managed`` that were not in ``start`` (what a run added)."""
    n = len(start)
    if (isinstance(start, CheckedHistory) and start.starts(managed)) or managed[:n] == list(start):
        return managed[n:]  # the usual case: the run appended to what it started from
    start_ids = {m.id for m in start}
    return [m for m in managed if m.id not in start_ids]
