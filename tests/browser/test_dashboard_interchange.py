"""The Imports page takes a mem0 export: the owner picks the format and the file, sees each item's
outcome with where it came from, and a broken file is refused with the file, line and field named."""

from __future__ import annotations

import asyncio
import json

from browser_helpers import OAuthStack, choose_password, setup_link
from playwright.async_api import expect

from memvault_devstack.browser import PageShots

MEM0 = {
    "results": [
        {
            "id": "7f3a",
            "memory": "The owner drinks tea, never coffee",
            "categories": ["food"],
            "created_at": "2025-02-03T09:00:00Z",
        },
        {"id": "8b4c", "memory": "Standups are at 09:30 Jakarta time", "metadata": {"type": "decision"}},
    ]
}


async def test_importing_a_mem0_export_on_the_imports_page(oauth_stack: OAuthStack, browser_pages: PageShots) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    page = await browser_pages.new()
    await choose_password(page, await asyncio.to_thread(setup_link, stack))

    await page.goto(f"{base}/dashboard/default/imports")
    await page.get_by_label("File format").select_option("mem0")
    export = json.dumps(MEM0).encode()
    await page.get_by_label("…or choose a file").set_input_files(
        files=[{"name": "mem0-export.json", "mimeType": "application/json", "buffer": export}]
    )
    await page.get_by_role("button", name="Import", exact=True).click()
    outcomes = page.locator("tr.outcome-row")
    await expect(outcomes).to_have_count(2)
    await expect(outcomes.locator(".badge")).to_have_text(["stored", "stored"])
    await expect(outcomes.nth(1)).to_contain_text("mem0-export.json memory 2")
    await expect(page.locator("table").last).to_contain_text("mem0: mem0-export.json")
    await browser_pages.shot(page, "import-mem0")

    await page.get_by_role("link", name="Memories", exact=True).click()
    await expect(page.locator("main")).to_contain_text("The owner drinks tea, never coffee")

    await page.goto(f"{base}/dashboard/default/imports")
    await page.get_by_label("File format").select_option("mem0")
    broken = b'{"memory": "fine"}\n{"id": "x"}\n'
    await page.get_by_label("…or choose a file").set_input_files(
        files=[{"name": "broken.jsonl", "mimeType": "application/json", "buffer": broken}]
    )
    await page.get_by_role("button", name="Import", exact=True).click()
    await expect(page.locator("main")).to_contain_text("broken.jsonl, line 2: memory: missing")
    await page.goto(f"{base}/dashboard/default/imports")
    await expect(page.locator("main")).not_to_contain_text("broken.jsonl")
