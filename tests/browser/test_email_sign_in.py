"""Email sign-in in Chromium: the link arrives at a local SMTP server, the person opens it and is signed in,
on the owner's sign-in page and on the way to the consent page."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from browser_helpers import OAuthStack, choose_password, setup_link
from playwright.async_api import expect

from memvault_devstack.browser import PageShots
from memvault_devstack.mailbox import Mailbox
from memvault_devstack.stack import Stack

ADDRESS = "owner@example.test"


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with Mailbox() as started:
        yield started


class _AppCallback(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"the app got its code"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def app_callback() -> Iterator[str]:
    """An app's loopback redirect URI (RFC 8252) that answers like a native app's listener."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AppCallback)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/callback"
    server.shutdown()
    server.server_close()


def smtp_env(mailbox: Mailbox) -> dict[str, str]:
    return {
        "MEMVAULT_SMTP__HOST": mailbox.host,
        "MEMVAULT_SMTP__PORT": str(mailbox.port),
        "MEMVAULT_SMTP__SECURITY": "none",
        "MEMVAULT_SMTP__FROM_ADDRESS": "memvault <memvault@example.test>",
    }


def gateway_command(stack: Stack, *args: str) -> str:
    answer = subprocess.run(
        [sys.executable, "-m", "memvault_gateway", *args],
        env={**os.environ, **stack.env_for("gateway")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


async def test_the_owner_signs_in_with_a_link_from_their_mail(
    oauth_stack: OAuthStack, browser_pages: PageShots, mailbox: Mailbox
) -> None:
    stack = await oauth_stack(**smtp_env(mailbox))
    # The owner's account, with its address; they never choose a password.
    await asyncio.to_thread(setup_link, stack, "owner", "--email", ADDRESS)
    page = await browser_pages.new()
    await page.goto(f"{stack.gateway_url}/account")
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    await page.get_by_label("Email").fill(ADDRESS)
    await page.get_by_role("button", name="Email me a sign-in link").click()
    await expect(page.get_by_role("heading")).to_have_text("Check your email")
    await expect(page.locator("body")).to_contain_text("If that address belongs to an account here")
    await browser_pages.shot(page, "check-your-email")

    received = await mailbox.wait_for(ADDRESS)
    link = mailbox.link_in(received, "/login/email/")
    assert link.startswith(f"{stack.gateway_url}/login/email/")
    await page.goto(link)
    await expect(page.locator("body")).to_contain_text("This link signs you in as owner")
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("owner")
    assert page.url == f"{stack.gateway_url}/account"

    # The link is spent: another browser opening it is told so and is not signed in.
    other = await browser_pages.new()
    await other.goto(link)
    await expect(other.locator("body")).to_contain_text("used already or has expired")
    await browser_pages.shot(other, "link-spent")
    await other.goto(f"{stack.gateway_url}/account")
    await expect(other.get_by_role("heading")).to_have_text("Sign in to memvault")


async def test_signing_in_by_email_from_the_consent_page_returns_to_it(
    oauth_stack: OAuthStack, browser_pages: PageShots, mailbox: Mailbox, app_callback: str
) -> None:
    stack = await oauth_stack(MEMVAULT_LOGIN__LOCAL_ACCOUNTS="false", **smtp_env(mailbox))
    await asyncio.to_thread(setup_link, stack, "owner")
    await asyncio.to_thread(gateway_command, stack, "set-email", "--username", "owner", "--email", ADDRESS)
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as http:
        registered = await http.post(
            "/register",
            json={
                "client_name": "Mail test agent",
                "redirect_uris": [app_callback],
                "token_endpoint_auth_method": "none",
            },
        )
    assert registered.status_code == 201, registered.text
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    authorize = f"{stack.gateway_url}/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": registered.json()["client_id"],
            "redirect_uri": app_callback,
            "state": "mail-state",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": stack.mcp_url,
            "scope": "read write",
        }
    )

    page = await browser_pages.new()
    await page.goto(authorize)
    # Signed out: the sign-in page, which here offers only the email link.
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    assert urlsplit(page.url).path == "/login"
    await expect(page.get_by_label("Password")).to_have_count(0)
    await page.get_by_label("Email").fill(ADDRESS)
    await page.get_by_role("button", name="Email me a sign-in link").click()
    await expect(page.get_by_role("heading")).to_have_text("Check your email")

    link = mailbox.link_in(await mailbox.wait_for(ADDRESS), "/login/email/")
    await page.goto(link)
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_role("heading")).to_have_text("Connect an app")
    await expect(page.locator("body")).to_contain_text("Mail test agent")
    await browser_pages.shot(page, "consent-after-email-sign-in")
    assert page.url == authorize

    # Approving sends the browser back to the app with a code.
    await page.get_by_role("button", name="Approve").click()
    await expect(page.locator("body")).to_have_text("the app got its code")
    assert page.url.startswith(app_callback + "?")
    answer = parse_qs(urlsplit(page.url).query)
    assert answer["state"] == ["mail-state"] and answer["code"][0].startswith("mvc_")


async def test_the_owner_adds_their_address_on_the_account_page_by_confirming_it(
    oauth_stack: OAuthStack, browser_pages: PageShots, mailbox: Mailbox
) -> None:
    stack = await oauth_stack(**smtp_env(mailbox))
    link = await asyncio.to_thread(setup_link, stack)
    page = await browser_pages.new()
    await choose_password(page, link)
    await expect(page.locator("body")).to_contain_text("No address yet")
    await page.get_by_label("New address").fill(ADDRESS)
    await browser_pages.shot(page, "account-with-email-section")
    await page.get_by_role("button", name="Send a confirmation link").click()
    await expect(page.locator(".notice")).to_contain_text(f"A link to confirm {ADDRESS} is on its way")

    confirmation = mailbox.link_in(await mailbox.wait_for(ADDRESS), "/account/email/")
    await page.goto(confirmation)
    await expect(page.locator("body")).to_contain_text(f"to {ADDRESS}?")
    await browser_pages.shot(page, "confirm-address")
    await page.get_by_role("button", name="Confirm").click()
    await expect(page.locator("body")).to_contain_text(f"Sign-in links now go to {ADDRESS}")
    await page.goto(f"{stack.gateway_url}/account")
    await expect(page.locator("body")).to_contain_text(f"Sign-in links go to {ADDRESS}")
    await browser_pages.shot(page, "account-with-address")

    # Signed out, the owner now signs in with a link to that address.
    await page.get_by_role("button", name="Sign out").click()
    await page.get_by_label("Email").fill(ADDRESS)
    await page.get_by_role("button", name="Email me a sign-in link").click()
    await expect(page.get_by_role("heading")).to_have_text("Check your email")
    await page.goto(mailbox.link_in(await mailbox.wait_for(ADDRESS, count=2), "/login/email/"))
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("owner")
