"""10,000 mixed items imported over MCP with duplicate detection on: every item gets the right outcome."""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e_helpers import call, mcp_session, vault_stats
from import_mix import build, check, forgotten_texts

from memvault_core import limits
from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e

TOTAL = 10_000


async def test_ten_thousand_mixed_items_get_the_right_outcomes(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    forgotten = forgotten_texts(60)
    async with mcp_session(stack.mcp_url) as client:
        for text in forgotten:
            stored = await call(client, "remember", content=text)
            await call(client, "forget", memory_id=stored["id"])
        items = build(TOTAL, forgotten=list(forgotten))
        outcomes: list[dict[str, object]] = []
        notices: list[str] = []
        start = time.perf_counter()
        for offset in range(0, TOTAL, limits.MAX_BULK_ITEMS):
            chunk = items[offset : offset + limits.MAX_BULK_ITEMS]
            answer = await call(
                client, "bulk_remember", items=[{"content": i.content} for i in chunk], source=f"part {offset}"
            )
            assert answer["duplicate_check"] == "semantic"
            notices += answer.get("notices", [])
            outcomes += answer["items"]
        elapsed = time.perf_counter() - start

    wrong = check(items, outcomes)
    assert not wrong, f"{len(wrong)} wrong outcomes, e.g. {wrong[:5]}; notices: {notices[:3]}"
    expected = {kind: sum(1 for i in items if i.expect == kind) for kind in {i.expect for i in items}}
    assert min(expected.values()) >= 50, expected  # every kind is well represented
    stored = sum(1 for o in outcomes if o["outcome"] in ("stored", "similar"))
    stats = await vault_stats(stack)
    assert sum(stats.memories.values()) == stored
    print(f"\n{TOTAL} items in {elapsed:.1f} s ({TOTAL / elapsed:.0f} items/s); {expected}")
