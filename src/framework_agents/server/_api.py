"""The JSON API under ``/api``: list, read, run, resume and delete threads.

Routes (shapes in ``docs/server.md``)::

    GET    /api/threads?limit=&cursor=&q=     {"threads": [...], "next_cursor"}
    GET    /api/threads/{thread_id}           messages, state, pending approval, timeline
    POST   /api/threads/{thread_id}/runs      {"prompt"}    -> SSE of our events (or JSON)
    POST   /api/threads/{thread_id}/resume    {"decisions"} -> SSE of our events (or JSON)
    DELETE /api/threads/{thread_id}           204
    PATCH  /api/threads/{thread_id}/messages/{message_id}  {"content"} -> the thread
    POST   /api/threads/{thread_id}/branches  {"message_id", "thread_id"?, "label"?} -> 201

A run or a resume answers ``text/event-stream`` (one ``event: <type>`` per agent event),
or one JSON summary when the request sends ``Accept: application/json``. Everything that
can be refused is refused before the stream starts, with a status from the one table in
``_errors``; an error after that is the stream's ``run_error`` event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Send

from ..agent.events import AgentEvent, InterruptEvent, RunErrorEvent, RunFinishedEvent
from ..checkpoint.model import check_thread_id
from ..errors import InvalidArgumentError
from ..messages import Message
from ..swarm import HandoffEvent, MemberEvent
from ._edits import branch_thread, edit_message, parent_of
from ._errors import BadRequestError, UnauthorizedError, error_payload, status_for
from ._index import MAX_LIMIT
from ._runner import RunHandle, ThreadRunner
from ._shapes import Pending, title_of

__all__ = [
    "KEEPALIVE",
    "Endpoint",
    "api_routes",
    "error_response",
    "event_json",
    "guarded",
    "read_json",
    "send_error",
    "sse",
]

#: A route's handler.
Endpoint = Callable[[Request], Awaitable[Response]]


def error_response(exc: BaseException) -> JSONResponse:
    """``{"error": {"code", "message"}}`` with the error's status (no stack trace)."""
    return JSONResponse({"error": error_payload(exc)}, status_code=status_for(exc))


async def send_error(send: Send, exc: BaseException) -> None:
    """Answer with :func:`error_response` from an ASGI middleware (before any route)."""
    response = error_response(exc)
    headers = [(k.encode(), v.encode()) for k, v in response.headers.items()]
    if isinstance(exc, UnauthorizedError):
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": bytes(response.body)})


def guarded(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` answering any exception it raises with :func:`error_response`."""

    async def handle(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            return error_response(exc)

    handle.__name__ = endpoint.__name__
    handle.__doc__ = endpoint.__doc__
    return handle


async def _thread_body(request: Request) -> tuple[str, dict[str, Any]]:
    """The path's thread id (checked before the body is even parsed) and the JSON body."""
    thread_id = check_thread_id(request.path_params["thread_id"])
    return thread_id, await read_json(request)


def _field(body: dict[str, Any], name: str, kind: type, shape: str) -> Any:
    """``body[name]`` when it is a ``kind``, else ``BAD_REQUEST`` naming the body's ``shape``."""
    value = body.get(name)
    if not isinstance(value, kind):
        raise BadRequestError(f"the body must be {shape}")
    return value


async def read_json(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, else ``BAD_REQUEST``."""
    body = await request.body()
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequestError("the request body is not valid JSON") from exc
    except RecursionError:  # nested deeper than the parser goes
        raise BadRequestError("the request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise BadRequestError("the request body must be a JSON object")
    if b"\\u" in body:
        # A \ud800-\udfff escape alone is valid JSON but no text: it could never be
        # stored, sent back or streamed (UTF-8 cannot encode it).
        try:
            json.dumps(data, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise BadRequestError(
                "the request body holds a lone surrogate escape (\\ud800-\\udfff), not text"
            ) from None
        except RecursionError:
            raise BadRequestError("the request body is nested too deeply") from None
    return data


def message_json(message: Message) -> dict[str, Any]:
    """A message as the API shows it (its stored JSON shape)."""
    data: dict[str, Any] = message.model_dump(mode="json")
    return data


def event_json(
    event: AgentEvent | MemberEvent | HandoffEvent, pending: Pending | None = None
) -> tuple[str, dict[str, Any]]:
    """``(type, data)`` of one agent event as the API streams it (``docs/server.md``).

    The data is the event's own JSON (``event.to_dict()``), cut to what the API streams
    (``_STREAMED``), except where a server knows or hides more: an interrupt carries the
    thread's ``pending`` approval (its allowed decisions come from the checkpoint), an
    error is described by the one error table (an internal error's text stays in the
    log), a swarm member's run brackets become ``member_step``, and ``run_finished``
    holds the answer, not the history the result also holds.
    """
    if isinstance(event, InterruptEvent):
        return event.type, {
            "run_id": event.run_id,
            "pending": pending.to_json() if pending else None,
        }
    if isinstance(event, RunErrorEvent):
        return event.type, {"run_id": event.run_id, **error_payload(event.error)}
    if isinstance(event, MemberEvent):  # a swarm member's turn starts or ends
        return "member_step", {"agent": event.agent, "phase": _PHASES[event.event.type]}
    if isinstance(event, RunFinishedEvent):  # the answer, not the whole history it ends
        result = event.result
        return event.type, {
            "run_id": event.run_id,
            "text": result.text,
            "stop_reason": result.stop_reason,
        }
    data = event.to_dict()
    return event.type, {name: data[name] for name in _STREAMED[event.type]}


#: What the API streams of each other event's JSON.
_STREAMED = {
    "run_started": ("run_id", "thread_id"),
    "message_started": ("message_id", "turn"),
    "text_delta": ("message_id", "delta"),
    "reasoning_delta": ("message_id", "delta"),
    "message_completed": ("message", "turn"),
    "tool_call": ("message_id", "call", "requires_approval"),
    "tool_result": ("call_id", "tool", "message", "is_error"),
    "handoff": ("from", "to", "message"),
}


#: The ``phase`` of a ``member_step`` event, by the type of the member's own event.
_PHASES = {
    "run_started": "started",
    "run_finished": "finished",
    "interrupt": "interrupted",
    "run_error": "failed",
}


def sse(kind: str, data: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _pending_now(runner: ThreadRunner, thread_id: str) -> Pending | None:
    checkpoint = await runner.load(thread_id)
    return None if checkpoint is None else await runner.pending_of(checkpoint)


#: An SSE comment: clients ignore it, proxies see the connection is alive.
KEEPALIVE = ": keep-alive\n\n"


async def _stream(runner: ThreadRunner, handle: RunHandle) -> AsyncIterator[str]:
    async for event in handle.events_or_idle(runner.keepalive):
        if event is None:
            yield KEEPALIVE
            continue
        pending = (
            await _pending_now(runner, handle.thread_id)
            if isinstance(event, InterruptEvent)
            else None
        )
        yield sse(*event_json(event, pending))
    if handle.taken:  # nothing ran: the call of unknown outcome to settle, as it stands
        yield sse("interrupt", _shown(handle))


def _shown(handle: RunHandle) -> dict[str, Any]:
    """The ``interrupt`` data of a resume that ran nothing (``RunHandle.taken``)."""
    return {"run_id": "", "pending": handle.pending.to_json() if handle.pending else None}


async def _summary(runner: ThreadRunner, handle: RunHandle) -> tuple[dict[str, Any], int]:
    """The run's summary and its HTTP status: 200, or the status of the error it failed with."""
    status = 200
    summary: dict[str, Any] = {
        "status": "failed",
        "thread_id": handle.thread_id,
        "text": "",
        "pending": None,
        "error": None,
    }
    async for event in handle.events():
        if isinstance(event, RunFinishedEvent):
            summary.update(status="completed", text=event.result.text)
        elif isinstance(event, InterruptEvent):
            pending = await _pending_now(runner, handle.thread_id)
            summary.update(status="interrupted", pending=pending.to_json() if pending else None)
        elif isinstance(event, RunErrorEvent):
            summary.update(status="failed", error=error_payload(event.error))
            status = status_for(event.error)
    if handle.taken:
        summary.update(status="interrupted", pending=_shown(handle)["pending"])
    return summary, status


async def _answer(request: Request, runner: ThreadRunner, handle: RunHandle) -> Response:
    if "application/json" in request.headers.get("accept", "") and "text/event-stream" not in (
        request.headers.get("accept", "")
    ):
        summary, status = await _summary(runner, handle)
        return JSONResponse(summary, status_code=status)
    return StreamingResponse(
        _stream(runner, handle),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _page_limit(text: str) -> tuple[int, str | None]:
    """A page's ``limit``, clamped to ``MAX_LIMIT`` (with the notice that says so)."""
    try:
        limit = int(text)
    except ValueError as exc:
        raise BadRequestError("limit must be an integer") from exc
    if limit > MAX_LIMIT:
        return MAX_LIMIT, f"limit {limit} is more than {MAX_LIMIT}: clamped to {MAX_LIMIT}"
    return limit, None


def _moment(params: Mapping[str, str], name: str) -> datetime | None:
    """The ISO 8601 time of query parameter ``name`` (naive: UTC), or ``None``."""
    text = params.get(name)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"{name} must be an ISO 8601 time, got {text!r:.60}") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def api_routes(runner: ThreadRunner) -> list[Route]:
    """The JSON API's routes over ``runner``."""

    async def list_threads(request: Request) -> Response:
        """``GET /api/threads``: a page of threads, newest first."""
        params = request.query_params
        limit, notice = _page_limit(params.get("limit", "50"))
        page, cursor = await runner.list_threads(
            limit=limit,
            cursor=params.get("cursor") or None,
            query=params.get("q") or None,
            state=params.get("state") or None,
            updated_after=_moment(params, "updated_after"),
            updated_before=_moment(params, "updated_before"),
        )
        body: dict[str, Any] = {"threads": [s.to_json() for s in page], "next_cursor": cursor}
        body["limit"] = limit
        if notice:
            body["notice"] = notice
        return JSONResponse(body)

    async def read_thread(request: Request) -> Response:
        """``GET /api/threads/{id}``: messages, state, pending approval and timeline."""
        thread_id = request.path_params["thread_id"]
        checkpoint = await runner.require(thread_id)
        pending = await runner.pending_of(checkpoint)
        return JSONResponse(
            {
                "thread_id": checkpoint.thread_id,
                "saved_at": checkpoint.saved_at.isoformat(),
                "title": title_of(checkpoint.messages),
                "messages": [message_json(m) for m in checkpoint.messages],
                "state": checkpoint.state,
                "pending": pending.to_json() if pending else None,
                "running": runner.busy(thread_id),
                "timeline": await runner.timeline(thread_id),
                "parent": await parent_of(runner, thread_id),
            }
        )

    async def run_thread(request: Request) -> Response:
        """``POST /api/threads/{id}/runs`` with ``{"prompt"}``."""
        thread_id, body = await _thread_body(request)
        prompt = _field(body, "prompt", str, '{"prompt": "<text>"}')
        handle = await runner.start_run(thread_id, prompt)
        return await _answer(request, runner, handle)

    async def resume_thread(request: Request) -> Response:
        """``POST /api/threads/{id}/resume`` with ``{"decisions": {name: decision}}``."""
        thread_id, body = await _thread_body(request)
        decisions = _field(body, "decisions", dict, '{"decisions": {"<tool_call_id>": decision}}')
        handle = await runner.start_resume(thread_id, decisions)
        return await _answer(request, runner, handle)

    async def delete_thread(request: Request) -> Response:
        """``DELETE /api/threads/{id}``."""
        await runner.delete(request.path_params["thread_id"])
        return Response(status_code=204)

    async def edit(request: Request) -> Response:
        """``PATCH /api/threads/{id}/messages/{message_id}`` with ``{"content": "<text>"}``."""
        thread_id, body = await _thread_body(request)
        content = _field(body, "content", str, '{"content": "<text>"}')
        await edit_message(runner, thread_id, request.path_params["message_id"], content)
        return await read_thread(request)

    async def branch(request: Request) -> Response:
        """``POST /api/threads/{id}/branches`` with ``{"message_id", "thread_id"?, "label"?}``."""
        thread_id, body = await _thread_body(request)
        message_id = body.get("message_id")
        new_thread = body.get("thread_id")
        if not isinstance(message_id, str) or not isinstance(new_thread, str | None):
            raise BadRequestError('the body must be {"message_id": "<id>", "thread_id"?, "label"?}')
        new = await branch_thread(
            runner, thread_id, message_id, new_thread_id=new_thread, label=body.get("label")
        )
        parent = {"thread_id": thread_id, "message_id": message_id}
        return JSONResponse({"thread_id": new, "parent": parent}, status_code=201)

    return [
        Route("/api/threads", guarded(list_threads), methods=["GET"]),
        Route("/api/threads/{thread_id}/messages/{message_id}", guarded(edit), methods=["PATCH"]),
        Route("/api/threads/{thread_id}/branches", guarded(branch), methods=["POST"]),
        Route("/api/threads/{thread_id}", guarded(read_thread), methods=["GET"]),
        Route("/api/threads/{thread_id}", guarded(delete_thread), methods=["DELETE"]),
        Route("/api/threads/{thread_id}/runs", guarded(run_thread), methods=["POST"]),
        Route("/api/threads/{thread_id}/resume", guarded(resume_thread), methods=["POST"]),
    ]
