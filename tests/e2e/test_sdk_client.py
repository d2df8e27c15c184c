"""The official MCP Python SDK client with its OAuth provider, against all services as processes.

It discovers the server from the 401, registers itself, sends the owner through the consent page
(played here by a signed-in browser), calls tools, refreshes after its access token expires, and
is refused once the owner revokes the grant. A second test does the same headlessly with the
test-only auto-approve setting, as `make conformance` does.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from e2e_helpers import INITIALIZE, MCP_HEADERS, PASSWORD, csrf_of, hidden_fields, query_of
from mcp import Client, MCPError
from mcp.client.auth import OAuthClientProvider
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from memvault_core.identity import missing_scope_message
from memvault_devstack.fixtures import StackStarter
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


async def signed_in_owner(stack: Stack, username: str = "owner") -> OwnerBrowser:
    """The owner, signed up through a setup link, in a browser that keeps the session."""
    link = subprocess.run(  # noqa: ASYNC221 (a one-off CLI call before any client runs)
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--username", username],
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


async def test_sdk_client_registers_is_approved_refreshes_and_is_refused_after_revocation(
    fresh_stack: StackStarter,
) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_in_owner(stack)

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


def stdio_bridge(url: str, *extra: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """`memvault-mcp stdio`, as an app that only speaks stdio would start it."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "memvault_mcp", "stdio", "--url", url, "--no-browser", *extra], env=env
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_bridge_with_a_service_token_remembers_and_recalls(fresh_stack: StackStarter, mode: str) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_in_owner(stack, "ana.souza")
    connect = (await browser.http.get("/connect")).text
    assert "memvault is ana.souza's long-term memory" in connect  # the owner's display name
    me = (await browser.http.get("/api/v1/me")).json()
    (vault,) = [v["name"] for v in (await browser.http.get("/api/v1/vaults")).json()["vaults"]]
    created = await browser.http.post(
        "/api/v1/service-tokens",
        json={"name": "stdio app", "scopes": ["read", "write"], "vaults": [vault]},
        headers={"X-CSRF-Token": me["csrf_token"]},
    )
    assert created.status_code == 201, created.text
    env = {"MEMVAULT_TOKEN": created.json()["token"]}
    async with Client(stdio_bridge(stack.mcp_url, "--token-env", "MEMVAULT_TOKEN", env=env), mode=mode) as client:
        assert "get_operating_guide" in {t.name for t in (await client.list_tools()).tools}
        assert "get_operating_guide" in (client.instructions or "")
        guide = (await structured(client, "get_operating_guide"))["guide"]
        assert "This vault is ana.souza's long-term memory" in guide
        assert "read `/connect` on the memvault server" in guide
        stored = await structured(client, "remember", content="The stdio bridge user keeps notes in Obsidian.")
        assert stored["outcome"] == "stored"
        found = await structured(client, "recall", query="where are notes kept")
        assert found["results"][0]["id"] == stored["id"]
        refused = await client.call_tool("recall", {"query": "x", "vault": "not-granted"})
        assert refused.is_error  # the gateway's answer, passed through
    source = (await browser.http.get(f"/api/v1/vaults/{vault}/memories/{stored['id']}")).json()
    assert "stdio app" in str(source)
    await browser.http.aclose()

    bad = subprocess.run(  # noqa: ASYNC221 (a CLI check; no client is running)
        [sys.executable, "-m", "memvault_mcp", "stdio", "--url", stack.mcp_url, "--token-env", "MEMVAULT_NO_SUCH"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "MEMVAULT_NO_SUCH"},
    )
    assert bad.returncode != 0 and "MEMVAULT_NO_SUCH is empty or unset" in bad.stderr


async def test_stdio_bridge_signs_in_with_oauth_on_a_loopback_port_and_keeps_its_tokens(
    fresh_stack: StackStarter, tmp_path: Path
) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack, MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT="owner")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    errors = tmp_path / "stderr.txt"

    async def approve_when_asked() -> str:
        """Play the person: open the address the bridge printed; the test setting approves it."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            urls = [line for line in errors.read_text().splitlines() if line.startswith("http")]
            if urls:
                async with httpx.AsyncClient(timeout=30) as http:
                    approved = await http.get(urls[0])
                    assert approved.status_code == 302, approved.text
                    answer = await http.get(approved.headers["location"])
                assert answer.status_code == 200 and "signed in" in answer.text, answer.text
                return urls[0]
            await asyncio.sleep(0.1)
        raise AssertionError(f"the bridge printed no sign-in address: {errors.read_text()}")

    async def use_the_bridge() -> tuple[dict[str, Any], dict[str, Any]]:
        with errors.open("w") as errlog:
            async with Client(
                stdio_client(stdio_bridge(stack.mcp_url, env=env), errlog=errlog), mode="legacy"
            ) as client:
                stored = await structured(client, "remember", content="The OAuth stdio user drinks green tea.")
                return stored, await structured(client, "recall", query="green tea")

    errors.touch()
    approving, using = asyncio.create_task(approve_when_asked()), asyncio.create_task(use_the_bridge())
    await asyncio.wait({approving, using}, return_when=asyncio.FIRST_EXCEPTION)
    url = await approving
    stored, found = await using
    assert found["results"][0]["id"] == stored["id"]
    assert query_of(url)["redirect_uri"].startswith("http://127.0.0.1:")

    (saved,) = (tmp_path / "config" / "memvault").iterdir()
    assert saved.stat().st_mode & 0o777 == 0o600
    assert "access_token" in saved.read_text()

    # A second start, once the access token has expired, refreshes it: no new sign-in.
    expires_at = json.loads(saved.read_text())["expires_at"]
    while time.time() < expires_at:  # noqa: ASYNC110 (the clock, not async work, is what we wait for)
        await asyncio.sleep(0.25)
    first_refresh = json.loads(saved.read_text())["tokens"]["refresh_token"]
    with errors.open("w") as errlog:
        async with Client(stdio_client(stdio_bridge(stack.mcp_url, env=env), errlog=errlog), mode="legacy") as client:
            again = await structured(client, "recall", query="green tea")
    assert again["results"][0]["id"] == stored["id"]
    assert "http" not in errors.read_text()
    assert json.loads(saved.read_text())["tokens"]["refresh_token"] != first_refresh


async def test_sdk_client_with_a_read_only_grant_sees_no_write_tools_and_hears_who_grants_write(
    fresh_stack: StackStarter,
) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_in_owner(stack)
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
        assert listed == {
            "get_operating_guide",
            "recall",
            "list_memories",
            "audit_memory",
            "explain_memory",
            "archive_search",
            "archive_read",
        }

        # The gateway answers 403 insufficient_scope: the SDK asks the owner for 'write' (step-up); the
        # owner approves 'read' again, and the agent reads which scope is missing and who grants it.
        with pytest.raises(MCPError) as refused:
            await client.call_tool("remember", {"content": "A read-only agent must not store this."})
        assert browser.authorize_calls == 2
        assert set(browser.asked_scopes[1].split()) == {"read", "write"}
        message = str(refused.value)
        assert "remember needs the 'write' scope" in message and "(it has: read)" in message
        assert missing_scope_message("remember", "write", ["read"]) in message and "revoke" not in message
        assert (await structured(client, "list_memories"))["memories"] == []

        # Clients that step up keep working: approved with 'write' this time, the same call goes through.
        browser.scopes = ["read", "write"]
        stored = await structured(client, "remember", content="The read-only test agent may now write.")
        assert stored["outcome"] == "stored"
        assert browser.authorize_calls == 3
        assert storage.tokens.scope == "read write"
    await browser.http.aclose()
