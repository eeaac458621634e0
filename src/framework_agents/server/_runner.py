"""Runs of threads for every protocol: one factory, one checkpointer, one busy registry.

:class:`ThreadRunner` is what the JSON API, AG-UI and A2A share. A run or a resume is
checked before anything streams (thread id, busy, pending approval, decision), then runs
in a task of its own that feeds a queue: a client that disconnects stops reading, the run
goes on to its end and its checkpoint is complete (it finishes or stops at an interrupt).

Two runs of one thread never interleave. In this process a second run of a busy thread is
refused at once with ``THREAD_BUSY``; across processes (replicas sharing a store) the
checkpointer's thread lock makes the second run wait, then fail with ``THREAD_BUSY``. A
run takes that lock itself and lends it to the agent's run (``_held``), so what its
message does (appended, answered where a dead replica left it, or nothing: taken before)
is decided under the lock the run holds.

A resume runs the call the human saw: the agent's ``resume_stream(..., reissue=False)``
when it has that mode (checked once per agent class in :func:`supports_reissue`), whose
events stream as they happen (tokens included) and answer the pending ``tool_call_id``.
An agent without it (a third-party agent-shaped object) gets the older resume that asks
the model again, with the decision keyed by the pending call's ``hitl_key``, and its
events are rebuilt from the checkpoint afterwards (``_replay``). Either way the arguments
come from the checkpoint (an edit replaces them), never from the client's copy.

What a thread looks like to the protocols (:class:`~._shapes.Pending`, the thread list's
lines) is in ``_shapes``, its timeline in ``_timeline``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._util import maybe_await
from ..agent.events import (
    AgentEvent,
    InterruptEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ..agent.result import RunResult
from ..checkpoint._base import hold_thread, thread_lock
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..elicitation import parse_answer
from ..errors import (
    CheckpointMissingError,
    HitlDecisionError,
    InvalidArgumentError,
    ThreadBusyError,
)
from ..hitl import (
    HitlInterrupt,
    check_edit,
    hitl_key,
    parse_decision,
)
from ..messages import Message, new_id
from ..tools import DECISION_KINDS
from ._errors import ApprovalPendingError, ShuttingDownError
from ._held import HeldCheckpointer, placement, ran_unanswered, timed_lock
from ._index import ThreadIndex
from ._listing import ThreadList
from ._questions import ANSWER_KINDS, question_of
from ._replay import replay
from ._shapes import Pending, summary_json, title_of
from ._store import ServerStore
from ._tenants import current_tenant
from ._timeline import Timeline

__all__ = [
    "AgentFactory",
    "RunHandle",
    "ThreadRunner",
    "parent_key",
    "supports_reissue",
]

logger = logging.getLogger(__name__)

#: ``agent_factory()`` (sync or async) returns a fresh ``Agent`` (or ``Swarm``) per run.
AgentFactory = Callable[[], Any]

_REISSUE: dict[type, bool] = {}


def supports_reissue(agent: object) -> bool:
    """Whether ``agent.resume`` takes ``reissue=`` (run the stored call, not a re-asked one)."""
    cls = type(agent)
    known = _REISSUE.get(cls)
    if known is None:
        try:
            known = "reissue" in inspect.signature(cls.resume).parameters  # type: ignore[attr-defined]
        except (AttributeError, TypeError, ValueError):
            known = False
        _REISSUE[cls] = known
    return known


_END = object()
#: What a held run's opening gives when nothing is to run (``RunHandle.taken``).
_TAKEN = object()


@dataclass(slots=True)
class RunHandle:
    """A run in progress: its events, readable once, while the run goes on regardless."""

    thread_id: str
    resume: bool
    pending: Pending | None = None
    #: The thread's checkpoint when a resume started (``None`` for a run).
    before: ThreadCheckpoint | None = None
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    run_id: str = ""
    started: float = field(default_factory=time.perf_counter)
    #: The terminal event and what follows it: held back until the run let its thread go,
    #: so a client that sends its next turn as soon as it sees the end never finds the
    #: thread busy.
    held: list[Any] = field(default_factory=list)
    #: The write that lists the thread as running, done beside the run (awaited at its end).
    listing: asyncio.Task[None] | None = None
    #: The tenant the run is for (``None``: a server without tenants).
    tenant: str | None = None
    #: Nothing ran and no terminal event comes; the protocol shows the thread as it
    #: stands. A run: its message was taken before (answered, or waiting for a decision).
    #: A resume: its decision names a call now of unknown outcome as it was before it ran
    #: (:meth:`Pending.replaced`); ``pending`` is that call's interrupt.
    taken: bool = False

    def emit(self, event: AgentEvent) -> None:
        """Queue ``event`` for the reader (from the terminal one on: once released)."""
        if self.held or isinstance(event, RunFinishedEvent | RunErrorEvent | InterruptEvent):
            self.held.append(event)
        else:
            self.queue.put_nowait(event)

    async def events(self) -> AsyncIterator[AgentEvent]:
        """The run's events up to and including its terminal one."""
        async for item in self.events_or_idle(None):
            if item is not None:
                yield item

    async def events_or_idle(self, idle: float | None) -> AsyncIterator[AgentEvent | None]:
        """Like :meth:`events`, with ``None`` after every ``idle`` seconds without one.

        A streaming response writes a keep-alive for each ``None``, so proxies do not cut
        a connection while a slow model thinks.
        """
        while True:
            try:
                item = await asyncio.wait_for(self.queue.get(), idle)
            except TimeoutError:
                yield None
                continue
            if item is _END:
                return
            yield item

    async def wait(self) -> None:
        """Wait until the run has ended and its checkpoint is saved."""
        if self.task is not None:
            await asyncio.shield(self.task)


def parent_key(thread_id: str) -> str:
    """The storage key of a branch's link to the thread it was branched from."""
    return f"server/threads/{thread_id}/parent.json"


class ThreadRunner:
    """Runs, resumes, reads and deletes threads of one store with agents of one factory."""

    def __init__(
        self, factory: AgentFactory, store: ServerStore, *, keepalive: float = 15.0
    ) -> None:
        """Serve ``factory``'s agents on ``store``'s checkpointer.

        ``keepalive``: seconds without an event after which a stream sends a keep-alive.
        """
        if not callable(factory):
            raise InvalidArgumentError(f"agent_factory must be callable, got {factory!r:.100}")
        if not isinstance(keepalive, int | float) or not keepalive > 0:
            raise InvalidArgumentError(f"keepalive must be a positive number, got {keepalive!r}")
        self._factory = factory
        self.store = store
        self.index = ThreadIndex(store.storage, summary_json)
        self.timelines = Timeline(store.storage)
        self.threads = ThreadList(self.index, self._known_threads, self.load, self.busy)
        #: A page of threads, newest first, and the cursor of the next page
        #: (:meth:`ThreadList.page <framework_agents.server._listing.ThreadList.page>`).
        self.list_threads = self.threads.page
        self.keepalive = float(keepalive)
        #: The runs in progress here, by tenant and thread id (one thread id, several tenants).
        self._active: dict[tuple[str | None, str], RunHandle] = {}
        self._tools: dict[str, Any] | None = None
        #: ``time.monotonic()`` by which runs in flight must end once :meth:`drain` ran.
        self.drain_deadline: float | None = None

    @property
    def checkpointer(self) -> Any:
        """The checkpointer every protocol's threads live in."""
        return self.store.checkpointer

    # -- agents and tools ---------------------------------------------------------------

    async def make_agent(self) -> Any:
        """A fresh agent from the factory (a ``Swarm`` is served as ``swarm.as_agent()``)."""
        agent = await maybe_await(self._factory())
        as_agent = getattr(agent, "as_agent", None)
        if callable(as_agent):  # a Swarm: served through its agent-shaped view
            agent = as_agent()
        if not hasattr(agent, "stream") or not hasattr(agent, "resume"):
            raise InvalidArgumentError(
                f"agent_factory returned {agent!r:.100}, not an Agent or a Swarm"
            )
        return agent

    @staticmethod
    def _tools_of(agent: Any) -> dict[str, Any]:
        tools: dict[str, Any] = {}
        for member in [agent, *getattr(agent, "agents", ())]:
            for tool in getattr(member, "tools", ()) or ():
                tools.setdefault(tool.name, tool)
        return tools

    async def tools(self) -> dict[str, Any]:
        """The factory's tools by name (looked up once, on a probe agent)."""
        if self._tools is None:
            self._tools = self._tools_of(await self.make_agent())
        return self._tools

    # -- reading ------------------------------------------------------------------------

    async def load(self, thread_id: str, *, claimed: bool = False) -> ThreadCheckpoint | None:
        """The thread's checkpoint (``THREAD_ID_INVALID`` before any store call).

        A call of unknown outcome left by a dead run comes back shown as the open
        interrupt (:meth:`_show_unknown`) unless a run of the thread is in progress in
        this process (``claimed``: the caller's own claim, taken to run it, is not one).
        """
        check_thread_id(thread_id)
        checkpoint: ThreadCheckpoint | None = await self.checkpointer.load(thread_id)
        if checkpoint is not None and (claimed or not self.busy(thread_id)):
            checkpoint = await self._show_unknown(checkpoint)
        return checkpoint

    async def _show_unknown(self, checkpoint: ThreadCheckpoint) -> ThreadCheckpoint:
        """``checkpoint`` with a dead run's call of unknown outcome as its open interrupt.

        A call saved as about to run (``in_flight``) with nothing pending is either
        running now (its run holds the thread lock, maybe on another replica) or was left
        by a run that died in it. Only in the second case (the lock is free) the agent
        surfaces it as it would on the next prompt: a pending ``outcome_unknown``
        interrupt with a fresh id, settled by a decision naming that id (approve or edit
        runs the call again, reject answers it with a rejection). One shown without an id
        (written before interrupts had ids) gets its id the same way. The thread list's
        line follows. Nothing runs: the call is never run again without a decision.
        """
        if not checkpoint.in_flight or checkpoint.open_interrupt_id() is not None:
            return checkpoint  # nothing in flight, or shown already under its id
        thread_id = checkpoint.thread_id
        try:
            async with self._probe_lock(thread_id):
                pass
        except ThreadBusyError:
            return checkpoint  # a run holds the thread: the call may be running now
        agent = await self.make_agent()
        try:
            await self._resume(agent, thread_id, None, {})
        except HitlInterrupt as interrupt:
            if not interrupt.outcome_unknown:  # pragma: no cover - the agent's contract
                logger.warning("thread %s: a call in flight surfaced as %r", thread_id, interrupt)
        except ThreadBusyError:  # a run took the thread since the probe: it surfaces it
            return checkpoint
        except Exception:
            logger.exception("thread %s: could not show its call of unknown outcome", thread_id)
            return checkpoint
        shown: ThreadCheckpoint | None = await self.checkpointer.load(thread_id)
        if shown is None:
            return checkpoint
        try:
            await self.index.enter(shown)
        except Exception:
            logger.exception("could not list thread %s as waiting", thread_id)
        return shown

    def _probe_lock(self, thread_id: str) -> Any:
        """The thread lock taken without waiting (``THREAD_BUSY`` when a run holds it)."""
        return timed_lock(self.checkpointer, thread_id, 0)

    async def require(self, thread_id: str, *, claimed: bool = False) -> ThreadCheckpoint:
        """The thread's checkpoint, or ``CHECKPOINT_MISSING`` (``claimed``: see :meth:`load`)."""
        checkpoint = await self.load(thread_id, claimed=claimed)
        if checkpoint is None:
            raise CheckpointMissingError(f"thread {thread_id!r} does not exist")
        return checkpoint

    async def pending_of(self, checkpoint: ThreadCheckpoint) -> Pending | None:
        """The open approval of ``checkpoint``, if any."""
        call = checkpoint.pending
        if call is None:
            return None
        tool = (await self.tools()).get(call.name)
        allowed = tuple(getattr(tool, "allowed_decisions", DECISION_KINDS))
        key = hitl_key(call.name, call.args)
        interrupt_id = getattr(checkpoint, "interrupt_id", None)
        question = question_of(checkpoint)
        return Pending(
            interrupt_id=str(interrupt_id or call.id),
            tool_call_id=call.id,
            tool=call.name,
            args=dict(call.args),
            key=key,
            allowed_decisions=(
                ANSWER_KINDS if question else tuple(d for d in allowed if d != "suspend")
            ),
            outcome_unknown=checkpoint.outcome_unknown,
            decision_key=str(interrupt_id) if interrupt_id else key,
            kind="elicitation" if question else "tool_call",
            message=question.message if question else None,
            schema=question.schema if question else None,
        )

    async def _known_threads(self) -> list[str]:
        known: list[str] = await self.checkpointer.list_threads()
        return known

    async def _enter_running(self, thread_id: str, prompt: str | Message) -> None:
        """List the thread as ``running`` while its run goes (a failure is only logged)."""
        text = prompt if isinstance(prompt, str) else prompt.text
        try:
            await self.index.enter_running(thread_id, title_of([Message("user", text)]))
        except Exception:
            logger.exception("could not list thread %s as running", thread_id)

    # -- timeline -----------------------------------------------------------------------

    async def timeline(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's runs and resumes as the server recorded them, oldest first."""
        check_thread_id(thread_id)
        return await self.timelines.entries(thread_id)

    async def record(self, thread_id: str, kind: str, label: str | None) -> None:
        """Append one entry (``run``, ``resume``, ``edit``, ``branch``) to the timeline.

        Then the thread list's line of the thread is entered as the thread now stands.
        """
        await self.timelines.append(thread_id, kind, label)
        await self._relist(thread_id)

    async def _relist(self, thread_id: str) -> None:
        """The thread list's line of ``thread_id`` as the thread now stands."""
        checkpoint = await self.load(thread_id)
        if checkpoint is not None:  # the thread list's line for it, as it now stands
            await self.index.enter(checkpoint)
        else:  # a first run that saved nothing: no line (it was listed as running)
            await self.index.drop(thread_id)

    # -- deleting -----------------------------------------------------------------------

    async def delete(self, thread_id: str) -> None:
        """Delete the thread (``CHECKPOINT_MISSING`` if unknown, ``THREAD_BUSY`` if running)."""
        await self.require(thread_id)  # an unknown thread: 404 before any lock is taken
        handle = self.claim(thread_id, resume=False)  # THREAD_BUSY while a run holds it
        try:
            async with thread_lock(self.checkpointer, thread_id):
                await self.require(thread_id)
                await self.checkpointer.delete(thread_id)
                # Still holding the thread: a run that starts right after the delete must
                # not lose its timeline (or its list line) to this clean-up.
                await self.index.drop(thread_id)
                for key in (Timeline.key(thread_id), parent_key(thread_id)):
                    await self.store.storage.delete(key)
        finally:
            self.release(handle)

    # -- running ------------------------------------------------------------------------

    def busy(self, thread_id: str) -> bool:
        """Whether a run of the current tenant's ``thread_id`` is in progress in this process."""
        return (current_tenant(), thread_id) in self._active

    async def held(self, thread_id: str) -> bool:
        """Whether a run holds ``thread_id``'s lock, in this process or another replica.

        A holder that died keeps it until its lease runs out.
        """
        if self.busy(thread_id):
            return True
        try:
            async with self._probe_lock(thread_id):
                return False
        except ThreadBusyError:
            return True

    @property
    def lease(self) -> float:
        """Seconds a dead holder keeps a thread locked (the store's lease; 30 without one).

        A tenant's checkpointer wraps the store's (``inner``): its lease is the store's.
        """
        for checkpointer in (self.checkpointer, getattr(self.checkpointer, "inner", None)):
            lease = getattr(checkpointer, "lease", None)
            if isinstance(lease, int | float):
                return float(lease)
        return 30.0

    def drain(self, grace: float) -> None:
        """Stop taking runs (``SHUTTING_DOWN``); those in flight have ``grace`` seconds left."""
        if self.drain_deadline is None:
            grace = max(0.0, grace)
            self.drain_deadline = time.monotonic() + grace
            logger.info("draining: %d run(s) in flight, %.1f s to end", len(self._active), grace)
            with contextlib.suppress(RuntimeError):  # no loop here: aclose stops the runs
                loop = asyncio.get_running_loop()
                # Safe from a signal handler: scheduled from the loop, not from here.
                loop.call_soon_threadsafe(loop.call_later, grace, self._stop_runs)

    def _stop_runs(self) -> None:
        """Stop the runs still going: each ends at its last checkpoint with ``SHUTTING_DOWN``."""
        for handle in list(self._active.values()):
            if handle.task is not None and not handle.task.done():
                handle.task.cancel()

    def claim(self, thread_id: str, resume: bool) -> RunHandle:
        """Hold ``thread_id`` for one run or edit in this process (``THREAD_BUSY`` if held)."""
        check_thread_id(thread_id)
        if self.drain_deadline is not None:
            raise ShuttingDownError(
                "this server is shutting down and takes no new runs; retry on another replica"
            )
        tenant = current_tenant()
        if (tenant, thread_id) in self._active:
            raise ThreadBusyError(
                f"thread {thread_id!r} is running; wait for its run to end (HTTP 409)"
            )
        handle = RunHandle(thread_id, resume, tenant=tenant)
        self._active[tenant, thread_id] = handle
        return handle

    def release(self, handle: RunHandle) -> None:
        """Let go of the thread ``handle`` holds."""
        if self._active.get((handle.tenant, handle.thread_id)) is handle:
            del self._active[handle.tenant, handle.thread_id]

    async def start_run(self, thread_id: str, prompt: str | Message) -> RunHandle:
        """Check, then start a run of ``prompt`` on the thread; its events stream from the handle.

        Refused before anything runs: a bad thread id, a busy thread (``THREAD_BUSY``), a
        thread waiting for an approval (``APPROVAL_PENDING``), an empty prompt. A message
        with an id is placed under the thread's lock (``_held``): a message the thread
        holds unanswered at its end is answered, one it took otherwise runs nothing
        (``handle.taken``).
        """
        if isinstance(prompt, str) and not prompt.strip():
            raise InvalidArgumentError("prompt must be a non-empty string")
        message_id = None if isinstance(prompt, str) else prompt.id
        handle = self.claim(thread_id, resume=False)
        try:
            checkpoint = await self.load(thread_id, claimed=True)
            taken = placement(checkpoint, message_id) == "taken"
            if checkpoint is not None and checkpoint.pending is not None and not taken:
                raise ApprovalPendingError(
                    f"thread {thread_id!r} waits for a decision on "
                    f"{checkpoint.pending.name!r}; resume it before sending a new prompt"
                )
            agent = await self.make_agent()
        except BaseException:
            self.release(handle)
            raise
        handle.task = asyncio.create_task(self._drive_run(handle, agent, prompt))
        return handle

    async def start_resume(self, thread_id: str, decisions: Mapping[str, Any]) -> RunHandle:
        """Check, then resume the thread's pending approval with ``decisions``.

        ``decisions`` maps a name of the pending approval (its ``tool_call_id``,
        ``interrupt_id``, ``key`` or tool name) to a decision. Nothing pending, a key that
        names something else, or a decision the tool does not allow: ``HITL_DECISION``.
        A decision for a call now of unknown outcome that names it as it was before it
        ran (sent again after its answer was lost, :meth:`Pending.replaced`) runs nothing:
        the handle is ``taken``, its ``pending`` the interrupt to settle the call by.
        """
        handle = self.claim(thread_id, resume=True)
        try:
            checkpoint = await self.require(thread_id, claimed=True)
            pending = await self.pending_of(checkpoint)
            if (
                pending is not None
                and isinstance(decisions, Mapping)
                and len(decisions) == 1
                and pending.replaced(next(iter(decisions)))
            ):
                handle.pending, handle.taken = pending, True
                self.release(handle)
                handle.queue.put_nowait(_END)
                return handle
            decision = self._one_decision(thread_id, pending, decisions)
            agent = await self.make_agent()
            assert pending is not None
            tool = self._tools_of(agent).get(pending.tool)
            # HITL_DECISION now, before the stream starts: an answer against the question's
            # schema (the agent checks it again), a decision against the tool (edits too).
            question = question_of(checkpoint)
            if question is not None:
                parse_answer(decision, question, pending.tool)
            elif tool is not None:
                check_edit(parse_decision(decision, tool=tool, source="exact"), tool)
        except BaseException:
            self.release(handle)
            raise
        handle.pending, handle.before = pending, checkpoint
        handle.task = asyncio.create_task(
            self._drive_resume(handle, agent, checkpoint, pending, decision)
        )
        return handle

    @staticmethod
    def _one_decision(thread_id: str, pending: Pending | None, decisions: Mapping[str, Any]) -> Any:
        if pending is None:
            raise HitlDecisionError(f"thread {thread_id!r} has no approval waiting for a decision")
        if not isinstance(decisions, Mapping) or len(decisions) != 1:
            raise HitlDecisionError(
                "decisions must map the pending approval (its tool_call_id, interrupt_id, key "
                "or tool name) to one decision"
            )
        ((key, decision),) = decisions.items()
        if key not in pending.names():
            if pending.outcome_unknown:
                raise HitlDecisionError(
                    f"thread {thread_id!r} waits for a decision on a call of unknown outcome "
                    f"({pending.tool!r}: it was approved and started, whether it ran is "
                    f"unknown); settle it by its interrupt_id {pending.interrupt_id!r}"
                )
            raise HitlDecisionError(
                f"{key!r:.100} does not name the approval thread {thread_id!r} waits for "
                f"(tool_call_id {pending.tool_call_id!r})"
            )
        return decision

    async def _finish(self, handle: RunHandle, label: str | None) -> None:
        logger.info(
            "%s %s of thread %s: %s in %.1f ms",
            "resume" if handle.resume else "run",
            handle.run_id or "-",
            handle.thread_id,
            label or "completed",
            (time.perf_counter() - handle.started) * 1000,
        )
        try:
            if handle.listing is not None:  # the running line first, then the final one
                await asyncio.shield(handle.listing)
            if handle.taken:  # nothing ran: no timeline entry, the line as the thread stands
                await self._relist(handle.thread_id)
            else:
                await self.record(handle.thread_id, "resume" if handle.resume else "run", label)
        except Exception:  # the run itself is saved; a lost timeline line is only logged
            logger.exception("could not record the timeline of thread %s", handle.thread_id)
        finally:
            self.release(handle)
            for event in handle.held:  # the end is seen once the thread is free
                handle.queue.put_nowait(event)
            handle.held.clear()
            handle.queue.put_nowait(_END)

    async def _drive_run(self, handle: RunHandle, agent: Any, prompt: str | Message) -> None:
        handle.listing = asyncio.create_task(self._enter_running(handle.thread_id, prompt))

        def opening(base: ThreadCheckpoint | None) -> Any:
            placed = placement(base, None if isinstance(prompt, str) else prompt.id)
            if placed == "taken":
                return _TAKEN
            if placed == "new" and base is not None and base.pending is not None:
                raise ApprovalPendingError(
                    f"thread {handle.thread_id!r} waits for a decision on "
                    f"{base.pending.name!r}; resume it before sending a new prompt"
                )
            return prompt if placed == "new" else None  # continue: the thread has it

        await self._pump(handle, self._held_run(handle, agent, opening))

    async def start_answer(self, thread_id: str, call_id: str | None) -> RunHandle:
        """Answer the turn a decision ran, when its run died after the call's result landed.

        The thread holds the decided turn with the result of ``call_id`` (``None``: any)
        saved, nothing pending, no answer (``_held.ran_unanswered``): the run goes on (the
        model answers; the call does not run again). Decided under the thread's lock: a
        thread answered meanwhile runs nothing (``handle.taken``).
        """
        handle = self.claim(thread_id, resume=True)
        try:
            agent = await self.make_agent()
        except BaseException:
            self.release(handle)
            raise
        handle.listing = asyncio.create_task(self._enter_running(thread_id, ""))

        def opening(base: ThreadCheckpoint | None) -> Any:
            return None if ran_unanswered(base, call_id) else _TAKEN

        handle.task = asyncio.create_task(
            self._pump(handle, self._held_run(handle, agent, opening))
        )
        return handle

    async def _held_run(
        self,
        handle: RunHandle,
        agent: Any,
        opening: Callable[[ThreadCheckpoint | None], Any],
    ) -> AsyncIterator[AgentEvent]:
        """The run's events, how it opens decided under the thread's lock (see ``_held``).

        The lock is taken here and lent to the agent's run, so what the run does is decided
        on the checkpoint no other run can change before the run saves: ``opening(base)``
        gives the prompt to run (``None``: go on from the thread as it stands) or
        ``_TAKEN`` (nothing runs), or raises (a coded refusal).
        """
        thread_id = handle.thread_id
        async with hold_thread(self.checkpointer, thread_id) as held:
            message = opening(held.checkpoint)
            if message is _TAKEN:
                handle.taken = True
                return
            view = HeldCheckpointer(self.checkpointer, thread_id, held)
            events = agent.stream(message, checkpointer=view, thread_id=thread_id)
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event

    async def _pump(self, handle: RunHandle, events: AsyncIterator[AgentEvent]) -> None:
        """Feed a run's events to the handle's queue as they come, then finish the run."""
        label: str | None = None
        run_id = ""
        sent_error = False
        try:
            async with contextlib.aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    if isinstance(event, RunStartedEvent):
                        run_id = handle.run_id = event.run_id
                    elif isinstance(event, InterruptEvent):
                        label = "interrupted"
                    sent_error = isinstance(event, RunErrorEvent)
                    handle.emit(event)
        except Exception as exc:  # the stream sent run_error first when it could
            label = f"error:{getattr(exc, 'code', 'INTERNAL')}"
            if not sent_error:
                handle.emit(RunErrorEvent(run_id=run_id, error=exc))
        except asyncio.CancelledError:  # the server stops (drain, aclose): a coded end
            label = "error:SHUTTING_DOWN"
            stopped = ShuttingDownError(
                "the server stopped this run at its last checkpoint while shutting down; "
                "the thread is resumable on another replica"
            )
            handle.emit(RunErrorEvent(run_id=run_id, error=stopped))
            raise
        finally:
            await self._finish(handle, label)

    async def _drive_resume(
        self,
        handle: RunHandle,
        agent: Any,
        before: ThreadCheckpoint,
        pending: Pending,
        decision: Any,
    ) -> None:
        handle.listing = asyncio.create_task(self._enter_running(handle.thread_id, ""))
        if supports_reissue(agent) and callable(getattr(agent, "resume_stream", None)):
            # The stored call runs as the human saw it, its events streamed as they come
            # (tokens included) under the pending call's own id.
            events = agent.resume_stream(
                handle.thread_id,
                {pending.decision_key: decision},
                checkpointer=self.checkpointer,
                reissue=False,
            )
            await self._pump(handle, events)
            return
        label: str | None = None
        run_id = handle.run_id = new_id()
        handle.queue.put_nowait(
            RunStartedEvent(
                run_id=run_id,
                agent_id=str(getattr(agent, "agent_id", "default")),
                thread_id=handle.thread_id,
            )
        )
        result: RunResult | None = None
        interrupt: HitlInterrupt | None = None
        try:
            try:
                result = await self._resume(agent, handle.thread_id, pending, decision)
            except HitlInterrupt as raised:
                interrupt = raised
                label = "interrupted"
            after = await self.load(handle.thread_id)
            known = {m.id for m in before.messages}
            added = [m for m in (after.messages if after else []) if m.id not in known]
            for event in replay(added, pending, self._tools_of(agent)):
                handle.emit(event)
            if interrupt is not None:
                handle.emit(InterruptEvent(run_id=run_id, interrupt=interrupt))
            else:
                assert result is not None
                handle.emit(RunFinishedEvent(run_id=run_id, result=result))
        except Exception as exc:
            label = f"error:{getattr(exc, 'code', 'INTERNAL')}"
            handle.emit(RunErrorEvent(run_id=run_id, error=exc))
        finally:
            await self._finish(handle, label)

    async def _resume(
        self, agent: Any, thread_id: str, pending: Pending | None, decision: Any
    ) -> RunResult:
        """The one place that calls ``agent.resume`` (see the module docstring).

        ``pending=None``: a resume with no decision (it surfaces what the thread waits for).
        """
        resume: Callable[..., Awaitable[RunResult]] = agent.resume
        if supports_reissue(agent):
            decisions = {} if pending is None else {pending.decision_key: decision}
            return await resume(thread_id, decisions, checkpointer=self.checkpointer, reissue=False)
        decisions = {} if pending is None else {pending.key: decision}
        return await resume(thread_id, decisions, checkpointer=self.checkpointer)

    async def aclose(self, grace: float = 5.0) -> None:
        """Let runs in progress end (up to ``grace`` seconds), cancel the rest, close the store.

        After :meth:`drain`, up to what is left of its grace instead. A cancelled run stops
        at its last checkpoint: its thread is resumable (a call in flight then is one of
        unknown outcome, settled by a decision), and its lock is released.
        """
        if self.drain_deadline is not None:
            grace = max(0.0, self.drain_deadline - time.monotonic())
        tasks = [h.task for h in self._active.values() if h.task is not None]
        if tasks:
            _done, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        await self.store.close()
