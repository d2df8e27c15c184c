"""The dashboard's Backup page and "Clean up now" in Chromium: a backup downloaded through the
browser's own download (its manifest checked), restored into a second vault after the page asks
before replacing its memories, and retention's preview and run on the Settings page."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import asyncpg
from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import expect
from test_dashboard import accessible, api

from memvault_devstack.browser import PageShots

FACTS = ["The NAS is a Synology DS920+.", "Standup is at 9 every weekday."]


async def test_backup_download_restore_with_confirmation_and_clean_up(
    oauth_stack: OAuthStack, browser_pages: PageShots, tmp_path: Path
) -> None:
    stack = await oauth_stack(services=("vault", "mcp", "gateway"))
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new(java_script_enabled=False, accept_downloads=True)
    await sign_in(page, base, "owner")
    await api(page, "PUT", f"{base}/api/v1/vaults/default/settings", {"approval_mode": "auto"})
    for fact in FACTS:
        await api(page, "POST", f"{base}/api/v1/vaults/default/memories", {"content": fact})

    await page.goto(f"{base}/dashboard/default")
    await page.get_by_role("navigation").get_by_role("link", name="Backup").click()
    await expect(page.locator("h1")).to_have_text("Backup and export")
    await browser_pages.shot(page, "backup page")
    async with page.expect_download() as waiting:
        await page.get_by_role("link", name="Backup without embeddings").click()
    download = await waiting.value
    assert download.suggested_filename.startswith("memvault-default-") and download.suggested_filename.endswith(
        ".jsonl"
    )
    saved = tmp_path / download.suggested_filename
    await download.save_as(saved)
    data = saved.read_bytes()
    body, _, last = data.rstrip(b"\n").rpartition(b"\n")
    manifest = json.loads(last)
    assert manifest["kind"] == "manifest" and manifest["counts"]["memory"] == len(FACTS)
    assert manifest["sha256"] == hashlib.sha256(body + b"\n").hexdigest()

    async with page.expect_download() as waiting:
        await page.get_by_role("link", name="Markdown").click()
    markdown = tmp_path / "export.md"
    await (await waiting.value).save_as(markdown)
    assert all(fact in markdown.read_text(encoding="utf-8") for fact in FACTS)

    await api(page, "POST", f"{base}/api/v1/vaults", {"name": "copy"})
    await api(page, "PUT", f"{base}/api/v1/vaults/copy/settings", {"approval_mode": "auto"})
    await api(page, "POST", f"{base}/api/v1/vaults/copy/memories", {"content": "Replaced by the restore."})
    await page.goto(f"{base}/dashboard/copy/backup")
    await expect(page.locator(".warning")).to_contain_text("This vault holds 1 memories")
    await page.get_by_label("Backup file").set_input_files(str(saved))
    await page.get_by_role("button", name="Restore").click()
    await expect(page.locator("h2")).to_have_text("Replace everything in this vault?")
    await browser_pages.shot(page, "restore confirmation")
    await page.get_by_label("Choose the backup file again").set_input_files(str(saved))
    await page.get_by_role("button", name="Replace everything and restore").click()
    await expect(page.locator(".notice")).to_have_text(f"The backup was restored: {len(FACTS)} memories.")
    listed = await api(page, "GET", f"{base}/api/v1/vaults/copy/memories")
    contents = {m["content"] for m in listed["memories"]}
    assert contents == set(FACTS), contents

    # Clean up now: a rejected proposal past a one-day retention, previewed then removed.
    await api(
        page, "PUT", f"{base}/api/v1/vaults/copy/settings", {"approval_mode": "auto", "rejected_retention_days": 1}
    )
    proposal = await api(page, "POST", f"{base}/api/v1/vaults/copy/memories", {"content": "A guess.", "propose": True})
    await api(page, "POST", f"{base}/api/v1/vaults/copy/memories/{proposal['id']}/reject", {})
    conn = await asyncpg.connect(stack.postgres_dsn)
    try:
        await conn.execute(
            "UPDATE memory SET updated_at = now() - interval '3 days' WHERE id = $1::uuid", proposal["id"]
        )
    finally:
        await conn.close()
    await page.goto(f"{base}/dashboard/copy/settings")
    preview = page.locator(".retention-preview")
    await expect(preview.get_by_role("row", name="Rejected proposals")).to_contain_text("1")
    await browser_pages.shot(page, "clean up preview")
    await page.get_by_role("button", name="Clean up now").click()
    await expect(page.locator(".notice")).to_have_text("Clean-up done: 1 memories and 0 audit entries removed.")
    await expect(page.locator("body")).to_contain_text("Nothing to clean up.")
    audit = await api(page, "GET", f"{base}/api/v1/vaults/copy/audit?action=retention.purge")
    assert [e["actor"] for e in audit["entries"]] == ["user:owner"]

    # axe-core needs JavaScript, which the page above has off: the same pages again with it on.
    checked = await browser_pages.new()
    await sign_in(checked, base, "owner")
    for path in ("backup", "settings"):
        await checked.goto(f"{base}/dashboard/copy/{path}")
        await accessible(checked)
