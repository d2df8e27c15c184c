"""/authorize: check the request, ask the signed-in owner, and answer with a code (PKCE S256 only).

Errors about the client or its redirect URI are shown here and never redirected (the redirect
target is not trusted yet); every other error goes back to the app with `state` and `iss`
(RFC 9207). The consent form carries the original parameters and is checked again on submit.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.datastructures import FormData

from memvault_core.errors import MemvaultError
from memvault_core.identity import SCOPES
from memvault_gateway.auth import credentials, people, scopes, sessions
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.oauth import metadata_documents
from memvault_gateway.oauth.clients import replaces_earlier_grants, resolve_client
from memvault_gateway.oauth.redirects import host_of, redirect_uri_matches
from memvault_gateway.oauth.resources import canonical_resource
from memvault_gateway.settings import is_loopback_host
from memvault_gateway.store import Client, User
from memvault_gateway.web import pages
from memvault_gateway.web.http import with_query
from memvault_gateway.web.throttle import limited, peer_of

log = logging.getLogger("memvault_gateway")

router = APIRouter()

PARAMS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "code_challenge",
    "code_challenge_method",
    "scope",
    "resource",
)
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")
MAX_STATE_CHARS = 1000
STALE_PAGE = "This page was opened before you last signed in, so nothing was done. Check your choices and decide again."


class Refusal(Exception):
    """A request that cannot be sent back to the app: shown to the person instead."""


class ErrorRedirect(Exception):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


@dataclass(frozen=True)
class AuthorizationRequest:
    client: Client
    redirect_uri: str
    state: str | None
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]
    params: dict[str, str]


def _redirect(gw: Gateway, redirect_uri: str, state: str | None, params: dict[str, str]) -> str:
    answer = dict(params)
    if state is not None:
        answer["state"] = state
    answer["iss"] = gw.issuer
    return with_query(redirect_uri, answer)


async def parse(gw: Gateway, raw: dict[str, str], peer: str) -> AuthorizationRequest:
    client_id = raw.get("client_id", "")
    if metadata_documents.is_metadata_document_url(client_id) and not gw.settings.oauth.metadata_documents:
        raise Refusal(
            "This app identifies itself by a web address (a client ID metadata document), which this gateway does"
            " not accept (MEMVAULT_OAUTH__METADATA_DOCUMENTS=false). The app should register itself instead:"
            " remove its stored sign-in for this server and connect again."
        )
    try:
        client = await resolve_client(gw, client_id, peer)
    except metadata_documents.DocumentUnreachable as error:
        raise Refusal(
            f"This app's description could not be fetched from its web address: {error}. If this gateway cannot"
            " reach the internet, its operator sets MEMVAULT_OAUTH__METADATA_DOCUMENTS=false so that apps register"
            " themselves instead; then connect the app again."
        ) from None
    except metadata_documents.MetadataDocumentError as error:
        raise Refusal(f"This app's description could not be used: {error}.") from None
    if client is None:
        raise Refusal("This app is not registered here (unknown client_id). Ask it to connect again.")
    redirect_uri = raw.get("redirect_uri")
    if redirect_uri is None:
        if len(client.redirect_uris) != 1:
            raise Refusal("The app did not say where to return to (redirect_uri is missing).")
        redirect_uri = client.redirect_uris[0]
    elif not any(redirect_uri_matches(redirect_uri, known) for known in client.redirect_uris):
        raise Refusal("The app asked to return to an address it did not register (redirect_uri mismatch).")
    state = raw.get("state")
    if state is not None and len(state) > MAX_STATE_CHARS:
        raise Refusal("The request's state parameter is too long.")

    def fail(error: str, description: str) -> ErrorRedirect:
        return ErrorRedirect(_redirect(gw, redirect_uri, state, {"error": error, "error_description": description}))

    if raw.get("response_type") != "code":
        raise fail("unsupported_response_type", "response_type must be code")
    challenge = raw.get("code_challenge", "")
    if not challenge:
        raise fail("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
    if raw.get("code_challenge_method") != "S256":
        raise fail("invalid_request", "code_challenge_method must be S256")
    if not _CHALLENGE.match(challenge):
        raise fail("invalid_request", "code_challenge must be 43 base64url characters (S256)")
    resource = canonical_resource(gw, raw.get("resource"))
    if resource is None:
        raise fail("invalid_target", f"resource must be {gw.mcp_resource}")
    asked = scopes.parse(raw.get("scope"))
    if raw.get("scope") and not asked and not set(raw["scope"].split()) <= {"offline_access", "openid"}:
        raise fail("invalid_scope", "scope may contain read, write and admin")
    params = {k: raw[k] for k in PARAMS if k in raw}
    params["redirect_uri"] = redirect_uri
    return AuthorizationRequest(client, redirect_uri, state, challenge, resource, asked, params)


async def _approve(
    gw: Gateway,
    request_: AuthorizationRequest,
    user: User,
    chosen_scopes: tuple[str, ...],
    vaults: list[str],
    status: int = 303,
) -> RedirectResponse:
    grant = await gw.store.create_grant(
        user.id,
        kind="oauth",
        client_id=request_.client.client_id,
        name=request_.client.client_name,
        scopes=chosen_scopes,
        vaults=vaults,
    )
    code = credentials.new_token(credentials.AUTHORIZATION_CODE)
    await gw.store.create_code(
        credentials.token_hash(code),
        grant.id,
        client_id=request_.client.client_id,
        redirect_uri=request_.redirect_uri,
        code_challenge=request_.code_challenge,
        resource=request_.resource,
        scopes=chosen_scopes,
        valid_for=timedelta(seconds=gw.settings.oauth.authorization_code_seconds),
    )
    await _audit(
        gw,
        user,
        "grant.create",
        grant.id,
        {
            "client": request_.client.client_name,
            "client_id": request_.client.client_id[:200],
            "scopes": " ".join(chosen_scopes),
            "vaults": ",".join(vaults),
        },
    )
    log.info("grant created", extra={"grant_id": grant.id, "client_id": request_.client.client_id[:200]})
    return RedirectResponse(_redirect(gw, request_.redirect_uri, request_.state, {"code": code}), status_code=status)


async def _audit(gw: Gateway, user: User, action: str, target: str, details: dict[str, str]) -> None:
    try:
        await gw.vault.audit(user.subject, action, target=target, details=details)
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": action, "error": error.kind})


async def _auto_approve(gw: Gateway, request_: AuthorizationRequest) -> Response:
    subject = gw.settings.gateway.test_auto_approve_subject
    user = await gw.store.user_by_subject(subject)
    if user is None:
        user = await gw.store.create_user(subject, username=None, display_name=subject)
        user = user or await gw.store.user_by_subject(subject)
    if user is None or user.disabled:
        return pages.message("Cannot connect this app", "The auto-approve account is disabled.", 403)
    await people.ensure_vault_account(gw, user)
    vaults = [v.name for v in await gw.vault.vaults(user.subject)]
    log.warning("authorization approved automatically (test setting)", extra={"subject": subject})
    return await _approve(gw, request_, user, request_.scopes or scopes.DEFAULT_SCOPES, vaults, status=302)


async def _consent_page(
    gw: Gateway,
    request_: AuthorizationRequest,
    user: User,
    csrf: str,
    error: str = "",
    status: int = 200,
    chosen: tuple[list[str], list[str]] | None = None,
) -> Response:
    vaults = await gw.vault.vaults(user.subject)
    current = [
        g for g in await gw.store.grants_of(user.id) if g.kind == "oauth" and g.client_id == request_.client.client_id
    ]
    redirect = urlsplit(request_.redirect_uri)
    redirect_origin = (
        f"{redirect.scheme}://{redirect.netloc}" if redirect.scheme in ("http", "https") else f"{redirect.scheme}:"
    )
    verified = request_.client.kind == "metadata_document" and urlsplit(request_.client.client_id).hostname == (
        redirect.hostname
    )
    response = pages.consent(
        client_name=request_.client.client_name,
        client_id=request_.client.client_id,
        redirect_host=host_of(request_.redirect_uri),
        redirect_origin=redirect_origin,
        verified_host=verified,
        loopback=redirect.scheme == "http" and is_loopback_host(redirect.hostname or ""),
        private_scheme="" if redirect.scheme in ("http", "https") else redirect.scheme,
        user_name=user.display_name or user.username or user.subject,
        vaults=[pages.VaultChoice(v.name, v.role) for v in vaults],
        requested_scopes=request_.scopes or scopes.DEFAULT_SCOPES,
        current=[pages.CurrentAccess(g.scopes, g.vaults) for g in current],
        replaces_current=replaces_earlier_grants(request_.client),
        params=request_.params,
        csrf=csrf,
        error=error,
        chosen=chosen,
    )
    response.status_code = status
    return response


@router.get("/authorize", dependencies=[Depends(limited("authorize"))])
async def authorize(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    raw = {k: v for k, v in request.query_params.items() if k in PARAMS}
    try:
        request_ = await parse(gw, raw, peer_of(request))
    except Refusal as refusal:
        return pages.message("Cannot connect this app", str(refusal), 400)
    except ErrorRedirect as redirect:
        return RedirectResponse(redirect.url, status_code=302)
    if gw.settings.gateway.test_auto_approve_subject:
        return await _auto_approve(gw, request_)
    session = await sessions.current_session(gw, request)
    if session is None:
        target = "/authorize?" + urlencode(raw)
        return RedirectResponse("/login?" + urlencode({"next": target}), status_code=302)
    return await _consent_page(gw, request_, session.user, session.csrf_token)


def _choices(form: FormData, field: str) -> list[str]:
    return [str(v) for v in form.getlist(field)]


@router.post("/authorize", dependencies=[Depends(limited("authorize"))])
async def decide(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """The consent form's answer: Approve (with the chosen vaults and scopes) or Deny."""
    form = await request.form()
    raw = {k: str(form[k]) for k in PARAMS if k in form and k != "scope"}  # `scope` here is the ticked boxes
    if pages.REQUESTED_SCOPE_FIELD in form:
        raw["scope"] = str(form[pages.REQUESTED_SCOPE_FIELD])
    session = await sessions.current_session(gw, request)
    if session is None:
        # The session ended while the page was open (it expired, or the owner signed out in another tab):
        # sign in and decide again, while the app is still waiting. Nothing is decided without a session.
        return RedirectResponse("/login?" + urlencode({"next": "/authorize?" + urlencode(raw)}), status_code=303)
    token_ok = sessions.csrf_ok(gw, request, session, str(form.get("csrf_token") or ""))
    if not token_ok and not sessions.same_origin(gw, request):
        return pages.message("Request refused", sessions.CROSS_SITE, 403)
    try:
        request_ = await parse(gw, raw, peer_of(request))
    except Refusal as refusal:
        return pages.message("Cannot connect this app", str(refusal), 400)
    except ErrorRedirect as redirect:
        return RedirectResponse(redirect.url, status_code=303)
    user = session.user
    # Shown again, the page keeps what the owner ticked: a hurried second Approve grants nothing unticked.
    posted = (_choices(form, "vault"), _choices(form, "scope"))
    if not token_ok:
        # Our own page, opened before the owner last signed in: show it again rather than act on it.
        return await _consent_page(gw, request_, user, session.csrf_token, STALE_PAGE, status=400, chosen=posted)
    if form.get("decision") != "approve":
        await _audit(gw, user, "grant.deny", request_.client.client_id[:200], {"client": request_.client.client_name})
        denied = {"error": "access_denied", "error_description": "the owner denied access"}
        return RedirectResponse(_redirect(gw, request_.redirect_uri, request_.state, denied), status_code=303)
    held = {v.name for v in await gw.vault.vaults(user.subject)}
    vaults = sorted(set(_choices(form, "vault")) & held)
    chosen = tuple(s for s in SCOPES if s in set(_choices(form, "scope")))
    if not vaults or not chosen:
        error = "Choose at least one vault and at least one permission, or Deny."
        return await _consent_page(gw, request_, user, session.csrf_token, error, status=400, chosen=posted)
    return await _approve(gw, request_, user, chosen, vaults)
