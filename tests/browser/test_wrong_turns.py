"""A person who opens an agents' address or a wrong page in Chromium is told where to go instead."""

from __future__ import annotations

from browser_helpers import OAuthStack
from playwright.async_api import expect

from memvault_devstack.browser import PageShots


async def test_opening_mcp_or_an_unknown_page_in_a_browser_points_to_connect_and_account(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    page = await browser_pages.new()

    answer = await page.goto(f"{base}/mcp")
    assert answer is not None and answer.status == 200
    await expect(page.get_by_role("heading")).to_have_text("This address is for your agents")
    await expect(page.get_by_text("memvault's MCP endpoint")).to_be_visible()
    await browser_pages.shot(page, "mcp-in-a-browser")
    await page.get_by_role("link", name=f"{base}/connect").click()
    await expect(page.get_by_text("# Connect to memvault")).to_be_visible()

    answer = await page.goto(f"{base}/no/such/page")
    assert answer is not None and answer.status == 404
    await expect(page.get_by_role("heading")).to_have_text("Page not found")
    await browser_pages.shot(page, "not-found")

    # The account link leads to the owner's page, through sign-in for someone signed out.
    await page.goto(f"{base}/mcp")
    await page.get_by_role("link", name="your account").click()
    await expect(page.get_by_role("heading")).to_have_text("Sign in to memvault")
    assert page.url == f"{base}/login?next=/account"
