"""``Swarm``: agents that hand the conversation to each other, on one durable thread.

A run goes member by member. Each member runs as a clone (``with_tools(handoff_to_agent)``,
see ``_handoff.py``) on the swarm's thread, through a view of the checkpointer that stores
the swarm's record with every save (``_state.py``). A member that hands off ends its run
after that turn; the swarm then runs the named member on the same conversation, until a
member answers without handing off, a limit stops it, or a member needs an approval.

Without a checkpointer the swarm keeps its threads in an :class:`InMemoryCheckpointer` of
its own (thread ``"swarm"`` unless a ``thread_id`` is given), so consecutive runs continue
the conversation like an agent's memory does. One run at a time per instance
(``AGENT_BUSY``); one run at a time per thread across processes (the thread's lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .._telemetry import trace_workflow
from ..agent._base import aclose_events, at_least, check_target, finished_event, until_interrupt
from ..agent.agent import Agent, as_prompt
from ..agent.events import AgentEvent, InterruptEvent, RunFinishedEvent
from ..agent.result import RunResult
from ..checkpoint._base import Checkpointer, thread_lock
from ..checkpoint.memory import InMemoryCheckpointer
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import AgentBusyError, CheckpointMissingError, InvalidArgumentError
from ..hitl import HitlInterrupt, check_decisions
from ..messages import Message, new_id
from ._handoff import HANDOFF_TOOL, HandoffGate, MemberTurn, TurnSlot, make_handoff_tool
from ._state import SWARM_STATE_KEY, MemberCheckpointer, SwarmRecord, read_record
from ._types import (
    Handoff,
    HandoffEvent,
    MemberEvent,
    SwarmErrorEvent,
    SwarmEvent,
    SwarmFinishedEvent,
    SwarmInterruptEvent,
    SwarmResult,
    SwarmStartedEvent,
    SwarmStatus,
)

if TYPE_CHECKING:
    from ._serve import SwarmAgentView

__all__ = ["DEFAULT_THREAD", "Swarm"]

#: The thread of a swarm run without a checkpointer and without a thread id.
DEFAULT_THREAD = "swarm"

P = ParamSpec("P")
R = TypeVar("R")


class _MemberTimeout(Exception):
    """A member's run outlived its time budget (raised in place of a bare TimeoutError)."""


@dataclass(slots=True)
class _Run:
    """The mutable side of one swarm run."""

    run_id: str
    thread_id: str
    view: MemberCheckpointer
    record: SwarmRecord
    messages: list[Message]
    member: str
    prompt: Message | None
    decisions: dict[str, Any]
    base: ThreadCheckpoint | None  # the checkpoint the first member starts from
    resume: bool
    deadline: float | None
    reissue: bool = False  # a resume runs the stored call (True: asks the member's model again)
    handoffs: list[Handoff] = field(default_factory=list)
    iterations: int = 0

    def result(self, text: str, status: SwarmStatus, stop_reason: str) -> SwarmResult:
        """The run's result as it stands: its member, handoffs, messages and context."""
        return SwarmResult(
            text=text,
            status=status,
            agent=self.member,
            handoffs=list(self.handoffs),
            messages=list(self.messages),
            stop_reason=stop_reason,
            context=self.record.context_dict(),
            iterations=self.iterations,
            thread_id=self.thread_id,
        )


@dataclass(frozen=True, slots=True)
class _Request:
    """What a call of run, stream, resume or resume_stream asked for (checked by the driver)."""

    prompt: object
    checkpointer: object
    thread_id: object
    decisions: Mapping[str, Any] | None
    resume: bool = False
    reissue: bool = False


def _seconds(label: str, value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise InvalidArgumentError(
            f"{label} must be a number of seconds > 0 or None, not {value!r}"
        )
    return float(value)


def _deprecated_alias(new: Callable[P, R], warning: str, doc: str) -> Callable[P, R]:
    """``new`` under an old name that warns (``DeprecationWarning``) on every call."""

    @functools.wraps(new)
    def old(*args: P.args, **kwargs: P.kwargs) -> R:
        warnings.warn(warning, DeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)

    old.__doc__ = doc
    return old


class Swarm:
    """Agents that hand the conversation to each other (``docs/swarm.md``).

    Args:
        agents: The members, named by their ``agent_id`` (unique).
        entry: The member that takes the first turn of a new thread (default: the first).
        max_handoffs: Handoffs one run follows; one more stops it (``"max_handoffs"``).
        max_iterations: Member turns in one run (``"max_iterations"``).
        execution_timeout: Seconds for one whole run (``"execution_timeout"``; ``None``: none).
        node_timeout: Seconds for one member's turn (``"node_timeout"``; ``None``: none).
        swarm_id: This swarm's name (events and logs).
        repetition_window: The last handoffs of a run checked for ping-pong (0: off).
        repetition_min_agents: Fewer distinct members than this in that window stops the
            run (``"repetition"``).
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        entry: str | None = None,
        max_handoffs: int = 20,
        max_iterations: int = 20,
        execution_timeout: float | None = 900.0,
        node_timeout: float | None = 300.0,
        swarm_id: str = "default",
        repetition_window: int = 6,
        repetition_min_agents: int = 3,
    ) -> None:
        """Check the members and limits (``INVALID_ARGUMENT``) and build the members' clones."""
        members = _check_agents(agents)
        ids = [a.agent_id for a in members]
        if entry is None:
            entry = ids[0]
        if entry not in ids:
            raise InvalidArgumentError(f"entry {entry!r} is not a member; members: {ids}")
        if not isinstance(swarm_id, str) or not swarm_id:
            raise InvalidArgumentError("swarm_id must be a non-empty str")
        self.agents: tuple[Agent, ...] = members
        self.entry: str = entry
        self.max_handoffs = at_least(max_handoffs, "max_handoffs", 0)
        self.max_iterations = at_least(max_iterations, "max_iterations", 1)
        self.execution_timeout = _seconds("execution_timeout", execution_timeout)
        self.node_timeout = _seconds("node_timeout", node_timeout)
        self.swarm_id = swarm_id
        self.repetition_window = at_least(repetition_window, "repetition_window", 0)
        self.repetition_min_agents = at_least(repetition_min_agents, "repetition_min_agents", 2)
        self._slot = TurnSlot()
        self._members: dict[str, Agent] = {
            a.agent_id: self._clone(a, [i for i in ids if i != a.agent_id]) for a in members
        }
        self._own_checkpointer = InMemoryCheckpointer()
        self._busy = False

    def _clone(self, agent: Agent, others: list[str]) -> Agent:
        if not others:  # a swarm of one: nobody to hand off to
            return agent.with_tools()
        tool = make_handoff_tool(agent.agent_id, others, self._slot)
        clone = agent.with_tools(tool)
        clone.model = HandoffGate(agent.model, tool, self._slot, agent.agent_id)
        return clone

    # -- public surface --------------------------------------------------------------

    @property
    def member_ids(self) -> list[str]:
        """The members' ids, in the order given."""
        return [a.agent_id for a in self.agents]

    def member(self, agent_id: str) -> Agent:
        """The clone that runs as member ``agent_id`` (``INVALID_ARGUMENT`` if unknown)."""
        try:
            return self._members[agent_id]
        except KeyError:
            raise InvalidArgumentError(
                f"{agent_id!r} is not a member; members: {self.member_ids}"
            ) from None

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._busy

    async def run(
        self,
        prompt: str | Message | None,
        *,
        checkpointer: Any = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> SwarmResult:
        """Run the swarm on ``prompt`` (``None``: go on as is) and return its result.

        The thread's active member takes the first turn. Raises :class:`HitlInterrupt`
        (with ``agent`` naming the member) when a member's call needs a decision.
        """
        return await _result(self._drive(_Request(prompt, checkpointer, thread_id, decisions)))

    def stream(
        self,
        prompt: str | Message | None,
        *,
        checkpointer: Any = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[SwarmEvent]:
        """Run like :meth:`run`, yielding events (the interrupt is an event, not raised)."""
        request = _Request(prompt, checkpointer, thread_id, decisions)
        return until_interrupt(functools.partial(self._drive, request))

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Any,
        reissue: bool = False,
    ) -> SwarmResult:
        """Continue a thread in its active member, with ``decisions`` for its approval.

        ``CHECKPOINT_MISSING`` for an unknown thread. ``checkpointer=None`` means the
        swarm's own in-memory one. ``reissue`` is the member's :meth:`Agent.resume` mode:
        ``False`` (the default) runs the stored pending call with the approved or edited
        arguments, without asking the member's model again, so an approval runs exactly
        the call the human saw; ``True`` asks the member's model again.
        """
        request = _Request(None, checkpointer, thread_id, decisions, resume=True, reissue=reissue)
        return await _result(self._drive(request))

    def resume_stream(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Any,
        reissue: bool = False,
    ) -> AsyncIterator[SwarmEvent]:
        """:meth:`resume`, yielding events like :meth:`stream` (the member's streamed)."""
        request = _Request(None, checkpointer, thread_id, decisions, resume=True, reissue=reissue)
        return until_interrupt(functools.partial(self._drive, request))

    stream_resume = _deprecated_alias(
        resume_stream,
        "Swarm.stream_resume() is deprecated: use Swarm.resume_stream()",
        "Deprecated: the old name of :meth:`resume_stream` (as on ``Agent``); kept one release.",
    )

    def as_agent(self) -> SwarmAgentView:
        """This swarm behind an agent's surface (agent events, ``RunResult``): for servers."""
        from ._serve import SwarmAgentView  # the view's module builds on this one

        return SwarmAgentView(self)

    # -- the driver ------------------------------------------------------------------

    def _target(self, checkpointer: object, thread_id: object) -> tuple[Checkpointer, str]:
        if checkpointer is None:
            return self._own_checkpointer, check_thread_id(thread_id or DEFAULT_THREAD)
        return check_target(checkpointer, thread_id), cast(str, thread_id)

    def _drive(self, request: _Request) -> AsyncGenerator[SwarmEvent, None]:
        """The swarm's events inside an ``invoke_workflow {swarm_id}`` span (when traced).

        The members' ``invoke_agent`` spans are its children.
        """
        if not isinstance(request.reissue, bool):
            raise InvalidArgumentError(
                f"reissue must be a bool, not {type(request.reissue).__name__}"
            )
        events = self._drive_members(request)
        thread_id = request.thread_id
        conversation = thread_id if isinstance(thread_id, str) else None
        return trace_workflow(self.swarm_id, events, conversation_id=conversation)

    async def _drive_members(self, request: _Request) -> AsyncGenerator[SwarmEvent, None]:
        """Validate, take the instance and the thread, load the thread, run the members."""
        message = as_prompt(request.prompt)
        given = dict(check_decisions(request.decisions) or {})
        cp, tid = self._target(request.checkpointer, request.thread_id)
        if self._busy:
            raise AgentBusyError(
                f"swarm {self.swarm_id!r} is already running; one run at a time per instance"
            )
        self._busy = True
        try:
            async with thread_lock(cp, tid):
                base = await cp.load(tid)
                if base is None and request.resume:
                    raise CheckpointMissingError(f"thread {tid!r} has no checkpoint to resume")
                record = read_record(base, self.entry)
                self.member(record.active)  # INVALID_ARGUMENT if the thread's member is gone
                if base is None:
                    # Members always start from the thread, never from a clone's memory.
                    fresh = ThreadCheckpoint(tid, None, [], {SWARM_STATE_KEY: record.as_state()})
                    await cp.save(fresh)
                run = _Run(
                    run_id=new_id(),
                    thread_id=tid,
                    view=MemberCheckpointer(cp, tid, self._record_for_save),
                    record=record,
                    messages=list(base.messages) if base is not None else [],
                    member=record.active,
                    prompt=message,
                    decisions=given,
                    base=base,
                    resume=request.resume,
                    deadline=self._deadline(),
                    reissue=request.reissue,
                )
                # Closed explicitly: a consumer that stops early must stop the member now.
                async with contextlib.aclosing(self._members_loop(run)) as events:
                    async for event in events:
                        yield event
        finally:
            self._slot.turn = None
            self._busy = False

    def _deadline(self) -> float | None:
        if self.execution_timeout is None:
            return None
        return asyncio.get_running_loop().time() + self.execution_timeout

    def _record_for_save(self, final: bool) -> tuple[SwarmRecord, Message | None]:
        """What every save of the running member stores (see ``MemberCheckpointer``)."""
        turn = self._slot.turn
        assert turn is not None  # members only save while the swarm runs them
        if final and turn.after is not None:
            return turn.after, turn.message
        return turn.record, None

    async def _members_loop(self, run: _Run) -> AsyncGenerator[SwarmEvent, None]:
        yield SwarmStartedEvent(
            run_id=run.run_id,
            swarm_id=self.swarm_id,
            agent=run.member,
            thread_id=run.thread_id,
            prompt=run.prompt,
        )
        while True:
            stop = self._limit_before_turn(run)
            if stop is not None:
                yield SwarmFinishedEvent(run_id=run.run_id, result=run.result("", "failed", stop))
                return
            budget, reason = self._budget(run)
            turn = MemberTurn(run.member, run.record)
            self._slot.turn = turn
            run.iterations += 1
            finished: RunResult | None = None
            interrupt: HitlInterrupt | None = None
            try:
                async with contextlib.aclosing(_pumped(self._member_events(run), budget)) as pumped:
                    async for event in pumped:
                        if isinstance(event, RunFinishedEvent):
                            finished = event.result
                        elif isinstance(event, InterruptEvent):
                            interrupt = event.interrupt
                        yield MemberEvent(agent=run.member, event=event)
            except _MemberTimeout:
                yield SwarmFinishedEvent(run_id=run.run_id, result=run.result("", "failed", reason))
                return
            except Exception as exc:
                yield SwarmErrorEvent(run_id=run.run_id, agent=run.member, error=exc)
                raise
            finally:
                self._slot.turn = None
            if interrupt is not None:
                interrupt.agent = run.member
                yield SwarmInterruptEvent(run_id=run.run_id, agent=run.member, interrupt=interrupt)
                raise interrupt
            assert finished is not None  # a member's stream ends in one of the three
            if turn.handoff is None:
                run.messages = list(finished.messages)
                result = run.result(finished.text, "completed", finished.stop_reason)
                yield SwarmFinishedEvent(run_id=run.run_id, result=result)
                return
            assert turn.after is not None and turn.message is not None
            run.record, run.messages = turn.after, [*finished.messages, turn.message]
            run.handoffs.append(turn.handoff)
            yield HandoffEvent(handoff=turn.handoff, context=turn.context)
            stop = self._limit_after_handoff(run)
            if stop is not None:
                yield SwarmFinishedEvent(run_id=run.run_id, result=run.result("", "failed", stop))
                return
            run.member, run.prompt, run.decisions, run.base = turn.handoff.to_agent, None, {}, None

    def _member_events(self, run: _Run) -> AsyncIterator[AgentEvent]:
        """The running member's events: its stream, or its resume when one is due."""
        member = self.member(run.member)
        base = run.base
        if (
            run.resume
            and base is not None
            and (base.in_flight or (base.pending is not None and not run.reissue))
        ):
            # The member's resume: it settles calls in flight (one of unknown outcome asks
            # again), and without reissue runs the stored call as the human saw it.
            return member.resume_stream(
                run.thread_id, run.decisions or None, checkpointer=run.view, reissue=run.reissue
            )
        decisions = run.decisions
        if run.prompt is None and base is not None and base.pending is not None:
            # Going on from an interrupt: decisions given to earlier resumes still count.
            decisions = {**base.decisions, **decisions}
        return member.stream(
            run.prompt, checkpointer=run.view, thread_id=run.thread_id, decisions=decisions or None
        )

    def _budget(self, run: _Run) -> tuple[float | None, str]:
        """Seconds this member's turn may take, and the limit that would stop it."""
        if run.deadline is None:
            return self.node_timeout, "node_timeout"
        left = run.deadline - asyncio.get_running_loop().time()
        if self.node_timeout is not None and self.node_timeout <= left:
            return self.node_timeout, "node_timeout"
        return left, "execution_timeout"

    def _limit_before_turn(self, run: _Run) -> str | None:
        if run.iterations >= self.max_iterations:
            return "max_iterations"
        if run.deadline is not None and run.deadline <= asyncio.get_running_loop().time():
            return "execution_timeout"
        return None

    def _limit_after_handoff(self, run: _Run) -> str | None:
        if len(run.handoffs) > self.max_handoffs:
            return "max_handoffs"
        window = self.repetition_window
        if window and len(run.handoffs) >= window:
            recent = run.handoffs[-window:]
            involved = {h.from_agent for h in recent} | {h.to_agent for h in recent}
            if len(involved) < self.repetition_min_agents:
                return "repetition"
        return None

    def __repr__(self) -> str:
        """The swarm's id, members and entry."""
        return f"Swarm(swarm_id={self.swarm_id!r}, members={self.member_ids}, entry={self.entry!r})"


def _check_agents(agents: object) -> tuple[Agent, ...]:
    """The members, checked: Agents, at least one, unique ids, no clash with the tool."""
    if isinstance(agents, str | bytes | Mapping) or not isinstance(agents, Sequence):
        raise InvalidArgumentError(f"agents must be a list of Agent objects, not {agents!r:.100}")
    members = tuple(agents)
    if not members:
        raise InvalidArgumentError("a swarm needs at least one agent")
    for agent in members:
        if not isinstance(agent, Agent):
            raise InvalidArgumentError(f"swarm members must be Agent objects, not {agent!r:.100}")
        if agent.response_format is not None:
            # A member that hands off ends its run with a short closing message, which no
            # structured output would accept (see _handoff.py).
            raise InvalidArgumentError(
                f"agent {agent.agent_id!r} has a response_format; swarm members answer in "
                "text (parse the swarm's final text yourself)"
            )
        if any(t.name == HANDOFF_TOOL for t in agent.tools):
            raise InvalidArgumentError(
                f"agent {agent.agent_id!r} already has a tool named {HANDOFF_TOOL!r}, which "
                "the swarm gives every member; rename that tool"
            )
    ids = [a.agent_id for a in members]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InvalidArgumentError(f"swarm members need unique agent_ids; repeated: {duplicates}")
    return members


async def _result(events: AsyncGenerator[SwarmEvent, None]) -> SwarmResult:
    """Drain a driver; its result (an interrupt or error propagates)."""
    return (await finished_event(events, SwarmFinishedEvent)).result


_END = object()


async def _pumped(
    events: AsyncIterator[AgentEvent], budget: float | None
) -> AsyncGenerator[Any, None]:
    """``events`` produced in a task of their own under ``budget`` seconds.

    The timeout must not fire in the consumer of a swarm stream (which may await anything
    between two events), so the member's run is pumped by a separate task into a queue.
    When the budget runs out the member's run is cancelled and :class:`_MemberTimeout`
    is raised here; an error of the member's run is raised here as it is.
    """
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:
        timeout = asyncio.timeout(budget)
        try:
            async with timeout:
                async for event in events:
                    queue.put_nowait(event)
        except TimeoutError:
            if timeout.expired():
                raise _MemberTimeout from None
            raise
        finally:
            await aclose_events(events)  # frees the member (and its run lock) at once

    task = asyncio.create_task(pump())
    task.add_done_callback(lambda _: queue.put_nowait(_END))
    try:
        while (item := await queue.get()) is not _END:
            yield item
        await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
