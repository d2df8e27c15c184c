"""Which redirect URIs an app may register (OAuth 2.1 §7.12, RFC 8252, MCP authorization)."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from memvault_gateway.settings import is_loopback_host

MAX_REDIRECT_URI_CHARS = 2000


def redirect_uri_problem(uri: str, extra_schemes: Iterable[str] = ()) -> str | None:
    """Why `uri` cannot be a redirect URI, or None.

    Allowed: https URLs, http URLs on a loopback address (apps on the user's machine), and the
    private-use schemes an operator listed. Never fragments or credentials in the URL.
    """
    if not isinstance(uri, str) or not uri or len(uri) > MAX_REDIRECT_URI_CHARS:
        return f"a redirect URI is a URL of at most {MAX_REDIRECT_URI_CHARS} characters"
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return f"{uri[:100]!r} is not a valid URL"
    if "#" in uri:
        return "a redirect URI must not contain a fragment"
    if parts.username is not None or parts.password is not None:
        return "a redirect URI must not contain a user name or password"
    if any(ord(c) < 0x21 or c in '<>"\\^`{|}' for c in uri):
        return "a redirect URI must not contain spaces, control characters or quotes"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and is_loopback_host(host):
        return None
    if parts.scheme and parts.scheme.lower() in set(extra_schemes):
        return None
    return (
        f"redirect URI {uri[:100]!r} is not allowed: use https, or http on a loopback address "
        "(127.0.0.1, [::1] or localhost)"
    )


# RFC 8252 §7.3: a native app listens on whichever loopback port is free at login time, so the port
# of these hosts is not compared. `localhost` is included although §8.3 does not recommend it,
# because MCP clients register it (the gateway already accepts it at registration); its host name
# must still match as registered, so a client registered with 127.0.0.1 cannot switch to localhost.
_ANY_PORT_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def redirect_uri_matches(requested: str, registered: str) -> bool:
    """Whether an authorization request may return to `requested`, given one registered URI.

    Exact string match, except that an http URI on a loopback host may use any port
    (scheme, host, path and query must still be identical).
    """
    if requested == registered:
        return True
    if redirect_uri_problem(requested) is not None:
        return False
    try:
        asked, known = urlsplit(requested), urlsplit(registered)
        asked.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return False
    return (
        asked.scheme == known.scheme == "http"
        and asked.hostname is not None
        and asked.hostname == known.hostname
        and asked.hostname in _ANY_PORT_HOSTS
        and asked.path == known.path
        and asked.query == known.query
        and not asked.fragment
    )


def host_of(uri: str) -> str:
    """What the consent page shows as where the browser will go next."""
    parts = urlsplit(uri)
    return parts.hostname or f"{parts.scheme}:"
