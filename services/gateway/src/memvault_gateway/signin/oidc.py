"""Owner sign-in through an OpenID Connect provider the homelab already runs.

Authorization code flow with PKCE, `state` and `nonce` kept server-side (single use, 10
minutes). The browser that starts a sign-in also gets `state` in a cookie, and the callback
needs it: without that, someone could start a sign-in with their own provider account and send
the callback URL to the owner, whose browser would then be signed in as them (login CSRF). The
code is exchanged with authlib's client and the ID token checked with joserfc
(signature against the provider's JWKS, issuer, audience, expiry, nonce). People are known by
(issuer, sub); their vault subject is `oidc:<sub>`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import secrets
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client  # type: ignore[import-untyped]
from authlib.oauth2.rfc7636 import create_s256_code_challenge  # type: ignore[import-untyped]
from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from memvault_gateway.auth import credentials, people, sessions
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.dashboard.i18n import N_, words_of
from memvault_gateway.web import pages
from memvault_gateway.web.http import HOME, origin_of, safe_next

log = logging.getLogger("memvault_gateway")

router = APIRouter()

DISCOVERY_CACHE_SECONDS = 3600
SIGN_IN_PAGE_WAIT_SECONDS = 3.0
"""How long the sign-in page waits for the provider's discovery document before naming its issuer instead."""
_ERROR_CODE = re.compile(r"[a-z_]{1,40}")
"""An OAuth error code (RFC 6749 4.1.2.1) the provider sent back, shown to the person; anything else is not."""
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")
LOGIN_STATE_LIFETIME = timedelta(minutes=10)
_CACHE_KEY = "oidc_discovery"


class SignInFailed(Exception):
    """The provider's answer could not be used; the message is safe to show."""


def callback_url(gw: Gateway) -> str:
    return f"{gw.issuer}/login/oidc/callback"


async def _get_json(gw: Gateway, url: str) -> dict[str, Any]:
    try:
        response = await gw.outbound.get(url, headers={"Accept": "application/json"})
    except httpx.HTTPError as error:
        raise SignInFailed(f"the identity provider did not answer ({type(error).__name__})") from None
    if response.status_code != 200:
        raise SignInFailed(f"the identity provider answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise SignInFailed("the identity provider's answer is not JSON") from None
    if not isinstance(data, dict):
        raise SignInFailed("the identity provider's answer is not a JSON object")
    return data


async def provider_metadata(gw: Gateway) -> dict[str, Any]:
    """The provider's discovery document (and its JWKS), cached for an hour."""
    cached = gw.cache.get(_CACHE_KEY)
    if isinstance(cached, tuple) and cached[0] > time.monotonic():
        metadata: dict[str, Any] = cached[1]
        return metadata
    issuer = gw.settings.oidc.issuer
    metadata = await _get_json(gw, f"{issuer}/.well-known/openid-configuration")
    if metadata.get("issuer", "").rstrip("/") != issuer:
        raise SignInFailed("the identity provider's discovery document names another issuer")
    for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(metadata.get(field), str):
            raise SignInFailed(f"the identity provider's discovery document has no {field}")
    metadata["_jwks"] = await _get_json(gw, metadata["jwks_uri"])
    gw.cache[_CACHE_KEY] = (time.monotonic() + DISCOVERY_CACHE_SECONDS, metadata)
    return metadata


NOT_AVAILABLE = N_("Not available")
NOT_SET_UP = N_("Single sign-on is not set up on this gateway.")


def _back(next_path: str = HOME) -> tuple[str, str]:
    """The link from a failed single sign-on back to the sign-in page, keeping where the person was going."""
    return ("/login" if next_path == HOME else f"/login?{urlencode({'next': next_path})}", N_("Back to sign in"))


def _csp_origin(url: str) -> str | None:
    """The origin of `url` if it is a plain http(s) origin that can go into a CSP header unchanged."""
    origin = origin_of(url) if urlsplit(url).scheme in ("http", "https") else ""
    return origin if _ORIGIN.match(origin) else None


async def sign_in_form_targets(gw: Gateway) -> list[str]:
    """Where the sign-in page's single sign-on button may lead: its CSP `form-action` beside 'self'.

    Browsers apply `form-action` to the redirects that follow a form post too, so without the
    provider's authorization endpoint Chromium blocks the redirect to it and the button seems to do
    nothing. The endpoint comes from the cached discovery document; when the provider cannot tell
    us now, its issuer's origin (where almost every provider keeps that endpoint), so the page
    never waits long for a provider the person may not use.
    """
    if not gw.settings.oidc.enabled:
        return []
    try:
        async with asyncio.timeout(SIGN_IN_PAGE_WAIT_SECONDS):
            metadata = await provider_metadata(gw)
        endpoint = _csp_origin(metadata["authorization_endpoint"])
    except (SignInFailed, TimeoutError):
        endpoint = None
    origin = endpoint or _csp_origin(gw.settings.oidc.issuer)
    return [origin] if origin else []


def _check_id_token(gw: Gateway, metadata: dict[str, Any], id_token: str, nonce: str) -> dict[str, Any]:
    settings = gw.settings.oidc
    algorithms = [a for a in metadata.get("id_token_signing_alg_values_supported", ["RS256"]) if a != "none"]
    try:
        keys = KeySet.import_key_set(metadata["_jwks"])
        token = jwt.decode(id_token, keys, algorithms=algorithms or ["RS256"])
        jwt.JWTClaimsRegistry(
            leeway=60,
            iss={"essential": True, "value": metadata["issuer"]},
            aud={"essential": True, "value": settings.client_id},
            sub={"essential": True},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        ).validate(token.claims)
    except (JoseError, ValueError, KeyError, TypeError) as error:
        log.warning("ID token refused", extra={"error": type(error).__name__})
        raise SignInFailed("the identity provider's ID token did not check out") from None
    claims: dict[str, Any] = token.claims
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != settings.client_id:
        raise SignInFailed("the ID token was issued to another application")
    return claims


@router.post("/login/oidc")
async def start(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Send the browser to the identity provider."""
    words = words_of(request)
    if not gw.settings.oidc.enabled:
        return pages.message(NOT_AVAILABLE, NOT_SET_UP, 404, words=words)
    form = await request.form()
    if not sessions.same_origin(gw, request):
        return pages.message(N_("Request refused"), sessions.CROSS_SITE, 403, link=_back(), words=words)
    if not sessions.login_csrf_ok(gw, request, str(form.get("csrf_token") or "")):
        return pages.message(
            N_("Request refused"), N_("The sign-in form expired; try again."), 403, link=_back(), words=words
        )
    try:
        metadata = await provider_metadata(gw)
    except SignInFailed as error:
        return pages.message(
            N_("Sign-in unavailable"),
            N_("Single sign-on cannot be used right now: %(reason)s. Try again in a moment."),
            502,
            link=_back(safe_next(str(form.get("next") or ""))),
            words=words,
            values={"reason": str(error)},
        )
    state = secrets.token_urlsafe(32)
    nonce = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)
    await gw.store.create_login_state(
        credentials.token_hash(state), nonce, verifier, safe_next(str(form.get("next") or "")), LOGIN_STATE_LIFETIME
    )
    query = {
        "response_type": "code",
        "client_id": gw.settings.oidc.client_id,
        "redirect_uri": callback_url(gw),
        "scope": gw.settings.oidc.scopes,
        "state": state,
        "nonce": nonce,
        "code_challenge": create_s256_code_challenge(verifier),
        "code_challenge_method": "S256",
    }
    response = RedirectResponse(f"{metadata['authorization_endpoint']}?{urlencode(query)}", status_code=303)
    lifetime = int(LOGIN_STATE_LIFETIME.total_seconds())
    sessions.set_cookie(gw, response, sessions.oidc_state_cookie(gw), state, lifetime)
    return response


@router.get("/login/oidc/callback")
async def callback(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """The provider sends the browser back here with a code; sign the person in."""
    response = await _finish_sign_in(request, gw)
    sessions.clear_cookie(gw, response, sessions.oidc_state_cookie(gw))
    return response


async def _finish_sign_in(request: Request, gw: Gateway) -> Response:
    settings = gw.settings.oidc
    words = words_of(request)
    if not settings.enabled:
        return pages.message(NOT_AVAILABLE, NOT_SET_UP, 404, words=words)
    state = request.query_params.get("state", "")
    started_here = request.cookies.get(sessions.oidc_state_cookie(gw), "")
    if not state or not hmac.compare_digest(started_here.encode(), state.encode()):
        return pages.message(
            N_("Sign-in refused"),
            N_(
                "This sign-in was not started in this browser, or it took too long. "
                "Open the sign-in page here and start again."
            ),
            403,
            link=_back(),
            words=words,
        )
    found = await gw.store.take_login_state(credentials.token_hash(state)) if state and len(state) < 200 else None
    if found is None:
        return pages.message(
            N_("Sign-in expired"),
            N_("This sign-in attempt is unknown or too old; start again."),
            400,
            link=_back(),
            words=words,
        )
    nonce, verifier, next_path = found
    if "error" in request.query_params or "code" not in request.query_params:
        code = request.query_params.get("error", "")
        said = f" ({code})" if _ERROR_CODE.fullmatch(code) else ""
        return pages.message(
            N_("Not signed in"),
            N_("The identity provider did not sign you in%(said)s. Start again if you meant to sign in."),
            401,
            link=_back(next_path),
            words=words,
            values={"said": said},
        )
    try:
        metadata = await provider_metadata(gw)
        if "iss" in request.query_params and request.query_params["iss"] != metadata["issuer"]:
            raise SignInFailed("the answer came from another identity provider")
        secret = settings.client_secret.get_secret_value()
        async with AsyncOAuth2Client(
            client_id=settings.client_id,
            client_secret=secret or None,
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            timeout=10.0,
        ) as client:
            try:
                tokens = await client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=request.query_params["code"],
                    redirect_uri=callback_url(gw),
                    code_verifier=verifier,
                )
            except Exception as error:  # authlib raises several unrelated types for a refused exchange
                log.warning("OIDC code exchange failed", extra={"error": type(error).__name__})
                raise SignInFailed("the identity provider refused the sign-in code") from None
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed("the identity provider sent no ID token")
        claims = _check_id_token(gw, metadata, id_token, nonce)
    except SignInFailed as error:
        return pages.message(
            N_("Sign-in failed"),
            N_(
                "memvault could not sign you in: %(reason)s. Try again; if it keeps failing, the gateway's log says why."
            ),
            401,
            link=_back(next_path),
            words=words,
            values={"reason": str(error)},
        )

    display = str(claims.get("name") or claims.get("preferred_username") or claims.get("email") or "")[:200]
    user = await people.external_user(
        gw, settings.issuer, str(claims["sub"]), prefix="oidc", display_name=display, create=settings.create_accounts
    )
    if user is None:
        return pages.message(
            N_("No account"),
            N_("You signed in, but there is no memvault account for you; ask the administrator."),
            403,
            words=words,
        )
    await people.ensure_vault_account(gw, user)
    await sessions.start_session(gw, request, user, "oidc")
    return RedirectResponse(next_path, status_code=303)
