"""A server's questions during a tool call (elicitation), on both protocol eras.

**Stateless servers** (the 2026-07-28 protocol) answer a call that needs input with
``input_required``: the questions and an opaque ``requestState``. Nothing waits anywhere:
the question becomes :class:`~framework_agents.elicitation.ElicitationRequired` whose
``state`` holds the questions, the answers given so far and the ``requestState``
(:class:`Round`), all JSON, so the agent's checkpoint keeps it. The answer may come from
another process after a restart: the call is sent again with the answers and the state.
Several questions of one round are asked one interrupt at a time; the call goes out again
once every one is answered.

**Stateful servers** (the initialize handshake) ask mid-call with ``elicitation/create``
and wait for the answer on the live session. The SDK calls the client's callback, which
hands the question to the call (:class:`LiveCall`) and waits (a question does not say
which call asks, so the calls of one client to such a server run one at a time); the call
is parked in its client under an id (``state == {"live": id}``) and the question raised.
A resume in the same process, with the same client, delivers the answer to the waiting
callback and goes on waiting for the call's result (or its next question). If the call is
gone (the process or the client was restarted), the call is sent again, and the server's
first question, if it is the same one, is answered at once with the answer given: a
stateful server may then have done twice what it did before asking. A per-call timeout
counts the human's time too: past it, the call fails as any late call.

A question whose schema is not a form the protocol allows, a URL-mode elicitation, or a
request for sampling or roots (which this client does not offer) fails the call with a
tool error the model reads (a stateful server gets an error answer).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..elicitation import Elicitation, ElicitationAnswer, schema_problem
from ._sdk import types
from ._tools import MCPToolError

__all__ = ["LiveCall", "LiveCalls", "Round", "answer_result"]

_ids = itertools.count(1)


def answer_result(answer: ElicitationAnswer) -> Any:
    """A human's answer as the protocol's ``ElicitResult``."""
    content = answer.content if answer.action == "accept" else None
    return types.ElicitResult(action=answer.action, content=content)


def _form(request: Any, what: str) -> tuple[str, dict[str, Any]]:
    """The message and schema of a form elicitation, else a tool error naming ``what``."""
    params = getattr(request, "params", request)
    if isinstance(params, types.ElicitRequestURLParams):
        raise MCPToolError(
            f"the server asked to open a URL ({what}); this client answers forms only"
        )
    schema = dict(params.requested_schema)
    problem = schema_problem(schema)
    if problem is not None:
        raise MCPToolError(f"the server asked a question it may not ask ({what}): {problem}")
    return params.message, schema


@dataclass(slots=True)
class Round:
    """One ``input_required`` answer of a stateless server, as a checkpoint keeps it.

    ``questions``: ``{key: {"message", "schema"}}``; ``answers``: ``{key: {"action",
    "content"}}`` for the questions answered so far; ``request_state`` is echoed as it is.
    """

    request_state: str | None
    questions: dict[str, dict[str, Any]]
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, result: Any) -> Round:
        """The round of an ``InputRequiredResult`` (a tool error if it asks what we refuse)."""
        questions: dict[str, dict[str, Any]] = {}
        for key, request in (result.input_requests or {}).items():
            if not isinstance(request, types.ElicitRequest):
                raise MCPToolError(
                    f"the server asked for {request.method!r}, which this client does not offer"
                )
            message, schema = _form(request, repr(key))
            questions[key] = {"message": message, "schema": schema}
        return cls(result.request_state, questions)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Round:
        """The round an :class:`Elicitation`'s ``state`` holds (:meth:`to_state`)."""
        return cls(state.get("request_state"), dict(state["questions"]), dict(state["answers"]))

    def to_state(self) -> dict[str, Any]:
        """As an :class:`Elicitation`'s ``state`` (JSON)."""
        return {
            "request_state": self.request_state,
            "questions": self.questions,
            "answers": self.answers,
        }

    def next_question(self) -> Elicitation | None:
        """The first question not answered yet, or ``None`` when the call can go out."""
        for key, question in self.questions.items():
            if key not in self.answers:
                state = {**self.to_state(), "asking": key}
                return Elicitation(question["message"], question["schema"], state)
        return None

    def answered(self, answer: ElicitationAnswer) -> None:
        """Record ``answer`` for the question it answers."""
        key = answer.elicitation.state["asking"]
        self.answers[key] = {"action": answer.action, "content": answer.content}

    def responses(self) -> dict[str, Any]:
        """The answers as the protocol's ``inputResponses``."""
        return {
            key: types.ElicitResult(action=a["action"], content=a["content"])
            for key, a in self.answers.items()
        }


class LiveCall:
    """A call to a stateful server that may be waiting for a human's answer.

    The SDK's callback asks through :meth:`ask` and waits; the call's own coroutine sees
    the question in :meth:`wait` and parks the call in its :class:`LiveCalls`.
    """

    def __init__(self, answered: ElicitationAnswer | None = None) -> None:
        self.id = f"live-{next(_ids)}"
        self.task: asyncio.Task[Any] | None = None
        self.parked = False
        #: An answer given before the call was sent again (the first call is gone).
        self.answered = answered
        self._question: asyncio.Future[Elicitation] = asyncio.get_running_loop().create_future()
        self._reply: asyncio.Future[Any] | None = None
        #: Set by :meth:`fail`: the call ends with this error (the server broke the protocol).
        self._broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def ask(self, message: str, schema: dict[str, Any]) -> Any:
        """The callback's side: the ``ElicitResult`` once a human answered."""
        given, self.answered = self.answered, None
        if given is not None and (given.elicitation.message, given.elicitation.schema) == (
            message,
            schema,
        ):
            return answer_result(given)
        self._reply = asyncio.get_running_loop().create_future()
        self._question.set_result(Elicitation(message, schema, {"live": self.id}))
        try:
            return await self._reply
        finally:
            self._reply = None

    def answer(self, answer: ElicitationAnswer) -> None:
        """Hand ``answer`` to the callback that waits for it."""
        self.parked = False
        self._question = asyncio.get_running_loop().create_future()
        if self._reply is not None and not self._reply.done():
            self._reply.set_result(answer_result(answer))

    async def wait(self) -> Any:
        """The call's result, or :class:`ElicitationRequired`'s question when it asks one."""
        assert self.task is not None
        done, _ = await asyncio.wait(
            {self.task, self._question, self._broken}, return_when=asyncio.FIRST_COMPLETED
        )
        if self.task in done:
            return self.task.result()
        if self._broken in done:
            self.task.cancel()
            self._broken.result()  # raises the error :meth:`fail` gave
        self.parked = True
        return self._question.result()

    def fail(self, error: Exception) -> None:
        """End the call with ``error`` (its :meth:`wait` raises it; the request is cancelled)."""
        if not self._broken.done():
            self._broken.set_exception(error)

    def close(self) -> None:
        """Dismiss a waiting question (``cancel``) and stop the call."""
        if self._reply is not None and not self._reply.done():
            self._reply.set_result(types.ElicitResult(action="cancel"))
        if self.task is not None:
            self.task.cancel()


class LiveCalls:
    """The live calls of one client: running ones, and parked ones waiting for an answer."""

    def __init__(self) -> None:
        self._calls: dict[str, LiveCall] = {}
        self._one = asyncio.Lock()

    def one_at_a_time(self) -> asyncio.Lock:
        """Held by each call to a stateful server (a question names no call: one runs)."""
        return self._one

    def add(self, call: LiveCall) -> None:
        """Track ``call`` until :meth:`drop`."""
        self._calls[call.id] = call

    def drop(self, call: LiveCall) -> None:
        """Forget ``call`` (finished)."""
        self._calls.pop(call.id, None)

    def parked(self, call_id: object) -> LiveCall | None:
        """The parked call ``call_id``, if this client still holds it."""
        call = self._calls.get(call_id) if isinstance(call_id, str) else None
        return call if call is not None and call.parked else None

    async def on_elicit(self, context: Any, params: Any) -> Any:
        """The SDK's elicitation callback: the asking call's question, then its answer."""
        running = [c for c in self._calls.values() if not c.parked]
        if len(running) != 1:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{len(running)} tool calls are running: this client cannot tell "
                "which one asks (call one tool at a time on a server that asks questions)",
            )
        try:
            message, schema = _form(params, "elicitation/create")
        except MCPToolError as exc:
            return types.ErrorData(code=types.INVALID_PARAMS, message=str(exc))
        return await running[0].ask(message, schema)

    def fail_running(self, error: Exception) -> int:
        """End every running call (not the parked ones) with ``error``; how many."""
        running = [c for c in self._calls.values() if not c.parked]
        for call in running:
            call.fail(error)
        return len(running)

    def close(self) -> None:
        """Dismiss every waiting question and stop every call."""
        calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.close()
