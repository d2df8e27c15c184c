"""The owner's own items in Chromium: changing the display name on the account page (a clear error,
then the name everywhere), the conversation archive's export from the Backup page (with its progress
line; the file read back), and deleting a vault from Settings (the date and Cancel on every page of the
vault, writes refused meanwhile, cancelled again), in English and Indonesian, checked with axe-core."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import expect
from test_dashboard import accessible, api

from memvault_devstack.browser import PageShots


async def test_display_name_archive_export_and_vault_deletion(
    oauth_stack: OAuthStack, browser_pages: PageShots, tmp_path: Path
) -> None:
    stack = await oauth_stack(services=("vault", "mcp", "gateway"))
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new(accept_downloads=True)
    await sign_in(page, base, "owner")

    # the display name: refused with the reason, then saved and shown in the header
    await page.goto(f"{base}/account")
    name = page.get_by_label("Name", exact=True)
    await name.fill("   ")
    await page.get_by_role("button", name="Save the name").click()
    await expect(page.get_by_role("alert")).to_have_text("The name is empty; write the name others should see.")
    await expect(name).to_have_attribute("aria-invalid", "true")
    await browser_pages.shot(page, "display name refused")
    await accessible(page)
    await page.get_by_label("Name", exact=True).fill("Ana Lima")
    await page.get_by_role("button", name="Save the name").click()
    await expect(page.locator(".notice")).to_have_text("Your name is now Ana Lima.")
    await expect(page.locator(".who")).to_contain_text("Ana Lima")
    await browser_pages.shot(page, "display name saved")

    # the archive export: a download with a progress line, read back as a backup file of the archive
    for title in ("Pets", "Trips"):
        await api(
            page,
            "POST",
            f"{base}/api/v1/vaults/default/conversations",
            {"title": title, "messages": [{"role": "user", "text": f"about {title.lower()}"}]},
        )
    await page.goto(f"{base}/dashboard/default/backup")
    await expect(page.locator("#archive-export")).to_have_text("Export the conversation archive")
    await expect(page.locator("main")).to_contain_text("The archive holds 2 conversations, 2 revisions, 2 messages")
    async with page.expect_download() as waiting:
        await page.get_by_role("link", name="Export the archive").click()
    download = await waiting.value
    assert download.suggested_filename.startswith("memvault-default-archive-")
    await expect(page.locator("#archive-export-progress")).to_contain_text("Export complete:")
    await browser_pages.shot(page, "archive export done")
    saved = tmp_path / "archive.jsonl"
    await download.save_as(saved)
    lines = [json.loads(line) for line in saved.read_bytes().splitlines()]
    assert lines[0]["scope"] == "archive" and lines[-1]["counts"]["conversation"] == 2
    assert {r["text"] for r in lines if r["kind"] == "message"} == {"about pets", "about trips"}
    await accessible(page)

    # deleting the vault: confirmed by its name, then read-only with the date and Cancel everywhere
    await page.goto(f"{base}/dashboard/default/settings")
    await page.get_by_label("Type the vault's name (default) to confirm").fill("default")
    await page.get_by_role("button", name="Delete this vault").click()
    await expect(page.locator(".notice")).to_contain_text("The vault is marked for deletion")
    banner = page.locator(".pending-deletion")
    await expect(banner).to_contain_text("This vault will be deleted on")
    await expect(page.get_by_role("button", name="Cancel the deletion")).to_be_visible()
    await browser_pages.shot(page, "vault pending deletion")
    await accessible(page)
    await page.goto(f"{base}/dashboard/default/memories")
    await expect(page.locator(".pending-deletion")).to_be_visible()
    me = await page.context.request.get(f"{base}/api/v1/me")
    refused = await page.context.request.post(
        f"{base}/api/v1/vaults/default/memories",
        data={"content": "A write during the grace period."},
        headers={"X-CSRF-Token": (await me.json())["csrf_token"]},
    )
    assert refused.status == 403 and "pending deletion" in (await refused.json())["detail"]

    # the same page in Indonesian
    async with page.expect_navigation():
        await page.get_by_label("Language").select_option("id")
    await page.goto(f"{base}/dashboard/default/settings")
    await expect(page.locator(".pending-deletion")).to_contain_text("Vault ini akan dihapus pada")
    await browser_pages.shot(page, "vault pending deletion in Indonesian")
    await accessible(page)
    await page.get_by_role("button", name="Batalkan penghapusan").click()
    await expect(page.locator(".notice")).to_have_text("Penghapusan dibatalkan: vault dapat ditulisi lagi.")
    await expect(page.locator(".pending-deletion")).to_have_count(0)
    await browser_pages.shot(page, "deletion cancelled in Indonesian")
    await api(page, "POST", f"{base}/api/v1/vaults/default/memories", {"content": "Writable again."})
