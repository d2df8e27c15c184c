"""The authorization server and the /mcp token check, with agents approved by the test-only setting."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from gateway_helpers import (
    INITIALIZE,
    REDIRECT,
    SECRET,
    Agent,
    RunningGateway,
    StartGateway,
    mcp_client,
    mcp_post,
    pkce,
    query_of,
    tool,
    tool_call,
    unique,
)
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from memvault_core.identity import HTTP_HEADER, Identity, IdentitySigner, missing_scope_message

pytestmark = pytest.mark.integration


async def auto_gateway(start_gateway: StartGateway, **groups: dict[str, Any]) -> tuple[RunningGateway, str]:
    """A gateway that approves every request as a fresh subject; returns it and the subject."""
    subject = unique("agent-owner")
    gateway_group = {"test_auto_approve_subject": subject, **groups.pop("gateway", {})}
    return await start_gateway(gateway=gateway_group, **groups), subject


async def authorized(agent: Agent, scope: str = "read write") -> dict[str, Any]:
    """Run the authorization-code flow; return the token response."""
    verifier, challenge = pkce()
    async with agent.gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge, scope=scope))
    assert answer.status_code == 302, answer.text
    params = query_of(answer.headers["location"])
    tokens = await agent.exchange(params["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    return dict(tokens.json())


async def count_tokens(gateway: RunningGateway, client_id: str) -> int:
    return int(
        await gateway.fetchval(
            "SELECT count(*) FROM gateway.token t JOIN gateway.access_grant g ON g.id = t.grant_id"
            " WHERE g.client_id = $1",
            client_id,
        )
    )


async def test_discovery_documents_name_the_issuer_resource_and_methods(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        server = (await http.get("/.well-known/oauth-authorization-server")).json()
        resource = await http.get("/.well-known/oauth-protected-resource/mcp")
        root = (await http.get("/.well-known/oauth-protected-resource")).json()
    assert server["issuer"] == gateway.url
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["response_types_supported"] == ["code"]
    assert "none" in server["token_endpoint_auth_methods_supported"]
    assert server["authorization_response_iss_parameter_supported"] is True
    assert server["registration_endpoint"] == f"{gateway.url}/register"
    assert "offline_access" not in server["scopes_supported"]
    assert resource.headers["content-type"].startswith("application/json")
    assert resource.json()["resource"] == gateway.mcp
    assert resource.json()["authorization_servers"] == [gateway.url]
    assert root["resource"] == gateway.mcp


async def test_mcp_without_a_token_is_challenged_with_metadata_and_scope(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    answer = await mcp_post(gateway, INITIALIZE)
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert f'resource_metadata="{gateway.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="read write"' in challenge


async def test_agent_registers_authorizes_and_uses_tools_under_its_own_name(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register(client_name="Pocket agent"))
    verifier, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge, state="xyz"))
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert location.startswith(REDIRECT + "?")
    params = query_of(location)
    assert params["state"] == "xyz"
    assert params["iss"] == gateway.url

    tokens = await agent.exchange(params["code"], verifier)
    assert tokens.status_code == 200
    assert tokens.headers["cache-control"] == "no-store"
    body = tokens.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"] == "read write"
    assert body["access_token"].startswith("mva_") and body["refresh_token"].startswith("mvr_")

    async with mcp_client(gateway.mcp, body["access_token"]) as client:
        stored = await tool(client, "remember", content="The pocket agent likes green tea.", source="chat")
        found = await tool(client, "recall", query="green tea")
    assert found["results"][0]["id"] == stored["id"]
    source = await gateway.fetchval("SELECT source FROM memory WHERE id = $1::uuid", stored["id"])
    assert source == "chat (via Pocket agent)"
    actor = await gateway.fetchval(
        "SELECT actor FROM audit_log WHERE action = 'memory.remember' AND target = $1", stored["id"]
    )
    assert actor == "mcp:Pocket agent"
    hashes = await gateway.fetchval(
        "SELECT count(*) FROM gateway.token WHERE token_hash = $1 OR token_hash = $2",
        body["access_token"],
        body["refresh_token"],
    )
    assert hashes == 0  # only hashes are stored


async def test_refresh_rotates_and_a_replayed_refresh_token_ends_the_grant(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    first = await authorized(agent)

    refreshed = await agent.refresh(first["refresh_token"])
    assert refreshed.status_code == 200
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert (await mcp_post(gateway, INITIALIZE, second["access_token"])).status_code == 200

    replay = await agent.refresh(first["refresh_token"])
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    # The replay revoked the whole grant: the tokens from the good refresh stop working too.
    assert (await mcp_post(gateway, INITIALIZE, second["access_token"])).status_code == 401
    assert (await agent.refresh(second["refresh_token"])).status_code == 400


async def test_refresh_can_narrow_but_never_widen_scopes(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    tokens = await authorized(agent, scope="read")
    wider = await agent.refresh(tokens["refresh_token"], scope="read write")
    assert wider.status_code == 400
    assert wider.json()["error"] == "invalid_scope"


async def test_revoking_a_refresh_token_ends_the_grant_and_an_access_token_only_itself(
    start_gateway: StartGateway,
) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent, other = Agent(gateway, await gateway.register()), Agent(gateway, await gateway.register())
    one = await authorized(agent)
    two = await authorized(other)
    async with gateway.http() as http:
        revoked = await http.post("/revoke", data={"client_id": agent.client_id, "token": one["access_token"]})
        assert revoked.status_code == 200
        assert (await mcp_post(gateway, INITIALIZE, one["access_token"])).status_code == 401
        assert (await agent.refresh(one["refresh_token"])).status_code == 200  # the grant lives on

        await http.post("/revoke", data={"client_id": other.client_id, "token": two["refresh_token"]})
    assert (await mcp_post(gateway, INITIALIZE, two["access_token"])).status_code == 401
    assert (await other.refresh(two["refresh_token"])).status_code == 400


async def test_approving_a_registered_app_again_replaces_its_grant(start_gateway: StartGateway) -> None:
    """The same app asking again (for more scopes, or after losing its tokens): the latest approval holds."""
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    first = await authorized(agent, scope="read")

    # An approval whose code never reaches the app (abandoned, or sent to a port nobody listens on)
    # leaves the working connection alone: the old grant ends only when the new code is exchanged.
    verifier, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge))
    pending = query_of(answer.headers["location"])["code"]
    assert (await mcp_post(gateway, INITIALIZE, first["access_token"])).status_code == 200
    exchanged = await agent.exchange(pending, verifier)
    assert exchanged.status_code == 200, exchanged.text
    assert (await mcp_post(gateway, INITIALIZE, exchanged.json()["access_token"])).status_code == 200
    assert (await mcp_post(gateway, INITIALIZE, first["access_token"])).status_code == 401
    reasons = await gateway.fetchval(
        "SELECT array_agg(revoked_reason) FROM gateway.access_grant WHERE client_id = $1 AND revoked_at IS NOT NULL",
        agent.client_id,
    )
    assert reasons == ["replaced by a new approval"]

    second = await authorized(agent)
    assert (await mcp_post(gateway, INITIALIZE, exchanged.json()["access_token"])).status_code == 401
    assert (await agent.refresh(first["refresh_token"])).status_code == 400
    assert (await agent.refresh(exchanged.json()["refresh_token"])).status_code == 400
    assert (await mcp_post(gateway, INITIALIZE, second["access_token"])).status_code == 200
    live = await gateway.fetchval(
        "SELECT count(*) FROM gateway.access_grant WHERE client_id = $1 AND revoked_at IS NULL", agent.client_id
    )
    assert live == 1


async def test_confidential_client_must_authenticate(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    registered = await gateway.register(token_endpoint_auth_method="client_secret_basic")
    assert registered["client_secret"].startswith("mvcs_")
    agent = Agent(gateway, registered)
    assert "access_token" in await authorized(agent)

    impostor = Agent(gateway, {**registered, "client_secret": "mvcs_wrong"})
    verifier, challenge = pkce()
    async with gateway.http() as http:
        code = query_of((await http.get(agent.authorize_url(challenge))).headers["location"])["code"]
    refused = await impostor.exchange(code, verifier)
    assert refused.status_code == 401
    assert refused.json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    ("registered_method", "other_method"),
    [("client_secret_post", "client_secret_basic"), ("client_secret_basic", "client_secret_post")],
)
async def test_confidential_client_must_use_its_registered_authentication_method(
    start_gateway: StartGateway, registered_method: str, other_method: str
) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    registered = await gateway.register(token_endpoint_auth_method=registered_method)
    client_id, secret = registered["client_id"], registered["client_secret"]
    agent = Agent(gateway, registered)
    verifier, challenge = pkce()
    async with gateway.http() as http:
        code = query_of((await http.get(agent.authorize_url(challenge))).headers["location"])["code"]
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier, "client_id": client_id}

        async def exchange(method: str) -> Any:
            if method == "client_secret_basic":
                return await http.post("/token", data=form, auth=(client_id, secret))
            return await http.post("/token", data={**form, "client_secret": secret})

        refused = await exchange(other_method)
        assert refused.status_code == 401
        assert refused.json()["error"] == "invalid_client"
        assert registered_method in refused.json()["error_description"]
        assert (await exchange(registered_method)).status_code == 200


async def test_client_registered_without_the_refresh_grant_gets_and_uses_no_refresh_tokens(
    start_gateway: StartGateway,
) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    registered = await gateway.register(grant_types=["authorization_code"])
    assert registered["grant_types"] == ["authorization_code"]
    agent = Agent(gateway, registered)
    tokens = await authorized(agent)
    assert "refresh_token" not in tokens
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200
    refreshes = await gateway.fetchval(
        "SELECT count(*) FROM gateway.token t JOIN gateway.access_grant g ON g.id = t.grant_id"
        " WHERE g.client_id = $1 AND t.kind = 'refresh'",
        agent.client_id,
    )
    assert refreshes == 0

    # A refresh token from before the client's registration said otherwise is refused too.
    both = Agent(gateway, await gateway.register())
    old = await authorized(both)
    await gateway.fetchval(
        "UPDATE gateway.oauth_client SET metadata = jsonb_set(metadata, '{grant_types}', '[\"authorization_code\"]')"
        " WHERE client_id = $1",
        both.client_id,
    )
    refused = await both.refresh(old["refresh_token"])
    assert refused.status_code == 400
    assert refused.json()["error"] == "unauthorized_client"


async def test_registration_without_grant_types_is_given_refresh_tokens(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    async with gateway.http() as http:
        answer = await http.post("/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
    assert answer.status_code == 201
    assert answer.json()["grant_types"] == ["authorization_code", "refresh_token"]
    agent = Agent(gateway, answer.json())
    tokens = await authorized(agent)
    assert (await agent.refresh(tokens["refresh_token"])).status_code == 200


# --- refused, with nothing changed ------------------------------------------------------------------


async def test_refused_tokens_missing_expired_tampered_wrong_audience_in_query(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    good = (await authorized(agent))["access_token"]
    assert (await mcp_post(gateway, INITIALIZE, good)).status_code == 200

    tampered = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
    answer = await mcp_post(gateway, INITIALIZE, tampered)
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]

    assert (await mcp_post(gateway, INITIALIZE, None)).status_code == 401
    assert (await mcp_post(gateway, INITIALIZE, None, Authorization=f"Basic {good}")).status_code == 401

    async with gateway.http() as http:
        in_query = await http.post(f"/mcp?access_token={good}", json=INITIALIZE, headers={"Accept": "application/json"})
    assert in_query.status_code == 400

    # A token for the JSON API is not a token for /mcp.
    verifier, challenge = pkce()
    async with gateway.http() as http:
        location = (await http.get(agent.authorize_url(challenge, resource=f"{gateway.url}/api/v1"))).headers[
            "location"
        ]
    api_tokens = await agent.token(
        grant_type="authorization_code",
        code=query_of(location)["code"],
        code_verifier=verifier,
        redirect_uri=agent.redirect_uri,
        resource=f"{gateway.url}/api/v1",
    )
    assert api_tokens.status_code == 200
    wrong_audience = await mcp_post(gateway, INITIALIZE, api_tokens.json()["access_token"])
    assert wrong_audience.status_code == 401
    assert "another resource" in wrong_audience.json()["detail"]

    await gateway.fetchval(
        "UPDATE gateway.token SET expires_at = now() - interval '1 second' WHERE kind = 'access'"
        " AND grant_id IN (SELECT id FROM gateway.access_grant WHERE client_id = $1)",
        agent.client_id,
    )
    expired = await mcp_post(gateway, INITIALIZE, good)
    assert expired.status_code == 401
    assert "expired" in expired.json()["detail"]


async def test_authorize_refuses_unknown_resource_and_missing_pkce(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    async with gateway.http() as http:
        foreign = await http.get(agent.authorize_url(challenge, resource="https://evil.example/mcp"))
        plain = await http.get(agent.authorize_url(challenge, code_challenge_method="plain"))
        missing = await http.get(agent.authorize_url(""))
    assert query_of(foreign.headers["location"])["error"] == "invalid_target"
    assert query_of(plain.headers["location"])["error"] == "invalid_request"
    assert query_of(missing.headers["location"])["error"] == "invalid_request"
    assert query_of(missing.headers["location"])["iss"] == gateway.url
    assert await count_tokens(gateway, agent.client_id) == 0


async def test_pkce_verifier_mismatch_gets_no_tokens(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    other_verifier, _ = pkce()
    async with gateway.http() as http:
        code = query_of((await http.get(agent.authorize_url(challenge))).headers["location"])["code"]
    answer = await agent.exchange(code, other_verifier)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"
    assert await count_tokens(gateway, agent.client_id) == 0


async def test_reused_code_is_refused_and_revokes_what_it_issued(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    verifier, challenge = pkce()
    async with gateway.http() as http:
        code = query_of((await http.get(agent.authorize_url(challenge))).headers["location"])["code"]
    first = await agent.exchange(code, verifier)
    assert first.status_code == 200
    again = await agent.exchange(code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    assert (await mcp_post(gateway, INITIALIZE, first.json()["access_token"])).status_code == 401


async def test_redirect_uri_mismatch_is_never_redirected_to(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    grants_before = await gateway.fetchval("SELECT count(*) FROM gateway.access_grant")
    async with gateway.http() as http:
        for uri in (
            "https://evil.example/callback",
            REDIRECT + "/x",
            "http://127.0.0.1:33419/other",  # any port on loopback, but the path must match
            "http://127.0.0.1:33419/callback?next=1",
            "http://localhost:33418/callback",  # the host must match as registered
            "http://127.0.0.2:33418/callback",
            "https://127.0.0.1:33418/callback",
        ):
            answer = await http.get(agent.authorize_url(challenge, redirect_uri=uri))
            assert answer.status_code == 400
            assert "location" not in answer.headers
            assert "redirect_uri mismatch" in answer.text
    assert await gateway.fetchval("SELECT count(*) FROM gateway.access_grant") == grants_before

    verifier, challenge = pkce()
    async with gateway.http() as http:
        code = query_of((await http.get(agent.authorize_url(challenge))).headers["location"])["code"]
    switched = await agent.token(
        grant_type="authorization_code", code=code, code_verifier=verifier, redirect_uri="http://127.0.0.1:1/cb"
    )
    assert switched.status_code == 400
    assert switched.json()["error"] == "invalid_grant"


@pytest.mark.parametrize(
    ("registered", "used", "another_port"),
    [
        (REDIRECT, "http://127.0.0.1:51999/callback", "http://127.0.0.1:51998/callback"),
        ("http://[::1]:33418/cb?app=x", "http://[::1]:40001/cb?app=x", "http://[::1]:40002/cb?app=x"),
        ("http://localhost/callback", "http://localhost:40003/callback", "http://localhost/callback"),
    ],
)
async def test_loopback_redirect_may_use_any_port_and_the_token_request_must_repeat_it(
    start_gateway: StartGateway, registered: str, used: str, another_port: str
) -> None:
    """RFC 8252 §7.3: native apps pick a free port per login."""
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register(redirect_uris=[registered]), redirect_uri=used)
    verifier, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge))
    assert answer.status_code == 302, answer.text
    assert answer.headers["location"].startswith(used + ("&" if "?" in used else "?"))
    code = query_of(answer.headers["location"])["code"]
    refused = await agent.token(
        grant_type="authorization_code", code=code, code_verifier=verifier, redirect_uri=another_port
    )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"

    verifier, challenge = pkce()
    async with gateway.http() as http:
        code = query_of((await http.get(agent.authorize_url(challenge))).headers["location"])["code"]
    tokens = await agent.exchange(code, verifier)
    assert tokens.status_code == 200, tokens.text


@pytest.mark.parametrize(
    "uri",
    [
        "http://evil.example/callback",
        "http://192.168.1.20/callback",
        "https://app.example/cb#fragment",
        "javascript:alert(1)",
        "cursor://anysphere.cursor-mcp/oauth/callback",
    ],
)
async def test_registration_refuses_unsafe_redirect_uris(start_gateway: StartGateway, uri: str) -> None:
    gateway = await start_gateway()
    before = await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client")
    async with gateway.http() as http:
        answer = await http.post("/register", json={"client_name": "x", "redirect_uris": [uri]})
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_redirect_uri"
    assert await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client") == before


async def test_private_use_scheme_allowed_when_the_operator_lists_it(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(oauth={"extra_redirect_schemes": ["cursor"]})
    client = await gateway.register(redirect_uris=["cursor://anysphere.cursor-mcp/oauth/callback"])
    assert client["redirect_uris"] == ["cursor://anysphere.cursor-mcp/oauth/callback"]


async def test_revoked_grant_is_refused_at_once(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    tokens = await authorized(agent)
    await gateway.fetchval("UPDATE gateway.access_grant SET revoked_at = now() WHERE client_id = $1", agent.client_id)
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 401
    assert (await agent.refresh(tokens["refresh_token"])).status_code == 400


async def test_bad_origin_is_forbidden_before_the_token_is_looked_at(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    tokens = await authorized(Agent(gateway, await gateway.register()))
    answer = await mcp_post(gateway, INITIALIZE, tokens["access_token"], Origin="https://evil.example")
    assert answer.status_code == 403
    ok = await mcp_post(gateway, INITIALIZE, tokens["access_token"], Origin=gateway.url)
    assert ok.status_code == 200


async def test_read_only_grant_cannot_remember(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    tokens = await authorized(Agent(gateway, await gateway.register()), scope="read")
    assert tokens["scope"] == "read"
    before = await gateway.fetchval("SELECT count(*) FROM memory")
    answer = await mcp_post(
        gateway, tool_call("remember", {"content": "Read-only agents must not write this."}), tokens["access_token"]
    )
    assert answer.status_code == 403
    challenge = answer.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="read write"' in challenge
    # The body is a JSON-RPC error for the call, which MCP clients pass on to the agent.
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()
    assert error["id"] == 2 and error["error"]["data"] == {"required_scope": "write", "scopes": "read"}
    assert await gateway.fetchval("SELECT count(*) FROM memory") == before
    for mode in ("legacy", "2026-07-28"):
        async with mcp_client(gateway.mcp, tokens["access_token"], mode=mode) as client:
            found = await tool(client, "recall", query="anything at all")
            listed = {t.name for t in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as refused:
                await client.call_tool("remember", {"content": "Read-only agents must not write this."})
        assert found["results"] == []
        assert listed == {
            "get_operating_guide",
            "recall",
            "list_memories",
            "audit_memory",
            "explain_memory",
            "archive_search",
            "archive_read",
        }
        message = str(refused.value)
        assert "remember needs the 'write' scope" in message and "(it has: read)" in message
        assert missing_scope_message("remember", "write", ["read"]) in message
        assert "revoke" not in message  # approving again is enough
    assert await gateway.fetchval("SELECT count(*) FROM memory") == before


async def test_the_mcp_service_refuses_a_writing_tool_to_a_read_identity_as_a_tool_error(mcp_url: str) -> None:
    """Behind the gateway's 403, mcp itself holds the line, in words the agent can act on."""
    identity = IdentitySigner(SECRET).sign(Identity(subject=unique("reader"), client="t", scopes=frozenset({"read"})))
    async with (
        httpx2.AsyncClient(headers={HTTP_HEADER: identity}, timeout=60) as http,
        Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        listed = {t.name for t in (await client.list_tools()).tools}
        refused = await client.call_tool("forget", {"memory_id": "00000000-0000-0000-0000-000000000000"})
    assert "forget" not in listed and "recall" in listed
    assert refused.is_error
    text = refused.content[0].text  # type: ignore[union-attr]
    assert text == missing_scope_message("forget", "write", ["read"])


async def test_a_write_grant_lists_every_tool(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    tokens = await authorized(Agent(gateway, await gateway.register()), scope="read write")
    async with mcp_client(gateway.mcp, tokens["access_token"]) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
    assert {"remember", "bulk_remember", "forget", "supersede", "invalidate", "propose_memory", "recall"} <= listed


async def test_spent_state_is_purged(start_gateway: StartGateway) -> None:
    gateway, _ = await auto_gateway(start_gateway)
    agent = Agent(gateway, await gateway.register())
    tokens = await authorized(agent)
    await gateway.fetchval(
        "UPDATE gateway.token SET expires_at = now() - interval '2 days' WHERE grant_id IN"
        " (SELECT id FROM gateway.access_grant WHERE client_id = $1)",
        agent.client_id,
    )
    async with gateway.store() as store:
        assert await store.purge_expired() >= 2
    assert await count_tokens(gateway, agent.client_id) == 0
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 401


async def test_text_with_a_nul_character_is_refused_not_failed(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    before = await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client")
    async with gateway.http() as http:
        answer = await http.post("/register", json={"client_name": "Kitchen\u0000tablet", "redirect_uris": [REDIRECT]})
    assert answer.status_code == 400
    assert "NUL" in answer.json()["detail"]
    assert await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client") == before
