"""Opaque page cursors: what a caller hands back to get the next page.

A cursor records where the previous page ended and a fingerprint of the request
that made it, so a cursor cannot be replayed against a different query. Cursors are
not signed: the caller may edit one, so every position is checked before use (an edited
cursor can only move within the caller's own results; the vault is in the fingerprint).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import datetime
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
    if not valid or not isinstance(data.get("r"), str):
        raise _not_ours()
    if data["r"] != request:
        raise InvalidArgument(
            "cursor belongs to a different query or filter; repeat the same request, or omit the cursor",
            field="cursor",
        )
    position: dict[str, Any] = data["p"]
    return position


def offset_of(position: dict[str, Any] | None) -> int:
    """A ranked page's start: 0 without a cursor."""
    if position is None:
        return 0
    offset = position.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise _not_ours()
    return offset


def keyset_of(position: dict[str, Any] | None) -> tuple[datetime, str] | None:
    """Where a page ordered by (created_at, id) ended; None without a cursor."""
    if position is None:
        return None
    created_at = position.get("created_at")
    try:
        moment = datetime.fromisoformat(created_at) if isinstance(created_at, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise _not_ours()
    return moment, _id(position)


def id_of(position: dict[str, Any] | None) -> str | None:
    """The memory id a page ended at; None without a cursor."""
    return None if position is None else _id(position)


def _id(position: dict[str, Any]) -> str:
    try:
        return str(uuid.UUID(str(position.get("id"))))
    except ValueError:
        raise _not_ours() from None


def _not_ours() -> InvalidArgument:
    return InvalidArgument("cursor is not one this call returned; omit it to start from the first page", field="cursor")
