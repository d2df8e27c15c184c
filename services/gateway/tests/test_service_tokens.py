"""Service tokens for scripts: created and revoked by the owner, limited to their scopes and vaults."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_helpers import (
    INITIALIZE,
    Browser,
    RunningGateway,
    StartGateway,
    mcp_client,
    mcp_post,
    tool,
    tool_call,
    unique,
)

pytestmark = pytest.mark.integration


async def owner_with_two_vaults(gateway: RunningGateway) -> tuple[Browser, str, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    first = (await browser.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    second = unique("archive")
    assert (await browser.api("POST", "/api/v1/vaults", json={"name": second})).status_code == 201
    return browser, first, second


async def create_token(browser: Browser, **body: Any) -> dict[str, Any]:
    answer = await browser.api("POST", "/api/v1/service-tokens", json=body)
    assert answer.status_code == 201, answer.text
    assert answer.headers["cache-control"] == "no-store"
    return dict(answer.json())


async def test_service_token_reaches_only_its_vaults_with_only_its_scopes(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, first, second = await owner_with_two_vaults(gateway)
    importer = await create_token(browser, name="nightly import", scopes=["write"], vaults=[first])
    reader = await create_token(browser, name="backup", scopes=["read"], vaults=[second])
    assert importer["token"].startswith("mvs_") and importer["kind"] == "service"

    async with mcp_client(gateway.mcp, importer["token"]) as client:
        stored = await tool(client, "remember", vault=first, content="Imported by the nightly script.")
        refused = await client.call_tool("recall", {"vault": second, "query": "anything"})
    assert refused.is_error
    source = await gateway.fetchval("SELECT source FROM memory WHERE id = $1::uuid", stored["id"])
    assert source == "via nightly import (service token)"

    before = await gateway.fetchval("SELECT count(*) FROM memory")
    write = await mcp_post(
        gateway, tool_call("remember", {"vault": second, "content": "Not allowed."}), reader["token"]
    )
    assert write.status_code == 403
    assert await gateway.fetchval("SELECT count(*) FROM memory") == before

    async with gateway.http() as http:
        seen = await http.get("/api/v1/vaults", headers={"Authorization": f"Bearer {reader['token']}"})
        # Tokens never manage tokens.
        minted = await http.post(
            "/api/v1/service-tokens",
            json={"name": "x", "scopes": ["admin"], "vaults": [first]},
            headers={"Authorization": f"Bearer {reader['token']}"},
        )
    assert [v["name"] for v in seen.json()["vaults"]] == [second]
    assert minted.status_code == 401


async def test_service_tokens_are_listed_revoked_and_expire(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, first, _ = await owner_with_two_vaults(gateway)
    token = await create_token(browser, name="backup", scopes=["read"], vaults=[first], expires_in_days=30)
    assert token["expires_at"]
    assert (await mcp_post(gateway, INITIALIZE, token["token"])).status_code == 200

    listed = (await browser.http.get("/api/v1/grants")).json()["grants"]
    assert [(g["kind"], g["name"], g["scopes"], g["vaults"]) for g in listed] == [
        ("service", "backup", ["read"], [first])
    ]
    assert listed[0]["last_used_at"]
    assert "token" not in listed[0]
    # Use is written at most once a minute: another call within it does not go to the database.
    await gateway.fetchval("UPDATE gateway.access_grant SET last_used_at = NULL WHERE id = $1::uuid", token["id"])
    assert (await mcp_post(gateway, INITIALIZE, token["token"])).status_code == 200
    assert (
        await gateway.fetchval("SELECT last_used_at FROM gateway.access_grant WHERE id = $1::uuid", token["id"]) is None
    )

    await gateway.fetchval(
        "UPDATE gateway.access_grant SET expires_at = now() - interval '1 second' WHERE id = $1::uuid", token["id"]
    )
    assert (await mcp_post(gateway, INITIALIZE, token["token"])).status_code == 401

    other = await create_token(browser, name="import", scopes=["write"], vaults=[first])
    assert (await browser.api("DELETE", f"/api/v1/grants/{other['id']}")).status_code == 200
    assert (await mcp_post(gateway, INITIALIZE, other["token"])).status_code == 401
    actions = [e["action"] for e in (await browser.http.get("/api/v1/audit")).json()["entries"]]
    assert actions.count("service_token.create") == 2 and "grant.revoke" in actions


async def test_service_token_requests_are_checked(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, first, _ = await owner_with_two_vaults(gateway)
    cases: list[dict[str, Any]] = [
        {"name": "x", "scopes": [], "vaults": [first]},
        {"name": "x", "scopes": ["read"], "vaults": []},
        {"name": "x", "scopes": ["everything"], "vaults": [first]},
        {"name": "", "scopes": ["read"], "vaults": [first]},
    ]
    for body in cases:
        assert (await browser.api("POST", "/api/v1/service-tokens", json=body)).status_code == 422, body
    someone_elses = await browser.api(
        "POST", "/api/v1/service-tokens", json={"name": "x", "scopes": ["read"], "vaults": ["default-not-mine"]}
    )
    assert someone_elses.status_code == 400
    without_csrf = await browser.http.post(
        "/api/v1/service-tokens", json={"name": "x", "scopes": ["read"], "vaults": [first]}
    )
    assert without_csrf.status_code == 403
    assert (await browser.http.get("/api/v1/grants")).json()["grants"] == []
