"""/mcp: check Host, Origin and the access token, then forward to the mcp service with a signed identity.

The agent's token stops here. The mcp service gets only the short-lived internal identity
(subject, client name, scopes, vaults) and forwards nothing that identifies the token.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from memvault_core import limits
from memvault_core.identity import SCOPES, missing_scope_message
from memvault_gateway.auth import bearer, scopes
from memvault_gateway.auth.bearer import BearerError, Principal
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.mcp_edge import forward, signposts
from memvault_gateway.settings import LOOPBACK_NAMES, is_loopback_host
from memvault_gateway.web.body_limit import declared_size, request_too_large
from memvault_gateway.web.http import is_loopback_request, problem

log = logging.getLogger("memvault_gateway")

router = APIRouter()

INSUFFICIENT_SCOPE = -32003
"""The JSON-RPC error code of a call the connection's scopes do not allow (a server-defined code)."""
INVALID_REQUEST = -32600
"""JSON-RPC's code for a request the server will not take as sent (here: too large)."""


def origin_allowed(gw: Gateway, origin: str) -> bool:
    allowed = {gw.origin, *(o.rstrip("/") for o in gw.settings.gateway.allowed_origins)}
    if origin.rstrip("/") in allowed:
        return True
    return gw.dev_mode_usable and (urlsplit(origin).hostname or "") in LOOPBACK_NAMES


def host_allowed(gw: Gateway, host: str) -> bool:
    """The Host header names this gateway: the public URL's host and port (any loopback name when that
    host is loopback), or one of `extra_hosts`. Anything else may be a rebinding attacker's name."""
    public = urlsplit(gw.settings.gateway.public_url)
    default_port = 443 if public.scheme == "https" else 80
    try:
        asked = urlsplit(f"//{host}")
        name, port = (asked.hostname or ""), asked.port
    except ValueError:
        return False
    if not name or asked.path or asked.username is not None:
        return False
    public_name = public.hostname or ""
    same_name = name == public_name or (is_loopback_host(public_name) and is_loopback_host(name))
    if same_name and (port or default_port) == (public.port or default_port):
        return True
    for entry in gw.settings.gateway.extra_hosts:
        extra = urlsplit(f"//{entry}")
        if extra.hostname == name and (extra.port is None or extra.port == (port or default_port)):
            return True
    return False


def _scope_refusal(gw: Gateway, principal: Principal, tool: str, request_id: object, needed: str) -> Response:
    """403 insufficient_scope (clients that step up ask the owner for more) with a JSON-RPC error body,
    which the MCP SDKs pass on to the agent, saying what is missing and who can grant it."""
    held = " ".join(principal.scopes) or "none"
    message = missing_scope_message(tool, needed, principal.scopes)
    challenge = BearerError(
        403,
        "insufficient_scope",
        f"this call needs the '{needed}' scope; the connection has: {held}",
        scope=" ".join(sorted({*principal.scopes, needed}, key=SCOPES.index)),
    ).response(gw, gw.mcp_resource)
    error = {"code": INSUFFICIENT_SCOPE, "message": message, "data": {"required_scope": needed, "scopes": held}}
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": error},
        status_code=403,
        headers={"WWW-Authenticate": challenge.headers["www-authenticate"]},
    )


def _too_large(request: Request) -> Response:
    """413 with a JSON-RPC error body, which the MCP SDKs hand to the agent as the call's error: the
    vault's REQUEST_TOO_LARGE refusal, its code and suggested share of items in `data`. The body was not
    read, so the id is null (the client puts its own request's id back)."""
    size = declared_size(request.headers)
    message, data = request_too_large(size if size is not None and size > limits.MAX_REQUEST_BYTES else None)
    error = {"code": INVALID_REQUEST, "message": message, "data": data}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=413)


@router.api_route("/mcp", include_in_schema=False, methods=["GET", "POST", "DELETE"])
async def mcp(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    host = request.headers.get("host", "")
    if not host_allowed(gw, host):
        return signposts.wrong_host(request, gw.issuer, host)
    if request.method == "GET" and signposts.wants_html(request):
        return signposts.mcp_endpoint(gw.issuer)
    origin = request.headers.get("origin")
    if origin is not None and not origin_allowed(gw, origin):
        return problem(403, "Forbidden origin", f"requests from origin {origin[:100]!r} are not allowed")
    try:
        token = bearer.bearer_token(request)
        if token is not None:
            principal = await bearer.verify(gw, token, gw.mcp_resource)
        elif gw.dev_mode_usable and is_loopback_request(request):
            principal = Principal(subject=gw.settings.gateway.dev_subject, client="", scopes=SCOPES, vaults=())
        else:
            raise BearerError(401, None, "sign in: this endpoint needs an OAuth access token")
        try:
            body = await forward.read_body(request)
        except forward.BodyTooLarge:
            return _too_large(request)
        write_call = scopes.write_call_in(body)
        if write_call is not None and not scopes.satisfies(principal.scopes, "write"):
            return _scope_refusal(gw, principal, write_call[0], write_call[1], "write")
    except BearerError as error:
        return error.response(gw, gw.mcp_resource)

    if principal.grant_id:
        await gw.store.touch_grant(principal.grant_id)
    try:
        identity = gw.signer.sign(principal.identity())
        return await forward.forward(gw.upstream, gw.settings.gateway.mcp_url, request, body, identity)
    except httpx.HTTPError as error:
        log.warning("mcp service unreachable", extra={"error": type(error).__name__})
        return problem(503, "MCP service unavailable", "the mcp service did not answer; try again shortly")
