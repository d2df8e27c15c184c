"""How a tool is declared and how it reaches the vault.

A tool is one module-level async function, declared with `@tool(...)` (its title, description and
hints beside its code). It calls the vault with `ask_vault(ctx, VaultClient.<rpc>, request)`: the
client comes from the server's lifespan (`ToolContext`, set up in `app.py`), the identity from the
request the gateway forwarded, and a vault error becomes a tool error whose message the agent reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from memvault_core.errors import MemvaultError
from memvault_core.identity import HTTP_HEADER
from memvault_core.vault_client import VaultClient

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")
ToolFunction = Callable[..., Awaitable[dict[str, Any]]]
ToolT = TypeVar("ToolT", bound=ToolFunction)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class ToolSpec:
    """What the tool list says about one tool besides its input schema."""

    title: str
    description: str
    annotations: ToolAnnotations


SPECS: dict[ToolFunction, ToolSpec] = {}


def tool(title: str, description: str, annotations: ToolAnnotations) -> Callable[[ToolT], ToolT]:
    """Declare the decorated function an MCP tool named after it."""

    def declare(fn: ToolT) -> ToolT:
        SPECS[fn] = ToolSpec(title, description, annotations)
        return fn

    return declare


@dataclass(frozen=True)
class ToolContext:
    """What every tool call may use: the MCP server's lifespan value."""

    vault: VaultClient


def _identity(ctx: Context) -> str:
    headers = ctx.headers or {}
    token = headers.get(HTTP_HEADER.lower()) or headers.get(HTTP_HEADER)
    if not token:
        raise ToolError("this request did not come through the memvault gateway; connect to the gateway's /mcp URL")
    return token


def _vault(ctx: Context) -> VaultClient:
    context = ctx.request_context.lifespan_context
    if not isinstance(context, ToolContext):
        raise TypeError("the MCP server was built without a ToolContext lifespan; use memvault_mcp.app.build_app")
    return context.vault


async def ask_vault(
    ctx: Context,
    method: Callable[[VaultClient, str, RequestT], Awaitable[ResponseT]],
    request: RequestT,
) -> ResponseT:
    """Call one VaultClient method as the agent behind this request."""
    identity = _identity(ctx)
    try:
        return await method(_vault(ctx), identity, request)
    except MemvaultError as error:
        raise ToolError(error.message) from None
