"""Bad input at the gateway's edge (/api/v1, /mcp) and in MCP tool arguments is refused with a line
naming the field and what it accepts: never a 500, never 'Error executing tool', never read loosely."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gateway_helpers import (
    MCP_HEADERS,
    Agent,
    Browser,
    RunningGateway,
    StartGateway,
    mcp_client,
    pkce,
    query_of,
    tool,
    unique,
)
from mcp.shared.exceptions import MCPError

from memvault_core import limits

pytestmark = pytest.mark.integration

TOO_BIG = 2**63  # one more than int64 holds
INT64 = limits.MAX_INT64


async def owner_with_vault(gateway: RunningGateway) -> tuple[Browser, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    vault = unique("notes")
    assert (await browser.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    return browser, vault


def refused(response: Any, *needles: str) -> None:
    """A 422 problem whose detail says each needle."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    for needle in needles:
        assert needle in detail, detail


async def test_numbers_the_wire_cannot_hold_are_refused_naming_the_bound(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    stored = await browser.api("POST", f"{base}/memories", json={"content": "Keeps backups on the NAS."})
    memory = f"{base}/memories/{stored.json()['id']}"

    refused(
        await browser.api("GET", "/api/v1/audit", params={"before": TOO_BIG}), f"before must be between 0 and {INT64}"
    )
    refused(
        await browser.api("GET", f"{base}/audit", params={"before": TOO_BIG}), f"before must be between 0 and {INT64}"
    )
    refused(
        await browser.api("GET", f"{base}/guide/versions", params={"before_version": TOO_BIG}),
        f"before_version must be between 0 and {INT64}",
    )
    for path in ("approve", "reject", "invalidate", "reviewed"):
        refused(
            await browser.api("POST", f"{memory}/{path}", json={"expected_version": TOO_BIG}),
            f"expected_version must be between 0 and {INT64} (got {TOO_BIG})",
        )
    refused(
        await browser.api("PUT", f"{base}/guide", json={"text": "Recall first.", "expected_version": TOO_BIG}),
        "expected_version must be between",
    )
    refused(
        await browser.api("GET", f"{base}/recall", params={"q": "nas", "limit": 1_000_000_000_000}),
        f"limit must be between 1 and {limits.MAX_RECALL_RESULTS}",
    )
    refused(
        await browser.api("POST", f"{base}/memories", json={"content": "Tiny.", "confidence": 1e-300}),
        f"confidence must be between {limits.MIN_CONFIDENCE} and 1",
    )
    # The largest accepted value goes through to the vault, which answers for itself.
    at_edge = await browser.api("GET", f"{base}/audit", params={"before": INT64})
    assert at_edge.status_code == 200, at_edge.text


async def test_archive_upload_numbers_the_wire_cannot_hold_are_refused(start_gateway: StartGateway) -> None:
    """Found by the schema fuzzer (tests/e2e/test_api_fuzz.py): an import's size above int64 was a 500."""
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    imports = f"/api/v1/vaults/{vault}/archive/imports"
    refused(
        await browser.api("POST", imports, json={"size": 983820488554346440724, "sha256": "0" * 64}),
        f"size must be between 1 and {INT64}",
    )
    refused(
        await browser.api("PUT", f"{imports}/some-import/parts/{2**40}", content=b"part"),
        f"part must be between 0 and {limits.MAX_INT32}",
    )


async def test_archive_write_revisions_the_wire_cannot_hold_are_refused(start_gateway: StartGateway) -> None:
    """Found by the schema fuzzer: a base_revision, revision or tags_version above int32 was a 500."""
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    conversation = f"/api/v1/vaults/{vault}/conversations/some-id"
    big = 2**33
    bound = f"must be at most {limits.MAX_INT32}"
    message = [{"role": "user", "text": "hi"}]
    for path, body in (
        ("append", {"base_revision": big, "messages": message}),
        ("replace", {"base_revision": big, "messages": message}),
        ("messages/edit", {"base_revision": big, "edits": [{"node_id": "n", "text": "t"}]}),
        ("restore", {"revision": 1, "base_revision": big}),
    ):
        refused(await browser.api("POST", f"{conversation}/{path}", json=body), "base_revision", bound)
    refused(await browser.api("PUT", f"{conversation}/tags", json={"tags_version": big, "tags": []}), "tags_version")
    writes = [{"kind": "append", "conversation_id": "c", "base_revision": big, "messages": message}]
    refused(await browser.api("POST", f"/api/v1/vaults/{vault}/archive/commit", json={"writes": writes}), bound)
    pack = {"conversations": [{"conversation_id": "c", "revision": big}]}
    refused(await browser.api("POST", f"/api/v1/vaults/{vault}/archive/packs", json=pack), "revision")


async def test_values_are_not_read_loosely(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    refused(
        await browser.api("PUT", f"{base}/guide", json={"text": "Recall first.", "expected_version": True}),
        "expected_version: input should be a valid integer (got true)",
    )
    refused(
        await browser.api("PUT", f"{base}/settings", json={"audit_retention_days": 1.5}),
        "audit_retention_days: input should be a valid integer",
    )
    refused(await browser.api("POST", f"{base}/memories", json={"content": "x", "confidence": True}), "confidence")
    refused(await browser.api("GET", f"{base}/audit", params={"until": "0.5"}), "until must be an ISO 8601 date")
    refused(await browser.api("GET", f"{base}/audit", params={"since": "0001-01-01T00:00:00+14:00"}), "since must be")
    refused(
        await browser.api("POST", f"{base}/memories", json={"content": "x", "expires_at": 1893456000}),
        "expires_at must be an ISO 8601 date",
    )
    refused(await browser.api("GET", f"{base}/memories", params={"limit": 0}), "limit must be between 1 and")
    assert (await browser.api("GET", f"{base}/memories")).json()["memories"] == []  # nothing was written
    dated = await browser.api("GET", f"{base}/audit", params={"until": "2027-01-31T09:00:00Z", "since": "2026-01-01"})
    assert dated.status_code == 200, dated.text


async def test_a_wrong_method_is_answered_with_every_method_of_the_path(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    for path, methods in (
        (f"/api/v1/vaults/{vault}/settings", {"GET", "PUT"}),  # two routes, one path
        ("/api/v1/vaults", {"GET", "POST"}),
        (f"/api/v1/vaults/{vault}/memories", {"GET", "POST"}),
    ):
        answer = await browser.http.request("PATCH", path)
        assert answer.status_code == 405, answer.text
        allowed = {m.strip() for m in answer.headers["allow"].split(",")}
        assert methods <= allowed, (path, allowed)
        assert all(m in answer.json()["detail"] for m in methods)


async def agent_token(gateway: RunningGateway) -> str:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    agent = Agent(gateway, await gateway.register(client_name="edge test agent"))
    verifier, challenge = pkce()
    answer = await browser.consent(agent.authorize_url(challenge))
    tokens = (await agent.exchange(query_of(answer.headers["location"])["code"], verifier)).json()
    await browser.close()
    return str(tokens["access_token"])


async def test_a_deeply_nested_mcp_body_is_a_json_rpc_parse_error(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    token = await agent_token(gateway)
    async with gateway.http() as http:
        answer = await http.post(
            "/mcp", content=b"[" * 100_000, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        )
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32700 and body["id"] is None


async def test_an_mcp_call_over_max_request_bytes_is_a_json_rpc_error_the_agent_can_act_on(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    token = await agent_token(gateway)
    items = [f"fact {i} " + "x" * 3_000 for i in range(1_500)]  # about 4.6 MB of JSON
    async with mcp_client(gateway.mcp, token) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("bulk_remember", {"items": items})
        # The same connection goes on: a smaller call is taken.
        listed = await client.call_tool("list_memories", {})
    error = refused.value.error
    assert error.code == -32600 and error.message.startswith("REQUEST_TOO_LARGE: the request body is ")
    assert error.data["code"] == "REQUEST_TOO_LARGE"
    assert error.data["max_request_bytes"] == limits.MAX_REQUEST_BYTES
    assert error.data["request_bytes"] > limits.MAX_REQUEST_BYTES
    fraction = error.data["suggested_fraction"]
    assert 0.7 < fraction < 0.9 and int(len(items) * fraction) * 3_030 < limits.MAX_REQUEST_BYTES
    assert not listed.is_error


async def mcp_error(client: Any, name: str, arguments: dict[str, Any]) -> str:
    """The text an agent sees for a tool call that must fail."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} succeeded: {json.dumps(result.structured_content)[:200]}"
    return str(result.content[0].text)


async def test_mcp_tool_numbers_are_bounded_and_strict(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with mcp_client(gateway.mcp, await agent_token(gateway)) as client:
        listed = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
        assert listed["recall"]["limit"]["maximum"] == limits.MAX_RECALL_RESULTS
        assert listed["list_memories"]["limit"]["minimum"] == 1
        assert listed["invalidate"]["expected_version"]["maximum"] == INT64

        big = await mcp_error(client, "recall", {"query": "x", "limit": 1_000_000_000_000})
        assert big == f"recall: limit must be between 1 and {limits.MAX_RECALL_RESULTS} (got 1000000000000)"
        for limit in (0, -1):
            assert f"limit must be between 1 and {limits.MAX_LIST_RESULTS} (got {limit})" in await mcp_error(
                client, "list_memories", {"limit": limit}
            )
        assert "limit: input should be a valid integer (got true)" in await mcp_error(
            client, "audit_memory", {"limit": True}
        )
        stored = await tool(client, "remember", content="The NAS is a Synology DS920+.")
        version = await mcp_error(
            client, "invalidate", {"memory_id": stored["id"], "reason": "sold", "expected_version": TOO_BIG}
        )
        assert f"expected_version must be between 0 and {INT64}" in version
        tiny = await mcp_error(client, "remember", {"content": "Maybe owns a second NAS.", "confidence": 1e-300})
        assert f"confidence must be between {limits.MIN_CONFIDENCE} and 1 (got 1e-300)" in tiny  # the vault's answer
        assert "confidence" in await mcp_error(client, "remember", {"content": "Has a NAS.", "confidence": True})
        early = await mcp_error(client, "recall", {"query": "nas", "as_of": "0001-01-01T00:00:00+14:00"})
        assert "as_of '0001-01-01T00:00:00+14:00' is not a date" in early
        assert (await tool(client, "recall", query="Synology NAS", limit=limits.MAX_RECALL_RESULTS))["results"]
