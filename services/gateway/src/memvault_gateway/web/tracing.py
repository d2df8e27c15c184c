"""Tracing without credentials or memory text: URLs in request spans lose setup-link and
sign-in-link tokens and every query value but a few harmless ones.

The FastAPI instrumentation records each request's URL. A setup link, an email sign-in link and
an address confirmation link carry their token in the path, an identity provider's redirect carries `code` and `state`, recall carries the query text
in `q`, and a misbehaving agent may put `access_token` in the query string (refused, but still
traced). The hook rewrites those span attributes before the span is exported. Values are kept
only for the parameters listed here, so a parameter added later is redacted until someone
decides it is harmless.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode

# Page sizes, offsets, enum filters and OAuth parameters that are public by design. Not cursors
# (opaque, they may carry positions in results), tags, audit filters, `next` or `redirect_uri`.
HARMLESS_QUERY_KEYS = frozenset(
    {
        "limit",
        "before",
        "before_version",
        "status",
        "type",
        "kind",
        "response_type",
        "client_id",
        "code_challenge_method",
        "scope",
        "resource",
        "iss",
        "error",
    }
)
_SETUP_PATH = re.compile(r"/setup/[^/?#]+")
_EMAIL_LINK_PATH = re.compile(r"/(login|account)/email/[^/?#]+")
_URL_ATTRIBUTES = ("http.target", "http.url", "url.full", "url.query", "url.path")
REDACTED = "REDACTED"


def redact_query(query: str) -> str:
    """A query string with every value replaced but those of harmless parameters."""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, v if k in HARMLESS_QUERY_KEYS else REDACTED) for k, v in pairs], safe="/:")


def redact(url: str) -> str:
    """A URL or a path (with its query) with link tokens and query values replaced (`redact_query`)."""
    url = _SETUP_PATH.sub(f"/setup/{REDACTED}", url)
    url = _EMAIL_LINK_PATH.sub(rf"/\1/email/{REDACTED}", url)
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
