"""OpenTelemetry tracing: exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else nothing.

Context propagates with W3C trace context over HTTP (traceparent headers) and gRPC
(metadata), so one request through the gateway is one trace.

With no exporter, spans are not recorded: they keep their trace and span ids, which propagate and
which the logs carry (`trace_id`, `span_id`), but no attributes, events or timings are collected
only to be dropped (they cost 2 to 11 % of a recall's CPU over all services in the runs of
docs/benchmarks.md, bench:unrecorded-spans). `OTEL_TRACES_SAMPLER`, when set, decides instead.
Requests leave such a service marked "not sampled", and a service that exports follows its caller's
mark (parent-based sampling): so set the endpoint on every service, as the chart's `otel.endpoint`
and Compose do, not on one alone.
"""

from __future__ import annotations

import os

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, Sampler

_provider: TracerProvider | None = None


def exporting() -> bool:
    """Whether spans go to an OTLP collector (its endpoint is set)."""
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def sampler() -> Sampler | None:
    """None (the SDK's choice: `OTEL_TRACES_SAMPLER`, by default every root span and every span whose parent
    is sampled) when spans are exported or the sampler is chosen in the environment; otherwise one that
    records nothing of its own but still hands out ids."""
    if exporting() or os.environ.get("OTEL_TRACES_SAMPLER"):
        return None
    return ParentBased(ALWAYS_OFF)


class OutgoingOnly(TextMapPropagator):
    """Hands this process's trace context on (to the services it calls) and takes none from its callers:
    each request it receives starts a trace of its own. For the edge, whose callers are outside: a
    caller's `traceparent` would otherwise join memvault's spans to its trace, and its sampled flag would
    make every service record the request even with no exporter."""

    def __init__(self, inner: TextMapPropagator) -> None:
        self._inner = inner

    def extract(
        self, carrier: CarrierT, context: Context | None = None, getter: Getter[CarrierT] = default_getter
    ) -> Context:
        return context if context is not None else Context()

    def inject(
        self, carrier: CarrierT, context: Context | None = None, setter: Setter[CarrierT] = default_setter
    ) -> None:
        self._inner.inject(carrier, context, setter)

    @property
    def fields(self) -> set[str]:
        return self._inner.fields


def setup_telemetry(service: str, *, edge: bool = False) -> TracerProvider:
    """Install the global tracer provider for this process (idempotent); at the `edge` (the gateway),
    trace context in requests is not taken up (OutgoingOnly)."""
    global _provider
    if _provider is not None:
        return _provider
    if edge:
        propagate.set_global_textmap(OutgoingOnly(propagate.get_global_textmap()))
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"memvault-{service}")})
    provider = TracerProvider(resource=resource, sampler=sampler())
    if exporting():
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def shutdown_telemetry() -> None:
    """Flush spans still buffered; call once on the way out."""
    if _provider is not None:
        _provider.shutdown()
