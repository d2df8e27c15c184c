"""One recall through the gateway is one trace across gateway, mcp and vault."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from e2e_helpers import call, mcp_session, otlp_receiver
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.ports import free_port

pytestmark = pytest.mark.e2e

RECALL_RPC = "/memvault.vault.v1.VaultService/Recall"


@pytest.fixture
def agent_trace() -> Iterator[str]:
    """This process as an instrumented agent: a tracer provider of its own (unless one is set already,
    as after other tests in the same run) and a span around the test's calls, so the MCP client puts
    its trace context into each request's `_meta` (SEP-414). The hex trace id is the agent's trace,
    which memvault's spans must not join: one request through the gateway is the gateway's trace."""
    if not isinstance(otel_trace.get_tracer_provider(), TracerProvider):
        otel_trace.set_tracer_provider(TracerProvider())
    with otel_trace.get_tracer("agent").start_as_current_span("agent task") as span:
        context = span.get_span_context()
        assert context.is_valid
        yield format(context.trace_id, "032x")


def exporting_to(port: int) -> dict[str, str]:
    """Service environment that sends spans to the test's OTLP receiver, flushed every 100 ms."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


async def test_recall_is_one_trace_from_gateway_to_vault(fresh_stack: StackStarter, agent_trace: str) -> None:
    port = free_port()
    async with otlp_receiver(port) as collector:
        telemetry = exporting_to(port)
        stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"), env=telemetry)
        async with mcp_session(stack.mcp_url) as client:
            await call(client, "remember", content="The office printer is a Brother HL-L2350DW.")
            await call(client, "recall", query="office printer model")

        deadline = time.monotonic() + 30
        recall_spans: list[dict[str, str]] = []
        while time.monotonic() < deadline:
            recall_spans = [s for s in collector.spans if s["service"] == "memvault-vault" and s["name"] == RECALL_RPC]
            if recall_spans:
                trace = [s for s in collector.spans if s["trace_id"] == recall_spans[0]["trace_id"]]
                if {s["service"] for s in trace} >= {"memvault-gateway", "memvault-mcp", "memvault-vault"}:
                    break
            await asyncio.sleep(0.2)
        assert len(recall_spans) == 1, collector.spans
        trace = [s for s in collector.spans if s["trace_id"] == recall_spans[0]["trace_id"]]
        assert {s["service"] for s in trace} == {"memvault-gateway", "memvault-mcp", "memvault-vault"}
        assert not [s for s in collector.spans if s["trace_id"] == agent_trace], "a service joined the agent's trace"

        # The vault's span hangs, parent by parent, from the gateway's root span: one tree, not three.
        by_id = {s["span_id"]: s for s in trace}
        span = recall_spans[0]
        path = [span["service"]]
        while span["parent_id"] and span["parent_id"] in by_id:
            span = by_id[span["parent_id"]]
            path.append(span["service"])
        assert not span["parent_id"], f"broken parent chain: {path}"
        assert span["service"] == "memvault-gateway"
        assert "memvault-mcp" in path

        # Recall's queries are spans under the vault's Recall span (statement only, never parameters).
        queries = [
            s for s in trace if s["service"] == "memvault-vault" and s["parent_id"] == recall_spans[0]["span_id"]
        ]
        assert {s["name"] for s in queries} >= {"WITH", "SELECT"}, trace


async def test_remember_is_one_trace_from_gateway_to_indexer(fresh_stack: StackStarter, agent_trace: str) -> None:
    port = free_port()
    async with otlp_receiver(port) as collector:
        telemetry = exporting_to(port)
        stack = await asyncio.to_thread(fresh_stack, env=telemetry)
        async with mcp_session(stack.mcp_url) as client:
            await call(client, "remember", content="The garden shed has a solar panel on its roof.")

        wanted = {"memvault-gateway", "memvault-mcp", "memvault-vault", "memvault-indexer"}
        deadline = time.monotonic() + 60
        trace: list[dict[str, str]] = []
        while time.monotonic() < deadline:
            remember = [s for s in collector.spans if s["name"] == "/memvault.vault.v1.VaultService/Remember"]
            trace = [s for s in collector.spans if remember and s["trace_id"] == remember[0]["trace_id"]]
            # Each service exports on its own schedule: wait for all of them, not the first to land.
            indexed = any(s["service"] == "memvault-indexer" and s["name"] == "index created" for s in trace)
            if indexed and {s["service"] for s in trace} >= wanted:
                break
            await asyncio.sleep(0.2)
        assert {s["service"] for s in trace} >= wanted, collector.spans
        assert not [s for s in collector.spans if s["trace_id"] == agent_trace], "a service joined the agent's trace"
        # The indexer's work on this memory (not only the duplicate check the write asked it for)
        # carries the write's trace through the event headers.
        assert any(s["service"] == "memvault-indexer" and s["name"] == "index created" for s in trace)


async def test_a_callers_traceparent_header_starts_no_trace_of_ours(fresh_stack: StackStarter) -> None:
    """A `traceparent` header sent to the gateway (sampled, from a caller outside) is not taken up: the
    gateway's span is a root of a trace of its own, and no memvault span carries the caller's trace id."""
    caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    port = free_port()
    async with otlp_receiver(port) as collector:
        stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"), env=exporting_to(port))
        header = {"traceparent": f"00-{caller_trace}-00f067aa0ba902b7-01"}
        async with mcp_session(stack.mcp_url, headers=header) as client:
            await call(client, "recall", query="office printer model")

        deadline = time.monotonic() + 30
        recall_spans: list[dict[str, str]] = []
        while time.monotonic() < deadline and not recall_spans:
            recall_spans = [s for s in collector.spans if s["service"] == "memvault-vault" and s["name"] == RECALL_RPC]
            await asyncio.sleep(0.2)
        assert recall_spans, collector.spans
        assert not [s for s in collector.spans if s["trace_id"] == caller_trace], "a service joined the caller's trace"
        roots = [s for s in collector.spans if s["trace_id"] == recall_spans[0]["trace_id"] and not s["parent_id"]]
        assert [s["service"] for s in roots] == ["memvault-gateway"], roots
