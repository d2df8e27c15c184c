"""Multi-user isolation: a second account can neither read, write nor learn of the first's memories.

Every MCP tool and every /api/v1 route is tried as the second account, aimed at the first
account's vault, memory ids and grants. Answers about the first account's vault must read the
same as answers about a vault that does not exist, and nothing of the first account may change.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from gateway_helpers import Agent, Browser, RunningGateway, StartGateway, mcp_client, pkce, query_of, tool, unique

from memvault_gateway.app import create_app

pytestmark = pytest.mark.integration

SECRET_TEXT = "Alice keeps the spare house key under the blue flowerpot."


@dataclass
class Person:
    browser: Browser
    username: str
    vault: str
    token: str
    client_id: str


async def person_with_agent(gateway: RunningGateway, scopes: tuple[str, ...] = ("read", "write")) -> Person:
    """A new account, signed in, with an agent approved for all of its vaults."""
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    vault = (await browser.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    agent = Agent(gateway, await gateway.register(client_name=f"{username}'s agent"))
    verifier, challenge = pkce()
    answer = await browser.consent(agent.authorize_url(challenge), scope=list(scopes))
    tokens = (await agent.exchange(query_of(answer.headers["location"])["code"], verifier)).json()
    return Person(browser, username, vault, tokens["access_token"], agent.client_id)


def neutral(text: str, *names: str) -> str:
    """An answer with the names the caller supplied taken out, so answers can be compared."""
    for name in names:
        text = text.replace(name, "NAME")
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", text)


async def error_text(client: Any, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} succeeded: {result.structured_content}"
    return str(result.content[0].text)


async def snapshot(gateway: RunningGateway, vault: str) -> tuple[Any, ...]:
    return (
        await gateway.fetchval(
            "SELECT string_agg(m.id::text || m.status || m.version, ',' ORDER BY m.id) FROM memory m"
            " JOIN vault v ON v.id = m.vault_id WHERE v.name = $1",
            vault,
        ),
        await gateway.fetchval(
            "SELECT string_agg(a.subject || m.role, ',' ORDER BY a.subject) FROM membership m"
            " JOIN vault v ON v.id = m.vault_id JOIN account a ON a.id = m.account_id WHERE v.name = $1",
            vault,
        ),
        await gateway.fetchval(
            "SELECT count(*) FROM exclusion e JOIN vault v ON v.id = e.vault_id WHERE v.name = $1", vault
        ),
    )


def api_routes(app: FastAPI) -> list[APIRoute]:
    """Every route the app serves under /api/v1, however its routers were included."""
    found: list[APIRoute] = []
    pending: list[Any] = list(app.routes)
    while pending:
        route = pending.pop()
        if isinstance(route, APIRoute):
            if route.path.startswith("/api/v1"):
                found.append(route)
        elif hasattr(route, "original_router"):
            pending.extend(route.original_router.routes)
        elif hasattr(route, "routes"):
            pending.extend(route.routes)
    return sorted(found, key=lambda r: r.path)


async def test_no_mcp_tool_reaches_another_accounts_vault(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    alice = await person_with_agent(gateway)
    async with mcp_client(gateway.mcp, alice.token) as client:
        stored = await tool(client, "remember", content=SECRET_TEXT, tags=["home"])
    memory_id = stored["id"]
    before = await snapshot(gateway, alice.vault)

    bob = await person_with_agent(gateway)
    missing = unique("no-such-vault")
    async with mcp_client(gateway.mcp, bob.token) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        probes: dict[str, dict[str, Any]] = {
            "get_operating_guide": {},
            "recall": {"query": "spare house key flowerpot"},
            "remember": {"content": "Bob was here."},
            "propose_memory": {"content": "Bob proposes this."},
            "bulk_remember": {"items": [{"content": "Bob imports this."}]},
            "list_memories": {},
            "forget": {"memory_id": memory_id},
            "supersede": {"memory_id": memory_id, "content": "Bob replaces it."},
            "invalidate": {"memory_id": memory_id, "reason": "Bob says it is wrong."},
            "audit_memory": {},
            "explain_memory": {"memory_id": memory_id},
            "archive_search": {"query": "spare house key"},
            "archive_read": {"mode": "list"},
            "archive_write": {"op": "create", "messages": [{"text": "Bob was here."}]},
            "track_source": {"memory_id": memory_id, "kind": "text_url", "location": "https://example.org/key.txt"},
            "sources": {"action": "status"},
        }
        assert tools == set(probes), "a new tool needs an isolation probe here"
        for name, arguments in probes.items():
            aimed = await error_text(client, name, {**arguments, "vault": alice.vault})
            nowhere = await error_text(client, name, {**arguments, "vault": missing})
            assert neutral(aimed, alice.vault) == neutral(nowhere, missing), name
            assert SECRET_TEXT not in aimed and memory_id not in aimed

        # Copying into Alice's vault, or reading her conversations into a pack, is refused like a missing vault.
        copy = {"op": "copy", "conversation_ids": [str(uuid.uuid4())], "idempotency_key": "bob-copy"}
        aimed = await error_text(client, "archive_write", {**copy, "target_vault": alice.vault})
        nowhere = await error_text(client, "archive_write", {**copy, "target_vault": missing})
        assert neutral(aimed, alice.vault) == neutral(nowhere, missing)
        pack = {"mode": "pack", "pack": {"conversations": [str(uuid.uuid4())]}}
        aimed = await error_text(client, "archive_read", {**pack, "vault": alice.vault})
        nowhere = await error_text(client, "archive_read", {**pack, "vault": missing})
        assert neutral(aimed, alice.vault) == neutral(nowhere, missing)

        # In Bob's own vault, Alice's memory is neither found nor forgettable, and an unknown id looks the same.
        found = await tool(client, "recall", query="spare house key under the blue flowerpot")
        assert found["results"] == []
        listed = await tool(client, "list_memories")
        assert memory_id not in str(listed)
        forget_hers = await error_text(client, "forget", {"memory_id": memory_id})
        forget_random = await error_text(client, "forget", {"memory_id": str(uuid.uuid4())})
        assert neutral(forget_hers) == neutral(forget_random)
        guide = await tool(client, "get_operating_guide")
        assert alice.vault not in str(guide)

    assert await snapshot(gateway, alice.vault) == before


async def test_no_api_route_reaches_another_accounts_data(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    alice = await person_with_agent(gateway)
    async with mcp_client(gateway.mcp, alice.token) as client:
        memory_id = (await tool(client, "remember", content=SECRET_TEXT))["id"]
    alice_grant = (await alice.browser.http.get("/api/v1/grants")).json()["grants"][0]["id"]
    before = await snapshot(gateway, alice.vault)
    grants_before = await gateway.fetchval("SELECT count(*) FROM gateway.access_grant WHERE revoked_at IS NULL")

    bob = await person_with_agent(gateway)
    values = {
        "vault": alice.vault,
        "subject": bob.username,
        "grant_id": alice_grant,
        "memory_id": memory_id,
        "id": memory_id,
        "username": alice.username,
    }
    body = {
        # Vault names are per account: Bob may name a vault of his own like Alice's, which is no probe.
        "name": unique("bob-vault"),
        "role": "owner",
        "scopes": ["read"],
        "vaults": [alice.vault],
        "username": alice.username,
        "content": "Bob was here.",
        "email": "bob@example.test",
        # Deleting a vault or emptying its archive asks for its name again: Bob types Alice's.
        "confirm": alice.vault,
    }
    tried = 0
    calls = sorted(
        (method, route.path)
        for route in api_routes(create_app(gateway.settings, None))  # type: ignore[arg-type]
        for method in route.methods
    )
    for method, path in calls:
        if not path.startswith("/api/v1") or method == "HEAD":
            continue
        concrete = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values.get(m.group(1), memory_id), path)
        answer = await bob.browser.api(method, concrete, json=body if method in ("POST", "PUT", "PATCH") else None)
        tried += 1
        assert SECRET_TEXT not in answer.text, (method, path)
        assert memory_id not in answer.text, (method, path)
        if "{vault}" in path:
            assert answer.status_code == 404, (method, path, answer.text)
        if "{grant_id}" in path:
            assert answer.status_code == 404, (method, path, answer.text)
        if path == "/api/v1/vaults" and method == "GET":
            assert alice.vault not in answer.text
        if path == "/api/v1/audit":
            assert alice.vault not in answer.text and alice.username not in answer.text
    assert tried >= 10
    assert await snapshot(gateway, alice.vault) == before
    assert await gateway.fetchval("SELECT count(*) FROM gateway.access_grant WHERE revoked_at IS NULL") >= grants_before
    assert (
        await gateway.fetchval("SELECT revoked_at FROM gateway.access_grant WHERE id = $1::uuid", alice_grant) is None
    )
    assert await gateway.fetchval("SELECT email FROM gateway.user_account WHERE username = $1", alice.username) is None

    # The same question about Alice's vault and a vault that does not exist gets the same answer.
    missing = unique("no-such-vault")
    aimed = await bob.browser.http.get(f"/api/v1/vaults/{alice.vault}/members")
    nowhere = await bob.browser.http.get(f"/api/v1/vaults/{missing}/members")
    assert (aimed.status_code, neutral(aimed.text, alice.vault)) == (
        nowhere.status_code,
        neutral(nowhere.text, missing),
    )


async def test_a_grant_reaches_only_the_vaults_chosen_and_roles_limit_it(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    alice = await person_with_agent(gateway)
    private = unique("private")
    assert (await alice.browser.api("POST", "/api/v1/vaults", json={"name": private})).status_code == 201
    async with mcp_client(gateway.mcp, alice.token) as client:
        await tool(client, "remember", content="Shared vault fact: the router is in the hallway.")
        refused = await error_text(client, "recall", {"vault": private, "query": "anything"})
    assert "no vault named" in refused  # the grant was made before the vault existed

    bob = await person_with_agent(gateway)
    shared = await alice.browser.api(
        "PUT", f"/api/v1/vaults/{alice.vault}/members/{bob.username}", json={"role": "viewer"}
    )
    assert shared.status_code == 200 and shared.json()["role"] == "viewer"

    agent = Agent(gateway, await gateway.register(client_name="Bob's second agent"))
    verifier, challenge = pkce()
    answer = await bob.browser.consent(
        agent.authorize_url(challenge), vault=[alice.vault, bob.vault], scope=["read", "write"]
    )
    tokens = (await agent.exchange(query_of(answer.headers["location"])["code"], verifier)).json()
    before = await snapshot(gateway, alice.vault)
    async with mcp_client(gateway.mcp, tokens["access_token"]) as client:
        found = await tool(client, "recall", vault=alice.vault, query="router hallway")
        assert len(found["results"]) == 1
        write = await error_text(client, "remember", {"vault": alice.vault, "content": "Viewers cannot write."})
        assert "role: viewer" in write
        hidden = await error_text(client, "recall", {"vault": private, "query": "anything"})
        assert private not in hidden.split("your vaults:")[-1]
    assert await snapshot(gateway, alice.vault) == before

    # Taking the role away closes the vault to Bob's existing grant at once.
    assert (
        await alice.browser.api("DELETE", f"/api/v1/vaults/{alice.vault}/members/{bob.username}")
    ).status_code == 200
    async with mcp_client(gateway.mcp, tokens["access_token"]) as client:
        gone = await error_text(client, "recall", {"vault": alice.vault, "query": "router"})
    assert "no vault named" in gone
