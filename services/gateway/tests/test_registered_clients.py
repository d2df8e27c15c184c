"""Registered OAuth clients on /api/v1 and the Apps page: who may delete one, and that its tokens stop at once.

The rule: clients belong to the installation. An account may delete a client it has a grant for
only while no other account holds a live grant for it; an administrator may delete any. Deleting
removes the client with every grant, code and token under it.
"""

from __future__ import annotations

from typing import Any

import pytest
from gateway_helpers import (
    INITIALIZE,
    PASSWORD,
    Agent,
    Browser,
    RunningGateway,
    StartGateway,
    csrf_of,
    mcp_post,
    pkce,
    query_of,
)

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway, *, admin: bool = False) -> Browser:
    username, _ = await gateway.create_user(admin=admin)
    browser = Browser(gateway)
    assert (await browser.sign_in(username, PASSWORD)).status_code == 303
    return browser


async def connect(browser: Browser, agent: Agent) -> dict[str, Any]:
    """The person approves the agent in this browser; the agent's token response."""
    verifier, challenge = pkce()
    answer = await browser.consent(agent.authorize_url(challenge))
    assert answer.status_code == 303, answer.text
    tokens = await agent.exchange(query_of(answer.headers["location"])["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    return dict(tokens.json())


async def clients(browser: Browser) -> dict[str, dict[str, Any]]:
    answer = await browser.api("GET", "/api/v1/clients")
    assert answer.status_code == 200, answer.text
    return {c["client_id"]: c for c in answer.json()["clients"]}


async def test_an_owner_deletes_a_client_only_nobody_else_uses_and_its_tokens_stop_at_once(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    alice, bob, stranger = await signed_in(gateway), await signed_in(gateway), await signed_in(gateway)
    shared = Agent(gateway, await gateway.register(client_name="Shared agent"))
    own = Agent(gateway, await gateway.register(client_name="Alice's agent"))
    alice_shared = await connect(alice, shared)
    bob_shared = await connect(bob, shared)
    alice_own = await connect(alice, own)

    listed = await clients(alice)
    assert set(listed) == {shared.client_id, own.client_id}
    assert listed[shared.client_id]["other_accounts"] == 1 and not listed[shared.client_id]["deletable"]
    assert listed[own.client_id]["other_accounts"] == 0 and listed[own.client_id]["deletable"]
    assert listed[own.client_id]["redirect_hosts"] == ["127.0.0.1"]
    assert await clients(stranger) == {}  # another account's apps are not listed to it

    # Refused while Bob uses it: nothing changes, every token still works.
    refused = await alice.api("DELETE", "/api/v1/clients", params={"client_id": shared.client_id})
    assert refused.status_code == 403 and "only an administrator can delete it" in refused.json()["detail"]
    for tokens in (alice_shared, bob_shared):
        assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200
    # A client the account never had a grant for is not its to delete (nor to learn about).
    unknown = await stranger.api("DELETE", "/api/v1/clients", params={"client_id": own.client_id})
    assert unknown.status_code == 404
    assert (await stranger.api("DELETE", "/api/v1/clients")).status_code in (400, 422)

    # Deleted: its access token is refused at once, its refresh token too, and it is gone.
    deleted = await alice.api("DELETE", "/api/v1/clients", params={"client_id": own.client_id})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["client_name"] == "Alice's agent"
    assert (await mcp_post(gateway, INITIALIZE, alice_own["access_token"])).status_code == 401
    assert (await own.refresh(alice_own["refresh_token"])).status_code in (400, 401)
    assert await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client WHERE client_id = $1", own.client_id) == 0
    assert set(await clients(alice)) == {shared.client_id}
    audit = (await alice.api("GET", "/api/v1/audit", params={"limit": 20})).json()["entries"]
    assert "client.delete" in [e["action"] for e in audit]

    # Once Bob revokes his grant, Alice may delete the shared one; an administrator could any time.
    bob_grant = next(
        g for g in (await bob.api("GET", "/api/v1/grants")).json()["grants"] if g["client_id"] == shared.client_id
    )
    assert (await bob.api("DELETE", f"/api/v1/grants/{bob_grant['id']}")).status_code == 200
    assert (await clients(alice))[shared.client_id]["deletable"]
    admin = await signed_in(gateway, admin=True)
    assert (await clients(admin))[shared.client_id]["deletable"]
    assert (await admin.api("DELETE", "/api/v1/clients", params={"client_id": shared.client_id})).status_code == 200
    assert (await mcp_post(gateway, INITIALIZE, alice_shared["access_token"])).status_code == 401


async def test_the_apps_page_lists_clients_and_deletes_by_the_same_rule(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    alice, bob = await signed_in(gateway), await signed_in(gateway)
    shared = Agent(gateway, await gateway.register(client_name="Shared agent"))
    own = Agent(gateway, await gateway.register(client_name="<b>Own</b> agent"))
    await connect(alice, shared)
    await connect(bob, shared)
    tokens = await connect(alice, own)
    vault = (await alice.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    page = await alice.http.get(f"/dashboard/{vault}/apps")
    assert page.status_code == 200
    assert "&lt;b&gt;Own&lt;/b&gt; agent" in page.text and "Only an administrator can delete it." in page.text
    csrf = csrf_of(page.text)

    # The page offers no Delete for the shared one; posting it anyway is refused by the server.
    refused = await alice.http.post(
        f"/dashboard/{vault}/apps/clients/delete", data={"csrf_token": csrf, "client_id": shared.client_id}
    )
    assert refused.status_code == 403
    assert (
        await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client WHERE client_id = $1", shared.client_id)
    ) == 1
    no_csrf = await alice.http.post(f"/dashboard/{vault}/apps/clients/delete", data={"client_id": own.client_id})
    assert no_csrf.status_code == 403
    done = await alice.http.post(
        f"/dashboard/{vault}/apps/clients/delete", data={"csrf_token": csrf, "client_id": own.client_id}
    )
    assert done.status_code == 303
    after = await alice.http.get(done.headers["location"])
    assert "is deleted: its tokens no longer work" in after.text
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 401
