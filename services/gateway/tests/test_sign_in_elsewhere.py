"""Owner sign-in through an OpenID Connect provider, and through a trusted forward-auth proxy."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import pytest_asyncio
from gateway_helpers import (
    SECRET,
    Agent,
    Browser,
    RunningGateway,
    StartGateway,
    csrf_of,
    free_port,
    pkce,
    query_of,
    serve_asgi,
    stop_asgi,
    unique,
)
from oidc_provider import OidcProvider
from starlette.requests import Request

from memvault_core.identity import IdentitySigner
from memvault_gateway.auth import sessions
from memvault_gateway.context import Gateway
from memvault_gateway.signin import forward_auth
from memvault_gateway.vault_client import VaultClient

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def idp() -> AsyncIterator[OidcProvider]:
    port = free_port()
    provider = OidcProvider(issuer=f"http://127.0.0.1:{port}", user={"sub": unique("sub"), "name": "Carol"})
    server, task = await serve_asgi(provider.app(), port)
    yield provider
    await stop_asgi(server, task)


async def oidc_gateway(start_gateway: StartGateway, idp: OidcProvider, **oidc: Any) -> RunningGateway:
    return await start_gateway(
        oidc={"issuer": idp.issuer, "client_id": idp.client_id, "client_secret": idp.client_secret, **oidc}
    )


async def sso(gateway: RunningGateway, next_path: str = "/") -> tuple[Browser, httpx.Response]:
    """Press the single sign-on button and follow the provider back; returns the callback's answer."""
    browser = Browser(gateway)
    page = await browser.http.get("/login", params={"next": next_path})
    assert "Sign in with single sign-on" in page.text
    start = await browser.http.post("/login/oidc", data={"csrf_token": csrf_of(page.text), "next": next_path})
    assert start.status_code == 303
    assert "memvault_oidc_state=" in start.headers["set-cookie"]
    assert "HttpOnly" in start.headers["set-cookie"] and "SameSite=lax" in start.headers["set-cookie"]
    async with httpx.AsyncClient(follow_redirects=False) as outside:
        at_idp = await outside.get(start.headers["location"])
    assert at_idp.status_code == 302
    back = at_idp.headers["location"]
    assert back.startswith(f"{gateway.url}/login/oidc/callback?")
    return browser, await browser.http.get(back.removeprefix(gateway.url))


async def test_oidc_sign_in_creates_the_account_and_a_vault(start_gateway: StartGateway, idp: OidcProvider) -> None:
    gateway = await oidc_gateway(start_gateway, idp)
    browser, answer = await sso(gateway, next_path="/api/v1/me")
    assert answer.status_code == 303 and answer.headers["location"] == "/api/v1/me"
    assert "memvault_oidc_state" not in browser.http.cookies  # spent with the sign-in
    me = (await browser.http.get("/api/v1/me")).json()
    assert me["subject"] == f"oidc:{idp.user['sub']}"
    assert me["display_name"] == "Carol" and me["signed_in_with"] == "oidc"
    vaults = (await browser.http.get("/api/v1/vaults")).json()["vaults"]
    assert [v["role"] for v in vaults] == ["owner"]

    (sent,) = idp.authorize_requests
    assert sent["code_challenge_method"] == "S256" and sent["nonce"] and sent["scope"] == "openid profile email"

    again, second = await sso(gateway)
    assert second.status_code == 303
    assert (await again.http.get("/api/v1/me")).json()["subject"] == me["subject"]  # the same account
    assert len((await again.http.get("/api/v1/vaults")).json()["vaults"]) == 1


def form_action(response: httpx.Response) -> list[str]:
    (directive,) = [d.split()[1:] for d in response.headers["content-security-policy"].split(";") if "form-action" in d]
    return directive


async def test_sign_in_page_lets_its_button_lead_to_the_provider(
    start_gateway: StartGateway, idp: OidcProvider
) -> None:
    """Browsers apply form-action to the redirect after the button's post: the provider must be named."""
    port = idp.issuer.rsplit(":", 1)[1]
    idp.authorization_origin = f"http://localhost:{port}"
    gateway = await oidc_gateway(start_gateway, idp)
    async with gateway.http() as http:
        assert form_action(await http.get("/login")) == ["'self'", f"http://localhost:{port}"]


async def test_sign_in_page_names_the_issuer_while_the_provider_is_away(start_gateway: StartGateway) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    gateway = await start_gateway(oidc={"issuer": issuer, "client_id": "memvault"})
    async with gateway.http() as http:
        page = await http.get("/login")
    assert page.status_code == 200 and "Sign in with single sign-on" in page.text
    assert form_action(page) == ["'self'", issuer]
    without = await start_gateway()
    async with without.http() as http:
        assert form_action(await http.get("/login")) == ["'self'"]


async def test_oidc_owner_approves_an_agent(start_gateway: StartGateway, idp: OidcProvider) -> None:
    gateway = await oidc_gateway(start_gateway, idp)
    agent = Agent(gateway, await gateway.register())
    verifier, challenge = pkce()
    browser, answer = await sso(gateway, next_path=agent.authorize_url(challenge))
    approved = await browser.consent(answer.headers["location"])
    code = query_of(approved.headers["location"])["code"]
    assert (await agent.exchange(code, verifier)).status_code == 200


@pytest.mark.parametrize("fault", ["wrong_nonce", "foreign_audience", "unknown_key"])
async def test_oidc_refuses_an_id_token_that_does_not_check_out(
    start_gateway: StartGateway, idp: OidcProvider, fault: str
) -> None:
    gateway = await oidc_gateway(start_gateway, idp)
    setattr(idp, fault, True)
    browser, answer = await sso(gateway, next_path="/api/v1/me")
    assert answer.status_code == 401
    assert "<a href='/login?next=%2Fapi%2Fv1%2Fme'>Back to sign in</a>" in answer.text  # where they were going
    assert (await browser.http.get("/api/v1/me")).status_code == 401
    assert (
        await gateway.fetchval(
            "SELECT count(*) FROM gateway.user_account WHERE subject = $1", f"oidc:{idp.user['sub']}"
        )
        == 0
    )


async def start_sso_elsewhere(gateway: RunningGateway) -> str:
    """Start single sign-on in one browser and stop at the callback URL the provider sends back."""
    browser = Browser(gateway)
    page = await browser.http.get("/login")
    start = await browser.http.post("/login/oidc", data={"csrf_token": csrf_of(page.text), "next": "/"})
    async with httpx.AsyncClient(follow_redirects=False) as outside:
        back: str = (await outside.get(start.headers["location"])).headers["location"]
    return back.removeprefix(gateway.url)


def browser_holding(gateway: RunningGateway, state_cookie: str) -> Browser:
    """A fresh browser with the cookie that binds a sign-in to the browser that started it."""
    browser = Browser(gateway)
    browser.http.cookies.set("memvault_oidc_state", state_cookie)
    return browser


async def test_oidc_callback_state_is_single_use(start_gateway: StartGateway, idp: OidcProvider) -> None:
    gateway = await oidc_gateway(start_gateway, idp)
    back = await start_sso_elsewhere(gateway)
    state = query_of(back)["state"]
    assert (await browser_holding(gateway, state).http.get(back)).status_code == 303
    replay = await browser_holding(gateway, state).http.get(back)
    assert replay.status_code == 400
    forged = await browser_holding(gateway, "made-up").http.get(
        "/login/oidc/callback", params={"code": "x", "state": "made-up"}
    )
    assert forged.status_code == 400


async def test_oidc_callback_is_refused_in_a_browser_that_did_not_start_the_sign_in(
    start_gateway: StartGateway, idp: OidcProvider
) -> None:
    """Login CSRF: someone signs in with their own provider account and sends the callback URL to a victim."""
    gateway = await oidc_gateway(start_gateway, idp)
    back = await start_sso_elsewhere(gateway)
    victim = Browser(gateway)
    answer = await victim.http.get(back)
    assert answer.status_code == 403
    assert "not started in this browser" in answer.text
    assert "memvault_session" not in answer.headers.get("set-cookie", "")
    assert (await victim.http.get("/api/v1/me")).status_code == 401
    victim_signing_in_too = browser_holding(gateway, "the-victims-own-sign-in")
    assert (await victim_signing_in_too.http.get(back)).status_code == 403
    assert (
        await gateway.fetchval(
            "SELECT count(*) FROM gateway.user_account WHERE subject = $1", f"oidc:{idp.user['sub']}"
        )
        == 0
    )


async def test_oidc_without_account_creation_admits_only_known_people(
    start_gateway: StartGateway, idp: OidcProvider
) -> None:
    gateway = await oidc_gateway(start_gateway, idp, create_accounts=False)
    _, answer = await sso(gateway)
    assert answer.status_code == 403
    async with gateway.store() as store:
        await store.create_user(f"oidc:{idp.user['sub']}", username=None, display_name="Carol")
    browser, admitted = await sso(gateway)
    assert admitted.status_code == 303
    assert (await browser.http.get("/api/v1/me")).json()["subject"] == f"oidc:{idp.user['sub']}"


async def test_forward_auth_header_signs_in_only_from_trusted_proxies(start_gateway: StartGateway) -> None:
    name = unique("dave")
    trusted = await start_gateway(forward_auth={"header": "Remote-User", "trusted_proxies": ["127.0.0.1/32"]})
    elsewhere = await start_gateway(forward_auth={"header": "Remote-User", "trusted_proxies": ["10.0.0.0/8"]})

    async with elsewhere.http(headers={"Remote-User": name}) as http:
        assert (await http.get("/api/v1/me")).status_code == 401

    async with trusted.http(headers={"Remote-User": name, "Remote-Name": "Dave"}) as http:
        me = await http.get("/api/v1/me")
        assert me.status_code == 200
        assert me.json()["subject"] == f"proxy:{name}" and me.json()["signed_in_with"] == "forward-auth"
        assert "memvault_session=" in me.headers["set-cookie"]
        # A state-changing call still needs the session's CSRF token.
        vault = {"name": unique("dave-vault")}
        assert (await http.post("/api/v1/vaults", json=vault)).status_code == 403
        created = await http.post("/api/v1/vaults", json=vault, headers={"X-CSRF-Token": me.json()["csrf_token"]})
        assert created.status_code == 201

    # Another name from the proxy is another person, even with the first one's session cookie.
    async with trusted.http(headers={"Remote-User": unique("eve")}) as http:
        http.cookies.set("memvault_session", me.cookies["memvault_session"])
        other = (await http.get("/api/v1/me")).json()
    assert other["subject"] != f"proxy:{name}"


@asynccontextmanager
async def gateway_context(gateway: RunningGateway) -> AsyncIterator[Gateway]:
    """The objects a route of `gateway` works with, for calling the session code directly."""
    async with gateway.store() as store, httpx.AsyncClient() as client:
        vault = VaultClient(gateway.settings.gateway.vault_address, IdentitySigner(SECRET))
        try:
            yield Gateway(gateway.settings, store, vault, IdentitySigner(SECRET), client, client)
        finally:
            await vault.close()


def proxied_request(gw: Gateway, name: str, *, cookie: str = "", authorization: str = "") -> Request:
    headers = [(b"remote-user", name.encode())]
    if cookie:
        headers.append((b"cookie", f"{sessions.session_cookie(gw)}={cookie}".encode()))
    if authorization:
        headers.append((b"authorization", authorization.encode()))
    scope = {"type": "http", "method": "GET", "path": "/account", "query_string": b"", "headers": headers}
    return Request({**scope, "client": ("127.0.0.1", 50000), "state": {}})


async def test_reading_the_session_signs_nobody_up(start_gateway: StartGateway) -> None:
    """`current_session` only reads: a trusted proxy's header alone makes no account and no session."""
    gateway = await start_gateway(forward_auth={"header": "Remote-User", "trusted_proxies": ["127.0.0.1/32"]})
    name = unique("frank")
    async with gateway_context(gateway) as gw:
        request = proxied_request(gw, name)
        assert sessions.signed_in_by_proxy(gw, request)
        assert await sessions.current_session(gw, request) is None
        assert await gw.store.user_by_subject(f"proxy:{name}") is None
    assert (
        await gateway.fetchval(
            "SELECT count(*) FROM gateway.session s JOIN gateway.user_account u ON u.id = s.user_id WHERE u.subject = $1",
            f"proxy:{name}",
        )
        == 0
    )


async def test_forward_auth_sign_in_signs_up_a_new_person_with_a_vault_and_a_session(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(forward_auth={"header": "Remote-User", "trusted_proxies": ["127.0.0.1/32"]})
    name = unique("grace")
    async with gateway_context(gateway) as gw:
        first = await forward_auth.sign_in(proxied_request(gw, name), gw)
        assert first is not None and first.user.subject == f"proxy:{name}" and first.method == "forward-auth"
        assert [v.name for v in await gw.vault.vaults(first.user.subject)] != []
        # The session is an ordinary one: the next request with its cookie reads it without a new one.
        held = await gateway.fetchval(
            "SELECT count(*) FROM gateway.session WHERE user_id = $1", uuid.UUID(first.user.id)
        )
        assert held == 1
        again = await forward_auth.sign_in(proxied_request(gw, name), gw)
        assert again is not None and again.user.id == first.user.id
        # A program with a bearer token is answered by its token, not signed in by the proxy's header.
        newcomer = unique("heidi")
        assert await forward_auth.sign_in(proxied_request(gw, newcomer, authorization="Bearer x"), gw) is None
        assert await gw.store.user_by_subject(f"proxy:{newcomer}") is None


async def test_forward_auth_without_account_creation_admits_only_known_people(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(
        forward_auth={"header": "Remote-User", "trusted_proxies": ["127.0.0.1/32"], "create_accounts": False}
    )
    async with gateway_context(gateway) as gw:
        stranger = unique("ivan")
        assert await forward_auth.sign_in(proxied_request(gw, stranger), gw) is None
        assert await gw.store.user_by_subject(f"proxy:{stranger}") is None
