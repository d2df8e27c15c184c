"""Signed page cursors for the archive: opaque to the caller, made and checked only here.

A cursor is `<payload>.<signature>`, both base64url: the payload holds the kind of call, a
fingerprint of the request, the position, when it expires, and a keyed hash of the caller (account
and client), never the account id itself; the signature is an HMAC-SHA256 over the payload with the
vault's cursor secret. So a cursor cannot be edited (forged), replayed by another account or
client (foreign), used after it expires, or against another query; each of these gets its own error.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

from memvault_core.errors import InvalidArgument

CURSOR_TTL_SECONDS = 3600
"""How long an archive cursor stays valid."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorSigner:
    def __init__(
        self, secret: bytes, ttl_seconds: int = CURSOR_TTL_SECONDS, clock: Callable[[], float] = time.time
    ) -> None:
        if len(secret) < 16:
            raise ValueError("the cursor secret needs at least 16 bytes")
        self._key = hashlib.sha256(b"memvault archive cursor\x00" + secret).digest()
        self._ttl = ttl_seconds
        self._clock = clock

    @property
    def ttl_seconds(self) -> int:
        """How long a cursor sealed now stays valid."""
        return self._ttl

    def _caller(self, caller: str) -> str:
        return _b64(hmac.new(self._key, b"caller\x00" + caller.encode(), hashlib.sha256).digest()[:12])

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())

    def seal(self, kind: str, caller: str, request: str, position: dict[str, Any]) -> str:
        """A cursor for `caller` (account/client) continuing `request` of `kind` at `position`."""
        body = {"k": kind, "c": self._caller(caller), "r": request, "e": int(self._clock()) + self._ttl, "p": position}
        payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode())
        return f"{payload}.{self._sign(payload)}"

    def open(self, cursor: str, kind: str, caller: str, request: str | None) -> dict[str, Any] | None:
        """The position a cursor holds; None for no cursor. `request` None skips the request check (a
        continuation that sends only the cursor)."""
        if not cursor:
            return None
        payload, _, signature = cursor.partition(".")
        # compare_digest takes ASCII text only; a cursor with other characters was never ours (found by
        # the /api/v1 fuzzer: it was a TypeError, so INTERNAL).
        if (
            not payload
            or not signature
            or not cursor.isascii()
            or not hmac.compare_digest(self._sign(payload).encode(), signature.encode())
        ):
            raise InvalidArgument(
                "cursor is not one this server issued (it was changed or made up); omit it to start again",
                field="cursor",
            )
        try:
            body = json.loads(_unb64(payload))
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("p"), dict) or not isinstance(body.get("e"), int):
            raise InvalidArgument("cursor is not one this server issued; omit it to start again", field="cursor")
        if body.get("k") != kind:
            raise InvalidArgument(
                f"cursor belongs to another kind of read, not {kind}; send it to the call that returned it",
                field="cursor",
            )
        if not hmac.compare_digest(str(body.get("c", "")), self._caller(caller)):
            raise InvalidArgument(
                "cursor was issued to another caller (account or client); repeat the request without it",
                field="cursor",
            )
        if body["e"] < self._clock():
            raise InvalidArgument(
                f"cursor expired (cursors last {self._ttl // 60} minutes); repeat the request without it",
                field="cursor",
            )
        if request is not None and body.get("r") != request:
            raise InvalidArgument(
                "cursor belongs to a different query, filter or page size; repeat the same request, or omit the cursor",
                field="cursor",
            )
        position: dict[str, Any] = body["p"]
        return position

    @staticmethod
    def caller_of(subject: str, client: str) -> str:
        return f"{subject}/{client}"
