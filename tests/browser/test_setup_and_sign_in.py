"""The owner's first minutes, in Chromium: the setup link, choosing a password, signing in and out."""

from __future__ import annotations

import asyncio

from browser_helpers import PASSWORD, OAuthStack, setup_link
from playwright.async_api import expect

from memvault_devstack.browser import PageShots


async def test_setup_link_chooses_a_password_and_signs_the_owner_in(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    link = await asyncio.to_thread(setup_link, stack)
    page = await browser_pages.new()
    await page.goto(link)
    await expect(page.get_by_role("heading")).to_have_text("Set up your memvault account")

    # Too short: Chromium itself stops the form (minlength) and says why; nothing is sent.
    await page.get_by_label("Password").fill("short")
    await page.get_by_label("Again").fill("short")
    await page.get_by_role("button", name="Set password and sign in").click()
    assert "12" in await page.get_by_label("Password").evaluate("e => e.validationMessage")
    assert page.url == link
    await browser_pages.shot(page, "too-short")

    # The two differ: the server says so on the same page.
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_label("Again").fill(PASSWORD + " typo")
    await page.get_by_role("button", name="Set password and sign in").click()
    await expect(page.locator(".error")).to_have_text("the two passwords differ")

    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_label("Again").fill(PASSWORD)
    await page.get_by_role("button", name="Set password and sign in").click()
    await expect(page.get_by_text("Signed in as")).to_contain_text("owner")
    assert page.url.endswith("/account")

    # The link is spent: opening it again says so.
    again = await browser_pages.new()
    await again.goto(link)
    await expect(again.locator("body")).to_contain_text("used already")


async def test_a_setup_link_replaced_by_a_newer_one_says_where_the_newest_is(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    first = await asyncio.to_thread(setup_link, stack)
    newest = await asyncio.to_thread(setup_link, stack, "owner", "--force")
    assert newest != first
    page = await browser_pages.new()
    await page.goto(first)
    await expect(page.locator("body")).to_contain_text("replaced by a newer one")
    await expect(page.locator("body")).to_contain_text("memvault-dev setup-link")
    await page.goto(newest)
    await expect(page.get_by_role("heading")).to_have_text("Set up your memvault account")
