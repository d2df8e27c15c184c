"""/mcp: check Origin and the access token, then forward to the mcp service with a signed identity.

The agent's token stops here. The mcp service gets only the short-lived internal identity
(subject, client name, scopes, vaults) and forwards nothing that identifies the token.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx
from fastapi import APIRouter, Depends, Request, Response

from memvault_core.identity import SCOPES
from memvault_gateway import bearer, proxy, scopes
from memvault_gateway.bearer import BearerError, Principal
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.settings import LOOPBACK_NAMES
from memvault_gateway.web import is_loopback_request, problem

log = logging.getLogger("memvault_gateway")

router = APIRouter()


def dev_mode_usable(gw: Gateway) -> bool:
    """Dev mode only ever applies when the gateway's public URL is a loopback address."""
    settings = gw.settings.gateway
    return settings.dev_mode and (urlsplit(settings.public_url).hostname or "") in LOOPBACK_NAMES


def origin_allowed(gw: Gateway, origin: str) -> bool:
    allowed = {gw.origin, *(o.rstrip("/") for o in gw.settings.gateway.allowed_origins)}
    if origin.rstrip("/") in allowed:
        return True
    return dev_mode_usable(gw) and (urlsplit(origin).hostname or "") in LOOPBACK_NAMES


@router.api_route("/mcp", methods=["GET", "POST", "DELETE"])
async def mcp(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    origin = request.headers.get("origin")
    if origin is not None and not origin_allowed(gw, origin):
        return problem(403, "Forbidden origin", f"requests from origin {origin[:100]!r} are not allowed")
    try:
        token = bearer.bearer_token(request)
        if token is not None:
            principal = await bearer.verify(gw, token, gw.mcp_resource)
        elif dev_mode_usable(gw) and is_loopback_request(request):
            principal = Principal(subject=gw.settings.gateway.dev_subject, client="", scopes=SCOPES, vaults=())
        else:
            raise BearerError(401, None, "sign in: this endpoint needs an OAuth access token")
        try:
            body = await proxy.read_body(request)
        except proxy.BodyTooLarge:
            return problem(413, "Request too large", "the request body is over the gateway's limit (max_request_bytes)")
        needed = scopes.needed_for_mcp_body(body)
        if not scopes.satisfies(principal.scopes, needed):
            raise BearerError(
                403,
                "insufficient_scope",
                f"this call needs the '{needed}' scope; the connection has: {' '.join(principal.scopes) or 'none'}",
                scope=" ".join(sorted({*principal.scopes, needed}, key=SCOPES.index)),
            )
    except BearerError as error:
        return error.response(gw, gw.mcp_resource)

    if principal.grant_id:
        await gw.store.touch_grant(principal.grant_id)
    try:
        identity = gw.signer.sign(principal.identity())
        return await proxy.forward(gw.upstream, gw.settings.gateway.mcp_url, request, body, identity)
    except httpx.HTTPError as error:
        log.warning("mcp service unreachable", extra={"error": type(error).__name__})
        return problem(503, "MCP service unavailable", "the mcp service did not answer; try again shortly")
