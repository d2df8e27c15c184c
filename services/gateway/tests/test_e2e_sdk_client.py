"""The official MCP Python SDK client with its OAuth provider, against all services as processes.

It discovers the server from the 401, registers itself, sends the owner through the consent page
(played here by a signed-in browser), calls tools, refreshes after its access token expires, and
is refused once the owner revokes the grant. A second test does the same headlessly with the
test-only auto-approve setting, as `make conformance` does.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from gateway_helpers import INITIALIZE, MCP_HEADERS, PASSWORD, csrf_of, hidden_fields, query_of
from mcp import Client, MCPError
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack

pytestmark = pytest.mark.e2e

REDIRECT = "http://127.0.0.1:33418/callback"
ACCESS_TOKEN_SECONDS = 2


class MemoryStorage:
    """Where the SDK keeps its registration and tokens (a real app would use a keychain)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.token_writes = 0

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.token_writes += 1

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class OwnerBrowser:
    """The owner's signed-in browser: opens the authorize URL and approves (or refuses to)."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, follow_redirects=False, timeout=30)
        self.authorize_calls = 0
        self.asked_scopes: list[str] = []
        self.approve = True
        self.scopes = ["read", "write"]
        """What the owner ticks on the consent page, whatever the app asked for."""
        self.result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, url: str) -> None:
        self.authorize_calls += 1
        self.asked_scopes.append(query_of(url).get("scope", ""))
        if not self.approve:
            raise PermissionError("the owner did not approve this time")
        page = await self.http.get(url)
        assert page.status_code == 200, page.text
        form: dict[str, Any] = dict(hidden_fields(page.text))
        form.update(vault=["default"], scope=self.scopes, decision="approve")
        answer = await self.http.post("/authorize", data=form)
        assert answer.status_code == 303, answer.text
        params = query_of(answer.headers["location"])
        self.result = AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


@pytest.fixture
def fresh_stack(start_stack: StackStarter, postgres_dsn: str) -> Iterator[StackStarter]:
    """Stacks on a database of their own (the dev owner and its 'default' vault are fixed names)."""
    created: list[str] = []
    stacks: list[Stack] = []

    def start(**options: Any) -> Stack:
        name = f"memvault_gw_e2e_{secrets.token_hex(4)}"
        options["postgres_dsn"] = create_database(postgres_dsn, name, exist_ok=False)
        created.append(name)
        stacks.append(start_stack(**options))
        return stacks[-1]

    yield start
    for stack in stacks:
        stack.stop()
    for name in created:
        drop_database(postgres_dsn, name)


def oauth_stack(fresh_stack: StackStarter, **gateway_env: str) -> Stack:
    return fresh_stack(
        services=("vault", "mcp", "gateway"),
        service_env={
            "gateway": {
                "MEMVAULT_GATEWAY__DEV_MODE": "false",
                "MEMVAULT_OAUTH__ACCESS_TOKEN_SECONDS": str(ACCESS_TOKEN_SECONDS),
                **gateway_env,
            }
        },
    )


def client_metadata() -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name="SDK e2e agent",
        redirect_uris=[REDIRECT],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


async def structured(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def raw_status(url: str, token: str) -> int:
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
    return answer.status_code


async def signed_up_owner(stack: Stack) -> OwnerBrowser:
    """The owner's browser, signed in after setting the password through a setup link."""
    link = subprocess.run(  # noqa: ASYNC221 (a one-off CLI call before any client runs)
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--username", "owner"],
        env={**os.environ, **stack.env_for("gateway")},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    browser = OwnerBrowser(stack.gateway_url)
    page = await browser.http.get(link.removeprefix(stack.gateway_url))
    signed_up = await browser.http.post(
        link.removeprefix(stack.gateway_url),
        data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf_of(page.text)},
    )
    assert signed_up.status_code == 303
    return browser


async def test_sdk_client_registers_is_approved_refreshes_and_is_refused_after_revocation(
    fresh_stack: StackStarter,
) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_up_owner(stack)
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=stack.mcp_url,
        client_metadata=client_metadata(),
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    async with (
        httpx2.AsyncClient(auth=provider, timeout=60) as http,
        Client(streamable_http_client(stack.mcp_url, http_client=http), mode="auto") as client,  # type: ignore[arg-type]
    ):
        stored = await structured(client, "remember", content="The SDK e2e agent prefers tabs over spaces.")
        assert stored["outcome"] == "stored"
        assert browser.authorize_calls == 1
        assert storage.client_info is not None and storage.client_info.client_id.startswith("mvcl_")
        assert storage.tokens is not None and storage.tokens.scope == "read write"
        first_token = storage.tokens.access_token

        # Let the access token expire (the clock, not async work, is what we wait for).
        deadline = time.monotonic() + ACCESS_TOKEN_SECONDS + 1.5
        while time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.25)
        assert await raw_status(stack.mcp_url, first_token) == 401

        found = await structured(client, "recall", query="tabs or spaces")
        assert found["results"][0]["id"] == stored["id"]
        assert storage.tokens.access_token != first_token  # refreshed, not re-authorized
        assert browser.authorize_calls == 1
        assert storage.token_writes == 2

        me = (await browser.http.get("/api/v1/me")).json()
        grants = (await browser.http.get("/api/v1/grants")).json()["grants"]
        assert [(g["name"], g["vaults"]) for g in grants] == [("SDK e2e agent", ["default"])]
        revoked = await browser.http.delete(
            f"/api/v1/grants/{grants[0]['id']}", headers={"X-CSRF-Token": me["csrf_token"]}
        )
        assert revoked.status_code == 200

    browser.approve = False
    assert await raw_status(stack.mcp_url, storage.tokens.access_token) == 401
    # The SDK raises from its transport's task group, so the refusal arrives wrapped.
    with pytest.raises(BaseException) as refused:  # noqa: PT011
        async with (
            httpx2.AsyncClient(auth=provider, timeout=60) as http,
            Client(streamable_http_client(stack.mcp_url, http_client=http), mode="auto") as client,  # type: ignore[arg-type]
        ):
            await client.call_tool("recall", {"query": "tabs"})
    assert "did not approve" in "".join(str(e) for e in getattr(refused.value, "exceptions", [refused.value]))
    assert browser.authorize_calls == 2  # the 401 sent the client back to the owner, who said no

    source = await browser.http.get("/api/v1/audit")
    actions = [e["action"] for e in source.json()["entries"]]
    assert {"grant.create", "grant.revoke", "session.create"} <= set(actions)
    await browser.http.aclose()


async def test_sdk_client_completes_headlessly_with_the_test_auto_approve_setting(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack, MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT="owner")
    authorize_calls: list[str] = []
    result: dict[str, AuthorizationCodeResult] = {}

    async def redirect_handler(url: str) -> None:
        authorize_calls.append(url)
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as http:
            answer = await http.get(url)
        assert answer.status_code == 302
        params = query_of(answer.headers["location"])
        result["code"] = AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params["iss"])

    async def callback_handler() -> AuthorizationCodeResult:
        return result["code"]

    provider = OAuthClientProvider(
        server_url=stack.mcp_url,
        client_metadata=client_metadata(),
        storage=MemoryStorage(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with (
        httpx2.AsyncClient(auth=provider, timeout=60) as http,
        Client(streamable_http_client(stack.mcp_url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        guide = await structured(client, "get_operating_guide")
    assert "default" in str(guide)
    (url,) = authorize_calls
    query = query_of(url)
    assert query["resource"] == stack.mcp_url
    assert query["code_challenge_method"] == "S256"
    assert "test setting" in stack.log_path("gateway").read_text().lower()


async def test_sdk_client_with_a_read_only_grant_sees_no_write_tools_and_hears_who_grants_write(
    fresh_stack: StackStarter,
) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_up_owner(stack)
    browser.scopes = ["read"]
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=stack.mcp_url,
        client_metadata=client_metadata(),
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    async with (
        httpx2.AsyncClient(auth=provider, timeout=60) as http,
        Client(streamable_http_client(stack.mcp_url, http_client=http), mode="auto") as client,  # type: ignore[arg-type]
    ):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert storage.tokens is not None and storage.tokens.scope == "read"
        assert listed == {"get_operating_guide", "recall", "list_memories", "audit_memory", "explain_memory"}

        # The gateway answers 403 insufficient_scope: the SDK asks the owner for 'write' (step-up); the
        # owner approves 'read' again, and the agent reads which scope is missing and who grants it.
        with pytest.raises(MCPError) as refused:
            await client.call_tool("remember", {"content": "A read-only agent must not store this."})
        assert browser.authorize_calls == 2
        assert set(browser.asked_scopes[1].split()) == {"read", "write"}
        message = str(refused.value)
        assert "remember needs the 'write' scope" in message and "(it has: read)" in message
        assert "vault owner" in message and f"{stack.gateway_url}/account" in message
        assert (await structured(client, "list_memories"))["memories"] == []

        # Clients that step up keep working: approved with 'write' this time, the same call goes through.
        browser.scopes = ["read", "write"]
        stored = await structured(client, "remember", content="The read-only test agent may now write.")
        assert stored["outcome"] == "stored"
        assert browser.authorize_calls == 3
        assert storage.tokens.scope == "read write"
    await browser.http.aclose()
