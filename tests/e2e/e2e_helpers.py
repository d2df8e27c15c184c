"""Helpers for tests that drive the running services: an MCP client session, an OTLP receiver, and
reading the gateway's pages and redirects as a browser would."""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

PASSWORD = "correct horse battery staple"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def csrf_of(page: str) -> str:
    found = re.search(r"name='csrf_token' value='([^']+)'", page)
    assert found, "no CSRF token in the page"
    return found.group(1)


def hidden_fields(page: str) -> dict[str, str]:
    return {
        html.unescape(k): html.unescape(v)
        for k, v in re.findall(r"<input type=hidden name='([^']+)' value='([^']*)'>", page)
    }


@asynccontextmanager
async def mcp_session(url: str, mode: str = "auto", headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """An official MCP SDK client connected to `url` (mode: 'auto' negotiates 2026-07-28, 'legacy' 2025-11-25)."""
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool and return its structured result; fail the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise AssertionError(f"{tool} failed: {result.content[0].text if result.content else result}")
    assert result.structured_content is not None
    return dict(result.structured_content)


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; return the error text the agent sees."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {json.dumps(result.structured_content)[:300]}"
    text = result.content[0].text if result.content else ""
    return str(text)


class SpanCollector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    """A real OTLP/gRPC trace receiver that keeps what the services export."""

    def __init__(self) -> None:
        self.spans: list[dict[str, str]] = []

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.aio.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        {
                            "service": service,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex(),
                        }
                    )
        return trace_service_pb2.ExportTraceServiceResponse()


@asynccontextmanager
async def otlp_receiver(port: int) -> AsyncIterator[SpanCollector]:
    collector = SpanCollector()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    try:
        yield collector
    finally:
        await server.stop(None)


async def vault_stats(stack: Any, vault: str = "default") -> Any:
    """The vault's GetStats for the dev owner, over gRPC."""
    from memvault.vault.v1 import vault_pb2, vault_pb2_grpc
    from memvault_core.grpc import client_channel
    from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner

    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    channel = client_channel(stack.vault_address)
    try:
        stub = vault_pb2_grpc.VaultServiceStub(channel)
        return await stub.GetStats(vault_pb2.GetStatsRequest(vault=vault), metadata=((GRPC_METADATA_KEY, token),))
    finally:
        await channel.close()


def service_identity(stack: Any, service: str) -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying `service`'s identity, signed with the stack's key."""
    from memvault_core.identity import GRPC_METADATA_KEY, IdentitySigner

    return ((GRPC_METADATA_KEY, IdentitySigner(stack.identity_secret).sign_service(service)),)


async def index_info(stack: Any) -> Any:
    """The indexer's GetIndexInfo (points, searchable, model), over gRPC."""
    from memvault.index.v1 import index_pb2, index_pb2_grpc
    from memvault_core.grpc import client_channel

    channel = client_channel(stack.indexer_address)
    try:
        return await index_pb2_grpc.IndexServiceStub(channel).GetIndexInfo(
            index_pb2.GetIndexInfoRequest(), metadata=service_identity(stack, "indexer")
        )
    finally:
        await channel.close()


async def index_points(stack: Any) -> int:
    """Points in the indexer's collection."""
    return int((await index_info(stack)).points)


async def eventually(check: Any, deadline: float = 120.0, interval: float = 0.5) -> Any:
    """Poll an async check until it returns something truthy, or fail at the deadline."""
    import asyncio
    import time

    end = time.monotonic() + deadline
    last: Any = None
    while time.monotonic() < end:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"not reached within {deadline:.0f}s; last value: {last!r}")
