"""The dashboard's Index page in Chromium, without JavaScript: failed index jobs with their error,
retried one at a time, and a rebuild started by the administrator whose progress a refresh shows."""

from __future__ import annotations

import asyncio
import time

from browser_helpers import OAuthStack, choose_password, setup_link, sign_in
from playwright.async_api import expect
from test_dashboard import accessible, api

from memvault.vault.v1 import index_feed_pb2, index_feed_pb2_grpc, vault_pb2, vault_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.browser import PageShots
from memvault_devstack.stack import Stack

FACTS = ["The NAS is a Synology DS920+.", "Standup is at 9 every weekday.", "Prefers dark roast coffee."]


async def wait_indexed(stack: Stack, count: int, deadline: float = 120.0) -> None:
    signer = IdentitySigner(stack.identity_secret)
    channel = client_channel(stack.vault_address)
    try:
        stub = vault_pb2_grpc.VaultServiceStub(channel)
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            token = signer.sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
            stats = await stub.GetStats(
                vault_pb2.GetStatsRequest(vault="default"), metadata=((GRPC_METADATA_KEY, token),)
            )
            if stats.indexed == count and stats.index_pending == 0 and stats.index_failed == 0:
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"not indexed in {deadline}s: {stats}")
    finally:
        await channel.close()


async def fail_index(stack: Stack, memory_id: str) -> None:
    """What the indexer reports for an event that keeps failing: a failed index job."""
    channel = client_channel(stack.vault_address)
    try:
        report = index_feed_pb2.IndexReport(
            memory_id=memory_id, model="m", state=index_feed_pb2.INDEX_STATE_FAILED, error="EmbeddingTimeout"
        )
        await index_feed_pb2_grpc.IndexFeedServiceStub(channel).ReportIndexed(
            index_feed_pb2.ReportIndexedRequest(reports=[report]),
            metadata=((GRPC_METADATA_KEY, IdentitySigner(stack.identity_secret).sign_service("indexer")),),
        )
    finally:
        await channel.close()


async def test_failed_index_jobs_are_retried_and_a_rebuild_shows_its_progress(
    oauth_stack: OAuthStack, browser_pages: PageShots
) -> None:
    stack = await oauth_stack(services=("vault", "indexer", "mcp", "gateway"))
    base = stack.gateway_url
    await choose_password(await browser_pages.new(), await asyncio.to_thread(setup_link, stack))
    page = await browser_pages.new()
    await sign_in(page, base, "owner")  # the first account: the administrator
    ids = [
        (await api(page, "POST", f"{base}/api/v1/vaults/default/memories", {"content": fact}))["id"] for fact in FACTS
    ]
    await wait_indexed(stack, len(FACTS))
    await fail_index(stack, ids[1])

    await page.goto(f"{base}/dashboard/default")
    await page.get_by_role("link", name="Failed index jobs, retry and rebuild").click()
    await expect(page.locator("h1")).to_have_text("Search index")
    await expect(page.locator(".index-failure")).to_have_count(1)
    await expect(page.locator(".index-failure")).to_contain_text("EmbeddingTimeout")
    await accessible(page)

    plain = await browser_pages.new(java_script_enabled=False)
    await sign_in(plain, base, "owner")
    await plain.goto(f"{base}/dashboard/default/index")
    await plain.locator(".index-failure").get_by_role("button", name="Retry").click()
    await expect(plain.locator(".notice")).to_have_text("1 memories sent to the indexer again.")
    await wait_indexed(stack, len(FACTS))
    await plain.get_by_role("link", name="Refresh").click()
    await expect(plain.locator("body")).to_contain_text("No failed index jobs.")

    await plain.get_by_role("button", name="Rebuild", exact=True).click()
    await expect(plain.locator(".notice")).to_contain_text("The job has started")
    for _ in range(120):
        text = await plain.locator(".index-job").inner_text()
        if "finished" in text:
            break
        await asyncio.sleep(0.5)
        await plain.get_by_role("link", name="Refresh").click()
    await expect(plain.locator(".index-job")).to_contain_text(
        f"rebuild finished: {len(FACTS)} of {len(FACTS)} memories, 0 failed"
    )
    await expect(plain.get_by_role("button", name="Re-embed")).to_be_visible()  # one at a time: offered again
    await accessible(page)
