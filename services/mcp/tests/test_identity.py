"""Only the gateway reaches the tools: a request without its signed identity is refused."""

from __future__ import annotations

import httpx2
from mcp_helpers import Service


async def test_a_request_without_the_gateways_identity_is_refused_with_401(service: Service) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(
            service.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"X-Memvault-Identity": "forged"},
        )
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    assert service.vault.calls == []
