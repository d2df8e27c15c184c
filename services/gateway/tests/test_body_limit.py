"""Request bodies over a route's cap get 413 naming the limit, whether their size is declared or not."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from gateway_helpers import MCP_HEADERS, StartGateway

from memvault_core import limits
from memvault_gateway.web.body_limit import FORM_BYTES, request_too_large

pytestmark = pytest.mark.integration


async def chunked(size: int, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    """`size` bytes of a form with no Content-Length: httpx sends them chunked."""
    yield b"a="
    for start in range(2, size, chunk):
        yield b"x" * min(chunk, size - start)


@pytest.mark.parametrize(
    "path", ["/token", "/revoke", "/register", "/authorize", "/login", "/logout", "/setup/unknown-link"]
)
async def test_forms_over_16_kib_get_413_by_content_length_and_chunked(
    start_gateway: StartGateway, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await start_gateway()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    async with gateway.http() as http:
        declared = await http.post(path, content=b"a=" + b"x" * FORM_BYTES, headers=form)
        streamed = await http.post(path, content=chunked(FORM_BYTES + 1), headers=form)
    for answer in (declared, streamed):
        assert answer.status_code == 413
        assert f"over {FORM_BYTES} bytes" in answer.json()["detail"]
    assert "content-length" not in streamed.request.headers
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # the cut-off route is not an error


async def test_api_bodies_are_capped_at_max_request_bytes(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    json_body = {"Content-Type": "application/json"}
    async with gateway.http() as http:
        declared = await http.post("/api/v1/bulk", content=b"x" * (limits.MAX_REQUEST_BYTES + 1), headers=json_body)
        streamed = await http.post("/api/v1/bulk", content=chunked(limits.MAX_REQUEST_BYTES + 1), headers=json_body)
        # Larger than a form, within the API's cap: on to the route, which wants a signed-in caller.
        within = await http.post("/api/v1/bulk", json={"vault": "v", "text": "x" * FORM_BYTES * 4})
    for answer in (declared, streamed):
        assert answer.status_code == 413
        assert answer.headers["content-type"] == "application/problem+json"
        # The vault's refusal of a write over its limit, with a share of the items that fits.
        assert answer.json()["title"] == "Limit exceeded"
        assert answer.json()["detail"].startswith("REQUEST_TOO_LARGE: the request body is ")
        assert f"over max_request_bytes ({limits.MAX_REQUEST_BYTES})" in answer.json()["detail"]
    assert "suggested_fraction=0.899:" in declared.json()["detail"]  # 90 % of the share that fits, rounded down
    assert "suggested_fraction=0.5:" in streamed.json()["detail"] and "halve again" in streamed.json()["detail"]
    assert within.status_code == 401


@pytest.mark.unit
def test_the_suggested_share_is_conservative() -> None:
    for size in (limits.MAX_REQUEST_BYTES + 1, 6_000_000, 40_000_000, 10**12):
        _, data = request_too_large(size)
        fraction = data["suggested_fraction"]
        assert data["code"] == "REQUEST_TOO_LARGE" and data["request_bytes"] == size
        # Items of equal size: that share of them fits, with room to spare.
        assert fraction * size <= 0.9 * limits.MAX_REQUEST_BYTES or fraction == 0.001
        assert 0 < fraction < 0.9


async def test_mcp_keeps_its_own_cap(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        within = await http.post("/mcp", content=b"x" * (FORM_BYTES * 4), headers=MCP_HEADERS)
    assert within.status_code == 401  # no token; not refused for its size
