"""The vault map and tag editing on the Archive pages in Chromium: memories and conversations written
through /api/v1, the map reached from the overview and the Archive page, its boxes, nodes and links,
the same page twice byte for byte, its nodes reached and opened with the keyboard, axe-core; a
conversation's tags added and removed, a stale edit refused with the current tags shown, the list
filtered by every or any tag; a viewer on a phone sees the map (no sideways page scroll) but cannot
change tags (the server refuses)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import Page, expect
from test_dashboard import accessible, api, document, no_dialogs

from memvault_devstack.browser import PageShots

HOSTILE = "<img src=x onerror=alert(1)> is not a picture"


async def remember(page: Page, base: str, content: str, tags: list[str], **more: Any) -> str:
    memories = f"{base}/api/v1/vaults/default/memories"
    made = await api(page, "POST", memories, {"content": content, "tags": tags, **more})
    if made["status"] == "proposed":
        await api(page, "POST", f"{memories}/{made['id']}/approve", {})
    return str(made["id"])


async def converse(page: Page, base: str, title: str, tags: list[str], text: str) -> str:
    body = {"title": title, "tags": tags, "messages": [{"role": "user", "text": text}]}
    made = await api(page, "POST", f"{base}/api/v1/vaults/default/conversations", body)
    return str(made["receipts"][0]["conversation_id"])


async def test_the_vault_map_and_editing_a_conversations_tags(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack(services=("vault", "mcp", "gateway"))
    base = stack.gateway_url
    owner = await browser_pages.new()
    alerts = no_dialogs(owner)
    await choose_password(owner, await asyncio.to_thread(setup_link, stack))
    viewer = await browser_pages.new(phone=True)
    await choose_password(viewer, await asyncio.to_thread(setup_link, stack, "viewer"))
    await api(owner, "PUT", f"{base}/api/v1/vaults/default/members/viewer", {"role": "viewer"})

    house = await remember(owner, base, "We live in Bandung.", ["home"])
    await remember(owner, base, "The house is painted blue.", ["home"], depends_on=[house])
    await remember(owner, base, "The garden has a mango tree.", ["home"])
    await remember(owner, base, "The cat is called Miso.", ["home", "cat"])
    await remember(owner, base, "The cat eats at seven.", ["cat"])
    old = await remember(owner, base, "Standup is at nine.", ["work"])
    await api(
        owner,
        "POST",
        f"{base}/api/v1/vaults/default/memories/{old}/supersede",
        {"replacement": {"content": "Standup is at ten.", "tags": ["work"]}},
    )
    await remember(owner, base, HOSTILE, ["work"])
    await remember(owner, base, "No tag on this one.", [])
    vet = await converse(owner, base, "Vet visit", ["cat"], "Miso sees the vet on Friday.")
    await converse(owner, base, "Team offsite", ["work", "travel"], "The offsite is in Bali.")
    await converse(owner, base, "", [], "An untitled chat.")

    # The map, from the overview and from the Archive page.
    await owner.goto(f"{base}/dashboard/default")
    await owner.get_by_role("link", name="Open the vault map").click()
    await expect(owner.locator("h1")).to_have_text("Map of default")
    await owner.goto(f"{base}/dashboard/default/archive")
    await owner.get_by_role("link", name="Open the vault map").click()
    await expect(owner.locator("h1")).to_have_text("Map of default")
    svg = owner.locator("svg.vault-map-svg")
    boxes = svg.locator("g[role=group]")
    # The largest tags first (home 4; cat and work 3 each, by name; travel 1), the untagged last.
    await expect(boxes).to_have_count(5)
    await expect(svg.locator(".map-tag")).to_have_text(["#home", "#cat", "#work", "#travel", "Other and untagged"])
    await expect(svg.get_by_role("link", name="Memory: The cat is called Miso.")).to_have_count(1)
    await expect(svg.get_by_role("link", name="Conversation: Vet visit")).to_have_count(1)
    await expect(svg.get_by_role("link", name="Conversation: (no title)")).to_have_count(1)
    await expect(svg.get_by_role("link", name=f"Memory: {HOSTILE}")).to_have_count(1)
    # The cat memory sits under #cat (its most specific tag), not #home.
    cat_box = boxes.filter(has=owner.locator(".map-tag", has_text="#cat"))
    await expect(cat_box.get_by_role("link", name="Memory: The cat is called Miso.")).to_have_count(1)
    await expect(svg.locator(".map-edge-depends_on")).to_have_count(1)
    links = owner.locator(".map-links tbody tr")
    await expect(links.filter(has_text="replaces")).to_contain_text("Standup is at nine.")
    await expect(links.filter(has_text="replaces")).to_contain_text("(not drawn)")
    await expect(links.filter(has_text="depends on")).to_contain_text("We live in Bandung.")
    first = await (await owner.context.request.get(f"{base}/dashboard/default/archive/map")).body()
    again = await (await owner.context.request.get(f"{base}/dashboard/default/archive/map")).body()
    assert first == again and b"<svg" in first and b"style=" not in first
    answer = await owner.context.request.get(f"{base}/dashboard/default/archive/map")
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy
    await browser_pages.shot(owner, "vault map")
    await document(owner, "vault-map")
    await accessible(owner)

    # The keyboard reaches the map's nodes and opens one.
    focused = ""
    for _ in range(80):
        await owner.keyboard.press("Tab")
        focused = await owner.evaluate("document.activeElement.getAttribute('aria-label') || ''")
        if focused == "Memory: The cat eats at seven.":
            break
    assert focused == "Memory: The cat eats at seven."
    await browser_pages.shot(owner, "vault map keyboard focus")
    await owner.keyboard.press("Enter")
    await expect(owner).to_have_url(re.compile(r"/dashboard/default/memories/[0-9a-f-]{36}$"))
    await expect(owner.locator("main")).to_contain_text("The cat eats at seven.")

    # Tags of a conversation: added (lowercased, once each), one removed.
    await owner.goto(f"{base}/dashboard/default/archive/c/{vet}")
    tags_field = owner.get_by_label(re.compile("Tags, separated by commas or spaces"))
    await expect(tags_field).to_have_value("cat")
    await tags_field.fill("Cat, vet VET, Health")
    await owner.get_by_role("button", name="Save tags").click()
    await expect(owner.locator(".notice")).to_have_text("Tags saved.")
    await expect(owner.locator(".tag-edit .tag")).to_have_text(["#cat", "#vet", "#health"])
    await accessible(owner)

    # A second tab opened now goes stale when the first removes a tag.
    stale = await browser_pages.new()
    await sign_in(stale, base, "owner")
    await stale.goto(f"{base}/dashboard/default/archive/c/{vet}")
    await owner.get_by_role("button", name="Remove the tag health").click()
    await expect(owner.locator(".tag-edit .tag")).to_have_text(["#cat", "#vet"])
    await stale.get_by_label(re.compile("Tags, separated by commas or spaces")).fill("cat, vet, health, friday")
    await stale.get_by_role("button", name="Save tags").click()
    await expect(stale.locator("#tag-error")).to_contain_text("Nothing was saved")
    await expect(stale.locator("#tag-error")).to_contain_text("cat, vet, health, friday")
    await expect(stale.locator(".tag-edit .tag")).to_have_text(["#cat", "#vet"])
    await expect(stale.get_by_label(re.compile("Tags, separated by commas or spaces"))).to_have_value("cat, vet")
    await browser_pages.shot(stale, "stale tags refused")
    await accessible(stale)
    await stale.get_by_label(re.compile("Tags, separated by commas or spaces")).fill(
        " ".join(f"t{i}" for i in range(21))
    )
    await stale.get_by_role("button", name="Save tags").click()
    await expect(stale.locator("#tag-error")).to_contain_text("at most 20 tags")
    await expect(stale.locator(".tag-edit .tag")).to_have_text(["#cat", "#vet"])

    # The list filtered by every or any of some tags.
    await owner.goto(f"{base}/dashboard/default/archive")
    await owner.get_by_label("Tags (separated by commas or spaces)").fill("vet, travel")
    await owner.get_by_label("Conversations with").select_option("any")
    await owner.get_by_role("button", name="Filter").click()
    rows = owner.locator(".archive-conversations tbody tr")
    await expect(rows).to_have_count(2)
    await owner.get_by_label("Conversations with").select_option("all")
    await owner.get_by_role("button", name="Filter").click()
    await expect(owner.locator("main")).to_contain_text("No conversation has these tags.")
    await owner.get_by_label("Tags (separated by commas or spaces)").fill("work travel")
    await owner.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(1)
    await expect(rows).to_contain_text("Team offsite")
    await browser_pages.shot(owner, "archive filtered")

    # A viewer sees the map and the tags, with no way to change them; a forged edit is refused.
    await viewer.goto(f"{base}/dashboard/default/archive/map")
    drawn = viewer.locator("svg.vault-map-svg").get_by_role("link", name="Conversation: Vet visit")
    await expect(drawn).to_have_count(1)
    # On a 390 px phone the map scrolls inside its own box; the page does not scroll sideways.
    assert await viewer.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await browser_pages.shot(viewer, "vault map on a phone")
    await accessible(viewer)
    await viewer.goto(f"{base}/dashboard/default/archive/c/{vet}")
    await expect(viewer.locator(".tag-edit .tag")).to_have_text(["#cat", "#vet"])
    await expect(viewer.get_by_role("button", name="Save tags")).to_have_count(0)
    await expect(viewer.get_by_role("button", name=re.compile("Remove"))).to_have_count(0)
    me = await (await viewer.context.request.get(f"{base}/api/v1/me")).json()
    forged = await viewer.context.request.post(
        f"{base}/dashboard/default/archive/c/{vet}/tags",
        form={"csrf_token": me["csrf_token"], "tags": "mine", "tags_version": "3"},
        headers={"Origin": base},
    )
    assert forged.status == 403 and "Not allowed" in await forged.text()
    await owner.goto(f"{base}/dashboard/default/archive/c/{vet}")
    await expect(owner.locator(".tag-edit .tag")).to_have_text(["#cat", "#vet"])
    assert alerts == []

    # Indonesian.
    await owner.goto(f"{base}/dashboard/default/archive/map")
    await owner.get_by_label("Language").select_option("id")
    await expect(owner.locator("h1")).to_have_text("Peta default")
    await browser_pages.shot(owner, "vault map indonesian")
    await accessible(owner)
