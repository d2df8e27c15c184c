"""The resources (audiences) this authorization server issues tokens for: the MCP endpoint and the JSON API."""

from __future__ import annotations

from memvault_gateway.context import Gateway


def canonical_resource(gw: Gateway, resource: str | None) -> str | None:
    """The resource a token is for: ours (MCP by default) or None when it names anything else."""
    if not resource:
        return gw.mcp_resource
    trimmed = resource.rstrip("/")
    return trimmed if trimmed in (gw.mcp_resource, gw.api_resource) else None
