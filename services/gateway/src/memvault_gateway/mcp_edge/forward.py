"""Forwarding /mcp to the mcp service with a signed internal identity in place of any credential."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from memvault_core import limits
from memvault_core.identity import HTTP_HEADER

# Headers the mcp service needs; everything else (cookies, Authorization, a client's own
# X-Memvault-Identity) stays at the gateway.
FORWARDED_REQUEST_HEADERS = (
    "accept",
    "content-type",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "user-agent",
)
FORWARDED_RESPONSE_HEADERS = ("content-type", "mcp-session-id", "cache-control", "mcp-protocol-version")


class BodyTooLarge(Exception):
    pass


async def read_body(request: Request) -> bytes:
    """The request body, refusing more than the request limit without reading it all."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limits.MAX_REQUEST_BYTES:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.MAX_REQUEST_BYTES:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


async def forward(client: httpx.AsyncClient, url: str, request: Request, body: bytes, identity: str) -> Response:
    headers = {name: value for name in FORWARDED_REQUEST_HEADERS if (value := request.headers.get(name)) is not None}
    headers[HTTP_HEADER] = identity
    upstream = client.build_request(request.method, url, headers=headers, content=body)
    response = await client.send(upstream, stream=True)
    answer_headers = {k: v for k in FORWARDED_RESPONSE_HEADERS if (v := response.headers.get(k)) is not None}
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        # A JSON answer (the mcp service answers tool calls with JSON, not a stream): read it whole and
        # send it on in one piece, without the task and chunked framing a streamed answer costs.
        try:
            content = await response.aread()
        finally:
            await response.aclose()
        return Response(content, status_code=response.status_code, headers=answer_headers)

    async def relay() -> AsyncIterator[bytes]:
        async for chunk in response.aiter_raw():
            yield chunk

    return StreamingResponse(
        relay(),
        status_code=response.status_code,
        headers=answer_headers,
        background=BackgroundTask(response.aclose),
    )
