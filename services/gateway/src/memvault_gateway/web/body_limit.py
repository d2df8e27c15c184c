"""Caps on request bodies, enforced before a route has read more than its cap.

/api/v1 takes what the vault takes in one message (`max_request_bytes`: bulk imports and their
text); the OAuth, sign-in and consent forms and /register need a few KiB; a restore streams a backup
file of any size on to the vault; /mcp reads its body
itself (`proxy.read_body`, with the same `max_request_bytes`) and is left alone here.
"""

from __future__ import annotations

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


def _too_large(cap: int) -> ASGIApp:
    if cap == limits.MAX_REQUEST_BYTES:
        detail = f"the request body is over max_request_bytes ({cap} bytes); split it, e.g. fewer items per bulk call"
    else:
        detail = f"the request body is over {cap} bytes, the most this endpoint takes"
    return problem(413, "Request too large", detail)


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
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            await _too_large(cap)(scope, receive, send)
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
                        await _too_large(cap)(scope, receive, send)
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
