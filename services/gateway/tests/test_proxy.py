"""Forwarding to the mcp service: a JSON answer is passed on whole, a stream is relayed as it comes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import StreamingResponse

from memvault_core.identity import HTTP_HEADER
from memvault_gateway.mcp_edge import forward

pytestmark = pytest.mark.unit


def _request() -> Request:
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer agent-token"),
        (b"cookie", b"session=abc"),
        (b"mcp-protocol-version", b"2025-11-25"),
    ]
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "query_string": b""})


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def _upstream(seen: list[httpx.Request], content_type: str, body: bytes) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        headers = {"content-type": content_type, "set-cookie": "upstream=1", "mcp-session-id": "s1"}
        return httpx.Response(200, headers=headers, stream=_Chunks([body[:10], body[10:]]))

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def test_a_json_answer_is_passed_on_whole_with_only_the_mcp_headers() -> None:
    seen: list[httpx.Request] = []
    async with _upstream(seen, "application/json", b'{"jsonrpc":"2.0","id":1,"result":{}}') as client:
        response = await forward.forward(client, "http://mcp/mcp", _request(), b"{}", "signed-identity")
    assert not isinstance(response, StreamingResponse)
    assert response.body == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert response.headers["content-type"] == "application/json"
    assert response.headers["mcp-session-id"] == "s1"
    assert "set-cookie" not in response.headers
    (sent,) = seen
    assert sent.headers[HTTP_HEADER] == "signed-identity"
    assert sent.headers["mcp-protocol-version"] == "2025-11-25"
    assert "authorization" not in sent.headers and "cookie" not in sent.headers


async def test_an_event_stream_is_relayed_chunk_by_chunk() -> None:
    seen: list[httpx.Request] = []
    events = b"event: message\ndata: {}\n\n"
    async with _upstream(seen, "text/event-stream", events) as client:
        response = await forward.forward(client, "http://mcp/mcp", _request(), b"{}", "signed-identity")
        assert isinstance(response, StreamingResponse)
        relayed = b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[misc]
    assert relayed == events
    assert response.headers["content-type"] == "text/event-stream"
