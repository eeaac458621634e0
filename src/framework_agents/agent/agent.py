"""``Agent``: a model, tools and a memory, driven by one loop for ``run()`` and ``stream()``.

A run (:meth:`Agent._drive`): take the busy flag (``AGENT_BUSY`` if taken), get the
starting history (the session's hooks restore it on the first run; a thread's checkpoint
when a checkpointer is given; else the agent's :class:`~._history.AgentHistory`: memory,
seeded on the first run), append the prompt, run the loop (``_loop.run_loop`` with the
frozen ``RunSetup`` of this agent), then commit through the history: the conversation
manager, the memory replaced by the managed transcript (clear-then-save),
``agent.messages`` and a timeline entry. A run that fails commits nothing; an
interrupted run commits the history up to, and excluding, the interrupted assistant turn.

Every argument is checked once, in the public method that takes it. Threads
(``checkpointer`` + ``thread_id``, ``pause``, ``resume``) live in ``_threads``: it takes
the thread lock, loads the checkpoint, binds decisions to the open interrupt and plugs the
at-most-once protocol into the run through ``RunHooks``. The session is a hook provider
(``_sessions.SessionSync``); snapshots and edits go through it too (see
``docs/sessions.md`` and ``docs/checkpoints.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from .._telemetry import trace_run
from .._util import check_collaborator, implements
from ..checkpoint._base import Checkpointer
from ..conversation._base import ConversationManager
from ..errors import HitlDecisionError, InvalidArgumentError
from ..history import CheckedHistory
from ..hitl import DecideCallback, HitlInterrupt, check_decisions, is_interrupt_id
from ..memory._base import Memory
from ..memory.grounding import GroundingMemory, is_grounding
from ..messages import Message, new_id
from ..models._base import Model, ToolSpec
from ..sessions.snapshot import Snapshot
from ..tools import Tool
from ._busy import BusyFlag
from ._checks import (
    as_prompt,
    at_least,
    check_options,
    checked_overrides,
    items_of,
    seed_of,
    tool_list,
)
from ._drain import finished_event, until_interrupt
from ._history import AgentHistory
from ._loop import LoopRun, RunHooks, RunSetup, run_loop
from ._output import output_instruction
from ._pause import pause_thread
from ._run import Replay
from ._sessions import SessionStore, SessionSync, find_message
from ._threads import (
    Opening,
    ThreadHost,
    ThreadStart,
    check_target,
    open_thread,
    surface_interrupt,
)
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

__all__ = ["DEFAULT_MAX_TURNS", "Agent", "OutputVersion", "Prompt", "as_prompt"]

logger = logging.getLogger(__name__)

OutputVersion = Literal["v0", "v1"]

#: A user turn: its text, or a ready ``role="user"`` message.
Prompt = str | Message

#: Default bound on model calls per run.
DEFAULT_MAX_TURNS = 25


#: The events that end a run (each stream's last).
_TERMINAL = (RunFinishedEvent, InterruptEvent, RunErrorEvent)


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
    (``InMemoryMemory()``, ``SlidingWindowConversationManager()``); the history, state,
    system prompt and timeline belong to the agent's ``AgentHistory``.
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
        """Check every argument (``INVALID_ARGUMENT``) and keep it; see the class docstring."""
        if model is None:
            raise InvalidArgumentError("model must implement Model (complete), not None")
        self.model: Model = check_collaborator(model, Model, "model")  # type: ignore[assignment]
        self.tools: tuple[Tool, ...] = tool_list(tools)
        self.conversation_manager: ConversationManager = (
            check_collaborator(conversation_manager, ConversationManager, "conversation_manager")
            or _default_manager()
        )
        self._history = AgentHistory(
            check_collaborator(memory, Memory, "memory") or _default_memory(),
            seed=seed_of(initial_messages),
            state=state,
            system_prompt=system_prompt,
        )
        self._session = SessionSync(self._history, session_manager)
        self.middleware: tuple[object, ...] = items_of(middleware, "middleware")
        check_options(response_format, output_version, decide, agent_id)
        self.response_format: type[BaseModel] | None = response_format
        self.output_version: OutputVersion = output_version
        self.decide: DecideCallback | None = decide
        self.agent_id: str = agent_id
        self.max_turns: int = at_least(max_turns, "max_turns", 1)
        self.output_retries: int = at_least(output_retries, "output_retries", 0)
        self._busy = BusyFlag(agent_id)
        # The checkpointed run whose loop is going on (one: inside the busy flag), which a
        # pause of its own thread goes through.
        self._live: tuple[Checkpointer, LoopRun] | None = None
        self._tools_by_name: dict[str, Tool] = {t.name: t for t in self.tools}
        self._tool_specs: list[ToolSpec] = [t.spec for t in self.tools]
        self._middleware = MiddlewareChain(self.middleware)
        self._output_instruction = (
            output_instruction(response_format) if response_format is not None else None
        )

    # -- public attributes -------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """Dict-like agent state; JSON values only (``STATE_NOT_JSON`` otherwise)."""
        return self._history.state

    @state.setter
    def state(self, value: Mapping[str, Any]) -> None:
        self._history.state.replace(value)

    @property
    def messages(self) -> list[Message]:
        """The current history (a copy): what the last run left, or the seed before one."""
        return list(self._history.messages)

    @property
    def timeline(self) -> list[TimelineEntry]:
        """Every run (and later edit, branch, resume, snapshot), oldest first."""
        return self._history.timeline.entries()

    @property
    def memory(self) -> Memory:
        """The memory the history is kept in."""
        return self._history.memory

    @memory.setter
    def memory(self, memory: Memory) -> None:
        self._history.memory = check_collaborator(memory, Memory, "memory") or _default_memory()

    @property
    def system_prompt(self) -> str | None:
        """The system prompt (``INVALID_ARGUMENT`` unless a str or ``None``)."""
        return self._history.system_prompt

    @system_prompt.setter
    def system_prompt(self, prompt: str | None) -> None:
        self._history.system_prompt = prompt

    @property
    def session_manager(self) -> SessionStore | None:
        """The session manager (``INVALID_ARGUMENT`` when set to something that is not one)."""
        return self._session.manager

    @session_manager.setter
    def session_manager(self, manager: SessionStore | None) -> None:
        self._session.manager = manager

    @property
    def initial_messages(self) -> list[Message]:
        """The seed: the history of the first run when nothing else gives one."""
        return self._history.seed

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
        return await _result(self._run_traced(prompt, checkpointer, thread_id, decisions))

    def run_sync(
        self,
        prompt: Prompt | None,
        *,
        checkpointer: Checkpointer | None = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """:meth:`run` for code without an event loop (a script, a notebook cell without one).

        Runs the agent on a new event loop (``asyncio.run``); from inside a running loop
        it is ``INVALID_ARGUMENT``: ``await agent.run(...)`` there instead.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise InvalidArgumentError(
                "run_sync() was called from a running event loop: await agent.run(...) instead"
            )
        return asyncio.run(
            self.run(prompt, checkpointer=checkpointer, thread_id=thread_id, decisions=decisions)
        )

    def stream(
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
        return until_interrupt(
            functools.partial(self._run_traced, prompt, checkpointer, thread_id, decisions)
        )

    def _run_traced(
        self,
        prompt: Prompt | None,
        checkpointer: Checkpointer | None,
        thread_id: str | None,
        decisions: Mapping[str, Any] | None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The arguments of :meth:`run` / :meth:`stream` checked, then the traced driver."""
        if checkpointer is not None:
            checkpointer = check_target(checkpointer, thread_id)  # THREAD_ID_INVALID first
        checked = self._checked_decisions(decisions)
        if checkpointer is None and thread_id is not None:
            raise InvalidArgumentError(
                "thread_id needs a checkpointer (the thread would not be saved)"
            )
        message = as_prompt(prompt)
        # run(None) on a thread continues it asking the model again (resume(reissue=True)).
        opening = Opening.RUN if prompt is not None else Opening.REISSUE
        driver = self._drive(message, checkpointer, thread_id, checked, opening)
        return trace_run(self, driver, thread_id=thread_id)

    async def pause(self, thread_id: str, *, checkpointer: Checkpointer) -> None:
        """Save ``messages`` and ``state`` as the thread's checkpoint (``pending=None``).

        A thread with no checkpoint is ``CHECKPOINT_MISSING`` (nothing written) unless the
        agent parks its own history there: one no other thread's run left, holding a
        message. While this agent's run holds the thread (same checkpointer), the pause
        goes through that run, as a tool's or middleware's ``ctx.pause()`` does: it saves
        the run's history so far and never waits for the lock the run holds.
        """
        checkpointer = check_target(checkpointer, thread_id)
        live = self._live
        if live is not None and live[0] is checkpointer and live[1].thread_id == thread_id:
            await live[1].pause()
            return
        if not self._busy.held:
            # Before a first run, agent.messages is only the seed: what that run would start
            # from (the session's snapshot, else the stored memory, else the seed) is what a
            # pause must save, or a resume would overwrite the stored history with it.
            await self._session.ready()
        await pause_thread(checkpointer, thread_id, self._history)

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Checkpointer,
        reissue: bool = False,
    ) -> RunResult:
        """Continue a checkpointed thread (no new user message); ``CHECKPOINT_MISSING`` if unknown.

        Restores state, messages and memory from the checkpoint and goes on with the loop;
        ``decisions`` answer the interrupted approval calls (keys: ``hitl_key``, a tool
        name, or the open interrupt's ``interrupt_id``) and add to those given to earlier
        resumes of the same interrupt.

        ``reissue=False`` (the default) runs the stored interrupted turn: an approval runs
        exactly the call the human saw (or its edit), and the model is not asked again.
        ``reissue=True`` asks the model again, and a bare tool name approves whatever
        arguments the re-issued call carries. Decisions on a thread with nothing pending:
        ``HITL_DECISION`` (nothing runs); a decision naming a closed interrupt re-raises
        the open one.
        """
        return await _result(self._resume_traced(thread_id, decisions, checkpointer, reissue))

    def resume_stream(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Checkpointer,
        reissue: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Continue a checkpointed thread like :meth:`resume`, yielding events as they happen.

        The events and their end are those of :meth:`stream`: ``RunFinishedEvent``, or
        ``InterruptEvent`` (the interrupt is not raised), or ``RunErrorEvent`` after which
        the error is raised. A server streams a resumed run's tokens with it.
        """
        return until_interrupt(
            functools.partial(self._resume_traced, thread_id, decisions, checkpointer, reissue)
        )

    def _resume_traced(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None,
        checkpointer: Checkpointer,
        reissue: bool,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The arguments of :meth:`resume` / :meth:`resume_stream` checked, then the driver."""
        if not isinstance(reissue, bool):
            raise InvalidArgumentError(f"reissue must be a bool, not {reissue!r:.60}")
        checkpointer = check_target(checkpointer, thread_id)  # THREAD_ID_INVALID comes first
        checked = self._checked_decisions(decisions)
        opening = Opening.REISSUE if reissue else Opening.RESUME
        driver = self._drive(None, checkpointer, thread_id, checked, opening)
        return trace_run(self, driver, thread_id=thread_id, resume=True)

    def _checked_decisions(self, decisions: object) -> Mapping[str, Any]:
        """``decisions`` with every key naming a tool of this agent or an interrupt id.

        A decision for a misspelled tool name (or one that needs no approval) would be
        silently ignored and the call would interrupt again: it is ``HITL_DECISION``.
        """
        checked = check_decisions(decisions) or {}
        for key in checked:
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
        message: Message | None,
        checkpointer: Checkpointer | None,
        thread_id: str | None,
        decisions: Mapping[str, Any],
        opening: Opening,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The one driver (arguments checked by the public method): open, run the loop.

        With a checkpointer, the thread is opened first (its lock held, its checkpoint
        loaded, the decisions bound to its open interrupt) and its hooks join the run;
        ``opening`` says how it goes on.
        """
        # Every nested stream is closed explicitly: a consumer that stops early frees the
        # agent and the thread at once, not when the garbage collector finds them.
        if checkpointer is None:
            hooks = self._hooks(from_thread=False)
            run_events = self._busy_run(message, decisions, None, hooks, "run")
            async with contextlib.aclosing(run_events):
                async for event in run_events:
                    yield event
            return
        assert thread_id is not None  # check_target refused a missing one
        self._busy.check()  # before waiting for the thread: one run at a time per instance
        host = ThreadHost(self.agent_id, self._history, self._tools_by_name, self._setup)
        # The terminal event is yielded once the thread is let go: a consumer that pauses
        # or runs the thread on it takes the lock like anyone else (never its own run's).
        terminal: list[AgentEvent] = []
        try:
            async with open_thread(host, checkpointer, thread_id, decisions, opening) as start:
                events = self._thread_events(start, opening, message, checkpointer, thread_id)
                async with contextlib.aclosing(events):
                    async for event in events:
                        if isinstance(event, _TERMINAL):
                            terminal.append(event)
                        else:
                            yield event
        except Exception:
            if not terminal:
                raise
            yield terminal[0]
            raise
        for event in terminal:
            yield event

    def _thread_events(
        self,
        start: ThreadStart,
        opening: Opening,
        message: Message | None,
        checkpointer: Checkpointer,
        thread_id: str,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The events of a run of an opened thread: its interrupt first, or the run."""
        run = start.run
        if start.surface is not None:
            return self._surface(start, opening, message)
        hooks = self._hooks(run.hooks(), from_thread=run.start is not None)
        kind: TimelineKind = "resume" if opening.resumes else "run"
        return self._busy_run(
            message, run.decisions, thread_id, hooks, kind, run.replay, checkpointer
        )

    async def _busy_run(
        self,
        message: Message | None,
        decisions: Mapping[str, Any] | None,
        thread_id: str | None,
        hooks: RunHooks,
        timeline_kind: TimelineKind,
        replay: Replay | None = None,
        checkpointer: Checkpointer | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """One run inside the agent's busy flag (released before the terminal event)."""
        with self._busy.hold() as release:
            events = self._run_events(
                message, decisions, thread_id, hooks, timeline_kind, replay, release, checkpointer
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event

    async def _surface(
        self, start: ThreadStart, opening: Opening, prompt: Message | None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Raise the interrupt a thread opened on (the agent takes the thread's state)."""
        base, call = start.base, start.surface
        assert base is not None and call is not None
        with self._busy.hold():
            interrupt = await surface_interrupt(
                start.run.checkpointer, base, call, stale=start.stale, carry=start.carry
            )
            self._history.state.replace(base.state)
            await self._history.replace(base.messages)
            self._history.bind_thread(start.run.checkpointer, base.thread_id)
            label = "outcome_unknown" if interrupt.outcome_unknown else "interrupted"
            self._history.record("resume" if opening.resumes else "run", label)
        run_id = new_id()
        yield RunStartedEvent(
            run_id=run_id, agent_id=self.agent_id, thread_id=base.thread_id, prompt=prompt
        )
        yield InterruptEvent(run_id=run_id, interrupt=interrupt)
        raise interrupt

    def _hooks(self, *providers: RunHooks, from_thread: bool) -> RunHooks:
        """The run's hooks: the session's, then each provider's (a thread's)."""
        return RunHooks.compose(self._session.hooks(from_thread=from_thread), *providers)

    async def _start(self, hooks: RunHooks) -> Sequence[Message]:
        """The history a run starts from: the hooks' (a thread's), else the agent's own."""
        if hooks.on_start is not None:
            await hooks.on_start()  # the session is restored (or its app data carried)
        start = await hooks.prepare() if hooks.prepare is not None else None
        return start if start is not None else await self._history.start()

    async def _run_events(
        self,
        message: Message | None,
        decisions: Mapping[str, Any] | None,
        thread_id: str | None,
        hooks: RunHooks,
        timeline_kind: TimelineKind,
        replay: Replay | None,
        release: Callable[[], None],
        checkpointer: Checkpointer | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Start, loop, commit and the terminal event of one run (inside the busy flag)."""
        run = LoopRun([], message, decisions, thread_id, hooks=hooks, replay=replay)
        history = self._history
        # The run's entry is recorded once, when it commits (before the commit hooks, so
        # the session's save carries it), or else when it fails.
        entry: TimelineEntry | None = None
        try:
            yield RunStartedEvent(
                run_id=run.run_id, agent_id=self.agent_id, thread_id=thread_id, prompt=message
            )
            run.history = await self._start(hooks)
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
                self._live = None if checkpointer is None else (checkpointer, run)
                try:
                    async for event in loop_events:
                        yield event
                finally:
                    self._live = None
            assert run.final is not None
            manager = self.conversation_manager
            if run.retry_ids:
                managed, base = await history.commit(run.visible(), run.checked, manager)
            else:
                checked = run.checked_transcript()
                managed, base = await history.commit(
                    run.transcript, run.checked, manager, checked, run.grown_from
                )
            entry = history.record(timeline_kind, ran=run.ran)
            if hooks.on_commit is not None:
                await hooks.on_commit(managed, True)
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
            kept, _ = await history.commit(
                run.kept_on_interrupt(), run.checked, self.conversation_manager
            )
            entry = history.record(timeline_kind, "interrupted", ran=run.ran)
            if hooks.on_commit is not None:
                await hooks.on_commit(kept, False)
            logger.debug(
                "run %s of %r (thread %s): interrupted", run.run_id, self.agent_id, thread_id
            )
            release()
            yield InterruptEvent(run_id=run.run_id, interrupt=interrupt)
            raise
        except Exception as exc:
            code = getattr(exc, "code", type(exc).__name__)
            if entry is None:  # a commit hook that fails leaves the committed run's entry
                history.record(timeline_kind, f"error:{code}", ran=run.ran)
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
        memory = self._history.memory
        if not implements(memory, GroundingMemory):
            return
        run.history = [m for m in run.history if not is_grounding(m)]
        asked = message if message is not None else _latest_user(run.history)
        if asked is not None:
            run.context = await memory.ground([], asked.text)

    # -- seams ------------------------------------------------------------------------

    def _setup(self) -> RunSetup:
        """The frozen setup the loop runs with (built per run: attributes may change)."""
        parts = (self._history.system_prompt, self._output_instruction)
        return RunSetup(
            model=self.model,
            tools=self._tools_by_name,
            tool_specs=tuple(self._tool_specs),
            middleware=self._middleware,
            system_prompt="\n\n".join(p for p in parts if p) or None,
            conversation_manager=self.conversation_manager,
            max_turns=self.max_turns,
            output_retries=self.output_retries,
            response_format=self.response_format,
            output_version=self.output_version,
            decide=self.decide,
            owner=self,
        )

    def _constructor_kwargs(self) -> dict[str, Any]:
        """This agent's constructor arguments (for clones and branches)."""
        kwargs = {name: getattr(self, name) for name in _CONSTRUCTOR_ATTRIBUTES}
        kwargs["state"] = self.state.to_dict()
        return kwargs

    # -- snapshots, editing, branches ---------------------------------------------------

    def take_snapshot(
        self,
        preset: str | None = "session",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        app_data: Any = None,
    ) -> Snapshot:
        """A snapshot of the selected fields (sync, no I/O); records a ``"snapshot"`` entry."""
        return self._session.take_snapshot(preset, include, exclude, app_data)

    async def load_snapshot(self, snapshot: Snapshot) -> None:
        """Restore the fields present in ``snapshot``; absent ones keep their values.

        Holds the busy flag like a run (``AGENT_BUSY`` if one is going on): a run starting
        in between would commit a history without the change, or overwrite it.
        """
        if not isinstance(snapshot, Snapshot):
            raise InvalidArgumentError(
                f"load_snapshot() takes a Snapshot, not {type(snapshot).__name__}"
            )
        with self._busy.hold("load_snapshot"):
            await self._session.load_snapshot(snapshot)

    async def edit_message(self, id_or_index: str | int, content: Any) -> Message:
        """Replace one message's content, by id or index (negative: from the end)."""
        with self._busy.hold("edit_message"):
            return await self._session.edit_message(id_or_index, content)

    def branch(
        self,
        label: str,
        overrides: Mapping[str, Any] | None = None,
        at: str | int | None = None,
    ) -> Agent:
        """An independent fork: shared model/tools, copied state, fresh seeded memory.

        ``at`` (a message id or index) ends the branch's history at that message;
        ``overrides`` are constructor arguments. Both timelines get a ``"branch"`` entry.
        """
        if not isinstance(label, str):
            raise InvalidArgumentError(f"branch label must be a str, not {type(label).__name__}")
        overrides = checked_overrides(type(self), overrides)
        kwargs = self._constructor_kwargs()
        messages = list(self._history.messages)
        if at is not None:
            messages = messages[: find_message(messages, at, "branch(at=...)") + 1]
        kwargs.update(  # the state is a deep copy already (_constructor_kwargs)
            memory=None,  # fresh default memory, seeded with the history on the first run
            session_manager=None,
            initial_messages=[m.model_copy(deep=True) for m in messages],
        )
        kwargs.update(overrides)
        child = type(self)(**kwargs)
        child._history.timeline = Timeline(self._history.timeline.entries())
        self._history.record("branch", label)
        child._history.record("branch", label)
        return child

    def with_tools(self, *extra: Tool | Any) -> Agent:
        """A clone with ``extra`` tools added: fresh memory, no session manager, fresh state."""
        kwargs = self._constructor_kwargs()
        kwargs.update(tools=(*self.tools, *extra), memory=None, session_manager=None, state=None)
        return Agent(**kwargs)

    def __repr__(self) -> str:
        return (
            f"Agent(agent_id={self.agent_id!r}, model={self.model!r:.60}, tools={len(self.tools)})"
        )


#: The constructor arguments of a clone or a branch, each read back from the agent's
#: attribute of the same name (and ``state``, as a copy).
_CONSTRUCTOR_ATTRIBUTES = (
    "model",
    "tools",
    "system_prompt",
    "memory",
    "conversation_manager",
    "session_manager",
    "initial_messages",
    "middleware",
    "response_format",
    "output_version",
    "decide",
    "agent_id",
    "max_turns",
    "output_retries",
)


async def _result(events: AsyncGenerator[AgentEvent, None]) -> RunResult:
    """The result of a run's traced driver (its interrupt or error propagates)."""
    return (await finished_event(events, RunFinishedEvent)).result


def _added(managed: CheckedHistory, start: Sequence[Message]) -> list[Message]:
    """The messages of ``managed`` that were not in ``start`` (what a run added)."""
    n = len(start)
    if (isinstance(start, CheckedHistory) and start.starts(managed)) or managed[:n] == list(start):
        return managed[n:]  # the usual case: the run appended to what it started from
    start_ids = {m.id for m in start}
    return [m for m in managed if m.id not in start_ids]
