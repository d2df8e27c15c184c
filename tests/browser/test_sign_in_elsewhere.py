"""Signing in through an OpenID Connect provider, and through a trusted forward-auth proxy, in Chromium.

The provider is the request-level tests' own (services/gateway/tests/oidc_provider.py), served on a
free port by this test; the proxy is a small reverse proxy this test runs that adds the header the
gateway trusts, connecting to the gateway from 127.0.0.2 (the only address the gateway trusts), so
Chromium, which connects from 127.0.0.1, cannot pass the header itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import httpx
import pytest_asyncio
from browser_helpers import OAuthStack
from gateway_helpers import free_port, serve_asgi, stop_asgi, unique
from oidc_provider import OidcProvider
from playwright.async_api import expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memvault_devstack.browser import PageShots

SSO_BUTTON = "Sign in with Authelia"
# Hop-by-hop headers (RFC 9110 7.6.1) and what httpx has already decoded are not passed on.
_NOT_FORWARDED = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
}


class ForwardAuthProxy:
    """A reverse proxy on a free loopback port that vouches for one person, as Authelia would.

    It replaces whatever the browser sent in `Remote-User` / `Remote-Name` with `user` and
    `display_name`, and connects to `upstream` from the address `source`.
    """

    def __init__(self, *, user: str, display_name: str, source: str) -> None:
        self.user = user
        self.display_name = display_name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.upstream = ""
        self.client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(local_address=source), timeout=30, trust_env=False
        )
        methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
        self.app = Starlette(routes=[Route("/{path:path}", self.forward, methods=methods)])
        self._server: Any = None

    async def forward(self, request: Request) -> Response:
        headers = [
            (name, value)
            for name, value in request.headers.items()
            if name not in _NOT_FORWARDED and name not in ("remote-user", "remote-name")
        ]
        headers += [
            ("remote-user", self.user),
            ("remote-name", self.display_name),
            ("x-forwarded-for", request.client.host if request.client else ""),
            ("x-forwarded-proto", "http"),
        ]
        upstream = await self.client.request(
            request.method,
            self.upstream + request.url.path + (f"?{request.url.query}" if request.url.query else ""),
            headers=headers,
            content=await request.body(),
        )
        response = Response(upstream.content, status_code=upstream.status_code)
        response.raw_headers = [
            (name, value) for name, value in upstream.headers.raw if name.decode().lower() not in _NOT_FORWARDED
        ] + [(b"content-length", str(len(upstream.content)).encode())]
        return response

    async def __aenter__(self) -> ForwardAuthProxy:
        self._server = await serve_asgi(self.app, self.port)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await stop_asgi(*self._server)
        await self.client.aclose()


@pytest_asyncio.fixture
async def idp() -> AsyncIterator[OidcProvider]:
    port = free_port()
    provider = OidcProvider(issuer=f"http://127.0.0.1:{port}", user={"sub": unique("sub"), "name": "Carol"})
    server, task = await serve_asgi(provider.app(), port)
    yield provider
    await stop_asgi(server, task)


def oidc_env(idp: OidcProvider) -> dict[str, str]:
    return {
        "MEMVAULT_OIDC__ISSUER": idp.issuer,
        "MEMVAULT_OIDC__CLIENT_ID": idp.client_id,
        "MEMVAULT_OIDC__CLIENT_SECRET": idp.client_secret,
        "MEMVAULT_OIDC__BUTTON_LABEL": SSO_BUTTON,
    }


async def test_oidc_sign_in_from_the_button(
    oauth_stack: OAuthStack, idp: OidcProvider, browser_pages: PageShots
) -> None:
    # The provider's sign-in page is on another site (localhost, not 127.0.0.1), as it is at home:
    # the cookie that binds the sign-in to this browser must come back from there.
    idp.page = True
    idp.authorization_origin = idp.issuer.replace("127.0.0.1", "localhost")
    stack = await oauth_stack(**oidc_env(idp))
    base = stack.gateway_url
    page = await browser_pages.new()
    await page.goto(f"{base}/account")
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    await page.get_by_role("button", name=SSO_BUTTON).click()
    await expect(page.get_by_role("heading")).to_have_text("Test IdP")
    assert page.url.startswith(f"{idp.authorization_origin}/authorize?")
    await page.get_by_role("button", name="Continue").click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("Carol")
    assert page.url == f"{base}/account"
    (sent,) = idp.authorize_requests
    assert sent["redirect_uri"] == f"{base}/login/oidc/callback"

    cookies = {c["name"]: c for c in await page.context.cookies()}
    assert "memvault_oidc_state" not in cookies  # spent with the sign-in
    session = cookies["memvault_session"]
    assert session["httpOnly"] is True and session["sameSite"] == "Lax" and session["secure"] is False

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.locator(".notice")).to_have_text("You are signed out.")
    # Signing in again is the same person with the same single vault.
    await page.get_by_role("button", name=SSO_BUTTON).click()
    await page.get_by_role("button", name="Continue").click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("Carol")
    me = await page.request.get(f"{base}/api/v1/me")
    assert (await me.json())["subject"] == f"oidc:{idp.user['sub']}"
    vaults = await (await page.request.get(f"{base}/api/v1/vaults")).json()
    assert len(vaults["vaults"]) == 1


async def test_oidc_sign_in_refused_by_the_provider_says_so(
    oauth_stack: OAuthStack, idp: OidcProvider, browser_pages: PageShots
) -> None:
    stack = await oauth_stack(**oidc_env(idp))
    idp.wrong_nonce = True
    page = await browser_pages.new()
    await page.goto(f"{stack.gateway_url}/login")
    await page.get_by_role("button", name=SSO_BUTTON).click()
    await expect(page.get_by_role("heading")).to_have_text("Sign-in failed")
    await expect(page.locator("p").first).to_have_text(
        "memvault could not sign you in: the identity provider's ID token did not check out."
        " Try again; if it keeps failing, the gateway's log says why."
    )
    assert "memvault_session" not in {c["name"] for c in await page.context.cookies()}
    await page.get_by_role("link", name="Back to sign in").click()
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")


async def test_oidc_sign_in_cancelled_at_the_provider_can_start_again(
    oauth_stack: OAuthStack, idp: OidcProvider, browser_pages: PageShots
) -> None:
    idp.page = True
    stack = await oauth_stack(**oidc_env(idp))
    base = stack.gateway_url
    page = await browser_pages.new()
    await page.goto(f"{base}/account")
    await page.get_by_role("button", name=SSO_BUTTON).click()
    await page.get_by_role("button", name="Cancel").click()
    await expect(page.get_by_role("heading")).to_have_text("Not signed in")
    await expect(page.locator("p").first).to_have_text(
        "The identity provider did not sign you in (access_denied). Start again if you meant to sign in."
    )
    await page.get_by_role("link", name="Back to sign in").click()
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    await page.get_by_role("button", name=SSO_BUTTON).click()
    await page.get_by_role("button", name="Continue").click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("Carol")
    assert page.url == f"{base}/account"


async def test_forward_auth_signs_in_through_the_trusted_proxy_only(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    name = unique("dave")
    async with ForwardAuthProxy(user=name, display_name="Dave", source="127.0.0.2") as proxy:
        stack = await oauth_stack(
            MEMVAULT_GATEWAY__PUBLIC_URL=proxy.url,
            MEMVAULT_FORWARD_AUTH__HEADER="Remote-User",
            MEMVAULT_FORWARD_AUTH__NAME_HEADER="Remote-Name",
            MEMVAULT_FORWARD_AUTH__TRUSTED_PROXIES='["127.0.0.2/32"]',
        )
        proxy.upstream = stack.gateway_url

        page = await browser_pages.new()
        await page.goto(f"{proxy.url}/account")
        await expect(page.get_by_text("Signed in as")).to_contain_text("Dave")
        assert page.url == f"{proxy.url}/account"
        me = await (await page.request.get(f"{proxy.url}/api/v1/me")).json()
        assert me["subject"] == f"proxy:{name}" and me["signed_in_with"] == "forward-auth"
        session = {c["name"]: c for c in await page.context.cookies()}["memvault_session"]
        assert session["httpOnly"] is True and session["sameSite"] == "Lax"
        # The proxy signs the person in again on the next page, so a sign-out button here would
        # seem to do nothing: the page says where signing out happens instead.
        await expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
        await expect(page.locator("body")).to_contain_text("sign out there to sign out of memvault")

        # Forms work through the proxy (its URL is the public URL): revoke a script's token.
        vault = (await (await page.request.get(f"{proxy.url}/api/v1/vaults")).json())["vaults"][0]["name"]
        created = await page.request.post(
            f"{proxy.url}/api/v1/service-tokens",
            data={"name": "backup script", "scopes": ["read"], "vaults": [vault]},
            headers={"X-CSRF-Token": me["csrf_token"]},
        )
        assert created.status == 201, await created.text()
        await page.reload()
        await expect(page.get_by_role("cell", name="backup script")).to_be_visible()
        await page.get_by_role("button", name="Revoke").click()
        await expect(page.get_by_text("No app has access yet.")).to_be_visible()
        assert page.url == f"{proxy.url}/account"

        # The sign-in page has nothing to ask; someone else signing in at the proxy is someone else here.
        await page.goto(f"{proxy.url}/login")
        assert page.url == f"{proxy.url}/account"
        proxy.user, proxy.display_name = unique("erin"), "Erin"
        await page.reload()
        await expect(page.get_by_text("Signed in as")).to_contain_text("Erin")

        # The same headers sent straight to the gateway, not by the trusted proxy, sign nobody in.
        direct = await browser_pages.new(extra_http_headers={"Remote-User": name, "Remote-Name": "Dave"})
        await direct.goto(f"{stack.gateway_url}/account")
        await expect(direct.get_by_role("heading")).to_have_text("Sign in to memvault")
        assert "memvault_session" not in {c["name"] for c in await direct.context.cookies()}
