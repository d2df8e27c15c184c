"""Every form and state-changing call, posted with the Origin headers browsers and attackers send.

Under `Referrer-Policy: no-referrer` a browser posts our own forms with `Origin: null`, which the
CSRF check refuses, so no form could be submitted: pages now send `same-origin`, and these tests
post as a browser does (its real Origin), as a script does (no Origin), and as another site does
(`Origin: null`, a foreign Origin, `Sec-Fetch-Site: cross-site`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from gateway_helpers import (
    PASSWORD,
    Agent,
    Browser,
    RunningGateway,
    StartGateway,
    checked,
    csrf_of,
    free_port,
    hidden_fields,
    pkce,
    unique,
)

from memvault_gateway.__main__ import setup_link
from memvault_gateway.auth import sessions
from memvault_gateway.settings import MigrateSettings
from memvault_gateway.signin import account_email

pytestmark = pytest.mark.integration

CROSS_SITE: dict[str, dict[str, str]] = {
    "Origin: null": {"Origin": "null"},
    "a foreign Origin": {"Origin": "https://evil.example"},
    "a look-alike Origin": {"Origin": "http://127.0.0.1.evil.example"},
    "Sec-Fetch-Site: cross-site": {"Sec-Fetch-Site": "cross-site"},
    "Sec-Fetch-Site: same-site": {"Sec-Fetch-Site": "same-site"},
}

Post = Callable[[Browser, dict[str, str]], Awaitable[httpx.Response]]


def own_origin(gateway: RunningGateway) -> dict[str, str]:
    """What Chromium sends on a same-origin form post under `Referrer-Policy: same-origin`."""
    return {"Origin": gateway.url, "Sec-Fetch-Site": "same-origin"}


async def test_pages_send_a_referrer_policy_under_which_browsers_send_their_origin(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        for path in ("/login", "/account"):
            answer = await http.get(path, follow_redirects=True)
            assert answer.headers["referrer-policy"] == "same-origin", path


async def test_sign_in_accepts_our_origin_or_none_and_refuses_every_cross_site_post(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    username, password = await gateway.create_user()

    async def post(headers: dict[str, str]) -> tuple[httpx.Response, Browser]:
        browser = Browser(gateway)
        page = await browser.http.get("/login")
        answer = await browser.http.post(
            "/login",
            data={"username": username, "password": password, "csrf_token": csrf_of(page.text)},
            headers=headers,
        )
        return answer, browser

    for name, headers in CROSS_SITE.items():
        answer, browser = await post(headers)
        assert answer.status_code == 403, name
        assert "expired" not in answer.text, name  # a refusal, not a misleading "form expired"
        assert (await browser.http.get("/api/v1/me")).status_code == 401, name
        await browser.close()
    for name, headers in {"our Origin": own_origin(gateway), "no Origin": {}}.items():
        answer, browser = await post(headers)
        assert answer.status_code == 303, (name, answer.text)
        assert (await browser.http.get("/api/v1/me")).status_code == 200, name
        await browser.close()


async def test_setup_link_form_accepts_our_origin_and_refuses_cross_site_posts(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    settings = MigrateSettings(gateway=gateway.settings.gateway, postgres=gateway.settings.postgres)
    link = await setup_link(settings, unique("owner"), force=False)
    assert link is not None
    path = link.removeprefix(gateway.url)
    browser = Browser(gateway)
    page = await browser.http.get(path)
    form = {"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf_of(page.text)}
    for name, headers in CROSS_SITE.items():
        refused = await browser.http.post(path, data=form, headers=headers)
        assert refused.status_code == 403, name
    done = await browser.http.post(path, data=form, headers=own_origin(gateway))
    assert done.status_code == 303, done.text
    assert (await browser.http.get("/api/v1/me")).status_code == 200
    await browser.close()


async def signed_in(gateway: RunningGateway) -> Browser:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    return browser


async def test_consent_accepts_our_origin_and_refuses_cross_site_posts(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    page = await browser.http.get(agent.authorize_url(challenge))
    assert page.status_code == 200, page.text
    form: dict[str, str | list[str]] = dict(hidden_fields(page.text))
    form.update(vault=checked(page.text, "vault"), scope=["read"], decision="approve")
    for name, headers in CROSS_SITE.items():
        refused = await browser.http.post("/authorize", data=form, headers=headers)
        assert refused.status_code == 403, name
        assert sessions.CROSS_SITE in refused.text, name  # the same words as every other form
    approved = await browser.http.post("/authorize", data=form, headers=own_origin(gateway))
    assert approved.status_code == 303, approved.text
    assert "code=" in approved.headers["location"]
    await browser.close()


async def test_revoke_sign_out_and_api_changes_refuse_cross_site_posts(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser = await signed_in(gateway)
    csrf = await browser.csrf()
    vaults = (await browser.http.get("/api/v1/vaults")).json()["vaults"]
    created = await browser.api(
        "POST",
        "/api/v1/service-tokens",
        json={"name": "backup script", "scopes": ["read"], "vaults": [vaults[0]["name"]]},
    )
    assert created.status_code == 201, created.text
    grant = created.json()["id"]
    email_form = {"csrf_token": csrf, "email": "new-address@example.com"}
    for name, headers in CROSS_SITE.items():
        email = await browser.http.post(account_email.PATH, data=email_form, headers=headers)
        assert email.status_code == 403 and sessions.CROSS_SITE in email.text, name
        revoke = await browser.http.post(f"/account/grants/{grant}/revoke", data={"csrf_token": csrf}, headers=headers)
        assert revoke.status_code == 403, name
        api = await browser.http.delete(f"/api/v1/grants/{grant}", headers={"X-CSRF-Token": csrf, **headers})
        assert api.status_code == 403, name
        logout = await browser.http.post("/logout", data={"csrf_token": csrf}, headers=headers)
        assert logout.status_code == 403, name
        assert "not sent from this site" in revoke.text and "not sent from this site" in logout.text, name
    # Our own page, opened under an earlier session (an old tab): not blamed on another site.
    for path in (f"/account/grants/{grant}/revoke", "/logout", account_email.PATH):
        stale = await browser.http.post(
            path,
            data={"csrf_token": "from-an-older-session", "email": "new-address@example.com"},
            headers=own_origin(gateway),
        )
        assert stale.status_code == 403 and "Page out of date" in stale.text, path
        assert "nothing was done" in stale.text and "not sent from this site" not in stale.text, path
    grants = (await browser.http.get("/api/v1/grants")).json()["grants"]
    assert [g["id"] for g in grants] == [grant]  # nothing was revoked

    revoke = await browser.http.post(
        f"/account/grants/{grant}/revoke", data={"csrf_token": csrf}, headers=own_origin(gateway)
    )
    assert revoke.status_code in (200, 303), revoke.text
    assert (await browser.http.get("/api/v1/grants")).json()["grants"] == []
    logout = await browser.http.post("/logout", data={"csrf_token": csrf}, headers=own_origin(gateway))
    assert logout.status_code == 303
    assert (await browser.http.get("/api/v1/me")).status_code == 401
    await browser.close()


async def test_single_sign_on_button_refuses_cross_site_posts_as_such(start_gateway: StartGateway) -> None:
    """A cross-site post is not an expired form: it is refused with the words every other form uses."""
    issuer = f"http://127.0.0.1:{free_port()}"  # refused before the provider would be asked
    gateway = await start_gateway(oidc={"issuer": issuer, "client_id": "memvault"})
    browser = Browser(gateway)
    page = await browser.http.get("/login")
    form = {"csrf_token": csrf_of(page.text), "next": "/"}
    for name, headers in CROSS_SITE.items():
        refused = await browser.http.post("/login/oidc", data=form, headers=headers)
        assert refused.status_code == 403, name
        assert sessions.CROSS_SITE in refused.text and "expired" not in refused.text, name
    stale = await browser.http.post(
        "/login/oidc", data={**form, "csrf_token": "from-another-page"}, headers=own_origin(gateway)
    )
    assert stale.status_code == 403 and "The sign-in form expired" in stale.text
    await browser.close()


async def test_without_an_origin_every_form_still_needs_its_token(start_gateway: StartGateway) -> None:
    """A post with no Origin (a script, an old browser) is let through only with the right token."""
    gateway = await start_gateway()
    settings = MigrateSettings(gateway=gateway.settings.gateway, postgres=gateway.settings.postgres)
    link = await setup_link(settings, unique("owner"), force=False)
    assert link is not None
    path = link.removeprefix(gateway.url)
    newcomer = Browser(gateway)
    await newcomer.http.get(path)
    for token in ("", "not-the-token"):
        refused = await newcomer.http.post(
            path, data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": token}
        )
        assert refused.status_code == 403, token
    await newcomer.close()

    browser = await signed_in(gateway)
    vaults = (await browser.http.get("/api/v1/vaults")).json()["vaults"]
    created = await browser.api(
        "POST", "/api/v1/service-tokens", json={"name": "script", "scopes": ["read"], "vaults": [vaults[0]["name"]]}
    )
    grant = created.json()["id"]
    for token in ("", "not-the-token"):
        revoke = await browser.http.post(f"/account/grants/{grant}/revoke", data={"csrf_token": token})
        assert revoke.status_code == 403, token
        logout = await browser.http.post("/logout", data={"csrf_token": token})
        assert logout.status_code == 403, token
        api = await browser.http.delete(f"/api/v1/grants/{grant}", headers={"X-CSRF-Token": token} if token else {})
        assert api.status_code == 403, token
    assert [g["id"] for g in (await browser.http.get("/api/v1/grants")).json()["grants"]] == [grant]
    assert (await browser.http.get("/api/v1/me")).status_code == 200
    await browser.close()
