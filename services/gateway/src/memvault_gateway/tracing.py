"""Tracing without credentials: URLs in request spans lose setup-link tokens and secret query values.

The FastAPI instrumentation records each request's URL. A setup link carries its token in the
path, an identity provider's redirect carries `code` and `state`, and a misbehaving agent may put
`access_token` in the query string (refused, but still traced). The hook rewrites those span
attributes before the span is exported.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode

SECRET_QUERY_KEYS = frozenset(
    {"access_token", "refresh_token", "code", "state", "token", "client_secret", "code_verifier", "id_token"}
)
_SETUP_PATH = re.compile(r"/setup/[^/?#]+")
_URL_ATTRIBUTES = ("http.target", "http.url", "url.full", "url.query", "url.path")
REDACTED = "REDACTED"


def redact_query(query: str) -> str:
    """A query string with the values of credential parameters replaced."""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, REDACTED if k.lower() in SECRET_QUERY_KEYS else v) for k, v in pairs], safe="/:")


def redact(url: str) -> str:
    """A URL or a path (with its query) with setup-link tokens and credential parameters replaced."""
    url = _SETUP_PATH.sub(f"/setup/{REDACTED}", url)
    head, separator, query = url.partition("?")
    return f"{head}{separator}{redact_query(query)}" if separator else url


def server_request_hook(span: Any, scope: dict[str, Any]) -> None:
    """For FastAPIInstrumentor: scrub the URL attributes of a request's span."""
    if span is None or not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    for name in _URL_ATTRIBUTES:
        value = attributes.get(name)
        if isinstance(value, str):
            cleaned = redact_query(value) if name == "url.query" else redact(value)
            if cleaned != value:
                span.set_attribute(name, cleaned)
