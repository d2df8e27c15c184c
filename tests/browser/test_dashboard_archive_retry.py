"""The Retry button of an archive import's progress page in Chromium, without JavaScript: a conversation that
failed for a real Postgres error is imported on retry while the one committed before is not imported again;
a stale Retry on an import that no longer failed is refused with the vault's reason; Indonesian and
axe-core with JavaScript on; a failed message index job retried from the Archive page's totals."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import asyncpg
from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import Page, expect
from test_dashboard import accessible
from test_dashboard_archive import chatgpt, upload

from memvault_devstack.browser import PageShots

REFUSE = """
CREATE FUNCTION memvault_test_refuse_flaky() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.external_id = 'conv-flaky' THEN RAISE EXCEPTION 'disk full while writing conv-flaky'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER memvault_test_refuse_flaky BEFORE INSERT ON archive_conversation
    FOR EACH ROW EXECUTE FUNCTION memvault_test_refuse_flaky();
"""
ALLOW = "DROP TRIGGER memvault_test_refuse_flaky ON archive_conversation; DROP FUNCTION memvault_test_refuse_flaky()"


async def sql(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def until_done(page: Page) -> None:
    for _ in range(60):  # the import job works in the background; Refresh shows how far it came
        if await page.locator("[role=status] .badge").inner_text() in ("done", "failed"):
            return
        await asyncio.sleep(0.5)
        await page.get_by_role("link", name="Refresh").click()
    raise AssertionError(f"the import did not finish: {await page.locator('main').inner_text()}")


async def test_retry_imports_the_failed_conversation_once_and_refuses_a_stale_retry(
    oauth_stack: OAuthStack, browser_pages: PageShots, tmp_path: Path
) -> None:
    stack = await oauth_stack(services=("vault", "mcp", "gateway"))
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new(java_script_enabled=False)
    await sign_in(page, base, "owner")

    await sql(stack.postgres_dsn, REFUSE)
    export = tmp_path / "conversations.json"
    export.write_text(
        json.dumps(
            [
                chatgpt("conv-steady", "Boiler", "The boiler was serviced in May."),
                chatgpt("conv-flaky", "Spare key", "The spare key is under the blue pot."),
            ]
        )
    )
    await upload(page, base, export, "chatgpt")
    await expect(page.locator(".progress-line")).to_have_text(
        "2 of 2 conversations: 1 new, 0 updated, 0 unchanged, 1 failed"
    )
    await expect(page.get_by_role("row", name=re.compile("conv-flaky"))).to_contain_text("disk full")
    retry = page.get_by_role("button", name="Retry")
    await expect(retry).to_be_visible()
    await browser_pages.shot(page, "import with a failed conversation")
    import_url = page.url
    stale = await browser_pages.new(java_script_enabled=False)
    await sign_in(stale, base, "owner")
    await stale.goto(import_url)

    # axe-core and Indonesian on the page with its Retry button (JavaScript on).
    checked = await browser_pages.new()
    await sign_in(checked, base, "owner")
    await checked.goto(import_url)
    await accessible(checked)
    await checked.get_by_label("Language").select_option("id")
    await expect(checked.get_by_role("button", name="Ulangi")).to_be_visible()
    await expect(checked.locator("main")).to_contain_text("Melanjutkan dari titik simpan terakhir")
    await checked.get_by_label("Bahasa").select_option("en")

    await sql(stack.postgres_dsn, ALLOW)  # the cause is fixed
    await retry.click()
    await expect(page.locator(".notice")).to_have_text(
        "The import was queued again: it resumes from its last checkpoint, then tries its failed conversations again."
    )
    await until_done(page)
    await expect(page.locator(".progress-line")).to_have_text(
        "2 of 2 conversations: 2 new, 0 updated, 0 unchanged, 0 failed"
    )
    await expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    await expect(page.locator("main")).not_to_contain_text("could not be read")
    await browser_pages.shot(page, "import after retry")

    # The tab opened before the retry still shows its button: the vault refuses and says why.
    await stale.get_by_role("button", name="Retry").click()
    await expect(stale.locator("main")).to_contain_text("is done with no failed conversations")
    await browser_pages.shot(stale, "stale retry refused")

    # A message the indexer gave up on (what its report writes): retried from the Archive page's totals.
    conn = await asyncpg.connect(stack.postgres_dsn)
    try:
        await conn.execute(
            "INSERT INTO archive_message_index (message_id, vault_id, content_hash, model, state, attempts, last_error)"
            " SELECT m.id, m.vault_id, m.content_hash, 'test-model', 'failed', 3, 'the model answered 503'"
            " FROM archive_message m WHERE m.text LIKE 'The spare key%'"
        )
    finally:
        await conn.close()
    await page.goto(f"{base}/dashboard/default/archive")
    messages = page.locator(".archive-totals section").nth(1)
    await expect(messages).to_contain_text("1 failed")
    await messages.get_by_role("button", name="Retry failed messages (1)").click()
    await expect(page.locator(".notice")).to_have_text("1 messages sent to the indexer again.")
    await expect(page.locator(".archive-totals section").nth(1)).to_contain_text("0 failed")
    await expect(page.get_by_role("button", name=re.compile("Retry failed messages"))).to_have_count(0)
    await browser_pages.shot(page, "failed messages retried")

    conn = await asyncpg.connect(stack.postgres_dsn)
    try:
        revisions = await conn.fetch(
            "SELECT c.external_id, count(r.*) AS n FROM archive_conversation c"
            " JOIN archive_revision r ON r.conversation_id = c.id GROUP BY c.external_id"
        )
    finally:
        await conn.close()
    assert {r["external_id"]: r["n"] for r in revisions} == {"conv-steady": 1, "conv-flaky": 1}
