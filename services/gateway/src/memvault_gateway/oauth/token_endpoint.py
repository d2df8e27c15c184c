"""The token endpoint (authorization code with PKCE, refresh with rotation) and revocation (RFC 7009)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import credentials, scopes
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.oauth.clients import (
    GRANT_TYPES,
    ClientAuthError,
    authenticate_client,
    grant_types_of,
    replaces_earlier_grants,
)
from memvault_gateway.oauth.resources import canonical_resource
from memvault_gateway.store import Grant, NewToken
from memvault_gateway.web.http import NO_STORE, oauth_error
from memvault_gateway.web.throttle import limited

log = logging.getLogger("memvault_gateway")

router = APIRouter()

REPLACED = "replaced by a new approval"


async def issue_tokens(
    gw: Gateway,
    grant: Grant,
    resource: str,
    granted: tuple[str, ...],
    *,
    refresh_token: bool,
    replaces_earlier: bool = False,
) -> JSONResponse:
    """A fresh access token under `grant`, and a refresh token if the client registered that grant.

    With `replaces_earlier`, the owner's other grants to this app end in the same transaction.
    """
    access = credentials.new_token(credentials.ACCESS_TOKEN)
    lifetime = gw.settings.oauth.access_token_seconds
    tokens = [NewToken(credentials.token_hash(access), "access", resource, granted, timedelta(seconds=lifetime))]
    body: dict[str, Any] = {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": lifetime,
        "scope": " ".join(granted),
    }
    if refresh_token:
        refresh = credentials.new_token(credentials.REFRESH_TOKEN)
        days = timedelta(days=gw.settings.oauth.refresh_token_days)
        tokens.append(NewToken(credentials.token_hash(refresh), "refresh", resource, granted, days))
        body["refresh_token"] = refresh
    replaced = await gw.store.create_tokens(grant, tokens, replace_reason=REPLACED if replaces_earlier else None)
    if replaced is None:
        return oauth_error("invalid_grant", "the grant was revoked")
    if replaced:
        subject = await _subject_of(gw, grant)
        for old in replaced:
            await _audit(gw, subject, "grant.revoke", old, {"kind": old.kind, "reason": REPLACED})
    return JSONResponse(body, headers=NO_STORE)


async def _audit(gw: Gateway, subject: str, action: str, grant: Grant, details: dict[str, str]) -> None:
    try:
        await gw.vault.audit(subject, action, target=grant.id, details={"client": grant.name, **details})
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": action, "error": error.kind})


async def _subject_of(gw: Gateway, grant: Grant) -> str:
    user = await gw.store.user_by_id(grant.user_id)
    return user.subject if user else ""


@router.post("/token", dependencies=[Depends(limited("token"))])
async def token(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    form = await request.form()
    try:
        client = await authenticate_client(gw, request, form)
    except ClientAuthError as error:
        return error.response()
    grant_type = form.get("grant_type")
    registered = grant_types_of(client)
    if grant_type in GRANT_TYPES and grant_type not in registered:
        return oauth_error("unauthorized_client", f"this client did not register the {grant_type} grant type")

    if grant_type == "authorization_code":
        code = str(form.get("code") or "")
        found = await gw.store.take_code(credentials.token_hash(code)) if code else None
        if found is None:
            return oauth_error("invalid_grant", "the authorization code is unknown")
        if found.used:
            # A second use means the code leaked: end everything issued from it.
            revoked = await gw.store.revoke_grant(found.grant.id, "authorization code used twice")
            if revoked:
                await _audit(gw, await _subject_of(gw, revoked), "grant.revoke", revoked, {"reason": "code reuse"})
            return oauth_error("invalid_grant", "the authorization code was already used")
        if found.expired:
            return oauth_error("invalid_grant", "the authorization code has expired; authorize again")
        if found.client_id != client.client_id:
            return oauth_error("invalid_grant", "the authorization code was issued to another client")
        if str(form.get("redirect_uri") or found.redirect_uri) != found.redirect_uri:
            return oauth_error("invalid_grant", "redirect_uri differs from the one used to authorize")
        if not credentials.pkce_matches(str(form.get("code_verifier") or ""), found.code_challenge):
            return oauth_error("invalid_grant", "code_verifier does not match the code_challenge")
        requested_resource = form.get("resource")
        if requested_resource is not None and canonical_resource(gw, str(requested_resource)) != found.resource:
            return oauth_error("invalid_target", "resource differs from the one used to authorize")
        if found.grant.revoked_at is not None:
            return oauth_error("invalid_grant", "the grant was revoked")
        return await issue_tokens(
            gw,
            found.grant,
            found.resource,
            found.scopes,
            refresh_token="refresh_token" in registered,
            replaces_earlier=replaces_earlier_grants(client),
        )

    if grant_type == "refresh_token":
        presented = str(form.get("refresh_token") or "")
        token_hash = credentials.token_hash(presented)
        record = await gw.store.token(token_hash) if presented else None
        if record is None or record.kind != "refresh" or record.grant.client_id != client.client_id:
            return oauth_error("invalid_grant", "the refresh token is unknown")
        if record.used or not await gw.store.use_refresh_token(token_hash):
            # Refresh tokens are good once. A replay means one leaked: end the whole grant.
            revoked = await gw.store.revoke_grant(record.grant.id, "refresh token used twice")
            if revoked:
                await _audit(gw, record.subject, "grant.revoke", revoked, {"reason": "refresh token reuse"})
            return oauth_error("invalid_grant", "the refresh token was already used; authorize again")
        if not record.usable:
            return oauth_error("invalid_grant", "the refresh token has expired or was revoked; authorize again")
        granted = record.scopes
        if form.get("scope") is not None:
            asked = scopes.parse(str(form.get("scope")))
            if not asked or not set(asked) <= set(record.scopes):
                return oauth_error("invalid_scope", "a refresh can keep or narrow the scopes, never widen them")
            granted = asked
        requested_resource = form.get("resource")
        if requested_resource is not None and canonical_resource(gw, str(requested_resource)) != record.resource:
            return oauth_error("invalid_target", "resource differs from the one this grant is for")
        return await issue_tokens(gw, record.grant, record.resource, granted, refresh_token=True)

    return oauth_error("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")


@router.post("/revoke")
async def revoke(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """RFC 7009. Revoking a refresh token ends the whole grant; an access token, just itself."""
    form = await request.form()
    try:
        client = await authenticate_client(gw, request, form)
    except ClientAuthError as error:
        return error.response()
    presented = str(form.get("token") or "")
    if not presented:
        return oauth_error("invalid_request", "token is required")
    token_hash = credentials.token_hash(presented)
    record = await gw.store.token(token_hash)
    if record is not None and record.grant.client_id == client.client_id:
        if record.kind == "refresh":
            revoked = await gw.store.revoke_grant(record.grant.id, "revoked by the client")
            if revoked:
                await _audit(gw, record.subject, "grant.revoke", revoked, {"reason": "client revoked its token"})
        else:
            await gw.store.revoke_token(token_hash)
    # The answer is the same whether or not the token existed (RFC 7009 §2.2).
    return Response(status_code=200, headers=NO_STORE)
