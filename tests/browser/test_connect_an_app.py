"""Connecting an app, in Chromium: the official MCP SDK client asks, the owner decides in the browser.

Each app is the SDK's OAuthClientProvider over Streamable HTTP to the gateway's /mcp. Its
redirect handler opens the authorize URL in the owner's Chromium page, as a desktop app opens the
system browser; its redirect URI is a loopback server the test runs (the page a person sees when
the browser comes back: "you can close this tab"), which hands the code, or the refusal, to the
SDK's callback handler. The owner acts in the page meanwhile, as a person would.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import httpx2
import pytest
from browser_helpers import PASSWORD, OAuthStack, choose_password, setup_link
from gateway_helpers import INITIALIZE, MCP_HEADERS
from mcp import Client
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import Locator, Page, Route, expect

from memvault_devstack.browser import PageShots
from memvault_devstack.stack import Stack

CLOSE_THIS_TAB = "You can close this tab"
WAIT_SECONDS = 60


class MemoryStorage:
    """Where the SDK keeps its registration and tokens (a real app would use a keychain)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class LoopbackRedirect:
    """The app's redirect URI on the owner's machine (RFC 8252 §7.3): a tiny HTTP server on a free port.

    It answers the browser with a page saying whether the app is connected and that the tab can
    be closed, and queues what arrived (code or error) for the SDK's callback handler.
    """

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.arrivals: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        arrivals = self.arrivals

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path != "/callback":
                    self.send_error(404)
                    return
                query = dict(parse_qsl(url.query))
                if "code" in query:
                    text = f"The app is connected to memvault. {CLOSE_THIS_TAB} and go back to the app."
                else:
                    reason = query.get("error_description") or query.get("error", "no code came back")
                    text = f"The app was not connected: {reason}. {CLOSE_THIS_TAB}."
                body = f"<!doctype html><title>App</title><h1>Example app</h1><p>{escape(text)}</p>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                loop.call_soon_threadsafe(arrivals.put_nowait, query)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the query holds the authorization code."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/callback"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class App:
    """An MCP app on the owner's machine: the official SDK client, whose browser is the owner's page."""

    def __init__(self, stack: Stack, name: str, page: Page, redirect: LoopbackRedirect) -> None:
        self.stack = stack
        self.page = page
        self.redirect = redirect
        self.storage = MemoryStorage()
        self.authorize_urls: list[str] = []
        self.owner: asyncio.Task[None] | None = None
        self.provider = OAuthClientProvider(
            server_url=stack.mcp_url,
            client_metadata=OAuthClientMetadata(
                client_name=name,
                redirect_uris=[redirect.url],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=self.storage,
            redirect_handler=self.open_in_browser,
            callback_handler=self.wait_for_redirect,
        )

    def owner_will(self, act: Callable[[], Awaitable[None]]) -> None:
        """What the owner does in the browser when this app next sends it to memvault."""
        self.owner = asyncio.ensure_future(act())

    async def open_in_browser(self, url: str) -> None:
        self.authorize_urls.append(url)
        await self.page.goto(url)

    async def wait_for_redirect(self) -> AuthorizationCodeResult:
        arrival = asyncio.ensure_future(self.redirect.arrivals.get())
        waiting: set[asyncio.Future[Any]] = {arrival}
        if self.owner is not None:
            waiting.add(self.owner)
        async with asyncio.timeout(WAIT_SECONDS):
            while not arrival.done():
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if self.owner in done and self.owner.exception() is not None:
                    arrival.cancel()
                    raise self.owner.exception()  # type: ignore[misc]
        query = arrival.result()
        if "code" not in query:
            # What a real app does with an error redirect: stop, and say what memvault said.
            raise OAuthFlowError(
                f"memvault did not connect this app: {query.get('error')} ({query.get('error_description', '')})"
            )
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def owner_done(self) -> None:
        """Wait for the owner's part; it failing fails the test with its own message."""
        assert self.owner is not None
        await self.owner
        self.owner = None

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(auth=self.provider, timeout=WAIT_SECONDS) as http,
            Client(streamable_http_client(self.stack.mcp_url, http_client=http), mode="auto") as client,  # type: ignore[arg-type]
        ):
            yield client

    @property
    def access_token(self) -> str:
        assert self.storage.tokens is not None
        return self.storage.tokens.access_token


async def structured(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def structured_error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


async def raw_post(url: str, token: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})


def messages_of(error: BaseException) -> str:
    """The text of an error the SDK raised, out of the exception groups its task groups wrap it in."""
    if isinstance(error, BaseExceptionGroup):
        return " ".join(messages_of(inner) for inner in error.exceptions)
    return str(error)


@pytest.fixture
async def loopback() -> AsyncIterator[Callable[[], LoopbackRedirect]]:
    started: list[LoopbackRedirect] = []

    def start() -> LoopbackRedirect:
        started.append(LoopbackRedirect())
        return started[-1]

    yield start
    for server in started:
        server.close()


async def create_vault(page: Page, base_url: str, name: str) -> None:
    """Create a vault through /api/v1 with the page's session (its cookies and CSRF token)."""
    me = await page.context.request.get(f"{base_url}/api/v1/me")
    created = await page.context.request.post(
        f"{base_url}/api/v1/vaults", data={"name": name}, headers={"X-CSRF-Token": (await me.json())["csrf_token"]}
    )
    assert created.status == 201, await created.text()


def vault_box(page: Page, name: str) -> Locator:
    """The consent page's checkbox for a vault ("work (you are owner)")."""
    return page.get_by_role("checkbox", name=re.compile(rf"^{re.escape(name)} \("))


def scope_box(page: Page, name: str) -> Locator:
    """The consent page's checkbox for a permission ("read: read memories ...")."""
    return page.get_by_role("checkbox", name=re.compile(rf"^{re.escape(name)}:"))


async def test_an_app_connects_with_the_vaults_and_permissions_the_owner_chooses(
    oauth_stack: OAuthStack, browser_pages: PageShots, loopback: Callable[[], LoopbackRedirect]
) -> None:
    stack = await oauth_stack()
    page = await browser_pages.new()
    await choose_password(page, await asyncio.to_thread(setup_link, stack))
    await create_vault(page, stack.gateway_url, "work")
    await create_vault(page, stack.gateway_url, "family")
    app = App(stack, "Notes agent", page, loopback())

    def vault(name: str) -> Locator:
        return vault_box(page, name)

    def scope(name: str) -> Locator:
        return scope_box(page, name)

    async def read_only_on_default_and_work() -> None:
        await expect(page.locator("h1")).to_have_text("Connect an app")
        await expect(page.locator("body")).to_contain_text("Notes agent wants to use your memvault memory as owner")
        await expect(page.locator("body")).to_contain_text(
            "your browser goes back to the app on this computer (127.0.0.1). Only approve if you just started"
        )
        await expect(page.locator("body")).not_to_contain_text("already")
        await expect(vault("default")).to_be_checked()
        await expect(vault("work")).not_to_be_checked()
        await expect(vault("family")).not_to_be_checked()
        await expect(scope("read")).to_be_checked()
        await expect(scope("write")).to_be_checked()
        await expect(scope("admin")).not_to_be_checked()
        # No vault at all is not a choice: the page says so and asks again, keeping what was unticked.
        await vault("default").uncheck()
        await scope("write").uncheck()
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator(".error")).to_have_text(
            "Choose at least one vault and at least one permission, or Deny."
        )
        await expect(vault("default")).not_to_be_checked()
        await expect(scope("read")).to_be_checked()
        await expect(scope("write")).not_to_be_checked()
        await vault("default").check()
        await vault("work").check()
        await browser_pages.shot(page, "consent-chosen")
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("body")).to_contain_text("The app is connected to memvault")
        await browser_pages.shot(page, "back-at-the-app")

    app.owner_will(read_only_on_default_and_work)
    async with app.connected() as client:
        guide = await structured(client, "get_operating_guide")
        await app.owner_done()
        assert page.url.startswith(app.redirect.url + "?code=")
        assert sorted(v["name"] for v in guide["vaults"]) == ["default", "work"]
        assert app.storage.tokens is not None and app.storage.tokens.scope == "read"
        found = await structured(client, "recall", query="anything at all", vault="work")
        assert found["results"] == []
        refused = await structured_error(client, "recall", query="anything", vault="family")
        assert "family" in refused
        assert len(app.authorize_urls) == 1

        # Read only means read only: a write with this token is refused before it reaches the vault.
        write = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "The notes agent may not write."}},
        }
        answer = await raw_post(stack.mcp_url, app.access_token, write)
        assert answer.status_code == 403
        assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]

        await page.goto(f"{stack.gateway_url}/account")
        row = page.get_by_role("row", name=re.compile("Notes agent"))
        await expect(row).to_contain_text("read")
        await expect(row).not_to_contain_text("write")
        await expect(row).to_contain_text("default, work")

        # The SDK hears that 403 and asks the owner again for what the call needs (a scope step-up).
        async def grant_write_as_well() -> None:
            await expect(page.locator("h1")).to_have_text("Connect an app")
            await expect(page.locator("body")).to_contain_text("Notes agent wants to use your memvault memory")
            await expect(page.locator("body")).to_contain_text(
                "Notes agent already has access: read on default, work. Approving replaces it with what you"
                " choose here; Deny leaves it as it is."
            )
            await expect(scope("write")).to_be_checked()
            await expect(vault("work")).to_be_checked()
            await expect(vault("default")).to_be_checked()
            await expect(vault("family")).not_to_be_checked()
            await browser_pages.shot(page, "consent-step-up")
            await page.get_by_role("button", name="Approve").click()
            await expect(page.locator("body")).to_contain_text("The app is connected to memvault")

        app.owner_will(grant_write_as_well)
        read_only_token = app.access_token
        stored = await structured(client, "remember", content="The work vault holds the deploy notes.", vault="work")
        await app.owner_done()
        assert stored["outcome"] == "stored" and stored["vault"] == "work"
        assert len(app.authorize_urls) == 2
        assert app.storage.tokens.scope == "read write"
        found = await structured(client, "recall", query="deploy notes", vault="work")
        assert [r["id"] for r in found["results"]] == [stored["id"]]

    # The owner's latest answer is the app's access: one grant, and the read-only token is gone.
    assert (await raw_post(stack.mcp_url, read_only_token, INITIALIZE)).status_code == 401
    await page.goto(f"{stack.gateway_url}/account")
    await expect(page.get_by_role("row", name=re.compile("Notes agent"))).to_have_count(1)
    await expect(page.get_by_role("row", name=re.compile("Notes agent"))).to_contain_text("read write")
    await expect(page.get_by_role("row", name=re.compile("Notes agent"))).to_contain_text("default, work")


async def test_signing_in_on_the_way_then_deny_and_revoke(
    oauth_stack: OAuthStack, browser_pages: PageShots, loopback: Callable[[], LoopbackRedirect]
) -> None:
    stack = await oauth_stack()
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new()  # the owner's everyday browser: not signed in yet
    notes = App(stack, "Notes agent", page, loopback())

    async def sign_in_then_approve() -> None:
        await expect(page.locator("h1")).to_have_text("Sign in to memvault")
        assert urlsplit(page.url).path == "/login"
        await expect(page.locator(".notice")).to_have_text(
            "An app asked to connect to your memvault. Sign in, then choose what it may use."
        )
        await page.get_by_label("User name").fill("owner")
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator("h1")).to_have_text("Connect an app")
        await expect(page.locator("body")).to_contain_text("Notes agent wants to use your memvault memory")
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("body")).to_contain_text("The app is connected to memvault")
        await browser_pages.shot(page, "back-at-the-app")

    notes.owner_will(sign_in_then_approve)
    # The SDK ends a connection whose authorization fails: the refused call is the session's last.
    reached_the_last_call = False

    async def use_until_refused() -> None:
        nonlocal reached_the_last_call
        async with notes.connected() as client:
            stored = await structured(client, "remember", content="The owner's cat is called Miso.")
            await notes.owner_done()
            assert stored["outcome"] == "stored"
            found = await structured(client, "recall", query="cat called Miso")
            assert found["results"][0]["id"] == stored["id"]

            # A second app: the owner, signed in now, goes straight to the consent page and says no.
            other = App(stack, "Other agent", page, loopback())

            async def deny() -> None:
                await expect(page.locator("body")).to_contain_text("Other agent wants to use your memvault memory")
                await page.get_by_role("button", name="Deny").click()
                await expect(page.locator("body")).to_contain_text("The app was not connected: the owner denied access")
                await browser_pages.shot(page, "back-at-the-app-denied")

            other.owner_will(deny)
            with pytest.raises(BaseException) as denied:  # noqa: PT011 (the SDK wraps it in exception groups)
                async with other.connected() as refused_client:
                    await refused_client.call_tool("recall", {"query": "cat"})
            await other.owner_done()
            assert "memvault did not connect this app: access_denied (the owner denied access)" in messages_of(
                denied.value
            )
            assert dict(parse_qsl(urlsplit(page.url).query))["error"] == "access_denied"
            assert other.storage.tokens is None

            await page.goto(f"{stack.gateway_url}/account")
            await expect(page.get_by_role("row", name=re.compile("Notes agent"))).to_be_visible()
            await expect(page.locator("body")).not_to_contain_text("Other agent")

            # Revoke: the app's token stops working at once.
            await page.get_by_role("row", name=re.compile("Notes agent")).get_by_role("button", name="Revoke").click()
            await expect(page.locator("body")).to_contain_text("No app has access yet.")
            await browser_pages.shot(page, "account-after-revoke")
            assert (await raw_post(stack.mcp_url, notes.access_token, INITIALIZE)).status_code == 401

            # Its next call sends the owner to the consent page again; the owner says no this time.
            async def deny_again() -> None:
                await expect(page.locator("body")).to_contain_text("Notes agent wants to use your memvault memory")
                await page.get_by_role("button", name="Deny").click()
                await expect(page.locator("body")).to_contain_text("The app was not connected")

            notes.owner_will(deny_again)
            reached_the_last_call = True
            await client.call_tool("recall", {"query": "cat called Miso"})

    with pytest.raises(BaseExceptionGroup) as ended:
        await use_until_refused()
    if not reached_the_last_call:
        raise ended.value
    await notes.owner_done()
    assert "memvault did not connect this app: access_denied" in messages_of(ended.value)
    assert len(notes.authorize_urls) == 2


def pkce() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


async def test_an_app_returning_to_another_host_is_named_and_not_called_verified(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    page = await browser_pages.new(phone=True)  # an app on a phone (a web app) sends its owner here too
    await choose_password(page, await asyncio.to_thread(setup_link, stack))
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as http:
        registered = await http.post(
            "/register",
            json={
                "client_name": "Calendar helper",
                "redirect_uris": ["https://callback.example/cb"],
                "token_endpoint_auth_method": "none",
            },
        )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    arrived: list[str] = []

    async def callback_site(route: Route) -> None:  # no internet here: the browser's request is answered locally
        arrived.append(route.request.url)
        await route.fulfill(status=200, content_type="text/html", body="<!doctype html><p>Calendar helper</p>")

    await page.route("https://callback.example/**", callback_site)
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": "https://callback.example/cb",
        "state": "s-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": stack.mcp_url,
        "scope": "admin",
    }
    await page.goto(f"{stack.gateway_url}/authorize?{urlencode(query)}")
    body = page.locator("body")
    await expect(body).to_contain_text("Calendar helper wants to use your memvault memory")
    await expect(body).to_contain_text("your browser goes to callback.example. Only approve if you just started")
    await expect(body).not_to_contain_text("own address")
    await expect(body).not_to_contain_text("verified")
    # It asked for admin alone; the owner gives it read instead.
    await expect(scope_box(page, "admin")).to_be_checked()
    await scope_box(page, "admin").uncheck()
    await scope_box(page, "read").check()
    await page.get_by_role("button", name="Approve").click()
    await expect(page.locator("body")).to_have_text("Calendar helper")
    (url,) = arrived
    assert url.startswith("https://callback.example/cb?")
    answer = dict(parse_qsl(urlsplit(url).query))
    assert answer["state"] == "s-1" and answer["code"].startswith("mvc_")
    assert answer["iss"] == stack.gateway_url
    async with httpx.AsyncClient(timeout=30) as http:
        tokens = await http.post(
            f"{stack.gateway_url}/token",
            data={
                "grant_type": "authorization_code",
                "code": answer["code"],
                "code_verifier": verifier,
                "client_id": client_id,
                "redirect_uri": "https://callback.example/cb",
                "resource": stack.mcp_url,
            },
        )
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["scope"] == "read"


async def test_a_consent_page_left_open_while_the_session_ended_asks_again_instead_of_failing(
    oauth_stack: OAuthStack, browser_pages: PageShots, loopback: Callable[[], LoopbackRedirect]
) -> None:
    stack = await oauth_stack()
    page = await browser_pages.new()
    await choose_password(page, await asyncio.to_thread(setup_link, stack))
    app = App(stack, "Notes agent", page, loopback())
    other_tab = await page.context.new_page()

    async def sign_out_in_the_other_tab() -> None:
        await other_tab.goto(f"{stack.gateway_url}/account")
        await other_tab.get_by_role("button", name="Sign out").click()
        await expect(other_tab.locator("h1")).to_have_text("Sign in to memvault")

    async def decide_across_session_changes() -> None:
        await expect(page.locator("h1")).to_have_text("Connect an app")
        # Signed out elsewhere: Approve leads to sign-in, and from there back to the same question.
        await sign_out_in_the_other_tab()
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("h1")).to_have_text("Sign in to memvault")
        await page.get_by_label("User name").fill("owner")
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator("body")).to_contain_text("Notes agent wants to use your memvault memory")

        # Signed out and in again elsewhere: this page is older than the session; nothing is done.
        await sign_out_in_the_other_tab()
        await other_tab.get_by_label("User name").fill("owner")
        await other_tab.get_by_label("Password").fill(PASSWORD)
        await other_tab.get_by_role("button", name="Sign in").click()
        await expect(other_tab.get_by_text("Signed in as")).to_be_visible()
        await scope_box(page, "write").uncheck()
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator(".error")).to_have_text(
            "This page was opened before you last signed in, so nothing was done. Check your choices and decide again."
        )
        await browser_pages.shot(page, "consent-opened-before-sign-in")
        # Shown again, the page keeps the owner's choices: a second Approve grants only 'read'.
        await expect(scope_box(page, "write")).not_to_be_checked()
        await expect(scope_box(page, "read")).to_be_checked()
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("body")).to_contain_text("The app is connected to memvault")

    app.owner_will(decide_across_session_changes)
    async with app.connected() as client:
        guide = await structured(client, "get_operating_guide")
        await app.owner_done()
    assert [v["name"] for v in guide["vaults"]] == ["default"]
    assert app.storage.tokens is not None and app.storage.tokens.scope == "read"
    assert len(app.authorize_urls) == 1  # the app asked once; the owner's detours did not break its flow


async def test_an_app_returning_to_a_private_use_scheme_is_sent_there(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    """Apps such as Cursor come back through their own scheme (RFC 8252 §7.1), which the operator allows."""
    stack = await oauth_stack(MEMVAULT_OAUTH__EXTRA_REDIRECT_SCHEMES='["cursor"]')
    page = await browser_pages.new()
    await choose_password(page, await asyncio.to_thread(setup_link, stack))
    redirect = "cursor://anysphere.cursor-retrieval/oauth/callback"
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as http:
        registered = await http.post(
            "/register",
            json={"client_name": "Cursor", "redirect_uris": [redirect], "token_endpoint_auth_method": "none"},
        )
    assert registered.status_code == 201, registered.text
    refusals: list[str] = []
    page.on(
        "console", lambda message: refusals.append(message.text) if "Content Security Policy" in message.text else None
    )
    _, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": registered.json()["client_id"],
        "redirect_uri": redirect,
        "state": "s-2",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": stack.mcp_url,
    }
    await page.goto(f"{stack.gateway_url}/authorize?{urlencode(query)}")
    await expect(page.locator("body")).to_contain_text(
        "your browser goes to the app on this computer that opens cursor: links. Only approve if"
    )
    await expect(page.locator("body")).not_to_contain_text("anysphere")
    # Chromium hands cursor:// to the operating system (nothing handles it here, so it is aborted); what
    # counts is that the browser goes there with the code, which a form-action without the scheme forbids.
    async with page.expect_request(lambda request: request.url.startswith("cursor:"), timeout=15_000) as went:
        await page.get_by_role("button", name="Approve").click()
    sent = (await went.value).url
    assert sent.startswith(redirect + "?code=mvc_"), sent
    assert dict(parse_qsl(urlsplit(sent).query))["state"] == "s-2"
    assert refusals == []
