"""OpenTelemetry spans and metrics by the GenAI semantic conventions, at no cost when off.

Everything framework-agents traces goes through the few wrappers here, so the code that
runs agents, models, tools and stores only wraps an awaitable or an event stream:

* :func:`trace_run`: one ``invoke_agent {agent}`` span per run or resume of an agent,
  around its event stream; a resume links to the run of the same thread it continues.
* :func:`trace_chat` / :func:`trace_chat_stream`: one ``chat {model}`` span (kind
  CLIENT) per model call, plus the metrics ``gen_ai.client.operation.duration`` and
  ``gen_ai.client.token.usage``.
* :func:`trace_tool`: one ``execute_tool {tool}`` span per tool call;
  :func:`tool_suspended` records the span of a call that stopped for a human decision
  (``error.type`` = ``HitlInterrupt``).
* :func:`workflow_span` / :func:`trace_workflow`: one ``invoke_workflow {swarm}`` span
  around a multi-agent run (its members' ``invoke_agent`` spans are its children).
* :func:`trace_store`: one ``{kind} {operation}`` span per load or save of a memory,
  session or checkpoint.

Cost when off. Only the OpenTelemetry API is used, found in ``sys.modules``: when the
application never imported ``opentelemetry`` (so cannot have set a provider), or set no
tracer provider, every wrapper returns what it was given, unchanged, and nothing is
imported. Metrics are recorded when a meter provider is set, with or without tracing.

Message content (prompts, answers, tool arguments and results) is recorded only when the
environment variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``,
the switch OpenTelemetry's GenAI instrumentations use.

Attribute names are written out as strings: the Python constants for the GenAI
conventions are deprecated upstream and move between releases.

A span is made current only while the wrapped code runs, never across a ``yield`` to the
consumer of a stream, so a consumer that stops early or iterates from several tasks
cannot leave a span attached to its context.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "TRACE_APP_DATA_KEY",
    "active",
    "link_previous_run",
    "run_link_record",
    "tool_suspended",
    "trace_chat",
    "trace_chat_stream",
    "trace_run",
    "trace_store",
    "trace_tool",
    "trace_workflow",
    "workflow_span",
]

logger = logging.getLogger(__name__)

#: Set to ``true`` to record message content on spans (off by default: it may be private).
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_SCOPE = "framework_agents"
_PROVIDERS = {
    "OpenAIModel": "openai",
    "AnthropicModel": "anthropic",
    "LocalModel": "llama_cpp",
}

T = TypeVar("T")
E = TypeVar("E")

# The invoke_agent span of the run being driven here, and whether that run is a resume.
_run_span: ContextVar[tuple[Any, bool] | None] = ContextVar("fa_run_span", default=None)

#: The key of a thread checkpoint's ``app_data`` that names the span of the run that saved
#: it, so a resume in another process links to the run it continues.
TRACE_APP_DATA_KEY = "framework_agents.trace"


class _FromProvider(Generic[T]):
    """What is made from the API's current global provider (a tracer, the histograms).

    ``None`` while the application has not imported the API module or has set no provider
    (the API's proxy or no-op one); cached by the provider it came from, so a provider set
    later is picked up.
    """

    def __init__(
        self, module: str, getter: str, off: frozenset[str], make: Callable[[Any], T]
    ) -> None:
        self._module = module
        self._getter = getter
        self._off = off
        self._make = make
        self._cached: tuple[Any, T] | None = None

    def __call__(self) -> T | None:
        api = sys.modules.get(self._module)
        if api is None:
            return None
        provider = getattr(api, self._getter)()
        if type(provider).__name__ in self._off:
            return None
        cached = self._cached
        if cached is None or cached[0] is not provider:
            cached = self._cached = (provider, self._make(provider))
        return cached[1]


def _histograms(provider: Any) -> tuple[Any, Any]:
    meter = provider.get_meter(_SCOPE)
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration"
    )
    tokens = meter.create_histogram(
        "gen_ai.client.token.usage", unit="{token}", description="Number of tokens used"
    )
    return duration, tokens


#: The tracer, or ``None`` when OpenTelemetry is absent or no tracer provider is set.
_tracer: _FromProvider[Any] = _FromProvider(
    "opentelemetry.trace",
    "get_tracer_provider",
    frozenset({"ProxyTracerProvider", "NoOpTracerProvider"}),
    lambda provider: provider.get_tracer(_SCOPE),
)
#: The (duration, token usage) histograms, or ``None`` without a meter provider.
_instruments: _FromProvider[tuple[Any, Any]] = _FromProvider(
    "opentelemetry.metrics",
    "get_meter_provider",
    frozenset({"_ProxyMeterProvider", "NoOpMeterProvider"}),
    _histograms,
)


def active() -> bool:
    """Whether spans or metrics would be recorded now (a tracer or meter provider is set)."""
    return _tracer() is not None or _instruments() is not None


def _capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("true", "1", "yes")


# -- attributes ---------------------------------------------------------------------------


def provider_name(model: object) -> str:
    """``gen_ai.provider.name`` of a model: its ``provider_name`` attribute, else by class."""
    given = getattr(model, "provider_name", None)
    if isinstance(given, str) and given:
        return given
    return _PROVIDERS.get(type(model).__name__, "_OTHER")


def model_name(model: object) -> str:
    """``gen_ai.request.model`` of a model: its ``model`` name, else its class name."""
    name = getattr(model, "model", None)
    if isinstance(name, str) and name:
        return name
    if type(model).__name__ == "LocalModel":
        return "SmolLM2-135M-Instruct"
    return type(model).__name__


def _error_type(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code else type(exc).__qualname__


def _fail(span: Any, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc`` (``error.type``, status, exception event)."""
    trace = sys.modules["opentelemetry.trace"]
    span.set_attribute("error.type", _error_type(exc))
    span.record_exception(exc)
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))


def _stopped(span: Any, exc: BaseException) -> None:
    """Mark a run or workflow ``span`` interrupted, or failed by ``exc`` (a close is neither)."""
    if type(exc).__name__ == "HitlInterrupt":
        span.set_attribute("framework_agents.run.outcome", "interrupted")
    elif not isinstance(exc, GeneratorExit):
        _fail(span, exc)


def _parts(message: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.role == "tool":
        return [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.text}
        ]
    for block in message.reasoning:
        parts.append({"type": "reasoning", "content": block.text})
    if message.text:
        parts.append({"type": "text", "content": message.text})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args}
        )
    return parts


def _messages_json(messages: Sequence[Any]) -> str:
    return json.dumps(
        [{"role": m.role, "parts": _parts(m)} for m in messages], ensure_ascii=False, default=str
    )


def _usage(message: Any) -> tuple[int | None, int | None]:
    usage = message.metadata.get("usage") if message is not None else None
    if not isinstance(usage, Mapping):
        return None, None
    found = [usage.get(name) for name in ("input_tokens", "output_tokens")]
    valid = [
        v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None for v in found
    ]
    return valid[0], valid[1]


def _set_response(span: Any, message: Any) -> None:
    """Response attributes of a ``chat`` span from the assistant message a model answered."""
    metadata = message.metadata
    reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    if isinstance(reason, str):
        span.set_attribute("gen_ai.response.finish_reasons", [reason])
    for key, name in (("model", "gen_ai.response.model"), ("response_id", "gen_ai.response.id")):
        value = metadata.get(key)
        if isinstance(value, str):
            span.set_attribute(name, value)
    input_tokens, output_tokens = _usage(message)
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)


def _record_metrics(
    attributes: Mapping[str, Any], started: float, message: Any, error: BaseException | None
) -> None:
    instruments = _instruments()
    if instruments is None:
        return
    duration, tokens = instruments
    common = {
        k: attributes[k]
        for k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
    }
    if error is not None:
        duration.record(time.perf_counter() - started, {**common, "error.type": _error_type(error)})
        return
    duration.record(time.perf_counter() - started, common)
    for kind, count in zip(("input", "output"), _usage(message), strict=True):
        if count is not None:
            tokens.record(count, {**common, "gen_ai.token.type": kind})


# -- runs -----------------------------------------------------------------------------------


def _conversation_id(agent: Any, thread_id: str | None) -> str | None:
    if thread_id is not None:
        return thread_id
    session_id = getattr(getattr(agent, "session_manager", None), "session_id", None)
    return session_id if isinstance(session_id, str) else None


def _observe_run(span: Any, event: Any) -> None:
    """Attributes of the ``invoke_agent`` span from the agent's events."""
    kind = getattr(event, "type", None)
    if kind == "run_started":
        span.set_attribute("framework_agents.run.id", event.run_id)
    elif kind == "run_finished":
        result = event.result
        span.set_attribute("framework_agents.run.outcome", "completed")
        span.set_attribute("gen_ai.response.finish_reasons", [result.stop_reason])
        span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
        if _capture_content():
            span.set_attribute("gen_ai.output.messages", _messages_json(result.new_messages[-1:]))
    elif kind == "interrupt":
        span.set_attribute("framework_agents.run.outcome", "interrupted")
        span.set_attribute("framework_agents.hitl.tool", event.interrupt.tool)
        span.set_attribute("gen_ai.tool.call.id", event.interrupt.call_id)


def trace_run(
    agent: Any,
    events: AsyncGenerator[E, None],
    *,
    thread_id: str | None = None,
    resume: bool = False,
) -> AsyncGenerator[E, None]:
    """``events`` inside an ``invoke_agent {agent}`` span (``events`` itself when off).

    A resume (``resume=True``) is linked to the run it continues when the thread's
    checkpoint names that run's span (:func:`run_link_record`, :func:`link_previous_run`),
    in this process or another; both spans carry the thread as ``gen_ai.conversation.id``.
    """
    tracer = _tracer()
    if tracer is None:
        return events
    trace = sys.modules["opentelemetry.trace"]
    name = str(getattr(agent, "agent_id", "agent"))
    model = getattr(agent, "model", None)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider_name(model),
        "gen_ai.agent.id": name,
        "gen_ai.agent.name": name,
        "gen_ai.request.model": model_name(model),
    }
    conversation = _conversation_id(agent, thread_id)
    if conversation is not None:
        attributes["gen_ai.conversation.id"] = conversation
    if resume:
        attributes["framework_agents.run.resume"] = True
    span = tracer.start_span(
        f"invoke_agent {name}", kind=trace.SpanKind.INTERNAL, attributes=attributes
    )
    return _spanned_events(span, events, _observe_run, resume=resume)


def run_link_record() -> dict[str, str] | None:
    """The traced run being driven here as JSON (trace and span ids), or ``None``.

    Stored with a thread's checkpoint (under :data:`TRACE_APP_DATA_KEY`) so that a resume
    in another process can link to the run it continues.
    """
    current = _run_span.get()
    if current is None:
        return None
    context = current[0].get_span_context()
    if not context.is_valid:
        return None
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def link_previous_run(record: object) -> None:
    """Link the resume being driven here to the run ``record`` names (from a checkpoint)."""
    current = _run_span.get()
    if current is None or not current[1] or not isinstance(record, dict):
        return
    span = current[0]
    try:
        trace_id, span_id = int(record["trace_id"], 16), int(record["span_id"], 16)
    except (KeyError, TypeError, ValueError):
        logger.debug("ignoring a malformed trace record in a checkpoint: %r", record)
        return
    if not trace_id or not span_id:
        return
    trace = sys.modules["opentelemetry.trace"]
    previous = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    span.add_link(previous, {"framework_agents.link": "resumes"})


async def _spanned_events(
    span: Any,
    events: AsyncGenerator[E, None],
    observe: Any,
    *,
    resume: bool = False,
) -> AsyncGenerator[E, None]:
    """Yield ``events`` with ``span`` current while each is produced; end it at the end."""
    context = sys.modules["opentelemetry.context"]
    trace = sys.modules["opentelemetry.trace"]
    parent = trace.set_span_in_context(span)
    try:
        while True:
            token = context.attach(parent)
            running = _run_span.set((span, resume))
            try:
                event = await anext(events)
            except StopAsyncIteration:
                break
            finally:
                _run_span.reset(running)
                context.detach(token)
            observe(span, event)
            yield event
    except BaseException as exc:
        _stopped(span, exc)
        raise
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            token = context.attach(parent)
            try:
                await close()
            finally:
                context.detach(token)
        span.end()


# -- workflows ------------------------------------------------------------------------------


def _workflow_attributes(name: str, conversation_id: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.agent.name": name,
    }
    if conversation_id is not None:
        attributes["gen_ai.conversation.id"] = conversation_id
    return attributes


@contextmanager
def workflow_span(name: str, *, conversation_id: str | None = None) -> Iterator[Any]:
    """An ``invoke_workflow {name}`` span, current inside the block (``None`` when off).

    For a coroutine (not an async generator): ``with workflow_span(swarm_id): ...``.
    """
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    trace = sys.modules["opentelemetry.trace"]
    with tracer.start_as_current_span(
        f"invoke_workflow {name}",
        kind=trace.SpanKind.INTERNAL,
        attributes=_workflow_attributes(name, conversation_id),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            _stopped(span, exc)
            raise


def trace_workflow(
    name: str, events: AsyncGenerator[E, None], *, conversation_id: str | None = None
) -> AsyncGenerator[E, None]:
    """An event stream inside an ``invoke_workflow {name}`` span (``events`` when off)."""
    tracer = _tracer()
    if tracer is None:
        return events
    trace = sys.modules["opentelemetry.trace"]
    span = tracer.start_span(
        f"invoke_workflow {name}",
        kind=trace.SpanKind.INTERNAL,
        attributes=_workflow_attributes(name, conversation_id),
    )
    return _spanned_events(span, events, _ignore)


def _ignore(span: Any, event: Any) -> None:
    return None


# -- model calls ----------------------------------------------------------------------------


def _chat_attributes(model: object, messages: Sequence[Any], system: str | None) -> dict[str, Any]:
    name = model_name(model)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(model),
        "gen_ai.request.model": name,
    }
    if _capture_content():
        attributes["gen_ai.input.messages"] = _messages_json(messages)
        if system:
            attributes["gen_ai.system_instructions"] = json.dumps(
                [{"type": "text", "content": system}], ensure_ascii=False
            )
    return attributes


def trace_chat(
    model: object,
    call: Awaitable[T],
    messages: Sequence[Any] = (),
    system_prompt: str | None = None,
) -> Awaitable[T]:
    """``await model.complete(...)`` inside a ``chat {model}`` span (``call`` when off)."""
    tracer = _tracer()
    if tracer is None and _instruments() is None:
        return call
    return _chat(tracer, _chat_attributes(model, messages, system_prompt), call)


def _start_chat(tracer: Any | None, attributes: dict[str, Any]) -> Any | None:
    if tracer is None:
        return None
    trace = sys.modules["opentelemetry.trace"]
    return tracer.start_span(
        f"chat {attributes['gen_ai.request.model']}",
        kind=trace.SpanKind.CLIENT,
        attributes=attributes,
    )


def _end_chat(
    span: Any | None,
    attributes: dict[str, Any],
    started: float,
    message: Any,
    error: BaseException | None,
) -> None:
    if span is not None:
        if error is not None:
            _fail(span, error)
        elif message is not None:
            _set_response(span, message)
            if _capture_content():
                span.set_attribute("gen_ai.output.messages", _messages_json([message]))
        span.end()
    _record_metrics(attributes, started, message, error)


async def _chat(tracer: Any | None, attributes: dict[str, Any], call: Awaitable[T]) -> T:
    span = _start_chat(tracer, attributes)
    started = time.perf_counter()
    message: Any = None
    error: BaseException | None = None
    try:
        if span is None:
            message = await call
        else:
            trace = sys.modules["opentelemetry.trace"]
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                message = await call
        return message  # type: ignore[no-any-return]
    except BaseException as exc:
        error = exc
        raise
    finally:
        _end_chat(span, attributes, started, message, error)


def trace_chat_stream(
    model: object,
    stream: AsyncIterator[T],
    messages: Sequence[Any] = (),
    system_prompt: str | None = None,
) -> AsyncIterator[T]:
    """``model.stream(...)`` inside a ``chat {model}`` span (``stream`` when off).

    The span ends with the stream; its response attributes come from the final
    ``ModelDone`` chunk.
    """
    tracer = _tracer()
    if tracer is None and _instruments() is None:
        return stream
    return _chat_stream(tracer, _chat_attributes(model, messages, system_prompt), stream)


async def _chat_stream(
    tracer: Any | None, attributes: dict[str, Any], stream: AsyncIterator[T]
) -> AsyncIterator[T]:
    span = _start_chat(tracer, attributes)
    context = sys.modules.get("opentelemetry.context")
    parent = None
    if span is not None:
        parent = sys.modules["opentelemetry.trace"].set_span_in_context(span)
    started = time.perf_counter()
    message: Any = None
    error: BaseException | None = None
    try:
        while True:
            token = context.attach(parent) if context is not None and parent is not None else None
            try:
                chunk = await anext(stream)
            except StopAsyncIteration:
                break
            finally:
                if context is not None and token is not None:
                    context.detach(token)
            if type(chunk).__name__ == "ModelDone":
                message = getattr(chunk, "message", None)
            yield chunk
    except GeneratorExit:
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
        _end_chat(span, attributes, started, message, error)


# -- tools ----------------------------------------------------------------------------------


def _tool_span(tracer: Any, call: Any) -> Any:
    trace = sys.modules["opentelemetry.trace"]
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    if _capture_content():
        attributes["gen_ai.tool.call.arguments"] = json.dumps(
            call.args, ensure_ascii=False, default=str
        )
    return tracer.start_span(
        f"execute_tool {call.name}", kind=trace.SpanKind.INTERNAL, attributes=attributes
    )


def trace_tool(call: Any, execution: Awaitable[T]) -> Awaitable[T]:
    """A tool call's execution inside an ``execute_tool {tool}`` span (as is when off).

    A result message whose ``metadata["kind"]`` is ``tool_error`` sets ``error.type`` to
    ``tool_error``; a rejected call is marked ``framework_agents.tool.outcome=rejected``.
    """
    tracer = _tracer()
    if tracer is None:
        return execution
    return _tool(_tool_span(tracer, call), execution)


async def _tool(span: Any, execution: Awaitable[T]) -> T:
    trace = sys.modules["opentelemetry.trace"]
    try:
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            result = await execution
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):
            _fail(span, exc)
        span.end()
        raise
    metadata = getattr(result, "metadata", None)
    kind = metadata.get("kind") if isinstance(metadata, Mapping) else None
    if kind == "tool_error":
        span.set_attribute("error.type", "tool_error")
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(getattr(result, "text", ""))))
    elif kind == "rejected":
        span.set_attribute("framework_agents.tool.outcome", "rejected")
    if _capture_content():
        span.set_attribute("gen_ai.tool.call.result", str(getattr(result, "text", result)))
    span.end()
    return result


def tool_suspended(call: Any, interrupt: BaseException) -> None:
    """Record the ``execute_tool`` span of a call that stopped for a human decision.

    The span ends at once with ``error.type`` set to the interrupt's type
    (``HitlInterrupt``); the tool did not run.
    """
    tracer = _tracer()
    if tracer is None:
        return
    trace = sys.modules["opentelemetry.trace"]
    span = _tool_span(tracer, call)
    span.set_attribute("error.type", type(interrupt).__name__)
    span.set_attribute("framework_agents.tool.outcome", "suspended")
    reason = getattr(interrupt, "reason", None)
    if isinstance(reason, str):
        span.set_attribute("framework_agents.hitl.reason", reason)
    span.set_status(trace.Status(trace.StatusCode.ERROR, str(interrupt)[:500]))
    span.end()


# -- stores ---------------------------------------------------------------------------------


def trace_store(
    kind: str, operation: str, store: object, call: Awaitable[T], *, key: str | None = None
) -> Awaitable[T]:
    """A store's load or save inside a ``{kind} {operation}`` span (``call`` when off).

    ``kind`` is ``memory``, ``session`` or ``checkpoint``; ``key`` the thread id, session
    id or memory key it reads or writes.
    """
    tracer = _tracer()
    if tracer is None:
        return call
    trace = sys.modules["opentelemetry.trace"]
    attributes: dict[str, Any] = {
        "framework_agents.store.kind": kind,
        "framework_agents.store.operation": operation,
        "framework_agents.store.backend": type(store).__name__,
    }
    if key is not None:
        attributes["framework_agents.store.key"] = key
    span = tracer.start_span(
        f"{kind} {operation}", kind=trace.SpanKind.INTERNAL, attributes=attributes
    )
    return _store(span, call)


async def _store(span: Any, call: Awaitable[T]) -> T:
    trace = sys.modules["opentelemetry.trace"]
    try:
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            return await call
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):
            _fail(span, exc)
        raise
    finally:
        span.end()
