"""An OpenTelemetry SDK tracer and meter provider for one test, with in-memory exporters.

The API allows one global provider per process, so the fixture resets the API's
"set once" guards around each test, as OpenTelemetry's own test utilities do; every other
test of the suite runs with no provider set (tracing off).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

try:
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.util._once import Once
except ImportError:  # the otel extra or the SDK (dev extra) is missing
    HAVE_SDK = False
else:
    HAVE_SDK = True


def _reset_globals() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None


@dataclass
class Telemetry:
    """What a test reads: finished spans and collected metric points."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        """Finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        """Finished spans whose name starts with ``prefix``, in the order they ended."""
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def points(self, metric: str) -> list[Any]:
        """Histogram data points of ``metric``."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        found.extend(item.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    """A tracer and meter provider set for this test only."""
    if not HAVE_SDK:
        pytest.skip("needs opentelemetry-api and opentelemetry-sdk (extras otel and dev)")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    _reset_globals()
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(meters)
    try:
        yield Telemetry(exporter, reader)
    finally:
        provider.shutdown()
        meters.shutdown()
        _reset_globals()
