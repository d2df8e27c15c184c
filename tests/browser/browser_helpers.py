"""Helpers the browser tests share: the stack starter's type, setup links, signing up and in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable

from playwright.async_api import Page, expect

from memvault_devstack.stack import Stack

OAuthStack = Callable[..., Awaitable[Stack]]
PASSWORD = "correct horse battery staple"


def setup_link(stack: Stack, username: str = "owner", *extra: str) -> str:
    """A one-time link to choose a password, from `memvault-gateway setup-link`."""
    answer = subprocess.run(
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--username", username, *extra],
        env={**os.environ, **stack.env_for("gateway")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    return answer.stdout.strip().splitlines()[-1]


async def choose_password(page: Page, link: str, password: str = PASSWORD) -> None:
    """Open a setup link, choose `password`, and land signed in on /account."""
    await page.goto(link)
    await page.get_by_label("Password").fill(password)
    await page.get_by_label("Again").fill(password)
    await page.get_by_role("button", name="Set password and sign in").click()
    await expect(page.get_by_text("Signed in as")).to_be_visible()


async def sign_in(page: Page, base_url: str, username: str, password: str = PASSWORD) -> None:
    """Sign in on /login with the form, as a person types it, in whichever language the page speaks."""
    await page.goto(f"{base_url}/login")
    form = page.locator("form:has(input[name=username])")
    await form.locator("input[name=username]").fill(username)
    await form.locator("input[name=password]").fill(password)
    await form.locator("button[type=submit]").click()
