"""The caller's OpenTelemetry span as W3C trace context headers (``traceparent``, ``tracestate``) on a
request, so the service's span joins the caller's trace. Through opentelemetry-api when it is installed
(the ``otel`` extra); without it, or outside any span, no header is added."""

from __future__ import annotations

try:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the otel extra is not installed
    _propagator: TraceContextTextMapPropagator | None = None
else:
    # W3C trace context whatever the application's global propagator is: it is what the services read.
    _propagator = TraceContextTextMapPropagator()


def trace_headers() -> dict[str, str] | None:
    """The headers of the current span's context, or None without one."""
    if _propagator is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier or None
