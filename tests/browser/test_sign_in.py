"""Signing in with a password and out again, in Chromium, and the cookies the browser keeps."""

from __future__ import annotations

import asyncio
import time

from browser_helpers import PASSWORD, OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import expect

from memvault_devstack.browser import PageShots


async def test_wrong_then_right_password_then_sign_out(oauth_stack: OAuthStack, browser_pages: PageShots) -> None:
    stack = await oauth_stack()
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    base = stack.gateway_url

    # Signed out, the account page sends the person to sign in first and back afterwards.
    page = await browser_pages.new()
    await page.goto(f"{base}/account")
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    assert page.url == f"{base}/login?next=/account"

    await page.get_by_label("User name").fill("owner")
    await page.get_by_label("Password").fill(PASSWORD + "x")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator(".error")).to_have_text("Wrong user name or password.")
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    # The name stays; only the password is typed again, and the cursor is already there.
    await expect(page.get_by_label("User name")).to_have_value("owner")
    await expect(page.get_by_label("Password")).to_have_value("")
    await expect(page.get_by_label("Password")).to_be_focused()
    assert not [c for c in await page.context.cookies() if "session" in c["name"]]
    await browser_pages.shot(page, "wrong-password")

    # The form still remembers where to go after a failed attempt.
    await page.get_by_label("User name").fill("Owner ")  # as typed on a phone: capital, trailing space
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("owner")
    assert page.url == f"{base}/account"

    # Over http://127.0.0.1 the session cookie is HttpOnly and SameSite=Lax; Secure and the
    # __Host- prefix need an https public URL (checked in-process in the gateway's tests).
    cookies = {c["name"]: c for c in await page.context.cookies()}
    session = cookies["memvault_session"]
    assert session["httpOnly"] is True and session["sameSite"] == "Lax" and session["path"] == "/"
    assert session["secure"] is False and session["domain"] == "127.0.0.1"
    assert 11.9 * 3600 < session["expires"] - time.time() <= 12 * 3600  # login.session_hours
    assert not any(name.startswith("__Host-") for name in cookies)
    login_csrf = cookies["memvault_login_csrf"]
    assert login_csrf["httpOnly"] is True and login_csrf["sameSite"] == "Lax"
    # Scripts on the page cannot read either.
    assert await page.evaluate("document.cookie") == ""

    # A signed-in person opening /login goes straight on.
    await page.goto(f"{base}/login?next=/account")
    assert page.url == f"{base}/account"

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    await expect(page.locator(".notice")).to_have_text("You are signed out.")
    await browser_pages.shot(page, "signed-out")
    assert "memvault_session" not in {c["name"] for c in await page.context.cookies()}
    await page.goto(f"{base}/account")
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")

    # The session ended on the server too: its old cookie signs nobody in.
    kept = await browser_pages.new()
    await kept.context.add_cookies([session])
    await kept.goto(f"{base}/account")
    await expect(kept.get_by_role("heading")).to_have_text("Sign in to memvault")


async def test_sign_in_with_an_unknown_user_says_the_same_as_a_wrong_password(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    page = await browser_pages.new(phone=True)
    await sign_in(page, stack.gateway_url, "nobody")
    await expect(page.locator(".error")).to_have_text("Wrong user name or password.")
    assert page.url == f"{stack.gateway_url}/login"


async def test_sign_out_from_a_tab_opened_before_signing_in_again(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    """An old tab's form holds the old session's token: it must say so, not blame another site."""
    stack = await oauth_stack()
    base = stack.gateway_url
    old_tab = await browser_pages.new()
    await choose_password(old_tab, await asyncio.to_thread(setup_link, stack))
    new_tab = await old_tab.context.new_page()
    await new_tab.goto(f"{base}/account")
    await new_tab.get_by_role("button", name="Sign out").click()
    await sign_in(new_tab, base, "owner")
    await expect(new_tab.get_by_text("Signed in as")).to_contain_text("owner")

    await old_tab.get_by_role("button", name="Sign out").click()
    await expect(old_tab.get_by_role("heading")).to_have_text("Page out of date")
    await expect(old_tab.locator("p").first).to_have_text(
        "This page was opened before you last signed in, so nothing was done. Open it again and retry."
    )
    await browser_pages.shot(old_tab, "out-of-date")
    await old_tab.get_by_role("link", name="Open it again").click()
    await old_tab.get_by_role("button", name="Sign out").click()
    await expect(old_tab.locator(".notice")).to_have_text("You are signed out.")


async def test_a_browser_asking_for_indonesian_sets_up_and_signs_in_in_indonesian(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    """Chromium set to Indonesian (Accept-Language: id-ID): the setup and sign-in pages speak it too."""
    stack = await oauth_stack()
    base = stack.gateway_url
    page = await browser_pages.new(locale="id-ID")
    await page.goto(await asyncio.to_thread(setup_link, stack))
    await expect(page.get_by_role("heading")).to_have_text("Siapkan akun memvault Anda")
    assert await page.locator("html").get_attribute("lang") == "id"
    await page.get_by_label("Kata sandi").fill(PASSWORD)
    await page.get_by_label("Ulangi").fill(PASSWORD)
    await page.get_by_role("button", name="Simpan kata sandi dan masuk").click()
    await expect(page.get_by_text("Masuk sebagai")).to_be_visible()

    await page.get_by_role("button", name="Keluar").click()
    await expect(page.get_by_role("heading")).to_have_text("Masuk ke memvault")
    await expect(page.locator(".notice")).to_have_text("Anda sudah keluar.")
    await page.get_by_label("Nama pengguna").fill("owner")
    await page.get_by_label("Kata sandi").fill(PASSWORD + "x")
    await page.get_by_role("button", name="Masuk", exact=True).click()
    await expect(page.locator(".error")).to_have_text("Nama pengguna atau kata sandi salah.")
    await expect(page.get_by_label("Kata sandi")).to_be_focused()
    await browser_pages.shot(page, "indonesian-wrong-password")
    await page.get_by_label("Kata sandi").fill(PASSWORD)
    await page.get_by_role("button", name="Masuk", exact=True).click()
    await expect(page.get_by_text("Masuk sebagai")).to_contain_text("owner")
    assert page.url.startswith(base)
