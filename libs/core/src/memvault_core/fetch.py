"""Fetching a URL someone else chose, fenced in against server-side request forgery.

The gateway fetches client metadata documents and the vault fetches tracked sources through this.
Every hop is checked the same way: the caller's own URL rule (`check`), then each of the host's
addresses must be public (unless private ones are allowed), the connection goes to the address that
was checked (no second lookup a DNS rebinding could change), no proxy from the environment, a
deadline for the whole fetch and a cap on the body. Redirects are followed only up to
`max_redirects`, each target checked again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

# IPv6 prefixes that hand the connection to an IPv4 address through a translator or relay
# (NAT64, local-use NAT64, 6to4). `is_global` calls them public whatever address they lead to.
_TRANSLATED = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "2002::/16"))
_REDIRECTS = (301, 302, 303, 307, 308)


class FetchError(Exception):
    """The URL may not be fetched or its answer cannot be used; the message says why."""


class Unreachable(FetchError):
    """The host could not be resolved or reached, or did not answer in time."""


@dataclass(frozen=True)
class Fetched:
    url: str
    """The URL the body came from (after redirects)."""
    body: bytes
    content_type: str


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


async def addresses(
    host: str, port: int, *, allow_private: bool, allow_address: Callable[[str], bool] | None = None
) -> list[str]:
    """The host's addresses; FetchError if any is private (loopback, link-local, ...) and neither
    `allow_private` nor `allow_address(address)` allows it."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise Unreachable(f"cannot resolve {host!r}") from error
    found = sorted({str(info[4][0]) for info in infos})
    if not found:
        raise Unreachable(f"cannot resolve {host!r}")
    if not allow_private:
        for address in found:
            if not is_public_address(address) and not (allow_address is not None and allow_address(address)):
                raise FetchError(f"{host!r} resolves to a private address; refusing to fetch it")
    return found


def _describe(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    if limit % 1024 == 0:
        return f"{limit // 1024} KiB"
    return f"{limit} bytes"


async def fetch(
    url: str,
    *,
    check: Callable[[str], None],
    allow_private: bool,
    allow_address: Callable[[str], bool] | None = None,
    max_bytes: int,
    timeout_seconds: float,
    max_redirects: int = 0,
    accept: str = "*/*",
    what: str = "the document",
) -> Fetched:
    """GET `url` within the fence; `check(url)` raises FetchError for a URL the caller refuses (scheme,
    host allow-list) and runs for the first URL and every redirect target. `what` names the document
    in error messages; `allow_address` lets through private addresses the caller configured."""
    try:
        async with asyncio.timeout(timeout_seconds):
            current = url
            for hop in range(max_redirects + 1):
                check(current)
                parts = urlsplit(current)
                host = parts.hostname or ""
                port = parts.port or (443 if parts.scheme == "https" else 80)
                address = (await addresses(host, port, allow_private=allow_private, allow_address=allow_address))[0]
                literal = f"[{address}]" if ":" in address else address
                pinned = urlunsplit((parts.scheme, f"{literal}:{port}", parts.path, parts.query, ""))
                # A client of its own: no connection pool shared with other hosts, no proxy that would
                # resolve the name again, redirects followed here (each target checked) or not at all.
                async with (
                    httpx.AsyncClient(timeout=timeout_seconds, trust_env=False, follow_redirects=False) as client,
                    client.stream(
                        "GET",
                        pinned,
                        headers={"Host": parts.netloc, "Accept": accept},
                        extensions={"sni_hostname": host},
                    ) as response,
                ):
                    if max_redirects and response.status_code in _REDIRECTS and "location" in response.headers:
                        if hop == max_redirects:
                            raise FetchError(f"{what} redirects more than {max_redirects} times")
                        current = urljoin(current, response.headers["location"])
                        continue
                    if response.status_code != 200:
                        raise FetchError(f"{what} answered HTTP {response.status_code}")
                    declared = response.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > max_bytes:
                        raise FetchError(f"{what} is larger than {_describe(max_bytes)}")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise FetchError(f"{what} is larger than {_describe(max_bytes)}")
                    return Fetched(current, bytes(body), response.headers.get("content-type", ""))
    except TimeoutError as error:
        raise Unreachable(f"could not fetch {what} within {timeout_seconds:g} seconds") from error
    except httpx.HTTPError as error:
        raise Unreachable(f"could not fetch {what} ({type(error).__name__})") from error
    raise AssertionError("unreachable")
