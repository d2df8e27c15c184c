"""OpenTelemetry tracing: exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else nothing.

Context propagates with W3C trace context over HTTP (traceparent headers) and gRPC
(metadata), so one request through the gateway is one trace.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_provider: TracerProvider | None = None


def setup_telemetry(service: str) -> TracerProvider:
    """Install the global tracer provider for this process (idempotent)."""
    global _provider
    if _provider is not None:
        return _provider
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"memvault-{service}")})
    provider = TracerProvider(resource=resource)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def shutdown_telemetry() -> None:
    """Flush spans still buffered; call once on the way out."""
    if _provider is not None:
        _provider.shutdown()
