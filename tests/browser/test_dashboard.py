"""The owner's dashboard in Chromium: the owner's day, a viewer, a phone, two languages, hostile text.

An agent is the official MCP SDK client (as in test_connect_an_app.py), connected with the owner's
consent in the same browser. Every dashboard page the tests open is checked with axe-core
(tests/browser/package.json; loaded into the page by the test, never served by the gateway) for
serious or critical accessibility violations.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import test_connect_an_app as connect
from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from gateway_helpers import INITIALIZE
from playwright.async_api import Page, expect

from memvault_devstack.browser import PageShots
from memvault_devstack.stack import Stack

AXE = Path(__file__).parent / "node_modules" / "axe-core" / "axe.min.js"
DOCS_SHOTS = "MEMVAULT_DASHBOARD_SCREENSHOTS"
"""Set to a folder (docs/dashboard) to save the pages docs/dashboard.md shows."""
SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"


@pytest.fixture
async def loopback() -> AsyncIterator[Callable[[], connect.LoopbackRedirect]]:
    started: list[connect.LoopbackRedirect] = []

    def start() -> connect.LoopbackRedirect:
        started.append(connect.LoopbackRedirect())
        return started[-1]

    yield start
    for server in started:
        server.close()


async def accessible(page: Page) -> None:
    """axe-core finds no serious or critical violation on the page as it is now."""
    assert AXE.is_file(), "axe-core is missing: run `npm ci --prefix tests/browser`"
    await page.evaluate(AXE.read_text(encoding="utf-8"))
    found = await page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => v.id + ': ' + v.help + ' @ ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', ')))"
    )
    assert found == [], f"{page.url}: {found}"


async def api(page: Page, method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call /api/v1 with the page's session and its CSRF token, as the owner's browser would."""
    me = await page.context.request.get(url.split("/api/v1/")[0] + "/api/v1/me")
    answer = await page.context.request.fetch(
        url, method=method, data=body, headers={"X-CSRF-Token": (await me.json())["csrf_token"]}
    )
    assert answer.ok, await answer.text()
    result: dict[str, Any] = await answer.json()
    return result


async def document(page: Page, name: str) -> None:
    """Save the page for docs/dashboard.md when MEMVAULT_DASHBOARD_SCREENSHOTS names a folder."""
    folder = os.environ.get(DOCS_SHOTS)
    if folder:
        await page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def no_dialogs(page: Page) -> list[str]:
    """Messages of any alert() the page shows (none, when every memory text is escaped)."""
    seen: list[str] = []

    async def dismiss(dialog: Any) -> None:
        seen.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", dismiss)
    return seen


async def connect_agent(stack: Stack, page: Page, loopback: connect.LoopbackRedirect) -> connect.App:
    app = connect.App(stack, "Deploy agent", page, loopback)

    async def approve() -> None:
        await expect(page.locator("h1")).to_have_text("Connect an app")
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("body")).to_contain_text("The app is connected to memvault")

    app.owner_will(approve)
    return app


async def test_the_owners_day_review_import_guide_apps_and_hostile_text(
    oauth_stack: OAuthStack, browser_pages: PageShots, loopback: Callable[[], connect.LoopbackRedirect]
) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    page = await browser_pages.new()
    alerts = no_dialogs(page)
    await choose_password(page, await asyncio.to_thread(setup_link, stack))
    memories = f"{base}/api/v1/vaults/default/memories"
    old = await api(page, "POST", memories, {"content": "Deploys go to Heroku.", "key": "deploy.target"})
    await api(page, "POST", f"{memories}/{old['id']}/approve", {})

    agent = await connect_agent(stack, page, loopback())
    async with agent.connected() as client:
        proposed = await connect.structured(
            client, "propose_memory", content="Deploys go to Fly.io since March.", key="deploy.target"
        )
        await agent.owner_done()
        assert proposed["status"] == "proposed"

        # The overview counts the proposal and links to the queue.
        await page.goto(f"{base}/dashboard")
        await expect(page).to_have_url(f"{base}/dashboard/default")
        await expect(page.locator("h1")).to_have_text("Overview of default")
        waiting = page.locator(".card", has=page.get_by_role("heading", name="Waiting for review"))
        await expect(waiting.locator(".big")).to_have_text("1")
        by_type = page.locator(".card", has=page.get_by_role("heading", name="Memories by type"))
        await expect(by_type.get_by_role("row", name=re.compile("^fact"))).to_contain_text("2")
        # This stack runs no indexer: the overview says recall is keyword-only, and why.
        await expect(page.locator(".search-mode")).to_have_text("Search mode: keyword-only (words only).")
        await expect(page.locator("main")).to_contain_text("Why: no indexer is configured")
        retention = page.locator(".card", has=page.get_by_role("heading", name="Retention"))
        await expect(retention.locator(".retention-runner")).to_have_text("Runs in the vault service every 60 minutes.")
        await expect(retention.get_by_role("row", name="Last run")).to_contain_text(" UTC")
        await expect(retention.get_by_role("row", name="Next run")).to_contain_text(" UTC")
        await expect(retention.locator(".retention-due")).to_have_text(
            "It removes then: 0 rejected, 0 superseded and 0 invalidated memories, 0 audit entries."
        )
        await accessible(page)
        await document(page, "overview")
        await page.get_by_role("link", name="Open the review queue").click()

        # The proposal beside the memory it would replace; Approve & replace supersedes the old one.
        await expect(page.locator("h1")).to_have_text("Review queue")
        proposal = page.locator(".proposal", has_text="Deploys go to Fly.io since March.")
        await expect(proposal.locator(".related")).to_contain_text("Deploys go to Heroku.")
        await expect(proposal.locator(".related")).to_contain_text("Existing: same_key")
        await accessible(page)
        await browser_pages.shot(page, "review-queue")
        await document(page, "review")
        await proposal.get_by_role("button", name="Approve & replace").click()
        await expect(page.locator(".notice")).to_have_text("Approved, replacing what they are similar to: 1.")
        await expect(page.locator("main")).to_contain_text("Nothing is waiting for review.")

        found = await connect.structured(client, "recall", query="where do deploys go")
        ids = [r["id"] for r in found["results"]]
        assert proposed["id"] in ids and old["id"] not in ids
        # ... and warns that the new one replaced the old one, which the agent may still hold.
        new_hit = next(r for r in found["results"] if r["id"] == proposed["id"])
        assert new_hit["warnings"] == ["replaces"]
        assert any(f"replaced {old['id']}" in warning for warning in found["warnings"]), found["warnings"]

        # The memory's page shows its history and what it superseded.
        await page.goto(f"{base}/dashboard/default/memories/{proposed['id']}")
        await expect(page.locator("main")).to_contain_text("Deploys go to Heroku.")
        await expect(page.get_by_role("table")).to_contain_text("approve")
        await accessible(page)
        await document(page, "memory")

        # The guide: a new version, which the agent reads next.
        await page.goto(f"{base}/dashboard/default/guide")
        await page.get_by_label("Guide text (markdown)").fill("# House rules\n\nAlways store the deploy target.")
        await page.get_by_role("button", name="Save as a new version").click()
        await expect(page.locator(".notice")).to_contain_text("Saved as version")
        await document(page, "guide")
        await expect(page.get_by_label("Guide text (markdown)")).to_have_value(
            re.compile(r"^# House rules\n\nAlways store the deploy target\.\n?$")
        )
        await accessible(page)
        guide = await connect.structured(client, "get_operating_guide")
        assert "Always store the deploy target." in guide["guide"]

    # Paste an import, see each item's outcome, undo it: its memories are gone.
    await page.goto(f"{base}/dashboard/default/imports")
    await page.get_by_label("Paste markdown or plain text").fill(
        "- The office is in Bandung.\n- Tea, never coffee, for the owner.\n- Deploys go to Heroku.\n"
    )
    await page.get_by_role("button", name="Import", exact=True).click()
    outcomes = page.locator("tr.outcome-row")
    await expect(outcomes).to_have_count(3)
    await expect(outcomes.locator(".badge")).to_have_text(["stored", "stored", "duplicate"])
    await expect(outcomes.nth(2)).to_contain_text(f"same as {old['id'][:8]}")
    await accessible(page)
    await browser_pages.shot(page, "import-outcomes")
    await document(page, "imports")
    await page.get_by_role("button", name=re.compile("^Undo")).first.click()
    await expect(page.locator(".notice")).to_contain_text("Import undone: 2 removed")
    await page.get_by_role("link", name="Memories", exact=True).click()
    await page.get_by_label("Search (the same recall agents use)").fill("office in Bandung")
    await page.get_by_role("button", name="Search", exact=True).click()
    await expect(page.locator(".mode")).to_contain_text("Search mode:")
    await expect(page.locator("main")).not_to_contain_text("The office is in Bandung.")

    # Hostile memory text is shown as text, never run.
    for text in (SCRIPT, IMAGE):
        await api(page, "POST", memories, {"content": text})
    await page.goto(f"{base}/dashboard/default/memories")
    await expect(page.get_by_text(SCRIPT, exact=True)).to_be_visible()
    await expect(page.get_by_text(IMAGE, exact=True)).to_be_visible()
    assert await page.locator("main img").count() == 0
    await accessible(page)
    await document(page, "memories")
    await page.goto(f"{base}/dashboard/default/memories?q=onerror")
    await expect(page.get_by_text(IMAGE, exact=True)).to_be_visible()
    assert alerts == []

    # Filters (the same as /api/v1's): by key, then also by creation date; the form keeps them.
    await page.goto(f"{base}/dashboard/default/memories")
    await page.get_by_label("Key", exact=True).fill("deploy.target")
    await page.get_by_role("button", name="Search", exact=True).click()
    await expect(page.locator("li.result")).to_have_count(2)
    await expect(page.locator("main")).to_contain_text("Deploys go to Heroku.")
    await expect(page.get_by_label("Key", exact=True)).to_have_value("deploy.target")
    await accessible(page)
    await document(page, "memories-filtered")
    await page.get_by_label("Created to (inclusive)").fill("2020-01-01")
    await page.get_by_role("button", name="Search", exact=True).click()
    await expect(page.locator("main")).to_contain_text("No memories match.")
    await expect(page.get_by_label("Created to (inclusive)")).to_have_value("2020-01-01")

    # Settings, audit log.
    await page.goto(f"{base}/dashboard/default/settings")
    await page.get_by_label("Superseded memories").fill("30")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator(".notice")).to_have_text("Settings saved.")
    await expect(page.get_by_label("Superseded memories")).to_have_value("30")
    await accessible(page)
    await document(page, "settings")
    await page.goto(f"{base}/dashboard/default/audit")
    await expect(page.locator("table.audit")).to_contain_text("memory.approve")
    await document(page, "audit")
    await page.get_by_label("Action (or a prefix ending in '.')").fill("batch.")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.locator("table.audit tbody tr")).to_have_count(1)
    await expect(page.locator("table.audit")).to_contain_text("batch.undo")
    await accessible(page)

    # /account is part of the dashboard: same layout and navigation, the agent listed.
    await page.get_by_role("link", name="Account").click()
    await expect(page.get_by_role("row", name=re.compile("Deploy agent"))).to_contain_text("read write")
    await expect(page.get_by_role("navigation").get_by_role("link", name="Review")).to_be_visible()
    await accessible(page)
    await document(page, "account")
    await page.get_by_role("link", name="Open the dashboard of default").click()
    await expect(page.locator("h1")).to_have_text("Overview of default")

    # Apps: revoke the agent, its token stops working at once.
    await page.goto(f"{base}/dashboard/default/apps")
    row = page.locator("table:not(.clients)").get_by_role("row", name=re.compile("Deploy agent"))
    await expect(row).to_contain_text("default")
    await accessible(page)
    await document(page, "apps")
    await row.get_by_role("button", name=re.compile("^Revoke")).click()
    await expect(page.locator(".notice")).to_contain_text("Deploy agent can no longer use your vaults")
    assert (await connect.raw_post(stack.mcp_url, agent.access_token, INITIALIZE)).status_code == 401
    # Its registration stays until the owner deletes it (nobody else uses it, so the owner may).
    registered = page.locator("table.clients").get_by_role("row", name=re.compile("Deploy agent"))
    await expect(registered).to_contain_text("127.0.0.1")
    await registered.get_by_role("button", name=re.compile("^Delete")).click()
    await expect(page.locator(".notice")).to_contain_text("Deploy agent is deleted")
    await expect(page.locator("main")).to_contain_text("No registered app has been given access by you.")
    await accessible(page)

    # Forget, with a confirmation saying its text will be refused from then on.
    await page.goto(f"{base}/dashboard/default/memories/{proposed['id']}")
    await page.get_by_role("link", name="Forget…").click()
    await expect(page.locator("main")).to_contain_text("Its text will be refused from then on")
    await accessible(page)
    await document(page, "forget")
    await page.get_by_role("button", name="Forget it").click()
    await expect(page.locator(".notice")).to_contain_text("The memory is forgotten")
    refused = await page.context.request.get(f"{memories}/{proposed['id']}")
    assert refused.status == 404


async def test_indonesian_by_browser_language_and_by_the_switcher(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new(locale="id-ID")
    await sign_in(page, base, "owner")
    await expect(page.get_by_text("Masuk sebagai")).to_contain_text("owner")  # /account, in Indonesian
    await page.goto(f"{base}/dashboard/default")
    await expect(page.locator("html")).to_have_attribute("lang", "id")
    await expect(page.get_by_role("navigation").get_by_role("link", name="Ringkasan")).to_be_visible()
    await expect(page.locator("h1")).to_have_text("Ringkasan default")
    await accessible(page)
    await browser_pages.shot(page, "overview-indonesian")
    await document(page, "overview-indonesian")

    # The switcher's choice is remembered over the browser's language.
    await page.get_by_label("Bahasa").select_option("en")
    await expect(page.locator("h1")).to_have_text("Overview of default")
    await page.goto(f"{base}/dashboard/default/review")
    await expect(page.locator("h1")).to_have_text("Review queue")
    await page.get_by_label("Language").select_option("id")
    await expect(page.locator("h1")).to_have_text("Antrean tinjauan")


async def test_a_viewer_cannot_approve_and_the_owner_uses_the_queue_on_a_phone(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    owner = await browser_pages.new(phone=True)
    await choose_password(owner, await asyncio.to_thread(setup_link, stack))
    viewer = await browser_pages.new(phone=True)
    await choose_password(viewer, await asyncio.to_thread(setup_link, stack, "viewer"))
    await api(owner, "PUT", f"{base}/api/v1/vaults/default/members/viewer", {"role": "viewer"})
    memories = f"{base}/api/v1/vaults/default/memories"
    first = await api(owner, "POST", memories, {"content": "The cat is called Miso.", "propose": True})
    second = await api(owner, "POST", memories, {"content": "The dog is called Rex.", "propose": True})
    third = await api(owner, "POST", memories, {"content": "The fish is called Nemo.", "propose": True})

    # The viewer sees the queue, with no buttons to decide, and a forged decision is refused.
    await viewer.goto(f"{base}/dashboard/default/review")
    await expect(viewer.locator("main")).to_contain_text("The cat is called Miso.")
    await expect(viewer.locator(".readonly")).to_contain_text("your role: viewer")
    await expect(viewer.get_by_role("button", name="Approve")).to_have_count(0)
    await accessible(viewer)
    await document(viewer, "review-viewer")
    me = await (await viewer.context.request.get(f"{base}/api/v1/me")).json()
    forged = await viewer.context.request.post(
        f"{base}/dashboard/default/review",
        form={"csrf_token": me["csrf_token"], "decide_one": f"approve:{first['id']}"},
        headers={"Origin": base},
    )
    assert forged.status == 403
    assert "Not allowed" in await forged.text()
    queue = await api(owner, "GET", f"{base}/api/v1/vaults/default/review-queue")
    assert sorted(i["memory"]["id"] for i in queue["items"]) == sorted([first["id"], second["id"], third["id"]])

    # The owner, on a phone: tick both, approve at once; nothing needs scrolling sideways.
    await owner.goto(f"{base}/dashboard/default/review")
    await expect(owner.locator(".proposal")).to_have_count(3)
    assert await owner.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await accessible(owner)
    await browser_pages.shot(owner, "review-queue-phone")
    await document(owner, "review-phone")
    for text in ("The cat is called Miso.", "The dog is called Rex."):
        await owner.locator(".proposal", has_text=text).get_by_role("checkbox", name="Proposal").check()
    await owner.get_by_role("button", name="Approve ticked", exact=True).click()
    await expect(owner.locator(".notice")).to_have_text("Approved: 2.")
    await expect(owner.locator(".proposal")).to_have_count(1)
    for memory in (first, second):
        assert (await api(owner, "GET", f"{memories}/{memory['id']}"))["memory"]["status"] == "active"
    # The keys: j moves to the first proposal, d rejects it.
    await owner.keyboard.press("j")
    await expect(owner.locator(".proposal.current")).to_contain_text("The fish is called Nemo.")
    await owner.keyboard.press("d")
    await expect(owner.locator(".notice")).to_have_text("Rejected: 1.")
    await expect(owner.locator("main")).to_contain_text("Nothing is waiting for review.")
    assert (await api(owner, "GET", f"{memories}/{third['id']}"))["memory"]["status"] == "rejected"
    # Pages the owner opens on the phone: overview and memories fit too.
    for path in ("", "/memories", "/imports", "/guide", "/settings", "/members", "/audit", "/apps"):
        await owner.goto(f"{base}/dashboard/default{path}")
        assert await owner.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path
    await accessible(owner)
    await owner.get_by_role("link", name="Members").click()
    await expect(owner.get_by_label("Role of viewer")).to_have_value("viewer")
    await accessible(owner)
    await document(owner, "members")
    await viewer.goto(f"{base}/dashboard/default/settings")
    await expect(viewer.locator(".readonly")).to_contain_text("Only an owner")
    await accessible(viewer)


async def test_without_javascript_every_form_still_works(oauth_stack: OAuthStack, browser_pages: PageShots) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new(java_script_enabled=False)
    await sign_in(page, base, "owner")
    await api(page, "POST", f"{base}/api/v1/vaults", {"name": "work"})
    proposed = await api(
        page, "POST", f"{base}/api/v1/vaults/work/memories", {"content": "Standup at 9.", "propose": True}
    )
    await page.goto(f"{base}/dashboard")
    await page.get_by_label("Vault", exact=True).select_option("work")
    await page.get_by_role("button", name="Open").click()
    await expect(page.locator("h1")).to_have_text("Overview of work")
    await page.get_by_label("Language").select_option("id")
    await page.get_by_role("button", name="Change").click()
    await expect(page.locator("h1")).to_have_text("Ringkasan work")
    await page.get_by_role("link", name="Tinjauan", exact=True).click()
    await page.locator(".proposal", has_text="Standup at 9.").get_by_role("button", name="Setujui", exact=True).click()
    await expect(page.locator(".notice")).to_have_text("Disetujui: 1.")
    status = (await api(page, "GET", f"{base}/api/v1/vaults/work/memories/{proposed['id']}"))["memory"]["status"]
    assert status == "active"


async def test_the_owner_fixes_a_typo_in_place_forgets_and_lifts_the_exclusion(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack()
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new()
    await sign_in(page, base, "owner")
    await api(page, "POST", f"{base}/api/v1/vaults", {"name": "work"})
    typo = await api(page, "POST", f"{base}/api/v1/vaults/work/memories", {"content": "Standup at 9 in room Blu."})
    await page.goto(f"{base}/dashboard/work/memories/{typo['id']}")
    form = page.locator("form", has=page.get_by_role("heading", name="Edit in place"))
    await form.get_by_label("Text").fill("Standup at 9 in room Blue.")
    await form.get_by_label("Tags (comma-separated)").fill("team")
    await form.get_by_role("button", name="Save").click()
    await expect(page.locator(".notice")).to_contain_text("Saved in place")
    assert page.url.endswith(f"/dashboard/work/memories/{typo['id']}?done=edited")
    history = page.locator("table tbody tr")
    await expect(history).to_have_count(2)
    await expect(history.nth(0)).to_contain_text("Standup at 9 in room Blu.")
    await expect(history.nth(1)).to_contain_text("edited")
    await accessible(page)
    await document(page, "memory-edit")
    memory = (await api(page, "GET", f"{base}/api/v1/vaults/work/memories/{typo['id']}"))["memory"]
    assert memory["content"] == "Standup at 9 in room Blue." and memory["tags"] == ["team"]

    # Forget it: the confirmation says the text will be refused; the forgotten texts page lifts that.
    await page.get_by_role("link", name="Forget…").click()
    await expect(page.locator(".warning")).to_contain_text("Its text will be refused from then on")
    await page.get_by_role("button", name="Forget it").click()
    await page.get_by_role("link", name="Forgotten texts").click()
    await expect(page.locator("h1")).to_have_text("Forgotten texts")
    await expect(page.locator("table tbody tr")).to_have_count(1)
    await accessible(page)
    await document(page, "exclusions")
    await page.locator("table tbody tr").get_by_role("button", name="Lift").click()
    await expect(page.locator(".notice")).to_have_text("The exclusion is lifted: the text can be stored again.")
    await expect(page.locator("table")).to_have_count(0)
    again = await api(page, "POST", f"{base}/api/v1/vaults/work/memories", {"content": "Standup at 9 in room Blue."})
    assert again["outcome"] == "stored" and again["id"] != typo["id"]
