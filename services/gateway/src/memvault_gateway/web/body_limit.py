"""Caps on request bodies, enforced before a route has read more than its cap.

/api/v1 takes what the vault takes in one message (`max_request_bytes`: bulk imports and their
text); the OAuth, sign-in and consent forms and /register need a few KiB; a restore streams a backup
file of any size on to the vault; /mcp reads its body
itself (`proxy.read_body`, with the same `max_request_bytes`) and is left alone here. A body over
`max_request_bytes` gets the vault's `REQUEST_TOO_LARGE` refusal with a suggested share of items
(`request_too_large`), here as a problem and at /mcp as a JSON-RPC error.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvault_core import limits
from memvault_gateway.web.http import problem

FORM_BYTES = 16 * 1024
"""Bytes in a request body anywhere but /api/v1 and /mcp: forms, token requests, registrations."""


def cap_for(path: str) -> int | None:
    """The most bytes a request body to `path` may have; None when the route checks it itself."""
    if path == "/mcp" or (path.startswith("/api/v1/vaults/") and path.endswith("/restore")):
        return None  # a restore streams a backup file of any size on to the vault
    if path.startswith("/dashboard/") and path.endswith("/backup/restore"):
        return None  # the Backup page's upload of a backup file, spooled to disk by the form parser
    if path.startswith("/api/v1/"):
        return limits.MAX_REQUEST_BYTES
    return FORM_BYTES


REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
"""The code a body over max_request_bytes is refused with, as the vault refuses a write over its limit."""


def request_too_large(size: int | None) -> tuple[str, dict[str, Any]]:
    """(message, data) refusing a body of `size` bytes (None: sent chunked, so known only to be over)
    over max_request_bytes: the code, the limit and a conservative share of the items to send per call,
    90 % of the share that fits (the edge refuses before reading the body, so it cannot count them)."""
    most = limits.MAX_REQUEST_BYTES
    if size is None:
        fraction, said = 0.5, f"more than {most} bytes (sent without Content-Length)"
    else:
        fraction, said = max(0.001, math.floor(most * 0.9 / size * 1000) / 1000), f"{size} bytes"
    message = (
        f"{REQUEST_TOO_LARGE}: the request body is {said}, over max_request_bytes ({most}); nothing was "
        f"written. suggested_fraction={fraction}: send at most that share of its items per call "
        f"(suggested_max_items = the items sent x {fraction}, rounded down, at least 1)"
        + ("; if it still does not fit, halve again" if size is None else "")
    )
    data = {"code": REQUEST_TOO_LARGE, "max_request_bytes": most, "request_bytes": size, "suggested_fraction": fraction}
    return message, data


def declared_size(headers: Headers) -> int | None:
    """The Content-Length a request declares, if it declares one."""
    declared = headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


def _too_large(cap: int, size: int | None) -> ASGIApp:
    if cap == limits.MAX_REQUEST_BYTES:
        return problem(413, "Limit exceeded", request_too_large(size)[0])
    return problem(413, "Request too large", f"the request body is over {cap} bytes, the most this endpoint takes")


class BodyLimit:
    """ASGI middleware: 413 for a body over its route's cap, by Content-Length or, for a chunked
    body, as soon as the bytes received pass the cap (the route then sees the client go away).

    Plain ASGI, like `sessions.NewSessionCookie`, rather than Starlette's BaseHTTPMiddleware.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cap = cap_for(scope["path"]) if scope["type"] == "http" else None
        if cap is None:
            await self.app(scope, receive, send)
            return
        declared = declared_size(Headers(scope=scope))
        if declared is not None and declared > cap:
            await _too_large(cap, declared)(scope, receive, send)
            return

        received = 0
        started = False  # the route has begun its answer
        refused = False  # the body went over the cap; the route's answer is dropped

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    if not started:
                        await _too_large(cap, None)(scope, receive, send)
                    refused = True
                    return {"type": "http.disconnect"}
            return message

        async def send_unless_refused(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, send_unless_refused)
        except ClientDisconnect:
            if not refused:
                raise
