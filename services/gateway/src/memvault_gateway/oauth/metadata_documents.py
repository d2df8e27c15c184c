"""Client ID metadata documents: an app whose client_id is an https URL describes itself there.

The fetch is the one place the gateway requests a URL an outsider chose, so it is fenced in:
https only, the host's addresses must all be public (unless the operator allows private ones),
the connection goes to the address that was checked, no redirects, 5 seconds, 16 KiB; and each
address may have only so many new documents fetched an hour (`web/throttle.py`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

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
# IPv6 prefixes that hand the connection to an IPv4 address through a translator or relay
# (NAT64, local-use NAT64, 6to4). `is_global` calls them public whatever address they lead to.
_TRANSLATED = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "2002::/16"))


class MetadataDocumentError(Exception):
    """The document could not be used; the message says why, for the person at the consent screen."""


class DocumentUnreachable(MetadataDocumentError):
    """The document's host could not be resolved or reached (a gateway without outbound HTTPS)."""


def is_metadata_document_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def is_public_address(address: str) -> bool:
    """Global unicast, and not an IPv6 address standing for an IPv4 one that might be private."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _TRANSLATED):
            return False
        embedded = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
        if any(v4 is not None and not v4.is_global for v4 in embedded):
            return False
    return ip.is_global


def _check_url(url: str, allow_private: bool) -> tuple[str, int]:
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
    return host, parts.port or (443 if parts.scheme == "https" else 80)


async def _addresses(host: str, port: int, allow_private: bool) -> list[str]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise DocumentUnreachable(f"cannot resolve {host!r}") from error
    addresses = sorted({str(info[4][0]) for info in infos})
    if not addresses:
        raise DocumentUnreachable(f"cannot resolve {host!r}")
    if not allow_private:
        for address in addresses:
            if not is_public_address(address):
                raise MetadataDocumentError(f"{host!r} resolves to a private address; refusing to fetch it")
    return addresses


async def _fetch(gw: Gateway, url: str) -> dict[str, Any]:
    allow_private = gw.settings.oauth.metadata_document_private_addresses
    host, port = _check_url(url, allow_private)
    address = (await _addresses(host, port, allow_private))[0]
    parts = urlsplit(url)
    literal = f"[{address}]" if ":" in address else address
    pinned = urlunsplit((parts.scheme, f"{literal}:{port}", parts.path, parts.query, ""))
    try:
        # A client of its own: no connection pool shared with other hosts, no proxy that would
        # resolve the name again, no redirects.
        async with (
            asyncio.timeout(FETCH_TIMEOUT_SECONDS),
            httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, trust_env=False, follow_redirects=False) as client,
            client.stream(
                "GET",
                pinned,
                headers={"Host": parts.netloc, "Accept": "application/json"},
                extensions={"sni_hostname": host},
            ) as response,
        ):
            if response.status_code != 200:
                raise MetadataDocumentError(f"the client metadata document answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise MetadataDocumentError("the client metadata document is larger than 16 KiB")
    except (httpx.HTTPError, TimeoutError) as error:
        raise DocumentUnreachable(f"could not fetch the client metadata document ({type(error).__name__})") from error
    try:
        document = json.loads(bytes(body))
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
