"""Opaque page cursors: what a caller hands back to get the next page.

A cursor records where the previous page ended and a fingerprint of the request
that made it, so a cursor cannot be replayed against a different query.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from memvault_core.errors import InvalidArgument


def fingerprint(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()[:16]


def encode(kind: str, request: str, position: dict[str, Any]) -> str:
    raw = json.dumps({"k": kind, "r": request, "p": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str, kind: str, request: str) -> dict[str, Any] | None:
    """The position a cursor points at; None for no cursor."""
    if not cursor:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        valid = isinstance(data, dict) and data.get("k") == kind and isinstance(data.get("p"), dict)
    except ValueError:
        valid = False
    if not valid:
        raise InvalidArgument(
            "cursor is not one this call returned; omit it to start from the first page", field="cursor"
        )
    if data["r"] != request:
        raise InvalidArgument(
            "cursor belongs to a different query or filter; repeat the same request, or omit the cursor",
            field="cursor",
        )
    position: dict[str, Any] = data["p"]
    return position
