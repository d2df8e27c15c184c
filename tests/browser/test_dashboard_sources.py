"""Tracked sources in the owner's dashboard, in Chromium (the stack as processes with OAuth on): source
health on the overview, the Sources page (check now, errors, stop tracking), source changes in the
review queue (old and new JSON values, never the source's text; accept with a typed statement for a
text source, dismiss) and a dependent flagged for review (mark reviewed); a viewer sees the Sources
page read-only; a phone-sized page does not scroll sideways. axe-core on every page visited."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from browser_helpers import choose_password, setup_link
from playwright.async_api import Page, expect
from test_dashboard import accessible, api, document

from memvault_devstack.browser import PageShots
from memvault_devstack.fixtures import StackStarter
from memvault_devstack.source_server import source_server


async def check_now(page: Page, location: str) -> None:
    await page.get_by_role("row").filter(has_text=location).get_by_role("button", name="Check now").click()


async def no_sideways_scroll(page: Page) -> None:
    wide = await page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not wide, f"{page.url} scrolls sideways on a phone"


async def test_sources_page_review_of_source_changes_and_health_on_the_overview(
    fresh_stack: StackStarter, browser_pages: PageShots, tmp_path: Path
) -> None:
    root = tmp_path / "sources"
    root.mkdir()
    budget, policy, ads = root / "campaign.json", root / "refunds.md", root / "ads.json"
    budget.write_text(json.dumps({"campaign": {"budget": "$50,000"}}))
    policy.write_text("Refunds within 30 days. PROSE-MARKER")
    ads.write_text(json.dumps({"ads": 100}))
    with source_server() as http:
        prices = http.set("/prices.json", json.dumps({"pro": 20}))
        vault_env = {
            "MEMVAULT_SOURCES__FILE_ROOTS": json.dumps([str(root)]),
            "MEMVAULT_SOURCES__URL_HOSTS": json.dumps(["127.0.0.1"]),
            "MEMVAULT_SOURCES__PRIVATE_NETWORKS": json.dumps(["127.0.0.1/32"]),
            "MEMVAULT_SOURCES__FETCH_TIMEOUT_SECONDS": "2",
            "MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS": "0",
        }
        stack = await asyncio.to_thread(
            fresh_stack,
            services=("vault", "mcp", "gateway"),
            service_env={"gateway": {"MEMVAULT_GATEWAY__DEV_MODE": "false"}, "vault": vault_env},
        )
        base = stack.gateway_url
        page = await browser_pages.new()
        await choose_password(page, await asyncio.to_thread(setup_link, stack))
        vault = f"{base}/api/v1/vaults/default"
        await api(page, "PUT", f"{vault}/settings", {"approval_mode": "auto"})

        async def remember(content: str, **fields: object) -> str:
            return str((await api(page, "POST", f"{vault}/memories", {"content": content, **fields}))["id"])

        async def track(memory_id: str, **body: object) -> None:
            await api(page, "POST", f"{vault}/sources", {"memory_id": memory_id, **body})

        json_rule = {"selector": "/campaign/budget", "statement_template": "The campaign budget is {{value}}."}
        await track(
            await remember("The campaign budget is $50,000."),
            kind="json_file",
            location=str(budget),
            mode="review",
            **json_rule,
        )
        await track(await remember("Refunds are accepted within 30 days."), kind="text_file", location=str(policy))
        ads_id = await remember("The ads budget is 100 euros.")
        plan_id = await remember("Paid search gets 40% of the ads budget.", depends_on=[ads_id])
        await track(
            ads_id,
            kind="json_file",
            location=str(ads),
            selector="/ads",
            statement_template="The ads budget is {{value}} euros.",
        )
        price_id = await remember("The pro plan costs 20 euros.")

        # The Sources page: each source checked now from its row.
        budget.write_text(json.dumps({"campaign": {"budget": "$35,000"}}))
        policy.write_text("Refunds within 14 days. PROSE-MARKER-2")
        ads.write_text(json.dumps({"ads": 80}))
        await page.goto(f"{base}/dashboard/default")
        await page.get_by_role("navigation", name="Vault pages").get_by_role("link", name="Sources").click()
        await expect(page.locator("h1")).to_have_text("Tracked sources")
        # The URL source is tracked with the page's form.
        await page.get_by_label("Memory id").fill(price_id)
        await page.get_by_label("Kind").select_option("json_url")
        await page.get_by_label("Location (absolute path or http(s) URL)").fill(prices)
        await page.get_by_label("Selector (JSON only), e.g. /campaign/budget").fill("/pro")
        await page.get_by_label("Statement template (JSON only), e.g. The budget is {{value}}.").fill(
            "The pro plan costs {{value}} euros."
        )
        await page.get_by_role("button", name="Track", exact=True).click()
        await expect(page.locator(".notice")).to_have_text("The source is tracked; its content now is the baseline.")
        http.set("/prices.json", status=500)
        for location in (str(budget), str(policy), str(ads)):
            await check_now(page, location)
            await expect(page.locator(".notice")).to_have_text("Checked 1: 1 changed, 0 failed.")
        await check_now(page, prices)
        await expect(page.locator(".notice")).to_have_text("Checked 1: 0 changed, 1 failed.")
        failing = page.get_by_role("row").filter(has_text=prices)
        await expect(failing.locator(".error")).to_contain_text("answered HTTP 500")
        await expect(page.get_by_role("row").filter(has_text=str(budget))).to_contain_text("1 pending change")
        await accessible(page)
        await browser_pages.shot(page, "sources")
        await document(page, "sources")

        # The overview: source health.
        await page.get_by_role("navigation", name="Vault pages").get_by_role("link", name="Overview").click()
        card = page.locator(".card").filter(has=page.get_by_role("heading", name="Tracked sources"))
        await expect(card.get_by_role("row", name="With errors")).to_contain_text("1")
        await expect(card.get_by_role("row", name="Changes waiting")).to_contain_text("2")
        await expect(page.get_by_role("link", name="and 2 source changes")).to_be_visible()
        await accessible(page)
        await document(page, "overview-sources")

        # The review queue: two source changes and the flagged dependent of the superseded ads budget.
        await page.get_by_role("navigation", name="Vault pages").get_by_role("link", name="Review").click()
        await expect(page.locator("main")).to_contain_text("2 source changes waiting")
        json_change = page.locator(".source-change").filter(has_text=str(budget))
        await expect(json_change).to_contain_text('"$50,000"')
        await expect(json_change).to_contain_text('"$35,000"')
        await expect(json_change).to_contain_text("The campaign budget is $35,000.")
        await expect(page.locator("main")).not_to_contain_text("PROSE-MARKER")
        flagged = page.locator(f"#f-{plan_id}")
        await expect(flagged).to_contain_text("Paid search gets 40% of the ads budget.")
        await accessible(page)
        await browser_pages.shot(page, "review with source changes")
        await document(page, "review-sources")

        text_change = page.locator(".source-change").filter(has_text=str(policy))
        await text_change.get_by_label("Replacement statement").fill("Refunds are accepted within 14 days.")
        await text_change.get_by_role("button", name="Accept").click()
        await expect(page.locator(".notice")).to_have_text("The source change was accepted: the memory is superseded.")
        await page.locator(".source-change").filter(has_text=str(budget)).get_by_role("button", name="Dismiss").click()
        await expect(page.locator(".notice")).to_have_text(
            "The source change was dismissed: the memory stays as it is."
        )
        await page.locator(f"#f-{plan_id}").get_by_role("button", name="Mark reviewed").click()
        await expect(page.locator(".notice")).to_have_text("Marked as reviewed: the memory still holds.")
        await expect(page.locator("main")).to_contain_text("Nothing is waiting for review.")
        found = await api(page, "GET", f"{vault}/memories?status=active")
        contents = {m["content"] for m in found["memories"]}
        assert {
            "Refunds are accepted within 14 days.",
            "The ads budget is 80 euros.",
            "The campaign budget is $50,000.",
        } <= contents

        # A viewer sees the page read-only, on a phone.
        viewer = await browser_pages.new(phone=True)
        await choose_password(viewer, await asyncio.to_thread(setup_link, stack, "viewer"))
        await api(page, "PUT", f"{vault}/members/viewer", {"role": "viewer"})
        await viewer.goto(f"{base}/dashboard/default/sources")
        await expect(viewer.locator(".readonly")).to_contain_text("your role: viewer")
        await expect(viewer.get_by_role("button", name="Check now")).to_have_count(0)
        await expect(viewer.locator("main")).to_contain_text(prices)
        await accessible(viewer)
        await no_sideways_scroll(viewer)
        await browser_pages.shot(viewer, "sources as a viewer on a phone")

        # Stop tracking, from the owner's page.
        await page.goto(f"{base}/dashboard/default/sources")
        await page.get_by_role("row").filter(has_text=prices).get_by_role("button", name="Stop tracking").click()
        await expect(page.locator(".notice")).to_have_text(
            "The source is no longer tracked; the memory stays as it is."
        )
        await expect(page.locator("main")).not_to_contain_text(prices)
