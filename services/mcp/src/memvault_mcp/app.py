"""The MCP server as an ASGI app: Streamable HTTP at /mcp (both protocol eras), /healthz."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from memvault_core.identity import IdentitySigner
from memvault_core.metrics import HttpMetrics
from memvault_core.vault_client import VaultClient
from memvault_mcp.middleware import (
    ArgumentsMiddleware,
    GatewayTraceMiddleware,
    IdentityMiddleware,
    ScopeMiddleware,
    ToolMetricsMiddleware,
)
from memvault_mcp.tools import build_tools
from memvault_mcp.tools.registry import ToolContext

INSTRUCTIONS = (
    "memvault is the owner's long-term memory, shared by all of their AI agents. Call get_operating_guide "
    "once at the start, recall before asking the owner something they may have said before, and remember "
    "what will matter later. Never store secrets."
)


def build_app(client: VaultClient, signer: IdentitySigner) -> ASGIApp:
    """The MCP app over one vault client (the caller closes it)."""
    tools = build_tools()

    @asynccontextmanager
    async def lifespan(server: MCPServer[ToolContext]) -> AsyncIterator[ToolContext]:
        yield ToolContext(vault=client)  # what every tool call reaches the vault through

    server: MCPServer[ToolContext] = MCPServer(
        name="memvault",
        lifespan=lifespan,
        title="memvault",
        instructions=INSTRUCTIONS,
        version=version("memvault-mcp"),
        tools=tools,
        middleware=[ToolMetricsMiddleware(tools), ScopeMiddleware(tools, signer), ArgumentsMiddleware(tools)],
    )
    # Ahead of the SDK's OpenTelemetry middleware (first in the chain): see GatewayTraceMiddleware.
    server.middleware.insert(0, GatewayTraceMiddleware())

    @server.custom_route("/healthz", methods=["GET"])  # type: ignore[untyped-decorator]
    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,  # any replica can answer any request
        json_response=True,
        # Reachable only from the gateway, which checks Origin and Host; every request must
        # also carry a signed identity, so DNS rebinding gains an attacker nothing here.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    # One span per request; spans for each ASGI message would cost time on every call and say nothing.
    return OpenTelemetryMiddleware(
        HttpMetrics(IdentityMiddleware(app, signer), "mcp"), exclude_spans=["receive", "send"]
    )
