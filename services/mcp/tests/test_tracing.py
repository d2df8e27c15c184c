"""The mcp service's spans belong to the gateway's trace, whatever trace context an agent sends."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.context import ServerRequestContext

from memvault_core.identity import IdentitySigner
from memvault_mcp.app import build_app
from memvault_mcp.middleware import GatewayTraceMiddleware

pytestmark = pytest.mark.unit

AGENT_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def passed_on(meta: dict[str, Any] | None) -> Any:
    seen: list[Any] = []

    async def call_next(ctx: ServerRequestContext[Any, Any]) -> Any:
        seen.append(ctx.meta)
        return "answer"

    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=None,  # type: ignore[arg-type]  # the middleware reads only the request's meta
        lifespan_context=None,
        protocol_version="2025-11-25",
        method="tools/call",
        params={"name": "recall"},
        meta=meta,  # type: ignore[arg-type]
    )
    assert await GatewayTraceMiddleware()(ctx, call_next) == "answer"
    return seen[0]


async def test_an_agents_trace_context_in_meta_is_dropped_and_the_rest_kept() -> None:
    meta = {"traceparent": AGENT_TRACE, "tracestate": "vendor=1", "baggage": "user=x", "progressToken": 7}
    assert await passed_on(meta) == {"progressToken": 7}
    assert await passed_on({"traceparent": AGENT_TRACE}) is None
    assert await passed_on({"progressToken": 7}) == {"progressToken": 7}
    assert await passed_on(None) is None


def test_the_trace_context_goes_before_the_sdks_span_is_made() -> None:
    from mcp.server.mcpserver import MCPServer

    built: list[MCPServer[Any]] = []
    original = MCPServer.__init__

    def keep(self: MCPServer[Any], *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        built.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MCPServer, "__init__", keep)
        build_app(client=None, signer=IdentitySigner("x" * 32))  # type: ignore[arg-type]
    chain = [type(m).__name__ for m in built[0].middleware]
    assert chain[0] == "GatewayTraceMiddleware"
    assert chain[1] == "OpenTelemetryMiddleware"  # the SDK's span per message
