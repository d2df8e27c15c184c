"""Email sign-in: a single-use, 15-minute link mailed through SMTP, for the owner's sign-in and the consent page.

Each test starts a local SMTP server (aiosmtpd, memvault_devstack.mailbox) and a gateway sending to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from gateway_helpers import Agent, Browser, RunningGateway, StartGateway, csrf_of, pkce, query_of, unique
from pydantic import ValidationError

from memvault_devstack.mailbox import Mailbox, Received
from memvault_devstack.migrations import roll_back_one
from memvault_devstack.postgres import create_database, drop_database, psql, with_database
from memvault_gateway.__main__ import EmailTaken, main, set_email, setup_link
from memvault_gateway.auth import credentials
from memvault_gateway.dashboard import i18n
from memvault_gateway.settings import MigrateSettings, SmtpGroup
from memvault_gateway.signin import email_login
from memvault_gateway.store import MIGRATIONS
from memvault_gateway.web.throttle import RULES

pytestmark = pytest.mark.integration

SENT = "If that address belongs to an account here, a sign-in link is on its way."


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with Mailbox() as started:
        yield started


def smtp_for(mailbox: Mailbox, **extra: Any) -> dict[str, Any]:
    return {
        "host": mailbox.host,
        "port": mailbox.port,
        "security": "none",
        "from_address": "memvault <memvault@example.test>",
        **extra,
    }


async def owner_with_email(gateway: RunningGateway) -> tuple[str, str]:
    """A local account with a sign-in address; returns (username, address)."""
    username, _ = await gateway.create_user()
    address = f"{username}@example.test"
    async with gateway.store() as store:
        user = await store.user_by_username(username)
        assert user is not None and await store.set_email(user.id, address)
    return username, address


async def ask_for_link(browser: Browser, address: str, next_path: str = "/account", **headers: str) -> Any:
    page = await browser.http.get("/login", params={"next": next_path})
    assert page.status_code == 200, page.text
    return await browser.http.post(
        "/login/email",
        data={"email": address, "next": next_path, "csrf_token": csrf_of(page.text)},
        headers=headers,
    )


async def link_for(mailbox: Mailbox, gateway: RunningGateway, address: str, count: int = 1) -> tuple[str, Received]:
    """The path of the `count`-th sign-in link mailed to `address`, and the mail."""
    received = await mailbox.wait_for(address, count)
    link = mailbox.link_in(received, "/login/email/")
    assert link.startswith(f"{gateway.url}/login/email/mvmail_")
    return link.removeprefix(gateway.url), received


async def use_link(browser: Browser, path: str) -> Any:
    page = await browser.http.get(path)
    assert page.status_code == 200, page.text
    return await browser.http.post(path, data={"csrf_token": csrf_of(page.text)})


async def test_a_mailed_link_signs_in_once(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    username, address = await owner_with_email(gateway)
    browser = Browser(gateway)

    page = await browser.http.get("/login")
    assert "action='/login/email'" in page.text and "Email me a sign-in link" in page.text
    # Typed differently from how it is stored: still the same address.
    asked = await ask_for_link(browser, f"  {address.upper()} ")
    assert asked.status_code == 200 and SENT in asked.text

    path, received = await link_for(mailbox, gateway, address)
    assert received.recipients == (address,)
    assert received.message["From"] == "memvault <memvault@example.test>"
    assert received.message["Subject"] == "Your memvault sign-in link"
    assert received.message["Auto-Submitted"] == "auto-generated"
    assert username in received.text and "works once" in received.text
    token = path.rsplit("/", 1)[1]
    # Only the token's hash is stored.
    assert await gateway.fetchval("SELECT count(*) FROM gateway.email_link WHERE token_hash = $1", token) == 0
    assert (
        await gateway.fetchval(
            "SELECT expires_at - created_at FROM gateway.email_link WHERE token_hash = $1",
            credentials.token_hash(token),
        )
    ).total_seconds() == 15 * 60

    # Opening the link spends nothing (mail scanners fetch links); it names the account and asks.
    first = await browser.http.get(path)
    assert first.status_code == 200 and username in first.text
    signed_in = await use_link(browser, path)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/account"
    me = (await browser.http.get("/api/v1/me")).json()
    assert me["username"] == username and me["signed_in_with"] == "email" and me["email"] == address

    # Spent: opening it again, or sending the form again, says so and signs nobody in.
    other = Browser(gateway, address="127.0.0.2")
    again = await other.http.get(path)
    assert again.status_code == 404 and "used already or has expired" in again.text
    replay = await other.http.post(path, data={"csrf_token": csrf_of(first.text)})
    assert replay.status_code == 403  # another browser's form token
    page = await other.http.get("/login")
    replay = await other.http.post(path, data={"csrf_token": csrf_of(page.text)})
    assert replay.status_code == 404
    assert (await other.http.get("/api/v1/me")).status_code == 401

    actions = [e["action"] for e in (await browser.api("GET", "/api/v1/audit", params={"limit": 50})).json()["entries"]]
    assert "session.email_link" in actions and "session.create" in actions
    await browser.close()
    await other.close()


async def test_an_expired_link_signs_nobody_in(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, address = await owner_with_email(gateway)
    browser = Browser(gateway)
    assert (await ask_for_link(browser, address)).status_code == 200
    path, _ = await link_for(mailbox, gateway, address)
    page = await browser.http.get(path)
    assert page.status_code == 200
    token_hash = credentials.token_hash(path.rsplit("/", 1)[1])
    await gateway.fetchval(
        "UPDATE gateway.email_link SET expires_at = now() - interval '1 second' WHERE token_hash = $1", token_hash
    )
    assert (await browser.http.get(path)).status_code == 404
    late = await browser.http.post(path, data={"csrf_token": csrf_of(page.text)})
    assert late.status_code == 404 and "expired" in late.text
    assert (await browser.http.get("/api/v1/me")).status_code == 401


async def test_a_newer_link_replaces_the_older_one(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, address = await owner_with_email(gateway)
    browser = Browser(gateway)
    assert (await ask_for_link(browser, address)).status_code == 200
    older, _ = await link_for(mailbox, gateway, address)
    assert (await ask_for_link(browser, address)).status_code == 200
    newer, _ = await link_for(mailbox, gateway, address, count=2)
    assert (await browser.http.get(older)).status_code == 404
    assert (await use_link(browser, newer)).status_code == 303


async def test_an_unknown_address_gets_the_same_answer_and_no_mail(
    start_gateway: StartGateway, mailbox: Mailbox
) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, address = await owner_with_email(gateway)
    nobody = f"{unique('nobody')}@example.test"
    browser = Browser(gateway)
    unknown = await ask_for_link(browser, nobody)
    known = await ask_for_link(browser, address)
    assert unknown.status_code == known.status_code == 200
    assert unknown.text == known.text
    await email_login.settled()
    assert len(mailbox.to(address)) == 1
    assert mailbox.to(nobody) == []
    assert len(mailbox.received) == 1

    # Not an address at all: said so, nothing sent.
    bad = await ask_for_link(browser, "not an address")
    assert bad.status_code == 400 and "not an email address" in bad.text


async def test_link_requests_are_limited_per_address_and_per_email(
    start_gateway: StartGateway, mailbox: Mailbox
) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, address = await owner_with_email(gateway)
    per_email = RULES["email-link-address"].amount
    for number in range(per_email):
        # From different addresses, so only the per-email count runs out.
        answer = await ask_for_link(Browser(gateway, address=f"127.0.1.{number + 1}"), address)
        assert answer.status_code == 200
    refused = await ask_for_link(Browser(gateway, address="127.0.1.99"), address)
    assert refused.status_code == 429 and "Too many sign-in links were asked for for this address" in refused.text
    await email_login.settled()
    assert len(mailbox.to(address)) == per_email

    # One address asking for many different emails (mostly unknown): the per-address count runs out.
    stranger = Browser(gateway, address="127.0.2.1")
    for _ in range(RULES["email-link"].amount):
        assert (await ask_for_link(stranger, f"{unique('x')}@example.test")).status_code == 200
    refused = await ask_for_link(stranger, f"{unique('x')}@example.test")
    assert refused.status_code == 429 and "from here" in refused.text


async def test_email_sign_in_is_off_without_an_smtp_host(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser = Browser(gateway)
    page = await browser.http.get("/login")
    assert "action='/login/email'" not in page.text and "name=email" not in page.text
    asked = await browser.http.post(
        "/login/email", data={"email": "a@example.test", "next": "/account", "csrf_token": csrf_of(page.text)}
    )
    assert asked.status_code == 404 and "Email sign-in is turned off here" in asked.text
    opened = await browser.http.get("/login/email/mvmail_whatever")
    assert opened.status_code == 404 and "MEMVAULT_SMTP__HOST" in opened.text


async def test_the_link_goes_back_only_to_a_path_on_this_site(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, address = await owner_with_email(gateway)
    for count, wanted in enumerate(
        ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"), start=1
    ):
        browser = Browser(gateway)
        assert (await ask_for_link(browser, address, next_path=wanted)).status_code == 200
        path, _ = await link_for(mailbox, gateway, address, count)
        answer = await use_link(browser, path)
        assert answer.status_code == 303 and answer.headers["location"] == "/account", wanted
        await browser.close()


async def test_from_the_consent_page_the_link_returns_to_it(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox), login={"local_accounts": False})
    username, address = await owner_with_email(gateway)
    agent = Agent(gateway, await gateway.register(client_name="Desk agent"))
    _, challenge = pkce()
    browser = Browser(gateway)
    to_login = await browser.http.get(agent.authorize_url(challenge, state="st-mail"))
    assert to_login.status_code == 302
    next_path = query_of(to_login.headers["location"])["next"]
    page = await browser.http.get(to_login.headers["location"])
    # Password sign-in is off here: the email form is what the page offers.
    assert "name=password" not in page.text and "Email me a sign-in link" in page.text
    assert (await ask_for_link(browser, address, next_path=next_path)).status_code == 200
    path, received = await link_for(mailbox, gateway, address)
    assert "authorize" not in received.text  # the way back is kept with the link, not in it
    back = await use_link(browser, path)
    assert back.status_code == 303 and back.headers["location"] == next_path
    consent = await browser.http.get(back.headers["location"])
    assert consent.status_code == 200 and "Desk agent" in consent.text and username in consent.text
    approved = await browser.consent(back.headers["location"])
    assert approved.status_code == 303 and "code" in query_of(approved.headers["location"])


async def test_forms_from_another_site_are_refused(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, address = await owner_with_email(gateway)
    browser = Browser(gateway)
    forged = await ask_for_link(browser, address, Origin="https://evil.example")
    assert forged.status_code == 403
    async with gateway.http() as script:
        no_token = await script.post("/login/email", data={"email": address, "csrf_token": "x"})
    assert no_token.status_code == 403
    await email_login.settled()
    assert mailbox.received == []

    assert (await ask_for_link(browser, address)).status_code == 200
    path, _ = await link_for(mailbox, gateway, address)
    page = await browser.http.get(path)
    cross_site = await browser.http.post(
        path, data={"csrf_token": csrf_of(page.text)}, headers={"Origin": "https://evil.example"}
    )
    assert cross_site.status_code == 403
    assert (await browser.http.get("/api/v1/me")).status_code == 401
    # Refused before it was spent: the owner's own click still works.
    assert (await use_link(browser, path)).status_code == 303


async def test_smtp_credentials_are_used_and_failures_logged_without_address_or_link(
    start_gateway: StartGateway, caplog: pytest.LogCaptureFixture
) -> None:
    with Mailbox(credentials=("mailer", "mail-secret")) as mailbox:
        gateway = await start_gateway(smtp=smtp_for(mailbox, username="mailer", password="mail-secret"))
        wrong = await start_gateway(smtp=smtp_for(mailbox, username="mailer", password="not-it"))
        _, address = await owner_with_email(gateway)
        with caplog.at_level(logging.DEBUG, logger="memvault_gateway"):
            assert (await ask_for_link(Browser(gateway), address)).status_code == 200
            path, received = await link_for(mailbox, gateway, address)
            assert received.authenticated_as == "mailer"
            assert (await ask_for_link(Browser(wrong), address)).status_code == 200
            await email_login.settled()
        assert len(mailbox.received) == 1
    records = [r for r in caplog.records if r.name == "memvault_gateway"]
    assert any(r.getMessage() == "sign-in link not sent" for r in records)
    assert any(r.getMessage() == "sign-in link sent" for r in records)
    token = path.rsplit("/", 1)[1]
    for record in records:
        text = repr(record.__dict__)
        assert address not in text and token not in text and "mail-secret" not in text


async def test_operators_and_administrators_set_the_address(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    settings = MigrateSettings(gateway=gateway.settings.gateway, postgres=gateway.settings.postgres)
    owner = unique("owner")
    address = f"{owner}@example.test"
    assert await setup_link(settings, owner, force=False, email=address) is not None
    async with gateway.store() as store:
        found = await store.user_by_email(address)
        assert found is not None and found.username == owner
    other = unique("other")
    with pytest.raises(EmailTaken):
        await setup_link(settings, other, force=False, email=address)
    assert await set_email(settings, other, address) == "another account already has that address"
    assert await set_email(settings, owner, None) is None
    assert await set_email(settings, other, address) is None
    nobody = unique("nobody")
    assert await set_email(settings, nobody, address) == f"no local account {nobody!r}"

    admin, _ = await gateway.create_user(admin=True)
    browser = Browser(gateway)
    assert (await browser.sign_in(admin)).status_code == 303
    made = await browser.api("POST", "/api/v1/accounts", json={"username": unique("kid"), "email": "Kid@Example.TEST"})
    assert made.status_code == 201, made.text
    async with gateway.store() as store:
        kid = await store.user_by_email("kid@example.test")
        assert kid is not None and kid.username == made.json()["username"]
    taken = await browser.api("POST", "/api/v1/accounts", json={"username": unique("kid"), "email": address})
    assert taken.status_code == 400 and "another account" in taken.text
    bad = await browser.api("POST", "/api/v1/accounts", json={"username": unique("kid"), "email": "nope"})
    assert bad.status_code == 400 and "not an email address" in bad.text

    kid_name = made.json()["username"]
    changed = await browser.api("PUT", f"/api/v1/accounts/{kid_name}/email", json={"email": "New.Kid@example.test"})
    assert changed.status_code == 200 and changed.json()["email"] == "new.kid@example.test"
    taken = await browser.api("PUT", f"/api/v1/accounts/{kid_name}/email", json={"email": address})
    assert taken.status_code == 400 and "another account" in taken.text
    cleared = await browser.api("PUT", f"/api/v1/accounts/{kid_name}/email", json={"email": ""})
    assert cleared.status_code == 200 and cleared.json()["email"] is None
    async with gateway.store() as store:
        assert await store.user_by_email("new.kid@example.test") is None
    missing = await browser.api("PUT", f"/api/v1/accounts/{unique('nobody')}/email", json={"email": "a@example.test"})
    assert missing.status_code == 404

    # Not an administrator: refused.
    plain, _ = await gateway.create_user()
    someone = Browser(gateway, address="127.0.0.5")
    assert (await someone.sign_in(plain)).status_code == 303
    refused = await someone.api("PUT", f"/api/v1/accounts/{plain}/email", json={"email": "me@example.test"})
    assert refused.status_code == 403


@pytest.mark.unit
def test_the_commands_refuse_what_is_not_an_address(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["set-email", "--email", "not an address"], ["setup-link", "--email", "me@"]):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        assert "is not an email address" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["set-email"])  # --email or --clear is required
    assert "one of the arguments --email --clear is required" in capsys.readouterr().err


@pytest.mark.unit
def test_smtp_settings_say_what_is_missing() -> None:
    assert not SmtpGroup().enabled
    with pytest.raises(ValidationError, match="FROM_ADDRESS is required"):
        SmtpGroup(host="smtp.example.lan")
    with pytest.raises(ValidationError, match="must be an email address"):
        SmtpGroup(host="smtp.example.lan", from_address="memvault")
    with pytest.raises(ValidationError, match="must be an email address"):
        SmtpGroup(host="smtp.example.lan", from_address="m@example.lan\r\nBcc: everyone@example.org")
    with pytest.raises(ValidationError, match="both MEMVAULT_SMTP__USERNAME and MEMVAULT_SMTP__PASSWORD"):
        SmtpGroup(host="smtp.example.lan", from_address="m@example.lan", username="u")
    with pytest.raises(ValidationError, match="clear text"):
        SmtpGroup(host="smtp.example.lan", from_address="m@example.lan", username="u", password="p", security="none")
    local = SmtpGroup(host="127.0.0.1", from_address="m@example.lan", username="u", password="p", security="none")
    assert local.enabled


def test_the_email_migration_rolls_back_and_applies_again(postgres_dsn: str) -> None:
    server, name = with_database(postgres_dsn, "postgres"), f"memvault_email_{unique('db')[-10:]}"
    dsn = create_database(server, name)
    try:
        MIGRATIONS.apply(dsn)
        columns = "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'gateway'"
        has_email = f"{columns} AND table_name = 'user_account' AND column_name = 'email'"
        assert psql(dsn, has_email).strip() == "1"
        roll_back_one(MIGRATIONS, dsn, "0002_email_sign_in")
        assert psql(dsn, has_email).strip() == "0"
        assert psql(dsn, "SELECT to_regclass('gateway.email_link') IS NULL").strip() == "t"
        assert MIGRATIONS.apply(dsn) == ["0002_email_sign_in"]
        assert psql(dsn, has_email).strip() == "1"
    finally:
        drop_database(server, name)


async def signed_in_on_account(gateway: RunningGateway, address: str = "127.0.0.1") -> tuple[Browser, str, str]:
    """(browser signed in, username, the /account page's CSRF token)."""
    username, _ = await gateway.create_user()
    browser = Browser(gateway, address=address)
    assert (await browser.sign_in(username)).status_code == 303
    page = await browser.http.get("/account")
    assert page.status_code == 200
    return browser, username, csrf_of(page.text)


async def test_a_person_sets_their_own_address_only_by_confirming_it_from_that_mailbox(
    start_gateway: StartGateway, mailbox: Mailbox
) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    browser, username, csrf = await signed_in_on_account(gateway)
    page = await browser.http.get("/account")
    assert "No address yet" in page.text and "Send a confirmation link" in page.text
    address = f"{username}.new@example.test"

    asked = await browser.http.post("/account/email", data={"email": address.upper(), "csrf_token": csrf})
    assert asked.status_code == 200 and "A link to confirm" in asked.text
    received = await mailbox.wait_for(address)
    assert received.message["Subject"] == "Confirm your memvault address"
    link = mailbox.link_in(received, "/account/email/").removeprefix(gateway.url)
    async with gateway.store() as store:
        assert await store.user_by_email(address) is None  # not until it is confirmed

    # The confirmation link signs nobody in, and a sign-in link confirms nothing.
    token = link.rsplit("/", 1)[1]
    assert (await browser.http.get(f"/login/email/{token}")).status_code == 404

    # Opened elsewhere (the phone that reads the mail): it names the account and the address, and asks.
    phone = Browser(gateway, address="127.0.0.7")
    shown = await phone.http.get(link)
    assert shown.status_code == 200 and username in shown.text and address in shown.text
    done = await phone.http.post(link, data={"csrf_token": csrf_of(shown.text)})
    assert done.status_code == 200 and f"Sign-in links now go to {address}" in done.text
    assert (await phone.http.get("/api/v1/me")).status_code == 401  # confirming is not signing in
    assert (await phone.http.post(link, data={"csrf_token": csrf_of(shown.text)})).status_code == 404  # spent
    assert (await browser.http.get("/api/v1/me")).json()["email"] == address
    assert f"Sign-in links go to <strong>{address}</strong>" in (await browser.http.get("/account")).text

    # That address now signs in by email; then the person removes it.
    other = Browser(gateway, address="127.0.0.8")
    assert (await ask_for_link(other, address)).status_code == 200
    sign_in, _ = await link_for(mailbox, gateway, address, count=2)
    assert (await browser.http.get(sign_in.replace("/login/email/", "/account/email/"))).status_code == 404
    assert (await use_link(other, sign_in)).status_code == 303
    removed = await browser.http.post("/account/email", data={"email": "", "csrf_token": csrf})
    assert removed.status_code == 303
    assert (await browser.http.get("/api/v1/me")).json()["email"] is None
    actions = [e["action"] for e in (await browser.api("GET", "/api/v1/audit", params={"limit": 50})).json()["entries"]]
    assert actions.count("account.email") == 2


async def test_the_email_part_of_the_account_page_speaks_the_dashboards_language(
    start_gateway: StartGateway, mailbox: Mailbox
) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    browser, _, csrf = await signed_in_on_account(gateway)
    indonesian = {"accept-language": "id"}
    page = await browser.http.get("/account", headers=indonesian)
    assert "Masuk lewat email" in page.text and "Kirim tautan konfirmasi" in page.text
    assert "Send a confirmation link" not in page.text
    wrong = await browser.http.post(
        "/account/email", data={"email": "not-an-address", "csrf_token": csrf}, headers=indonesian
    )
    assert wrong.status_code == 400 and "not-an-address bukan alamat email" in wrong.text
    english = await browser.http.post("/account/email", data={"email": "<b>x", "csrf_token": csrf})
    assert english.status_code == 400 and "&lt;b&gt;x is not an email address" in english.text
    sent = await browser.http.post(
        "/account/email", data={"email": "someone@example.test", "csrf_token": csrf}, headers=indonesian
    )
    assert sent.status_code == 200 and "Tautan untuk mengonfirmasi someone@example.test" in sent.text


async def test_the_email_link_pages_speak_the_browsers_language(start_gateway: StartGateway, mailbox: Mailbox) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    indonesian = {"accept-language": "id"}
    # The confirmation link, opened on a phone whose browser asks for Indonesian.
    browser, username, csrf = await signed_in_on_account(gateway)
    address = f"{username}.id@example.test"
    asked = await browser.http.post("/account/email", data={"email": address, "csrf_token": csrf})
    assert asked.status_code == 200
    link = mailbox.link_in(await mailbox.wait_for(address), "/account/email/").removeprefix(gateway.url)
    phone = Browser(gateway, address="127.0.0.9")
    shown = await phone.http.get(link, headers=indonesian)
    assert shown.status_code == 200 and "<html lang=id>" in shown.text
    assert "<h1>Konfirmasi alamat Anda</h1>" in shown.text
    assert f"Kirim tautan masuk memvault untuk <strong>{username}</strong> ke <strong>{address}</strong>?" in shown.text
    assert ">Konfirmasi</button>" in shown.text and "Confirm" not in shown.text
    english = await Browser(gateway, address="127.0.0.10").http.get(link)
    assert "<h1>Confirm your address</h1>" in english.text and ">Confirm</button>" in english.text
    # The switcher's cookie, remembered from the dashboard, wins over the browser's English.
    phone.http.cookies.set(i18n.LANGUAGE_COOKIE, "id")
    done = await phone.http.post(link, data={"csrf_token": csrf_of(shown.text)}, headers={"accept-language": "en"})
    assert done.status_code == 200 and f"Tautan masuk kini dikirim ke {address}." in done.text
    spent = await phone.http.get(link)
    assert spent.status_code == 404 and "<h1>Tautan tidak berlaku</h1>" in spent.text

    # Email sign-in: the answer, the link's page and a spent link.
    stranger = Browser(gateway, address="127.0.0.11")
    stranger.http.cookies.set(i18n.LANGUAGE_COOKIE, "id")
    answer = await ask_for_link(stranger, address)
    assert answer.status_code == 200 and "<h1>Periksa email Anda</h1>" in answer.text
    assert "dalam 15 menit" in answer.text
    sign_in, _ = await link_for(mailbox, gateway, address, count=2)  # the first was the confirmation
    page = await stranger.http.get(sign_in)
    assert page.status_code == 200 and "<h1>Masuk ke memvault</h1>" in page.text
    assert f"Tautan ini memasukkan Anda sebagai <strong>{username}</strong>." in page.text
    assert (await stranger.http.post(sign_in, data={"csrf_token": csrf_of(page.text)})).status_code == 303
    again = await phone.http.get(sign_in)
    assert again.status_code == 404 and "Tautan masuk ini sudah dipakai" in again.text


async def test_asking_for_another_accounts_address_mails_nothing_and_says_nothing(
    start_gateway: StartGateway, mailbox: Mailbox
) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    _, taken = await owner_with_email(gateway)
    browser, username, csrf = await signed_in_on_account(gateway)
    free = f"{username}@example.test"
    for_taken = await browser.http.post("/account/email", data={"email": taken, "csrf_token": csrf})
    for_free = await browser.http.post("/account/email", data={"email": free, "csrf_token": csrf})
    assert for_taken.status_code == for_free.status_code == 200
    assert for_taken.text.replace(taken, "X") == for_free.text.replace(free, "X")
    await email_login.settled()
    assert mailbox.to(taken) == [] and len(mailbox.to(free)) == 1

    # Another account takes the free address before the link is used: nothing changes, the link keeps.
    link = mailbox.link_in(mailbox.to(free)[0], "/account/email/").removeprefix(gateway.url)
    async with gateway.store() as store:
        someone = await store.user_by_username((await gateway.create_user())[0])
        assert someone is not None and await store.set_email(someone.id, free)
    shown = await browser.http.get(link)
    late = await browser.http.post(link, data={"csrf_token": csrf_of(shown.text)})
    assert late.status_code == 409 and "nothing changed" in late.text
    assert (await browser.http.get("/api/v1/me")).json()["email"] is None


async def test_the_address_form_needs_a_session_its_token_and_email_sign_in(
    start_gateway: StartGateway, mailbox: Mailbox
) -> None:
    gateway = await start_gateway(smtp=smtp_for(mailbox))
    browser, username, csrf = await signed_in_on_account(gateway)
    forged = await browser.http.post("/account/email", data={"email": f"{username}@example.test", "csrf_token": "x"})
    assert forged.status_code == 403
    bad = await browser.http.post("/account/email", data={"email": "not an address", "csrf_token": csrf})
    assert bad.status_code == 400 and "not an email address" in bad.text
    async with gateway.http() as stranger:
        signed_out = await stranger.post("/account/email", data={"email": "a@example.test", "csrf_token": csrf})
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login")
    await email_login.settled()
    assert mailbox.received == []

    off = await start_gateway()
    browser, _, csrf = await signed_in_on_account(off, address="127.0.0.9")
    assert "Email sign-in" not in (await browser.http.get("/account")).text
    refused = await browser.http.post("/account/email", data={"email": "a@example.test", "csrf_token": csrf})
    assert refused.status_code == 404 and "turned off" in refused.text
