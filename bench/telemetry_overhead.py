"""Benchmark: what tracing costs a run, off and on (run by hand).

One scenario, repeated: ``--runs`` short runs (default 300) of an agent whose zero-latency
``FunctionModel`` calls one tool and then answers (2 model calls, 1 tool call, a memory
load and save per run), with ``InMemoryMemory``. Measured in the same process, in turn:

* ``baseline``: the telemetry wrappers at the call sites replaced by identity functions
  (the code as it would be without tracing);
* ``off, no otel``: the wrappers as shipped, ``opentelemetry`` never imported;
* ``off, API imported``: the API imported, no provider set;
* ``on``: the SDK's ``TracerProvider`` and ``MeterProvider`` set, spans sent to an
  exporter that drops them (the cost of making the spans, not of shipping them).

Each is the best of ``--repeat`` rounds (default 5), in microseconds per run, and as a
ratio to the baseline. Usage: ``.venv/bin/python bench/telemetry_overhead.py [--runs 300]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from framework_agents import Agent, FunctionModel, InMemoryMemory, Message, ToolCall, ToolSpec, tool
from framework_agents.agent import _loop, _sessions, _threads
from framework_agents.agent import agent as agent_module

WRAPPED = {
    agent_module: ("trace_run", "trace_store"),
    _loop: ("trace_chat", "trace_chat_stream", "trace_tool", "tool_suspended"),
    _threads: ("trace_store",),
    _sessions: ("trace_store",),
}


@tool
def noop(n: int) -> int:
    """Return n."""
    return n


def _answer(messages: list[Message], tools: list[ToolSpec]) -> Message:
    if messages[-1].role == "user":
        return Message("assistant", "", tool_calls=[ToolCall("c1", "noop", {"n": 1})])
    return Message("assistant", "done", metadata={"usage": {"input_tokens": 3, "output_tokens": 1}})


def _identity(name: str) -> Callable[..., Any]:
    if name == "trace_run":
        return lambda agent, events, **_: events
    if name == "trace_store":
        return lambda kind, op, store, call, **_: call
    if name in ("trace_chat", "trace_chat_stream"):
        return lambda model, call, *_: call
    if name == "trace_tool":
        return lambda call, execution: execution
    return lambda *_: None


@contextmanager
def _baseline() -> Iterator[None]:
    saved = {(m, n): getattr(m, n) for m, names in WRAPPED.items() for n in names}
    for module, name in saved:
        setattr(module, name, _identity(name))
    try:
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


async def _runs(count: int) -> float:
    model = FunctionModel(_answer)
    agent = Agent(model, tools=[noop], memory=InMemoryMemory(max_messages=20))
    started = time.perf_counter()
    for _ in range(count):
        await agent.run("go")
        model.calls.clear()
    return (time.perf_counter() - started) / count * 1e6


def _best(count: int, repeat: int) -> float:
    return min(asyncio.run(_runs(count)) for _ in range(repeat))


def _turn_on() -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def main() -> None:
    """Print microseconds per run and the ratio to the baseline for each setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    _best(args.runs // 5 or 1, 1)  # warm up imports and caches
    results: list[tuple[str, float]] = []
    with _baseline():
        results.append(("baseline (no wrappers)", _best(args.runs, args.repeat)))
    assert "opentelemetry" not in sys.modules
    results.append(("off, no otel imported", _best(args.runs, args.repeat)))
    import opentelemetry.trace  # noqa: F401

    results.append(("off, API imported, no provider", _best(args.runs, args.repeat)))
    _turn_on()
    results.append(("on (SDK, spans dropped)", _best(args.runs, args.repeat)))
    base = results[0][1]
    print(f"{args.runs} runs x {args.repeat} rounds; 2 model calls + 1 tool call per run")
    for label, micros in results:
        print(f"  {label:32s} {micros:9.1f} us/run   x{micros / base:.3f}")


if __name__ == "__main__":
    main()
