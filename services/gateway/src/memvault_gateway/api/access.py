"""Who calls /api/v1: `principal` accepts the owner's browser session, or a bearer token meant for the
API (a service token, or an OAuth token issued for `<public_url>/api/v1`). `owner_session` is the
stricter dependency of management calls: a browser session, with its CSRF token on changes."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import Response

from memvault_core.errors import NotFound, PermissionDenied, Unauthenticated
from memvault_core.identity import SCOPES
from memvault_gateway.auth import bearer, sessions
from memvault_gateway.auth.bearer import BearerError, Principal
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.store import Session

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_HEADER = "x-csrf-token"


async def owner_session(request: Request, gw: Gateway = Depends(gateway)) -> Session:  # noqa: B008
    """The signed-in owner; state-changing calls must also carry the session's CSRF token."""
    session = await sessions.current_session(gw, request)
    if session is None:
        raise Unauthenticated("sign in first (this call needs a browser session)")
    if request.method not in SAFE_METHODS and not sessions.csrf_ok(
        gw, request, session, request.headers.get(CSRF_HEADER)
    ):
        raise PermissionDenied("missing or wrong X-CSRF-Token header; read it from GET /api/v1/me")
    return session


async def principal(request: Request, gw: Gateway = Depends(gateway)) -> Principal:  # noqa: B008
    """Whoever calls an /api/v1 route: a bearer token for the API, or the owner's session."""
    try:
        token = bearer.bearer_token(request)
        if token is not None:
            return await bearer.verify(gw, token, gw.api_resource)
    except BearerError as error:
        raise ApiAuthError(error) from None
    session = await owner_session(request, gw)
    return Principal(subject=session.user.subject, client="", scopes=SCOPES, vaults=())


class ApiAuthError(Exception):
    def __init__(self, error: BearerError) -> None:
        super().__init__(error.description)
        self.error = error


def api_auth_error_response(gw: Gateway, error: ApiAuthError) -> Response:
    return error.error.response(gw, gw.api_resource)


SessionDep = Annotated[Session, Depends(owner_session)]
GatewayDep = Annotated[Gateway, Depends(gateway)]

Caller = Annotated[Principal, Depends(principal)]


VISIBLE_VAULTS_SECONDS = 30.0
"""How long the names of the vaults a caller can use are kept for the check of each /api/v1 vault route.
Only a vault found among them is taken on trust: one not found is asked of the vault service again,
so a vault created or shared a moment ago is found at once. A vault taken away meanwhile still passes
this check for up to this long; the vault service then refuses the call itself, with the same 404."""
_VISIBLE_KEY = "api.visible_vaults"
_VISIBLE_CALLERS = 10_000


async def visible_vault(vault: str, caller: Caller, gw: GatewayDep) -> str:
    """The vault in the path, if the caller can use it; checked before the body, so a vault that is not
    theirs gets the same 404 as one that does not exist, whatever they sent. The names come from the
    vault service (ListVaults), kept per caller for VISIBLE_VAULTS_SECONDS: a round trip saved on most
    calls."""
    identity = caller.identity()
    kept = gw.cache.setdefault(_VISIBLE_KEY, {})
    assert isinstance(kept, dict)
    now = time.monotonic()
    known = kept.get(identity)
    if known is not None and known[0] > now and vault in known[1]:
        return vault
    usable = [v.name for v in await gw.vault.vaults_as(identity)]
    kept.pop(identity, None)
    kept[identity] = (now + VISIBLE_VAULTS_SECONDS, frozenset(usable))
    while len(kept) > _VISIBLE_CALLERS:
        kept.pop(next(iter(kept)))
    if vault not in usable:
        raise NotFound(
            f"no vault named {vault[:64]!r} is open to you; your vaults: {', '.join(usable) or '(none)'}", field="vault"
        )
    return vault


Vault = Annotated[str, Depends(visible_vault)]
