"""The dashboard's Archive pages in Chromium, without JavaScript: a ChatGPT export and a Claude.ai export
uploaded through the page with a progress line and the failed conversation named, archive totals, the
conversations paged, one conversation read at its head and pinned at an earlier revision, and a
delete that needs the exact id; a conversation's revisions paged past the newest 50; then axe-core on each page with JavaScript on."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import Page, expect
from test_dashboard import accessible, document

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.browser import PageShots
from memvault_devstack.stack import Stack


def chatgpt(conversation_id: str, title: str | None, words: str) -> dict[str, Any]:
    def node(node_id: str, parent: str | None, children: list[str], role: str, text: str) -> dict[str, Any]:
        message = {
            "id": node_id,
            "author": {"role": role, "metadata": {}},
            "create_time": 1_733_000_000,
            "content": {"content_type": "text", "parts": [text]},
            "metadata": {},
        }
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    return {
        "title": title,
        "create_time": 1_733_000_000,
        "update_time": 1_733_000_100,
        "conversation_id": conversation_id,
        "current_node": "b",
        "mapping": {
            "a": node("a", None, ["b"], "user", words),
            "b": node("b", "a", [], "assistant", "Noted, I will keep that in mind."),
        },
    }


def claude(index: int) -> dict[str, Any]:
    at = f"2025-03-01T10:{index:02d}:00Z"
    words = f"Plant number {index} on the balcony needs water every {index % 5 + 2} days."
    return {
        "uuid": f"claude-{index}",
        "name": f"Balcony plant {index}",
        "created_at": at,
        "updated_at": at,
        "chat_messages": [
            {"uuid": f"q{index}", "sender": "human", "text": words, "content": [{"type": "text", "text": words}]},
            {
                "uuid": f"a{index}",
                "sender": "assistant",
                "text": "Noted.",
                "content": [{"type": "text", "text": "Noted."}],
            },
        ],
    }


async def write_revisions(stack: Stack, count: int) -> str:
    """A conversation with `count` revisions (one message appended by each), written over gRPC as the owner."""
    metadata = (
        (
            GRPC_METADATA_KEY,
            IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES))),
        ),
    )
    channel = client_channel(stack.vault_address)
    try:
        archive = archive_pb2_grpc.ArchiveServiceStub(channel)
        created = await archive.CreateConversation(
            pb.CreateConversationRequest(
                vault="default", title="Many revisions", messages=[pb.MessageDraft(role="user", text="turn 0")]
            ),
            metadata=metadata,
        )
        conversation_id = created.receipt.conversation_id
        for revision in range(1, count):
            await archive.AppendMessages(
                pb.AppendMessagesRequest(
                    vault="default",
                    conversation_id=conversation_id,
                    base_revision=revision,
                    messages=[pb.MessageDraft(role="user", text=f"turn {revision}")],
                ),
                metadata=metadata,
            )
        return conversation_id  # type: ignore[no-any-return]
    finally:
        await channel.close()


async def upload(page: Page, base: str, path: Path, source: str) -> None:
    await page.goto(f"{base}/dashboard/default/archive")
    await page.get_by_label("Export file: conversations.json or the export's zip").set_input_files(str(path))
    await page.get_by_label("Exported from").select_option(source)
    await page.get_by_role("button", name="Upload and import").click()
    await expect(page.locator("h1")).to_have_text(f"Import of {path.name}")
    for _ in range(60):  # the vault's import job works in the background; the page offers Refresh
        if await page.locator("[role=status] .badge").inner_text() in ("done", "failed"):
            return
        await asyncio.sleep(0.5)
        await page.get_by_role("link", name="Refresh").click()
    raise AssertionError(f"the import of {path.name} did not finish: {await page.locator('main').inner_text()}")


async def test_archive_pages_import_list_read_pinned_and_delete(
    oauth_stack: OAuthStack, browser_pages: PageShots, tmp_path: Path
) -> None:
    stack = await oauth_stack(services=("vault", "mcp", "gateway"))
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new(java_script_enabled=False)
    await sign_in(page, base, "owner")

    await page.goto(f"{base}/dashboard/default")
    await page.get_by_role("navigation").get_by_role("link", name="Archive").click()
    await expect(page.locator("h1")).to_have_text("Conversation archive")
    await expect(page.locator("main")).to_contain_text("No conversations yet.")

    first = tmp_path / "conversations.json"
    first.write_text(
        json.dumps(
            [
                chatgpt("conv-wifi", "Home network", "The wifi password is on the fridge door."),
                {"conversation_id": "broken", "mapping": "not a mapping"},
                chatgpt("conv-bike", None, "My bike lock code is 4471."),
            ]
        )
    )
    await upload(page, base, first, "chatgpt")
    await expect(page.locator(".progress-line")).to_have_text(
        "3 of 3 conversations: 2 new, 0 updated, 0 unchanged, 1 failed"
    )
    failures = page.get_by_role("table")
    await expect(failures.get_by_role("row", name=re.compile("broken"))).to_contain_text("no mapping of messages")
    await browser_pages.shot(page, "import progress")
    await document(page, "archive-import")

    # The same file again is a duplicate: nothing is done again.
    await page.goto(f"{base}/dashboard/default/archive")
    await page.get_by_label("Export file: conversations.json or the export's zip").set_input_files(str(first))
    await page.get_by_role("button", name="Upload and import").click()
    await expect(page.locator(".progress-line")).to_have_text("the same bytes as an earlier import: nothing done again")

    changed = tmp_path / "conversations-later.json"
    changed.write_text(
        json.dumps(
            [
                chatgpt("conv-wifi", "Home network", "The wifi password is now in the password manager."),
                chatgpt("conv-bike", None, "My bike lock code is 4471."),
            ]
        )
    )
    await upload(page, base, changed, "chatgpt")
    await expect(page.locator(".progress-line")).to_have_text(
        "2 of 2 conversations: 0 new, 1 updated, 1 unchanged, 0 failed"
    )
    plants = tmp_path / "claude-export.json"
    plants.write_text(json.dumps([claude(i) for i in range(22)]))
    await upload(page, base, plants, "claude")
    await expect(page.locator(".progress-line")).to_have_text(
        "22 of 22 conversations: 22 new, 0 updated, 0 unchanged, 0 failed"
    )

    await page.goto(f"{base}/dashboard/default/archive")
    totals = page.locator(".archive-totals")
    await expect(totals.locator("section").nth(0)).to_contain_text("24")
    await expect(totals.locator("section").nth(0)).to_contain_text("chatgpt: 2 · claude: 22")
    await expect(totals.locator("section").nth(2)).to_contain_text("4")  # imports, the duplicate included
    imports = page.locator(".archive-imports tbody tr")
    await expect(imports).to_have_count(4)
    listed = page.locator(".archive-conversations tbody tr")
    await expect(listed).to_have_count(20)
    await browser_pages.shot(page, "archive")
    await document(page, "archive")
    await page.get_by_role("link", name="More").click()
    await expect(listed).to_have_count(4)
    await expect(page.locator(".archive-conversations")).to_contain_text("(no title)")

    await page.get_by_role("link", name="Home network").click()
    await expect(page.locator("h1")).to_have_text("Home network")
    await expect(page.locator(".transcript")).to_contain_text("now in the password manager")
    await expect(page.locator("main .meta").first).to_contain_text("revision 2 · the head")
    await page.get_by_role("link", name="Read revision 1").click()
    await expect(page.locator(".transcript")).to_contain_text("on the fridge door")
    await expect(page.locator(".transcript")).not_to_contain_text("password manager")
    await expect(page.locator("main .meta").first).to_contain_text("pinned: the head is revision 2")
    await browser_pages.shot(page, "conversation pinned")
    await document(page, "archive-conversation")

    conversation_url = page.url.split("?")[0]
    conversation_id = conversation_url.rsplit("/", 1)[-1]
    await page.get_by_label(re.compile("Type the conversation's id to confirm")).fill("not-the-id")
    await page.get_by_role("button", name="Delete for good").click()
    await expect(page.locator("main")).to_contain_text("type the conversation's id exactly")
    await page.goto(conversation_url)
    await page.get_by_label(re.compile("Type the conversation's id to confirm")).fill(conversation_id)
    await page.get_by_role("button", name="Delete for good").click()
    await expect(page.locator(".notice")).to_have_text("Conversation deleted with 2 revisions and 3 messages.")
    await expect(page.locator(".archive-totals section").nth(0)).to_contain_text("23")
    gone = await page.goto(conversation_url)
    assert gone is not None and gone.status == 404

    # 52 revisions: the page lists 50, newest first, and pages to the older ones and back.
    many = await write_revisions(stack, 52)
    await page.goto(f"{base}/dashboard/default/archive/c/{many}")
    revisions = page.locator(".archive-revisions tbody tr")
    await expect(revisions).to_have_count(50)
    await expect(revisions.first).to_contain_text("52")
    await expect(page.get_by_role("link", name="Newest revisions")).to_have_count(0)
    await page.get_by_role("link", name="Older revisions").click()
    await expect(revisions).to_have_count(2)
    await expect(page.get_by_role("link", name="Older revisions")).to_have_count(0)
    older_url = page.url
    await page.get_by_role("link", name="Read revision 1").click()
    await expect(page.locator("main .meta").first).to_contain_text("pinned: the head is revision 52")
    await expect(page.locator(".transcript")).to_contain_text("turn 0")
    await expect(page.locator(".transcript")).not_to_contain_text("turn 1")
    await expect(revisions).to_have_count(2)  # still the older revisions while reading one of them
    await browser_pages.shot(page, "conversation older revisions")
    await page.get_by_role("link", name="Newest revisions").click()
    await expect(revisions).to_have_count(50)
    await expect(page.locator("main .meta").first).to_contain_text("pinned: the head is revision 52")

    # Indonesian, then axe-core on each page with JavaScript on.
    checked = await browser_pages.new()
    await sign_in(checked, base, "owner")
    await checked.goto(f"{base}/dashboard/default/archive")
    await checked.get_by_label("Language").select_option("id")
    await expect(checked.locator("h1")).to_have_text("Arsip percakapan")
    await accessible(checked)
    await checked.get_by_label("Bahasa").select_option("en")
    await expect(checked.locator("h1")).to_have_text("Conversation archive")
    # An import's page and a conversation's page (whichever the list shows first: same-time rows have no set order).
    for link in (checked.get_by_role("link", name="claude-export.json"), checked.locator(".archive-conversations a")):
        await checked.goto(f"{base}/dashboard/default/archive")
        await link.first.click()
        await accessible(checked)
    await checked.goto(older_url)
    await accessible(checked)
