"""Small HTTP helpers shared by the gateway's routes: problems, OAuth errors, redirects, addresses."""

from __future__ import annotations

import ipaddress
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import Request
from fastapi.responses import JSONResponse

from memvault_gateway.settings import LOOPBACK_NAMES

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
HOME = "/account"
"""Where a person lands after signing in when nothing else was asked for."""


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An RFC 9457 problem answer; `detail` tells the caller what to do next."""
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        headers=headers,
        media_type="application/problem+json",
    )


def oauth_error(error: str, description: str, status: int = 400, headers: dict[str, str] | None = None) -> JSONResponse:
    """An OAuth 2.1 error answer from the token, registration or revocation endpoint."""
    return JSONResponse(
        {"error": error, "error_description": description},
        status_code=status,
        headers={**NO_STORE, **(headers or {})},
    )


def with_query(url: str, params: dict[str, str]) -> str:
    """`url` with `params` added to whatever query it already has."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def is_loopback_address(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_request(request: Request) -> bool:
    """Sent from this machine to a loopback name, not relayed by a proxy."""
    return (
        is_loopback_address(request.client.host if request.client else None)
        and (urlsplit(f"//{request.headers.get('host', '')}").hostname or "") in LOOPBACK_NAMES
        and "x-forwarded-for" not in request.headers
        and "forwarded" not in request.headers
    )


def client_address(request: Request) -> str | None:
    return request.client.host if request.client else None


def safe_next(value: str | None) -> str:
    """A path on this site to continue to; anything else (another host, a scheme) becomes the home page."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value or len(value) > 4000:
        return HOME
    return value
