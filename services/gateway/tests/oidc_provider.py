"""A small OpenID Connect provider for tests: one client, one signed-in user, RS256 ID tokens.

`/authorize` approves at once (the user is 'already signed in at the IdP'), or, with `page`, shows
a page of its own whose Continue button approves and Cancel refuses (what a person sees at Authelia or Keycloak).
Knobs let a test make the provider misbehave: a wrong nonce, a foreign audience, a key the JWKS
does not list.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route


@dataclass
class OidcProvider:
    issuer: str
    client_id: str = "memvault"
    client_secret: str = "idp-client-secret-" + "y" * 20
    user: dict[str, Any] = field(default_factory=lambda: {"sub": "u-1", "name": "Carol", "email": "carol@home.lan"})
    wrong_nonce: bool = False
    foreign_audience: bool = False
    unknown_key: bool = False
    authorization_origin: str = ""
    page: bool = False
    """Announce the authorization endpoint on this origin instead of the issuer's (as Amazon Cognito does)."""
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    authorize_requests: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self.discovery),
                Route("/jwks", self.jwks),
                Route("/authorize", self.authorize, methods=["GET", "POST"]),
                Route("/token", self.token, methods=["POST"]),
            ]
        )

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.authorization_origin or self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.key.as_dict(private=False)]})

    async def authorize(self, request: Request) -> Response:
        if self.page and request.method == "GET":
            hidden = "".join(
                f"<input type=hidden name='{escape(k)}' value='{escape(v)}'>" for k, v in request.query_params.items()
            )
            return HTMLResponse(
                "<!doctype html><title>Test IdP</title><h1>Test IdP</h1>"
                f"<p>Sign in to memvault as {escape(str(self.user.get('name', '')))}?</p>"
                f"<form method=post action='/authorize'>{hidden}<button name=decision value=approve>Continue</button>"
                "<button name=decision value=deny>Cancel</button></form>"
            )
        params = (
            dict(request.query_params)
            if request.method == "GET"
            else {k: str(v) for k, v in (await request.form()).items()}
        )
        if params.pop("decision", "approve") == "deny":
            refusal = {"error": "access_denied", "state": params["state"]}
            return RedirectResponse(f"{params['redirect_uri']}?{urlencode(refusal)}", status_code=302)
        self.authorize_requests.append(params)
        code = secrets.token_urlsafe(16)
        self.codes[code] = params
        return RedirectResponse(
            f"{params['redirect_uri']}?{urlencode({'code': code, 'state': params['state']})}", status_code=302
        )

    async def token(self, request: Request) -> Response:
        form = await request.form()
        expected = "Basic " + base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        params = self.codes.pop(str(form.get("code")), None)
        if params is None or form.get("redirect_uri") != params["redirect_uri"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        verifier = str(form.get("code_verifier"))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != params["code_challenge"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        now = int(time.time())
        claims = {
            **self.user,
            "iss": self.issuer,
            "aud": "someone-else" if self.foreign_audience else self.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": "not-the-nonce" if self.wrong_nonce else params["nonce"],
        }
        key = RSAKey.generate_key(2048, parameters={"kid": "k1"}) if self.unknown_key else self.key
        id_token = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)
        return JSONResponse(
            {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "expires_in": 300, "id_token": id_token}
        )
