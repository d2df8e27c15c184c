"""Agents' apps as OAuth clients: dynamic registration (RFC 7591), lookup, and client authentication."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import secrets
import time
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import FormData

from memvault_gateway.auth import credentials
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.oauth import metadata_documents
from memvault_gateway.oauth.redirects import host_of, redirect_uri_problem
from memvault_gateway.store import Client
from memvault_gateway.web.http import NO_STORE, oauth_error
from memvault_gateway.web.throttle import limited, peer_of

log = logging.getLogger("memvault_gateway")

router = APIRouter()

MAX_REGISTRATION_BYTES = 16 * 1024
MAX_REDIRECT_URIS = 10
MAX_CLIENT_NAME_CHARS = 200
PUBLIC = "none"
"""The token endpoint auth method of public clients (no secret)."""
AUTH_METHODS = (PUBLIC, "client_secret_basic", "client_secret_post")
GRANT_TYPES = {"authorization_code", "refresh_token"}
# RFC 7591's default is ["authorization_code"] alone, but MCP clients that register without
# grant_types still expect to refresh their hour-long access tokens. A server may register other
# values than those asked for (RFC 7591 §3.2.1) and says which in its answer, so a client that
# names none gets both, and one that names only authorization_code gets no refresh tokens.
DEFAULT_GRANT_TYPES = ["authorization_code", "refresh_token"]


class ClientAuthError(Exception):
    def __init__(self, description: str, basic: bool = False) -> None:
        super().__init__(description)
        self.description = description
        self.basic = basic

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Basic realm="memvault"'} if self.basic else None
        return oauth_error("invalid_client", self.description, status=401, headers=headers)


def replaces_earlier_grants(client: Client) -> bool:
    """Whether a new connection of this app replaces the access the owner gave it before.

    A registered app's client_id is its own (each install registers), so a second approval is the
    same app asking again (for more scopes, or after losing its tokens) and the owner's latest
    answer is the one that holds. An app known by its metadata document shares one client_id
    across every install (the owner's laptop and desktop), so each approval stays a grant of its own.
    The old grant ends only when the new approval's code is exchanged at /token: an approval whose
    code never arrives (abandoned, or sent to an address nobody listens on) leaves the app connected.
    """
    return client.kind != "metadata_document"


def grant_types_of(client: Client) -> list[str]:
    """The grant types a client registered, or its metadata document lists."""
    listed = client.metadata.get("grant_types")
    return [str(g) for g in listed] if isinstance(listed, list) else list(DEFAULT_GRANT_TYPES)


async def resolve_client(gw: Gateway, client_id: str, peer: str) -> Client | None:
    """A registered client, or one described by its metadata document (fetched for `peer`, within
    its rate limit); None if unknown or unusable."""
    if not client_id or len(client_id) > metadata_documents.MAX_URL_CHARS:
        return None
    if metadata_documents.is_metadata_document_url(client_id):
        if not gw.settings.oauth.metadata_documents:
            return None
        return await metadata_documents.resolve(gw, client_id, peer)
    return await gw.store.client(client_id)


async def authenticate_client(gw: Gateway, request: Request, form: FormData) -> Client:
    """The client making a token or revocation request, per its registered authentication method."""
    header = request.headers.get("authorization", "")
    form_id = str(form.get("client_id") or "")
    form_secret = form.get("client_secret")
    if header.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
            raw_id, _, raw_secret = decoded.partition(":")
            client_id, secret = unquote(raw_id), unquote(raw_secret)
        except (binascii.Error, UnicodeDecodeError):
            raise ClientAuthError("the Basic credentials are malformed", basic=True) from None
        if form_id and form_id != client_id:
            raise ClientAuthError("client_id differs from the Basic credentials", basic=True)
        method, basic = "client_secret_basic", True
    elif form_secret is not None:
        client_id, secret, method, basic = form_id, str(form_secret), "client_secret_post", False
    else:
        client_id, secret, method, basic = form_id, "", "none", False
    if not client_id:
        raise ClientAuthError("client_id is required")
    try:
        client = await resolve_client(gw, client_id, peer_of(request))
    except metadata_documents.MetadataDocumentError as error:
        raise ClientAuthError(str(error)) from None
    if client is None:
        raise ClientAuthError("unknown client; register again", basic=basic)
    if client.token_endpoint_auth_method == PUBLIC:
        if method != PUBLIC:
            raise ClientAuthError("this client is public and has no secret", basic=basic)
        return client
    if method != client.token_endpoint_auth_method:
        raise ClientAuthError(f"this client must authenticate with {client.token_endpoint_auth_method}", basic=basic)
    if not credentials.same_secret(secret, client.secret_hash):
        raise ClientAuthError("client authentication failed", basic=basic)
    return client


def _registration_error(description: str, error: str = "invalid_client_metadata") -> JSONResponse:
    return oauth_error(error, description)


@router.post("/register", dependencies=[Depends(limited("register"))])
async def register(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """RFC 7591 dynamic client registration: https or loopback redirect URIs only, matched exactly later."""
    body = await request.body()
    if len(body) > MAX_REGISTRATION_BYTES:
        return _registration_error("the registration request is larger than 16 KiB")
    try:
        metadata: Any = json.loads(body)
    except ValueError:
        return _registration_error("the registration request must be a JSON object", "invalid_request")
    if not isinstance(metadata, dict):
        return _registration_error("the registration request must be a JSON object", "invalid_request")

    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        return _registration_error(f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs", "invalid_redirect_uri")
    for uri in uris:
        problem = redirect_uri_problem(uri, gw.settings.oauth.extra_redirect_schemes)
        if problem:
            return _registration_error(problem, "invalid_redirect_uri")

    method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        return _registration_error(f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}")
    grant_types = metadata.get("grant_types", DEFAULT_GRANT_TYPES)
    if not isinstance(grant_types, list) or not grant_types or not set(grant_types) <= GRANT_TYPES:
        return _registration_error("grant_types may only be authorization_code and refresh_token")
    response_types = metadata.get("response_types", ["code"])
    if response_types != ["code"]:
        return _registration_error('response_types must be ["code"]')
    name = metadata.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_CLIENT_NAME_CHARS):
        return _registration_error(f"client_name must be a string of at most {MAX_CLIENT_NAME_CHARS} characters")
    client_name = (name or "").strip() or f"an app at {host_of(uris[0])}"

    client_id = "mvcl_" + secrets.token_urlsafe(18)
    secret = credentials.new_token(credentials.CLIENT_SECRET) if method != "none" else None
    kept = {
        k: metadata[k]
        for k in ("client_uri", "software_id", "software_version", "application_type")
        if isinstance(metadata.get(k), str) and len(metadata[k]) <= 500
    }
    kept["grant_types"] = grant_types
    client = await gw.store.create_client(
        client_id,
        kind="registered",
        client_name=client_name,
        redirect_uris=[str(u) for u in uris],
        token_endpoint_auth_method=method,
        secret_hash=credentials.token_hash(secret) if secret else None,
        metadata=kept,
    )
    log.info("client registered", extra={"client_id": client_id, "auth_method": method})
    answer: dict[str, Any] = {
        "client_id": client.client_id,
        "client_id_issued_at": int(time.time()),
        "client_name": client.client_name,
        "redirect_uris": list(client.redirect_uris),
        "token_endpoint_auth_method": method,
        "grant_types": grant_types,
        "response_types": ["code"],
        **{k: v for k, v in kept.items() if k != "grant_types"},
    }
    if secret:
        answer["client_secret"] = secret
        answer["client_secret_expires_at"] = 0
    return JSONResponse(answer, status_code=201, headers=NO_STORE)
