"""Client ID metadata documents: an app whose client_id is an https URL describes itself there.

The fetch is the one place the gateway requests a URL an outsider chose, so it is fenced in:
https only, the host's addresses must all be public (unless the operator allows private ones),
the connection goes to the address that was checked, no redirects, 5 seconds, 16 KiB
(`memvault_core.fetch`, shared with the vault's tracked sources); and each
address may have only so many new documents fetched an hour (`web/throttle.py`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from memvault_core import fetch
from memvault_gateway.context import Gateway
from memvault_gateway.oauth.redirects import redirect_uri_problem
from memvault_gateway.settings import is_loopback_host
from memvault_gateway.store import Client

log = logging.getLogger("memvault_gateway")

MAX_DOCUMENT_BYTES = 16 * 1024
FETCH_TIMEOUT_SECONDS = 5.0
CACHE_FOR = timedelta(hours=1)
MAX_URL_CHARS = 2000
PUBLIC_CLIENT = "none"  # token_endpoint_auth_method of clients without a secret


MetadataDocumentError = fetch.FetchError
"""The document could not be used; the message says why, for the person at the consent screen."""

DocumentUnreachable = fetch.Unreachable
"""The document's host could not be resolved or reached (a gateway without outbound HTTPS)."""


def is_metadata_document_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def _url_rule(allow_private: bool) -> Callable[[str], None]:
    def check(url: str) -> None:
        if len(url) > MAX_URL_CHARS:
            raise MetadataDocumentError("the client_id URL is too long")
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.fragment or "#" in url or parts.username or parts.password or not host:
            raise MetadataDocumentError("a client_id URL has a host and no fragment or credentials")
        if parts.path in ("", "/"):
            raise MetadataDocumentError("a client_id URL must have a path")
        if parts.scheme != "https" and not (parts.scheme == "http" and allow_private and is_loopback_host(host)):
            raise MetadataDocumentError("a client_id URL must use https")

    return check


async def _fetch(gw: Gateway, url: str) -> dict[str, Any]:
    allow_private = gw.settings.oauth.metadata_document_private_addresses
    fetched = await fetch.fetch(
        url,
        check=_url_rule(allow_private),
        allow_private=allow_private,
        max_bytes=MAX_DOCUMENT_BYTES,
        timeout_seconds=FETCH_TIMEOUT_SECONDS,
        accept="application/json",
        what="the client metadata document",
    )
    try:
        document = json.loads(fetched.body)
    except ValueError as error:
        raise MetadataDocumentError("the client metadata document is not JSON") from error
    if not isinstance(document, dict):
        raise MetadataDocumentError("the client metadata document is not a JSON object")
    return document


def _validate(url: str, document: dict[str, Any], extra_schemes: list[str]) -> tuple[str, list[str]]:
    if document.get("client_id") != url:
        raise MetadataDocumentError("the document's client_id is not the URL it was fetched from")
    name = document.get("client_name")
    if not isinstance(name, str) or not name.strip():
        raise MetadataDocumentError("the document has no client_name")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > 20:
        raise MetadataDocumentError("the document must list 1 to 20 redirect_uris")
    for uri in uris:
        problem = redirect_uri_problem(uri, extra_schemes)
        if problem:
            raise MetadataDocumentError(problem)
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise MetadataDocumentError(
            "only public clients (token_endpoint_auth_method 'none') may use a metadata document"
        )
    grant_types = document.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not set(grant_types) <= {"authorization_code", "refresh_token"}:
        raise MetadataDocumentError("grant_types may only be authorization_code and refresh_token")
    return name.strip()[:200], [str(u) for u in uris]


async def resolve(gw: Gateway, url: str, peer: str) -> Client:
    """The client a metadata document URL names, from the cache when fresh, else fetched and checked.

    Fetches are rate-limited per `peer` (the requesting address; over the limit, HTTPException 429),
    and a URL that just failed is not fetched again for a while. Only a usable document is stored.
    """
    cached = await gw.store.client(url)
    fresh = cached is not None and datetime.now(UTC) - cached.refreshed_at < CACHE_FOR
    if cached is not None and cached.kind == "metadata_document" and fresh:
        return cached
    if await gw.throttle.blocked("metadata-document-failed", url):
        wait = await gw.throttle.retry_after("metadata-document-failed", url)
        raise MetadataDocumentError(f"it could not be fetched or used a moment ago; try again in {wait} seconds")
    await gw.throttle.enforce("metadata-document", peer)
    try:
        document = await _fetch(gw, url)
        name, uris = _validate(url, document, gw.settings.oauth.extra_redirect_schemes)
    except MetadataDocumentError:
        await gw.throttle.count("metadata-document-failed", url)
        raise
    kept: dict[str, Any] = {
        k: document[k] for k in ("client_uri", "software_id", "software_version", "grant_types") if k in document
    }
    log.info("client metadata document fetched", extra={"client_host": urlsplit(url).hostname})
    return await gw.store.create_client(
        url,
        kind="metadata_document",
        client_name=name,
        redirect_uris=uris,
        token_endpoint_auth_method=PUBLIC_CLIENT,
        secret_hash=None,
        metadata=kept,
    )
