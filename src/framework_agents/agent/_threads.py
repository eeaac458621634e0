"""Checkpointed runs: threads, ``pause``/``resume`` and the at-most-once HITL protocol.

A run with ``checkpointer`` and ``thread_id`` holds the thread's run lock for its whole
length (a second run of the thread waits, then ``THREAD_BUSY``), starts from the thread's
checkpoint when there is one (messages, state, memory) and saves it when it ends
(``pending=None``). The agent opens the thread (:func:`open_thread`: the lock, the
checkpoint, the admission of the decisions), then drives the run itself with the thread's
``RunHooks``; this module never reaches into the agent: what a thread needs from it comes
in a :class:`ThreadHost`.

At most once, for calls of ``requires_approval`` tools that a decision let run:

1. Before such a call runs, its turn is checkpointed with the call in ``in_flight``.
2. When its result lands, the result is checkpointed and the call leaves ``in_flight``,
   before the loop goes on; when the turn ends, all its results are.
3. A resume that finds ``in_flight`` calls cannot know whether they ran: it never runs
   them again on its own. It marks them ``outcome_unknown`` and raises a
   :class:`HitlInterrupt` with ``outcome_unknown=True``. Only decisions given to a later
   resume (not earlier ones, not the ``decide`` callback) settle them: approve or edit
   re-runs the call under the same protocol, reject answers it with a rejection.

Steps 1 and 2 write a delta (``save_progress``: the turn and its results, not the history)
whenever the checkpointer already holds the turn's history; with a checkpointer that has
no ``save_progress``, they are full saves. A checkpointer without ``thread_lock`` gets an
in-process lock per thread instead (``checkpoint._base.thread_lock``).

A pause made while the run holds the thread (``ctx.pause()`` of a tool or middleware, or
``agent.pause`` of the agent's own running thread) goes through the run
(``_ThreadRun.on_pause``, under the lock of its saves), never through the thread lock the
run holds; ``agent.pause`` of a thread no run of the agent holds is ``_pause``'s. The run
lets the thread go before its terminal event reaches a stream's consumer.

Calls that need no approval are not guarded: a crash while one runs leaves it unanswered,
and ``repair_history`` tells the model it was interrupted. An interrupt saves the history
up to, and excluding, the interrupted assistant turn with that call as ``pending``, plus
the decisions given so far, so that several approval calls of one turn can be decided one
interrupt at a time.

Decisions are spent per assistant turn (``hitl.DecisionBook``): the ones a turn used leave
the book before its calls run, so no checkpoint written from then on carries them and a
later turn calling the tool again interrupts again. Settling calls of unknown outcome
spends the decisions that settled them the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

from .._telemetry import TRACE_APP_DATA_KEY, link_previous_run, run_link_record, trace_store
from .._util import check_collaborator
from ..checkpoint._base import Checkpointer, hold_thread, save_progress
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..elicitation import Elicitation, ElicitationAnswer, parse_answer
from ..errors import (
    CheckpointMissingError,
    HitlDecisionError,
    InvalidArgumentError,
)
from ..history import CheckedHistory
from ..hitl import (
    DecisionBook,
    HitlInterrupt,
    ResolvedDecision,
    hitl_key,
    is_interrupt_id,
    match_decision,
    new_interrupt_id,
    parse_decision,
)
from ..memory.carry import app_data_with_state, restore_state
from ..messages import Message, ToolCall
from ..tools import Tool
from ._calls import run_call
from ._history import AgentHistory
from ._loop import LoopRun, RunHooks, RunSetup, ToolProgress
from ._run import Asked, Replay

__all__ = [
    "Opening",
    "ThreadHost",
    "ThreadStart",
    "check_target",
    "open_thread",
    "surface_interrupt",
]


class Opening(enum.Enum):
    """How a run opens its thread.

    * ``RUN``: a new prompt; a resume's decisions may ride along.
    * ``RESUME``: no new message; an interrupted approval runs exactly the stored call
      (or its edit): the model is not asked again.
    * ``REISSUE``: no new message; the model is asked again and the decisions apply to
      the call it re-issues (bare tool names match any arguments).
    """

    RUN = "run"
    RESUME = "resume"
    REISSUE = "reissue"

    @property
    def resumes(self) -> bool:
        """Whether the run continues the thread with no new message."""
        return self is not Opening.RUN


@dataclass(frozen=True, slots=True)
class ThreadHost:
    """What a thread needs from the agent that runs it, handed over explicitly.

    ``history`` is the agent's (its state, memory, and what it last committed to a
    thread); ``setup()`` builds the loop's setup for re-running settled calls.
    """

    agent_id: str
    history: AgentHistory
    tools: Mapping[str, Tool]
    setup: Callable[[], RunSetup]


def checked_start(start: Sequence[Message], known: CheckedHistory | None) -> CheckedHistory:
    """A checkpoint's history as a checked one: past ``known`` only, when it begins with it.

    The thread's next run usually starts from what this agent committed last (the same
    message objects): then nothing is checked again. Otherwise the history is repaired.
    """
    if known is not None and known.starts(start):
        try:
            return known.extend(start[len(known) :])
        except InvalidArgumentError:
            pass  # not well formed past it: repaired below, like any stored history
    return CheckedHistory.repaired(start)


_UNKNOWN_REASON = (
    "was approved and started, but the process stopped before its result was saved: "
    "whether it ran is unknown. It is not re-run on its own; resume with a decision for it "
    "(approve or edit runs it again, reject answers it without running it)"
)


def check_target(checkpointer: object, thread_id: object) -> Checkpointer:
    """``checkpointer`` if it is one and ``thread_id`` is valid, else a coded error."""
    if checkpointer is None:
        raise InvalidArgumentError("checkpointer must implement Checkpointer, not None")
    check_collaborator(checkpointer, Checkpointer, "checkpointer")
    if thread_id is None:
        raise InvalidArgumentError("a run with a checkpointer needs a thread_id")
    check_thread_id(thread_id)
    return cast("Checkpointer", checkpointer)


@dataclass(slots=True)
class _Turn:
    """An assistant turn being executed, as the checkpoint records it."""

    history: list[Message]
    assistant: Message
    results: dict[str, Message] = field(default_factory=dict)
    in_flight: dict[str, ToolCall] = field(default_factory=dict)
    guarded: bool = False  # an approved call of this turn ran: its progress is saved


@dataclass(slots=True)
class _ThreadRun:
    """The checkpoint side of one checkpointed run (its ``RunHooks``)."""

    host: ThreadHost
    checkpointer: Checkpointer
    thread_id: str
    decisions: DecisionBook  # shared with the loop, which spends it turn by turn
    start: list[Message] | None = None
    state: dict[str, Any] | None = None
    settle: ThreadCheckpoint | None = None
    plans: list[tuple[ToolCall, ResolvedDecision]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    turn: _Turn | None = None
    replay: Replay | None = None
    #: Answers to questions, by the id of the call that runs with one: kept in every save
    #: while that call is in flight, so a settled re-run after a crash has it too.
    answers: dict[str, ElicitationAnswer] = field(default_factory=dict)
    app_data: dict[str, Any] | None = None  # the thread's, carried from save to save
    # The run's last save (the finished run's checkpoint): nothing of the thread is
    # written after it, so a checkpointer may let the thread go in the same step.
    save_last: Callable[[ThreadCheckpoint], Awaitable[bool]] | None = None
    ended: bool = False  # the run wrote its last checkpoint (its interrupt, question or end)
    closed: bool = False  # the thread's block ended: the run no longer holds it

    def hooks(self) -> RunHooks:
        return RunHooks(
            prepare=self.prepare,
            on_turn_start=self.on_turn_start,
            on_tool_start=self.on_tool_start,
            on_tool_result=self.on_tool_result,
            on_tool_turn=self.on_tool_turn,
            on_interrupt=self.on_interrupt,
            on_asked=self.on_asked,
            on_commit=self.on_commit,
            on_pause=self.on_pause,
        )

    def checkpoint(self, messages: Sequence[Message], **fields: Any) -> ThreadCheckpoint:
        state = self.host.history.state.to_dict()
        # A memory with long-term state (an in-memory GraphMemory) rides along in app_data.
        app_data = app_data_with_state(self.host.history.memory, self.app_data)
        record = run_link_record()  # a traced run: a later resume elsewhere links to it
        if record is not None:
            app_data = {
                **(app_data if isinstance(app_data, dict) else {}),
                TRACE_APP_DATA_KEY: record,
            }
        fields.setdefault("app_data", app_data if isinstance(app_data, dict) else None)
        # Every field is validated but the history: the run's own messages, checked as a
        # history already (validating them again is a pass over the whole history per
        # save; the checkpointer checks what a save adds).
        checkpoint = ThreadCheckpoint(self.thread_id, None, [], state, **fields)
        copied = messages.to_list() if isinstance(messages, CheckedHistory) else list(messages)
        return checkpoint.model_copy(update={"messages": copied})

    async def save_turn(self, turn: _Turn) -> None:
        order = [c.id for c in turn.assistant.tool_calls]
        checkpoint = self.checkpoint(
            turn.history,
            turn=turn.assistant,
            results=[turn.results[i] for i in order if i in turn.results],
            in_flight=[turn.in_flight[i] for i in order if i in turn.in_flight],
            decisions=dict(self.decisions),
            elicitation=_answer_record(turn.in_flight, self.answers),
        )
        await trace_store(  # a delta when the history is stored
            "checkpoint", "save", self.checkpointer, save_progress(self.checkpointer, checkpoint)
        )

    # -- hooks ------------------------------------------------------------------------

    async def prepare(self) -> Sequence[Message] | None:
        """The thread's history to start from; ``None``: no checkpoint, the agent's own start.

        Inside the busy section: nothing of the agent changes before the run is ours.
        """
        history = self.host.history
        if self.state is not None:
            history.state.replace(self.state)
        if self.start is None:
            return None
        await restore_state(history.memory, self.app_data)
        if self.settle is not None:
            self.start = await self.run_settled(self.settle)
        # Memory and agent.messages take the thread's history when the run commits (on
        # success or interrupt), like every run; rewriting them here too would cost a
        # second whole-history save, and a failed run commits nothing.
        return checked_start(self.start, history.recall_thread(self.checkpointer, self.thread_id))

    async def on_turn_start(self, history: list[Message], assistant: Message) -> None:
        self.turn = _Turn(history, assistant)  # the loop hands each tool turn a new list
        replay = self.replay
        if replay is not None and replay.turn.id == assistant.id:
            # The results that landed before a question stopped this turn are part of every
            # save of it from the start (a crash now must not lose them).
            self.turn.results.update(replay.landed)

    async def on_tool_start(self, call: ToolCall, decision: ResolvedDecision | None) -> None:
        turn = self.turn
        if turn is None or decision is None or decision.kind not in ("approve", "edit"):
            return
        async with self.lock:
            turn.in_flight[call.id] = call
            turn.guarded = True
            await self.save_turn(turn)  # step 1: recorded BEFORE the tool runs

    async def on_tool_result(self, progress: ToolProgress) -> None:
        turn = self.turn
        if turn is None:
            return
        turn.results[progress.call.id] = progress.result
        if progress.call.id in turn.in_flight:
            async with self.lock:
                del turn.in_flight[progress.call.id]
                await self.save_turn(turn)  # step 2: the result is durable before going on

    async def on_tool_turn(self, messages: list[Message]) -> None:
        turn, self.turn = self.turn, None
        if turn is not None and turn.guarded:
            async with self.lock:
                await self.save_turn(turn)  # every result of the turn, before the next call

    async def on_interrupt(
        self, interrupt: HitlInterrupt, messages: list[Message], turn: Message
    ) -> None:
        # ``messages`` already end before the interrupted turn (the loop's contract).
        pending = ToolCall(interrupt.call_id, interrupt.tool, interrupt.arguments)
        checkpoint = self.checkpoint(
            messages,
            pending=pending,
            decisions=dict(self.decisions),
            interrupt_id=interrupt.interrupt_id,
            pending_turn=turn if any(c.id == pending.id for c in turn.tool_calls) else None,
        )
        async with self.lock:
            self.ended = True
            await trace_store(
                "checkpoint", "save", self.checkpointer, self.checkpointer.save(checkpoint)
            )

    async def on_asked(self, asked: Asked) -> None:
        """Save the turn a question stopped: its landed results, the asking call pending.

        Every other call of the turn finished, so nothing of it is in flight: the asking
        call's question is its outcome (a stateless server did nothing yet).
        """
        self.turn = None
        interrupt = asked.interrupt
        checkpoint = self.checkpoint(
            asked.history,
            turn=asked.assistant,
            results=asked.results,
            pending=ToolCall(interrupt.call_id, interrupt.tool, interrupt.arguments),
            decisions=dict(self.decisions),
            interrupt_id=interrupt.interrupt_id,
            elicitation=asked.elicitation.to_dict(),
        )
        async with self.lock:
            self.ended = True
            await trace_store(
                "checkpoint", "save", self.checkpointer, self.checkpointer.save(checkpoint)
            )

    async def on_commit(self, history: CheckedHistory, finished: bool) -> None:
        self.host.history.bind_thread(self.checkpointer, self.thread_id)
        if not finished:  # an interrupt saved its own checkpoint (on_interrupt)
            return
        async with self.lock:
            self.ended = True
            checkpoint = self.checkpoint(history, finished=True)
            save_last, self.save_last = self.save_last, None
            if save_last is None:
                await trace_store(
                    "checkpoint", "save", self.checkpointer, self.checkpointer.save(checkpoint)
                )
            else:
                await trace_store("checkpoint", "save", self.checkpointer, save_last(checkpoint))
        self.host.history.remember_thread(self.checkpointer, self.thread_id, history)

    def check_open(self) -> None:
        """``INVALID_ARGUMENT`` once the run's block ended (a context kept past its run)."""
        if self.closed:
            raise InvalidArgumentError(
                f"the run that held thread {self.thread_id!r} is over: "
                "pause it with agent.pause(thread_id, checkpointer=...)"
            )

    async def on_pause(self, messages: list[Message]) -> None:
        """Save the thread now, for a pause made during the run (``ctx.pause()``).

        Under the run's save lock, never the thread lock the run holds: a pause never
        interleaves with the at-most-once saves. While a turn with an approved call runs,
        its progress record is what is saved (a pause must not make the protocol forget
        the call); otherwise ``messages`` (the run's history so far, well formed) with the
        decisions left. Once the run wrote its last checkpoint, that one already holds the
        run: nothing is written over it (a pending call stays pending). After the run's
        block ended, ``INVALID_ARGUMENT``: pause through ``agent.pause`` then.
        """
        self.check_open()
        async with self.lock:
            if self.ended:
                return
            turn = self.turn
            if turn is not None and turn.guarded:
                await self.save_turn(turn)
                return
            checkpoint = self.checkpoint(messages, decisions=dict(self.decisions))
            await trace_store(
                "checkpoint", "save", self.checkpointer, self.checkpointer.save(checkpoint)
            )

    # -- settling calls of unknown outcome ----------------------------------------------

    async def run_settled(self, base: ThreadCheckpoint) -> list[Message]:
        """Run (or reject) the decided in-flight calls of ``base``; the turn's history."""
        assert base.turn is not None
        turn = _Turn(list(base.messages), base.turn, guarded=True)
        turn.results = {r.tool_call_id or "": r for r in base.results}
        asked = {c.id: c for c in base.turn.tool_calls}
        # The settling decisions answer this turn only: spent before any write or re-run.
        self.decisions.consume(d.key for _, d in self.plans if d.key is not None)
        for call, decision in self.plans:
            ran = call
            if decision.kind == "edit":
                assert decision.args is not None
                ran = call.model_copy(update={"args": decision.args})
            if decision.kind != "reject":
                async with self.lock:
                    turn.in_flight[call.id] = ran
                    await self.save_turn(turn)  # step 1 again: this re-run is guarded too
            loop_run = LoopRun([], thread_id=self.thread_id, hooks=self.settle_hooks(turn))
            result = await run_call(
                self.host.setup(),
                loop_run,
                asked[call.id],
                decision,
                run_args=ran.args,
                answer=self.answers.get(call.id),
            )
            async with self.lock:
                turn.results[call.id] = result
                turn.in_flight.pop(call.id, None)
                await self.save_turn(turn)
        order = [c.id for c in base.turn.tool_calls]
        return [
            *turn.history,
            turn.assistant,
            *(turn.results[i] for i in order if i in turn.results),
        ]

    def settle_hooks(self, turn: _Turn) -> RunHooks:
        """The hooks of a settled call's run: a pause saves the turn being settled."""

        async def pause(messages: list[Message]) -> None:
            self.check_open()
            async with self.lock:
                await self.save_turn(turn)

        return RunHooks(on_pause=pause)


def _decide_unknown(
    tools: Mapping[str, Tool], base: ThreadCheckpoint, given: Mapping[str, Any]
) -> tuple[list[tuple[ToolCall, ResolvedDecision]], ToolCall | None]:
    """Decisions for every in-flight call, from ``given`` only; the first undecided call.

    ``given`` already holds the open interrupt's id-keyed decision under the pending
    call's ``hitl_key``; it is only consulted once that id was given (see
    :func:`_admit`), so a replayed request can never settle a call of unknown outcome.
    """
    plans: list[tuple[ToolCall, ResolvedDecision]] = []
    for call in base.in_flight:
        found = match_decision(given, call.name, call.args)
        if found is None:
            return plans, call
        key, value, source = found
        tool = tools.get(call.name)
        if tool is None:  # the tool is gone: running it answers "unknown tool", harmlessly
            decision = ResolvedDecision("approve", source, raw=value, key=key)
        else:
            decision = replace(parse_decision(value, tool=tool, source=source), key=key)
        if decision.kind == "suspend":
            return plans, call
        plans.append((call, decision))
    return plans, None


_STALE_REASON = (
    "needs a human decision; the decision given names an interrupt that is no longer open "
    "(a replayed or stale request), so nothing ran: decide this interrupt instead"
)


@dataclass(slots=True)
class _Admission:
    """What a run or resume of a thread does with its checkpoint, decided before it runs."""

    decisions: dict[str, Any]
    surface: ToolCall | None = None  # raise this call's interrupt instead of running
    stale: bool = False  # re-surface the open interrupt as it is (nothing is written)


def _refuse_idle_resume(base: ThreadCheckpoint, given: Mapping[str, Any]) -> None:
    """A resume of a thread with nothing pending: coded errors for what cannot go on.

    Decisions are refused (``HITL_DECISION``, nothing runs or is written); a resume with
    none of a finished or empty thread is ``INVALID_ARGUMENT``.
    """
    if given:
        raise HitlDecisionError(
            f"thread {base.thread_id!r} has no pending approval: the decisions "
            f"{sorted(given)} answer nothing, so nothing ran and nothing was written"
        )
    if base.finished and (not base.messages or base.messages[-1].role == "assistant"):
        # Finished means it ends on the model's answer; a thread something was added to
        # since (a swarm's handoff message) has a turn to answer and goes on.
        raise InvalidArgumentError(
            f"thread {base.thread_id!r} is finished (its last run ended on the model's "
            "answer): nothing to resume; run it with a new prompt"
        )
    if not base.messages and base.turn is None:  # resumable_history() is empty (no copy)
        raise InvalidArgumentError(
            f"thread {base.thread_id!r} holds no message: nothing to resume "
            "(the model is never called with no message); run it with a prompt"
        )


def _bind_decisions(
    base: ThreadCheckpoint, given: Mapping[str, Any], tools: Mapping[str, Any]
) -> tuple[dict[str, Any], bool, bool]:
    """The decisions by key, the open interrupt's id-keyed one bound to its pending call.

    With them: whether the request named the open interrupt, and whether it named only
    other interrupts (a stale request). A key that is a tool's name is never an id.
    """
    open_id = base.open_interrupt_id()
    ids = {k for k in given if is_interrupt_id(k) and k not in tools}
    decisions = {k: v for k, v in given.items() if k not in ids}
    named = open_id is not None and open_id in ids
    pending = base.pending
    if pending is not None and named:
        decisions[hitl_key(pending.name, pending.args)] = given[open_id]  # type: ignore[index]
    return decisions, named, bool(ids) and not named


def _admit(
    base: ThreadCheckpoint, given: Mapping[str, Any], tools: Mapping[str, Any], opening: Opening
) -> _Admission:
    """Bind the given decisions to the thread's open interrupt (the at-most-once gate).

    * Nothing pending on a resume: see :func:`_refuse_idle_resume`; a decided turn whose
      results are saved (the run failed after them) goes on with no decision (the ones
      that let it run are spent: a retry carrying them arms nothing).
    * A key that is an interrupt id settles only the open interrupt; any other id is
      stale and the open interrupt is re-surfaced instead of running anything.
    * Calls of unknown outcome are settled only in a request naming the open interrupt's
      id (its ``key``); anything else re-surfaces them.
    """
    pending, resumes = base.pending, opening.resumes
    if resumes and pending is None and not base.in_flight:
        if base.turn is None:
            _refuse_idle_resume(base, given)  # returns only when no decision was given
        return _Admission({})
    decisions, named, stale = _bind_decisions(base, given, tools)
    if base.in_flight:
        return _admit_unknown(base, decisions, resumes=resumes, named=named)
    if resumes and pending is not None and stale:
        return _Admission(decisions, surface=pending, stale=True)
    return _Admission(decisions)


def _admit_unknown(
    base: ThreadCheckpoint, decisions: dict[str, Any], *, resumes: bool, named: bool
) -> _Admission:
    """The admission of a thread with calls in flight (whose outcome may be unknown)."""
    if not resumes or not base.outcome_unknown:
        return _Admission(decisions, surface=base.in_flight[0])
    if not named:  # a replay, a double click, a bare name: never settles the unknown
        return _Admission(decisions, surface=base.pending or base.in_flight[0], stale=True)
    # Decisions carried here were given by earlier requests that named the open interrupt
    # (for other calls of unknown outcome of the same turn): they count.
    return _Admission({**base.decisions, **decisions})


async def surface_interrupt(
    checkpointer: Checkpointer,
    base: ThreadCheckpoint,
    call: ToolCall,
    *,
    stale: bool,
    carry: Mapping[str, Any] | None = None,
) -> HitlInterrupt:
    """The interrupt of ``call`` to raise, saved first unless re-surfaced as it stands.

    ``carry``: the decisions of a request that named the open interrupt but left another
    call of unknown outcome of the same turn undecided; they are kept with the next
    interrupt so the calls converge one named interrupt at a time. Only requests naming
    the open interrupt ever write them (a stale request writes nothing).

    A call of unknown outcome seen for the first time is recorded as such with a fresh
    interrupt id (a full save). The open interrupt re-surfaced after a stale request
    keeps its id and writes nothing. Either way the agent then takes the thread's state.
    """
    unknown = bool(base.in_flight)
    interrupt_id = base.open_interrupt_id()
    if interrupt_id is None or not stale:
        interrupt_id = new_interrupt_id()
    if not stale or base.open_interrupt_id() is None:
        update: dict[str, Any] = {
            "pending": call,
            "interrupt_id": interrupt_id,
            "saved_at": datetime.now(UTC),
        }
        if unknown:
            update.update(outcome_unknown=True, decisions=dict(carry or {}))
        await checkpointer.save(base.model_copy(update=update))  # a full save: the id
    question = _question(base)
    return HitlInterrupt(
        call.name,
        call.args,
        call.id,
        key=interrupt_id if unknown else None,
        thread_id=base.thread_id,
        reason=_UNKNOWN_REASON if unknown else (_STALE_REASON if stale else None),
        outcome_unknown=unknown,
        interrupt_id=interrupt_id,
        kind="tool_call" if question is None else "elicitation",
        message=None if question is None else question.message,
        schema=None if question is None else question.schema,
    )


def _answer_record(
    in_flight: Mapping[str, ToolCall], answers: Mapping[str, ElicitationAnswer]
) -> dict[str, Any] | None:
    """The checkpoint's ``elicitation`` while an answered call is in flight, else ``None``.

    The question with ``call_id`` and ``answer`` (``{"action", "content"}``) added.
    """
    for call_id in in_flight:
        answer = answers.get(call_id)
        if answer is not None:
            given = {"action": answer.action, "content": answer.content}
            return {**answer.elicitation.to_dict(), "call_id": call_id, "answer": given}
    return None


def _stored_answers(base: ThreadCheckpoint) -> dict[str, ElicitationAnswer]:
    """The answer an in-flight call of ``base`` ran with (:func:`_answer_record`), by call id."""
    stored = base.elicitation
    if stored is None or "answer" not in stored:
        return {}
    given = stored["answer"]
    answer = ElicitationAnswer(given["action"], given["content"], Elicitation.from_dict(stored))
    return {str(stored["call_id"]): answer}


def _question(base: ThreadCheckpoint) -> Elicitation | None:
    """The open question of ``base`` (its pending call asked one), or ``None``."""
    stored = base.elicitation
    if stored is None or base.pending is None or base.in_flight:
        return None
    return Elicitation.from_dict(stored)


def _take_answer(base: ThreadCheckpoint, decisions: dict[str, Any]) -> ElicitationAnswer | None:
    """The answer to ``base``'s open question among ``decisions`` (its key removed).

    Found like a decision for the pending call (the open interrupt's id is bound to it
    already); ``HITL_DECISION`` when it is not an answer or does not fit the schema. The
    key leaves ``decisions``: an answer is never read as an approval of a later call.
    """
    question, pending = _question(base), base.pending
    if question is None or pending is None:
        return None
    found = match_decision(decisions, pending.name, pending.args)
    if found is None:
        return None
    key, value, _ = found
    answer = parse_answer(value, question, pending.name)
    del decisions[key]
    return answer


@dataclass(slots=True)
class ThreadStart:
    """What opening a thread found: how the run goes on, or the interrupt to raise first.

    ``run`` holds the starting history, the state, the carried and given decisions and
    the hooks of the run; ``surface`` (with ``base``) is a call whose interrupt must be
    raised instead of running (``stale``: re-raised as it stands, nothing written).
    """

    run: _ThreadRun
    base: ThreadCheckpoint | None = None
    surface: ToolCall | None = None
    stale: bool = False
    carry: dict[str, Any] = field(default_factory=dict)


@contextlib.asynccontextmanager
async def open_thread(
    host: ThreadHost,
    checkpointer: Checkpointer,
    thread_id: str,
    decisions: Mapping[str, Any],
    opening: Opening,
) -> AsyncIterator[ThreadStart]:
    """Hold ``thread_id``'s run lock, load its checkpoint and decide how the run starts.

    The arguments were checked by the public method that took them. ``CHECKPOINT_MISSING``
    for a resume of an unknown thread; the decisions are bound to the open interrupt
    (:func:`_admit`) before anything runs. The lock is held until the block ends.
    """
    async with contextlib.AsyncExitStack() as stack:
        taking = stack.enter_async_context(hold_thread(checkpointer, thread_id))
        held = await trace_store("checkpoint", "load", checkpointer, taking, key=thread_id)
        base = held.checkpoint
        if base is not None and base.app_data is not None:
            link_previous_run(base.app_data.get(TRACE_APP_DATA_KEY))
        if base is None and opening.resumes:
            raise CheckpointMissingError(f"thread {thread_id!r} has no checkpoint to resume")
        admitted = (
            _Admission(dict(decisions))
            if base is None
            else _admit(base, decisions, host.tools, opening)
        )
        answer = None
        if base is not None and admitted.surface is None:
            answer = _take_answer(base, admitted.decisions)  # before anything runs
        carried = dict(base.decisions) if base is not None and opening.resumes else {}
        book = DecisionBook({**carried, **admitted.decisions})
        run = _ThreadRun(host, checkpointer, thread_id, book, save_last=held.save_last)
        start = ThreadStart(run, base)
        if base is not None:
            _plan_start(start, base, admitted, opening, host.tools, answer)
        try:
            yield start
        finally:
            run.closed = True


def _plan_start(
    start: ThreadStart,
    base: ThreadCheckpoint,
    admitted: _Admission,
    opening: Opening,
    tools: Mapping[str, Tool],
    answer: ElicitationAnswer | None = None,
) -> None:
    """How a run of a thread with a checkpoint goes on: an interrupt first, or its start.

    A resume of a thread whose pending call asked a question replays the stopped turn:
    with the answer, the asking call runs again with it (the results that landed are
    kept); without one, the question is raised again as it stands (nothing written).
    """
    run = start.run
    run.state = base.state
    run.app_data = base.app_data
    # Only read (checked_start slices it or repairs it into a new list): no copy needed.
    run.start = base.messages if base.turn is None else base.resumable_history()
    question = _question(base)
    if admitted.surface is not None:
        start.surface, start.stale = admitted.surface, admitted.stale
    elif question is not None and opening.resumes:
        assert base.turn is not None and base.pending is not None  # turn_problem checks it
        if answer is None:
            start.surface, start.stale = base.pending, True
            return
        landed = {r.tool_call_id or "": r for r in base.results}
        run.answers = {base.pending.id: answer}
        run.replay = Replay(base.turn, landed, run.answers)
        run.start = list(base.messages)
    elif base.in_flight:
        run.answers = _stored_answers(base)
        plans, undecided = _decide_unknown(tools, base, admitted.decisions)
        start.surface = undecided
        if undecided is not None and base.outcome_unknown:
            start.carry = admitted.decisions  # the request named the interrupt
        run.settle, run.plans = base, plans
    elif opening is Opening.RESUME:
        turn = base.interrupted_turn()
        run.replay = Replay(turn) if turn is not None else None
