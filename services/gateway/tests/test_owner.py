"""Owners: setup links, password sign-in, sessions with CSRF, the consent page, grants and audit."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest
from gateway_helpers import (
    INITIALIZE,
    PASSWORD,
    REDIRECT,
    Agent,
    Browser,
    RunningGateway,
    StartGateway,
    checked,
    csrf_of,
    hidden_fields,
    mcp_post,
    pkce,
    query_of,
    unique,
)

from memvault_gateway.__main__ import setup_link
from memvault_gateway.settings import MigrateSettings

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway, existing: str | None = None) -> tuple[Browser, str]:
    """A browser signed in as `existing`, or as a new local account."""
    username, password = (existing, PASSWORD) if existing else await gateway.create_user()
    browser = Browser(gateway)
    answer = await browser.sign_in(username, password)
    assert answer.status_code == 303, answer.text
    return browser, username


async def audit_actions(browser: Browser) -> list[dict[str, Any]]:
    answer = await browser.api("GET", "/api/v1/audit", params={"limit": 100})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["entries"])


async def test_setup_link_sets_the_password_once_and_signs_in(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username = unique("owner")
    settings = MigrateSettings(gateway=gateway.settings.gateway, postgres=gateway.settings.postgres)
    link = await setup_link(settings, username, force=False)
    assert link is not None and link.startswith(f"{gateway.url}/setup/mvsetup_")
    path = link.removeprefix(gateway.url)

    browser = Browser(gateway)
    form = await browser.http.get(path)
    assert form.status_code == 200
    # The token in the URL never goes to another site, and our own form posts carry their real Origin.
    assert form.headers["referrer-policy"] == "same-origin"
    csrf = csrf_of(form.text)
    short = await browser.http.post(path, data={"password": "short", "password_again": "short", "csrf_token": csrf})
    assert short.status_code == 400
    assert "at least 12 characters" in short.text
    done = await browser.http.post(path, data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf})
    assert done.status_code == 303 and done.headers["location"] == "/account"
    me = (await browser.http.get("/api/v1/me")).json()
    assert me["username"] == username and me["signed_in_with"] == "password"
    vaults = (await browser.http.get("/api/v1/vaults")).json()["vaults"]
    assert [v["role"] for v in vaults] == ["owner"]

    assert (await Browser(gateway).http.get(path)).status_code == 404  # spent
    assert await setup_link(settings, username, force=False) is None  # has a password now
    assert await setup_link(settings, username, force=True) is not None
    await browser.close()


async def test_a_replaced_setup_link_says_so_and_where_the_newest_is(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username = unique("owner")
    settings = MigrateSettings(gateway=gateway.settings.gateway, postgres=gateway.settings.postgres)
    older = await setup_link(settings, username, force=False)
    newer = await setup_link(settings, username, force=False)
    assert older is not None and newer is not None and older != newer
    browser = Browser(gateway)

    stale = await browser.http.get(older.removeprefix(gateway.url))

    assert stale.status_code == 404
    assert (
        "This link was replaced by a newer one; the newest link is printed by `memvault-dev setup-link` "
        "(or `memvault-gateway setup-link`)"
    ) in stale.text
    posted = await browser.http.post(
        older.removeprefix(gateway.url),
        data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": "x"},
    )
    assert posted.status_code == 404 and "replaced by a newer one" in posted.text  # cannot set a password
    fresh = await browser.http.get(newer.removeprefix(gateway.url))
    assert fresh.status_code == 200
    done = await browser.http.post(
        newer.removeprefix(gateway.url),
        data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf_of(fresh.text)},
    )
    assert done.status_code == 303
    used = await Browser(gateway).http.get(newer.removeprefix(gateway.url))
    assert "used already" in used.text and "replaced" not in used.text
    unknown = await Browser(gateway).http.get("/setup/mvsetup_never-issued")
    assert unknown.status_code == 404 and "not known here" in unknown.text
    await browser.close()


async def test_wrong_password_is_refused_and_audited(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username, _ = await gateway.create_user()
    stranger = Browser(gateway)
    refused = await stranger.sign_in(username, "not the password at all")
    assert refused.status_code == 401
    assert (await stranger.http.get("/api/v1/me")).status_code == 401
    unknown = await stranger.sign_in(unique("nobody"), PASSWORD)
    assert unknown.status_code == 401

    owner, _ = await signed_in(gateway, username)
    actions = [e["action"] for e in await audit_actions(owner)]
    assert "session.refuse" in actions and "session.create" in actions


async def test_sign_in_form_needs_its_csrf_cookie_and_our_origin(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username, password = await gateway.create_user()
    async with gateway.http() as http:
        forged = await http.post("/login", data={"username": username, "password": password, "csrf_token": "x"})
    assert forged.status_code == 403
    browser = Browser(gateway)
    page = await browser.http.get("/login")
    cross_site = await browser.http.post(
        "/login",
        data={"username": username, "password": password, "csrf_token": csrf_of(page.text)},
        headers={"Origin": "https://evil.example"},
    )
    assert cross_site.status_code == 403
    assert (await browser.http.get("/api/v1/me")).status_code == 401


async def test_session_cookie_flags_on_https_public_url(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    secure = await start_gateway(gateway={"public_url": "https://memvault.example"})
    username, password = await gateway.create_user()
    for running, name, flags in (
        (gateway, "memvault_session=", ("HttpOnly", "SameSite=lax")),
        (secure, "__Host-memvault_session=", ("HttpOnly", "SameSite=lax", "Secure", "Path=/")),
    ):
        async with running.http() as http:
            page = await http.get("/login")
            # Sent by hand: an http test client keeps Secure cookies to itself.
            login_cookie = page.headers["set-cookie"].split(";")[0]
            answer = await http.post(
                "/login",
                data={"username": username, "password": password, "csrf_token": csrf_of(page.text)},
                headers={"Origin": running.settings.gateway.public_url, "Cookie": login_cookie},
            )
        assert answer.status_code == 303
        cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith(name))
        for flag in flags:
            assert flag in cookie
        if running is gateway:
            assert "Secure" not in cookie


async def test_owner_approves_an_agent_for_chosen_vaults_and_scopes(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username, password = await gateway.create_user()
    agent = Agent(gateway, await gateway.register(client_name="Desk <agent>"))
    verifier, challenge = pkce()
    browser = Browser(gateway)

    to_login = await browser.http.get(agent.authorize_url(challenge, state="st1"))
    assert to_login.status_code == 302
    assert to_login.headers["location"].startswith("/login?next=%2Fauthorize")
    back = await browser.sign_in(username, password, next_path=query_of(to_login.headers["location"])["next"])
    assert back.status_code == 303 and back.headers["location"].startswith("/authorize?")

    second_vault = unique("work")
    created = await browser.api("POST", "/api/v1/vaults", json={"name": second_vault})
    assert created.status_code == 201

    page = await browser.http.get(back.headers["location"])
    assert page.status_code == 200
    assert "Desk &lt;agent&gt;" in page.text and "<agent>" not in page.text
    assert "<strong>127.0.0.1</strong>" in page.text  # where the browser goes next
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]

    answer = await browser.consent(back.headers["location"], vault=[second_vault], scope=["read"])
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith(REDIRECT)
    params = query_of(location)
    assert params["state"] == "st1" and params["iss"] == gateway.url
    tokens = await agent.exchange(params["code"], verifier)
    assert tokens.json()["scope"] == "read"
    assert (await mcp_post(gateway, INITIALIZE, tokens.json()["access_token"])).status_code == 200

    grants = (await browser.http.get("/api/v1/grants")).json()["grants"]
    (grant,) = [g for g in grants if g["client_id"] == agent.client_id]
    assert grant["name"] == "Desk <agent>"
    assert grant["scopes"] == ["read"] and grant["vaults"] == [second_vault]
    assert grant["created_at"] and grant["last_used_at"]
    await browser.close()


async def test_a_scope_the_app_asked_for_and_the_owner_unticked_is_not_granted(start_gateway: StartGateway) -> None:
    """The form carries the app's own request too; a browser posts it next to the ticked boxes."""
    gateway = await start_gateway()
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    agent = Agent(gateway, await gateway.register())
    verifier, challenge = pkce()
    page = await browser.http.get(agent.authorize_url(challenge, scope="admin"))
    assert checked(page.text, "scope") == ["admin"]
    answer = await browser.consent(agent.authorize_url(challenge, scope="admin"), scope=["read"])
    assert answer.status_code == 303
    tokens = await agent.exchange(query_of(answer.headers["location"])["code"], verifier)
    assert tokens.json()["scope"] == "read"

    # Nothing ticked: the page asks again, still carrying what the app asked for, and ticks nothing
    # the owner did not (a hurried second Approve must not grant what was unticked).
    again = await browser.consent(agent.authorize_url(challenge, scope="write"), scope=[])
    assert again.status_code == 400
    assert checked(again.text, "scope") == []
    assert hidden_fields(again.text)["requested_scope"] == "write"


async def test_a_consent_page_shown_again_keeps_the_owners_choices(start_gateway: StartGateway) -> None:
    """After "choose at least one" or a page older than the session, exactly the valid ticked boxes stay ticked."""
    gateway = await start_gateway()
    browser, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    url = agent.authorize_url(challenge, scope="read write")
    vault = (await browser.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    assert checked((await browser.http.get(url)).text, "scope") == ["read", "write"]

    no_vault = await browser.consent(url, vault=[], scope=["read"])
    assert no_vault.status_code == 400 and "Choose at least one vault" in no_vault.text
    assert checked(no_vault.text, "scope") == ["read"] and checked(no_vault.text, "vault") == []

    fields = hidden_fields((await browser.http.get(url)).text)
    form = [
        *{**fields, "csrf_token": "from-an-older-session"}.items(),
        ("vault", vault),
        ("vault", "someone-elses"),
        ("scope", "read"),
        ("scope", "everything"),
        ("decision", "approve"),
    ]
    stale = await browser.http.post(
        "/authorize", content=urlencode(form), headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert stale.status_code == 400 and "nothing was done" in stale.text
    assert checked(stale.text, "scope") == ["read"] and checked(stale.text, "vault") == [vault]
    assert (
        await gateway.fetchval("SELECT count(*) FROM gateway.access_grant WHERE client_id = $1", agent.client_id) == 0
    )
    await browser.close()


async def test_asked_again_the_owner_sees_the_apps_access_and_deny_keeps_it(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    agent = Agent(gateway, await gateway.register(client_name="Notes agent"))
    verifier, challenge = pkce()
    approved = await browser.consent(agent.authorize_url(challenge, scope="read"))
    tokens = (await agent.exchange(query_of(approved.headers["location"])["code"], verifier)).json()

    _, challenge = pkce()
    page = await browser.http.get(agent.authorize_url(challenge))
    vault = (await browser.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    assert f"already has access: read on {vault}. Approving replaces it" in page.text
    denied = await browser.consent(agent.authorize_url(challenge), decision="deny")
    assert query_of(denied.headers["location"])["error"] == "access_denied"
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200
    assert (await agent.refresh(tokens["refresh_token"])).status_code == 200
    await browser.close()


async def test_consent_page_spells_out_what_the_admin_scope_allows(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    page = await browser.http.get(agent.authorize_url(challenge, scope="read write admin"))
    admin = re.search(r"<strong>admin</strong>: ([^<]*)</label>", page.text)
    assert admin is not None
    for power in ("approve or reject proposed memories", "undo imports", "settings", "operating guide", "audit log"):
        assert power in admin.group(1)


async def test_consent_form_is_refused_without_the_session_csrf_token(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    url = agent.authorize_url(challenge)
    page = await browser.http.get(url)
    fields = {k: v for k, v in query_of(url).items()}
    vault = (await browser.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    forged = await browser.http.post(
        "/authorize", data={**fields, "csrf_token": "forged", "vault": vault, "scope": "write", "decision": "approve"}
    )
    # Nothing says another site sent it (a stale page of ours looks the same): shown again, not acted on.
    assert forged.status_code == 400
    assert "nothing was done" in forged.text and "location" not in forged.headers
    cross_site = await browser.http.post(
        "/authorize",
        data={**fields, "csrf_token": csrf_of(page.text), "vault": vault, "scope": "write", "decision": "approve"},
        headers={"Origin": "https://evil.example"},
    )
    assert cross_site.status_code == 403
    assert (
        await gateway.fetchval("SELECT count(*) FROM gateway.access_grant WHERE client_id = $1", agent.client_id) == 0
    )


async def test_deny_returns_access_denied_and_is_audited(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register(client_name="Unwanted"))
    _, challenge = pkce()
    answer = await browser.consent(agent.authorize_url(challenge, state="s9"), decision="deny")
    assert answer.status_code == 303
    params = query_of(answer.headers["location"])
    assert params["error"] == "access_denied" and params["state"] == "s9" and params["iss"] == gateway.url
    assert (
        await gateway.fetchval("SELECT count(*) FROM gateway.access_grant WHERE client_id = $1", agent.client_id) == 0
    )
    denied = [e for e in await audit_actions(browser) if e["action"] == "grant.deny"]
    assert denied and denied[0]["details"]["client"] == "Unwanted"


async def test_consent_cannot_reach_vaults_the_owner_does_not_hold(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    victim, _ = await signed_in(gateway)
    victim_vault = (await victim.http.get("/api/v1/vaults")).json()["vaults"][0]["name"]
    attacker, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    answer = await attacker.consent(agent.authorize_url(challenge), vault=[victim_vault], scope=["read"])
    assert answer.status_code == 400
    assert "Choose at least one vault" in answer.text
    assert (
        await gateway.fetchval("SELECT count(*) FROM gateway.access_grant WHERE client_id = $1", agent.client_id) == 0
    )


async def test_revoking_a_grant_in_the_api_ends_its_tokens_at_once(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register(client_name="Laptop agent"))
    verifier, challenge = pkce()
    code = query_of((await browser.consent(agent.authorize_url(challenge))).headers["location"])["code"]
    tokens = (await agent.exchange(code, verifier)).json()
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200
    grant_id = next(g["id"] for g in (await browser.http.get("/api/v1/grants")).json()["grants"])

    no_csrf = await browser.http.delete(f"/api/v1/grants/{grant_id}")
    assert no_csrf.status_code == 403
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200

    revoked = await browser.api("DELETE", f"/api/v1/grants/{grant_id}")
    assert revoked.status_code == 200
    assert revoked.json()["revoked"]["revoked_at"]
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 401
    assert (await agent.refresh(tokens["refresh_token"])).status_code == 400
    assert (await browser.api("DELETE", f"/api/v1/grants/{grant_id}")).status_code == 404
    assert (await browser.http.get("/api/v1/grants")).json()["grants"] == []
    listed = (await browser.http.get("/api/v1/grants", params={"include_revoked": "true"})).json()["grants"]
    assert [g["id"] for g in listed] == [grant_id]

    actions = [e["action"] for e in await audit_actions(browser)]
    assert actions.index("grant.revoke") < actions.index("grant.create")  # newest first


async def test_api_needs_a_session_and_another_owner_cannot_revoke_my_grant(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        assert (await http.get("/api/v1/grants")).status_code == 401
    owner, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register())
    verifier, challenge = pkce()
    code = query_of((await owner.consent(agent.authorize_url(challenge))).headers["location"])["code"]
    tokens = (await agent.exchange(code, verifier)).json()
    grant_id = (await owner.http.get("/api/v1/grants")).json()["grants"][0]["id"]

    other, _ = await signed_in(gateway)
    assert (await other.api("DELETE", f"/api/v1/grants/{grant_id}")).status_code == 404
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200
    # An agent's token is no key to the management API.
    async with gateway.http() as http:
        listed = await http.get("/api/v1/grants", headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert listed.status_code == 401


async def test_sign_out_ends_the_session(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _ = await signed_in(gateway)
    csrf = await browser.csrf()
    out = await browser.http.post("/logout", data={"csrf_token": csrf})
    assert out.status_code == 303
    assert (await browser.http.get("/api/v1/me")).status_code == 401


async def test_administrator_adds_an_account_with_a_setup_link(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    admin, _ = await signed_in(gateway)
    async with gateway.store() as store:
        user = await store.user_by_username((await admin.http.get("/api/v1/me")).json()["username"])
        assert user is not None
    await gateway.fetchval("UPDATE gateway.user_account SET is_admin = true WHERE id = $1::uuid", user.id)
    newcomer = unique("newcomer")
    created = await admin.api("POST", "/api/v1/accounts", json={"username": newcomer, "display_name": "New"})
    assert created.status_code == 201
    link = created.json()["setup_url"].removeprefix(gateway.url)
    browser = Browser(gateway)
    page = await browser.http.get(link)
    done = await browser.http.post(
        link, data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf_of(page.text)}
    )
    assert done.status_code == 303
    assert (await browser.http.get("/api/v1/me")).json()["username"] == newcomer
    assert (await browser.api("POST", "/api/v1/accounts", json={"username": unique("x")})).status_code == 403
    taken = await admin.api("POST", "/api/v1/accounts", json={"username": newcomer})
    assert taken.status_code == 400


async def test_account_page_lists_apps_and_revokes_them(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        assert (await http.get("/")).headers["location"] == "/account"
        assert (await http.get("/account")).headers["location"] == "/login?next=/account"
    browser, _ = await signed_in(gateway)
    agent = Agent(gateway, await gateway.register(client_name="Kitchen <tablet>"))
    verifier, challenge = pkce()
    code = query_of((await browser.consent(agent.authorize_url(challenge))).headers["location"])["code"]
    tokens = (await agent.exchange(code, verifier)).json()

    page = await browser.http.get("/account")
    assert page.status_code == 200
    assert "Kitchen &lt;tablet&gt;" in page.text and f"{gateway.url}/mcp" in page.text
    action = re.search(r"""action=["'](/account/grants/[^"']+/revoke)["']""", page.text)
    assert action is not None
    forged = await browser.http.post(action.group(1), data={"csrf_token": "forged"})
    assert forged.status_code == 403
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 200
    revoked = await browser.http.post(action.group(1), data={"csrf_token": csrf_of(page.text)})
    assert revoked.status_code == 303
    assert (await mcp_post(gateway, INITIALIZE, tokens["access_token"])).status_code == 401
    assert "No app has access yet" in (await browser.http.get("/account")).text
