"""MCP-level and HTTP-level guards in front of the tools, and the tools' metrics."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver.tools.base import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent
from prometheus_client import Histogram
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from memvault_core.errors import MemvaultError, PermissionDenied
from memvault_core.identity import HTTP_HEADER, Identity, IdentitySigner, missing_scope_message
from memvault_core.metrics import ERRORS, LATENCY_BUCKETS, NAMESPACE, REGISTRY, UNKNOWN
from memvault_core.validation import describe

TOOL_SECONDS = Histogram(
    "tool_call_seconds",
    "Time an MCP tool call took, by tool and outcome: `ok`, `tool_error` (refused or failed with a message for"
    " the agent) or `internal_error`.",
    ["tool", "outcome"],
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)


class ToolMetricsMiddleware(ServerMiddleware[Any]):
    """Time every tools/call by the tool's name (a name no tool has is `unknown`) and its outcome."""

    def __init__(self, tools: list[Tool]) -> None:
        self._names = {tool.name for tool in tools}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        name = (ctx.params or {}).get("name")
        label = name if isinstance(name, str) and name in self._names else UNKNOWN
        started = time.perf_counter()
        outcome = "internal_error"
        try:
            result = await call_next(ctx)
            outcome = _outcome(label, result)
            return result
        except MCPError:
            outcome = "tool_error"  # a JSON-RPC error the caller reads (an unknown tool, bad params)
            raise
        finally:
            TOOL_SECONDS.labels(label, outcome).observe(time.perf_counter() - started)
            if outcome == "internal_error":
                ERRORS.labels("mcp", "tool").inc()


def _outcome(name: str, result: HandlerResult) -> str:
    """`ok`, `tool_error`, or `internal_error`: the SDK answers a tool that crashed (anything but a
    ToolError) with the bare "Error executing tool <name>", keeping the exception's text to itself."""
    if not isinstance(result, CallToolResult) or not result.is_error:
        return "ok"
    text = result.content[0].text if result.content and isinstance(result.content[0], TextContent) else ""
    return "internal_error" if text.strip() == f"Error executing tool {name}" else "tool_error"


# The W3C trace context keys an MCP client may put in a request's `_meta` (SEP-414): the default
# propagators' carriers, trace context and baggage.
CLIENT_TRACE_KEYS = frozenset({"traceparent", "tracestate", "baggage"})


class GatewayTraceMiddleware(ServerMiddleware[Any]):
    """Drop the trace context an agent put in `_meta`, so each message's span (the SDK's
    OpenTelemetry middleware, which runs next) hangs from the gateway's request span, whose context
    came in the HTTP `traceparent` header, and not from the agent's own trace.

    An instrumented MCP client sends its trace in `_meta`; the SDK would make it the parent of the
    mcp service's spans and everything under them (vault, indexer), splitting one request through
    the gateway into two traces. The gateway is the edge: what a caller sends decides nothing inside.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.meta and not CLIENT_TRACE_KEYS.isdisjoint(ctx.meta):
            kept = {key: value for key, value in ctx.meta.items() if key not in CLIENT_TRACE_KEYS}
            ctx = dataclasses.replace(ctx, meta=kept or None)  # type: ignore[arg-type]
        return await call_next(ctx)


class ArgumentsMiddleware(ServerMiddleware[Any]):
    """Refuse a tools/call whose arguments name anything the tool's input schema does not, or
    have the wrong type, with one line per problem an agent can act on.

    The SDK's argument models ignore unknown keys; an agent that misspells `tags` as `tag`
    should hear about it instead of having its input silently dropped. A wrong type would come
    back as pydantic's report, headed by the model's name and ending in a documentation link.
    """

    def __init__(self, tools: list[Tool]) -> None:
        self._allowed = {tool.name: set(tool.parameters.get("properties", {})) for tool in tools}
        self._metadata = {tool.name: tool.fn_metadata for tool in tools}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.params:
            name = ctx.params.get("name")
            arguments = ctx.params.get("arguments") or {}
            allowed = self._allowed.get(name) if isinstance(name, str) else None
            if isinstance(name, str) and allowed is not None and isinstance(arguments, dict):
                unknown = sorted(set(arguments) - allowed)
                if unknown:
                    message = (
                        f"{name} has no argument {', '.join(repr(u) for u in unknown)}; "
                        f"its arguments are: {', '.join(sorted(allowed))}"
                    )
                    return _refused(message)
                try:
                    self._metadata[name].validate_arguments(arguments)  # as the SDK will, JSON strings too
                except ValidationError as error:
                    return _refused(f"{name}: " + "; ".join(describe(p) for p in error.errors()))
        return await call_next(ctx)


class ScopeMiddleware(ServerMiddleware[Any]):
    """List only the tools this connection's scopes allow, and answer a call of any other with a tool
    error naming the missing scope and who grants it.

    A tool that is not read-only needs `write`. The gateway refuses such calls first (403
    insufficient_scope) and the vault checks again; this is what the agent sees listed.
    """

    def __init__(self, tools: list[Tool], signer: IdentitySigner) -> None:
        self._needs = {
            tool.name: "read" if tool.annotations and tool.annotations.read_only_hint else "write" for tool in tools
        }
        self._signer = signer

    def _identity(self, ctx: ServerRequestContext[Any, Any]) -> Identity | None:
        headers = getattr(ctx.request, "headers", None)
        token = headers.get(HTTP_HEADER) if headers is not None else None
        try:
            return self._signer.verify(token)
        except MemvaultError:
            return None  # IdentityMiddleware refused it already; the tools refuse it again

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in ("tools/list", "tools/call"):
            return await call_next(ctx)
        identity = self._identity(ctx)
        if identity is None:
            return await call_next(ctx)
        if ctx.method == "tools/call":
            name = (ctx.params or {}).get("name")
            needed = self._needs.get(name) if isinstance(name, str) else None
            if needed is not None and not _holds(identity, needed):
                return _refused(missing_scope_message(str(name), needed, identity.scopes))
            return await call_next(ctx)
        result = await call_next(ctx)
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            allowed = [t for t in result["tools"] if _holds(identity, self._needs.get(t.get("name"), "write"))]
            result = {**result, "tools": allowed}
        return result


def _holds(identity: Identity, scope: str) -> bool:
    try:
        identity.require(scope)
    except PermissionDenied:
        return False
    return True


def _refused(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class IdentityMiddleware:
    """ASGI guard: every request to /mcp must carry a valid internal identity from the gateway."""

    def __init__(self, app: ASGIApp, signer: IdentitySigner, protected_prefix: str = "/mcp") -> None:
        self.app = app
        self.signer = signer
        self.prefix = protected_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            wanted = HTTP_HEADER.lower().encode()
            token = next((v.decode() for k, v in scope["headers"] if k == wanted), None)
            try:
                self.signer.verify(token)
            except MemvaultError as error:
                body = json.dumps({"error": "unauthenticated", "error_description": error.message}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
