"""OAuth scopes and which MCP tools need which.

`admin` implies `write`, which implies `read` (the vault checks the same hierarchy). The vault
is the authority on what a call may do; the gateway checks the tool's scope up front so an agent
hears `403 insufficient_scope` (and can ask for more), with a JSON-RPC error saying which scope is
missing and who grants it, instead of a failed tool call. The mcp service lists only the tools a
connection's scopes allow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from memvault_core.identity import SCOPES

DEFAULT_SCOPES = ("read", "write")
"""What an app asking for nothing in particular is offered on the consent page."""

_IMPLIED_BY = {"read": {"read", "write", "admin"}, "write": {"write", "admin"}, "admin": {"admin"}}

WRITE_TOOLS = frozenset(
    {
        "remember",
        "propose_memory",
        "bulk_remember",
        "forget",
        "supersede",
        "invalidate",
        "track_source",
        "sources",
        "archive_write",
    }
)
"""MCP tools that change memories; every other tool needs only `read`."""


def parse(scope: str | None) -> tuple[str, ...]:
    """The known scopes in a space-separated `scope` parameter, in canonical order; unknown ones are dropped."""
    asked = set((scope or "").split())
    return tuple(s for s in SCOPES if s in asked)


def satisfies(held: Iterable[str], needed: str) -> bool:
    return bool(set(held) & _IMPLIED_BY[needed])


def closure(scopes: Iterable[str]) -> tuple[str, ...]:
    """Every scope the given ones imply, so `write` alone also reads."""
    held = set(scopes)
    return tuple(s for s in SCOPES if satisfies(held, s))


def write_call_in(body: bytes) -> tuple[str, object] | None:
    """The (tool name, JSON-RPC id) of the first tools/call of a writing tool in a request body, if any."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # deep nesting: the mcp service answers -32700
        return None
    messages = message if isinstance(message, list) else [message]
    for item in messages:
        if not isinstance(item, dict) or item.get("method") != "tools/call":
            continue
        params = item.get("params")
        if isinstance(params, dict) and params.get("name") in WRITE_TOOLS:
            return str(params["name"]), item.get("id")
    return None
