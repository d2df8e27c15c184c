"""The ceiling holds for what the agent really receives: random archive pages, context reads and recall
answers are fitted, turned into text exactly as the MCP SDK sends a tool's dict, and measured."""

from __future__ import annotations

import random
from typing import Any

import pytest
from mcp.server.mcpserver.utilities.func_metadata import _convert_to_content
from mcp_types import TextContent

from memvault_core.archive_answers import fit_receipts
from memvault_mcp.tools import fitting
from memvault_mcp.tools.archive_fit import fit, fit_around, whole_read

pytestmark = pytest.mark.unit

CEILING = 48 * 1024
ALPHABET = ["a", " ", "é", "語", "😀", '"', "\\", "\n", "\x01", "<"]


def sent(answer: dict[str, Any]) -> int:
    """Bytes of the text block the SDK makes of a tool's dict answer (what the agent reads)."""
    [block] = _convert_to_content(answer)
    assert isinstance(block, TextContent)
    return len(block.text.encode())


def text(rng: random.Random) -> str:
    length = rng.choice([0, 1, 20, 200, 2_000, 20_000, 50_000, 70_000])
    length = rng.randint(0, length)
    chars = rng.sample(ALPHABET, rng.randint(1, 4))
    return "".join(rng.choice(chars) for _ in range(length)) if length < 2_000 else rng.choice(chars) * length


def messages(rng: random.Random, count: int) -> list[dict[str, Any]]:
    start = rng.choice([0, 1, 9, 99, 999_999])
    return [
        {
            "position": start + i,
            "message_id": f"m{rng.randint(0, 10**9)}",
            "node_id": "n" * rng.randint(1, 300),
            "key": None,
            "role": rng.choice(["user", "assistant"]),
            "content_type": "text",
            "text": text(rng),
            "created_at": "2026-12-06T02:00:00+00:00",
        }
        for i in range(count)
    ]


def header(rng: random.Random) -> dict[str, Any]:
    return {
        "conversation_id": "c0ffee00-0000-4000-8000-000000000001",
        "title": text(rng)[:300] or None,
        "revision": rng.randint(1, 10**6),
        "head_revision": rng.randint(1, 10**6),
    }


@pytest.mark.parametrize("seed", range(12))
def test_a_conversation_page_as_sent_never_passes_the_ceiling(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        items = messages(rng, rng.choice([1, 5, 50, 200]))
        more = {"mode": "conversation", "conversation_id": "c1", "revision": 7, "graph": rng.random() < 0.5}

        def omit(
            consumed: list[dict[str, Any]], rest: list[dict[str, Any]], more: dict[str, Any] = more
        ) -> list[dict[str, Any]]:
            after = consumed[-1]["position"] if consumed else rest[0]["position"] - 1
            return [{"count": len(rest), "read": {"tool": "archive_read", **more, "after_position": after}}]

        answer = fit(header(rng), "messages", items, omit, whole_read(rng.choice(["", "home"]), "c1", 7))
        assert sent(answer) <= CEILING
        held = len(answer["messages"]) + len(answer.get("oversized", []))
        assert held + sum(o["count"] for o in answer.get("omitted", [])) == len(items)


@pytest.mark.parametrize("seed", range(12))
def test_the_context_around_a_hit_as_sent_never_passes_the_ceiling(seed: int) -> None:
    rng = random.Random(1_000 + seed)
    for _ in range(25):
        items = messages(rng, rng.randint(1, 41))
        centre = rng.randrange(len(items))
        answer = header(rng) | {"position": items[centre]["position"]}
        more = {"mode": "conversation", "conversation_id": "c1", "revision": 7}
        answer = fit_around(answer, items, centre, more, whole_read("home", "c1", 7))
        assert sent(answer) <= CEILING
        held = len(answer["messages"]) + len(answer.get("oversized", []))
        assert held + sum(o["count"] for o in answer.get("omitted", [])) == len(items)


def test_two_hundred_short_messages_are_counted_as_the_indented_text_they_go_out_as() -> None:
    # Counted as compact JSON this page was about 39 KB and went out as about 54 KB of text.
    items = messages(random.Random(7), 0) + [
        {"position": i, "message_id": f"m{i}", "node_id": f"n{i}", "key": None, "role": "user",
         "content_type": "text", "text": "ok " * 40, "created_at": "2026-12-06T02:00:00+00:00"}
        for i in range(200)
    ]  # fmt: skip

    def omit(consumed: list[dict[str, Any]], rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"count": len(rest), "read": {"tool": "archive_read", "after_position": rest[0]["position"] - 1}}]

    answer = fit({"conversation_id": "c1"}, "messages", items, omit)
    assert CEILING - 1_000 < sent(answer) <= CEILING
    assert answer["omitted"][0]["count"] == 200 - len(answer["messages"])


@pytest.mark.parametrize("seed", range(8))
def test_recall_as_sent_never_passes_the_ceiling(seed: int) -> None:
    rng = random.Random(2_000 + seed)
    for _ in range(25):
        results = [
            {"id": f"m{n}", "content": text(rng)[:4_000], "tags": ["a"] * rng.randint(0, 5), "kind": "memory"}
            for n in range(rng.choice([0, 1, 10, 50]))
        ]
        hits = [
            {"message_id": f"x{n}", "revision": 1, "snippet": text(rng)[:400], "kind": "message"}
            for n in range(rng.choice([0, 1, 20, 50]))
        ]
        answer = {"vault": rng.choice(["", "home"]), "results": results, "conversation_hits": hits}
        answer = fitting.fit_recall(answer)
        assert sent(answer) <= CEILING
        shown = len(answer["results"]) + len(answer["conversation_hits"])
        assert shown + len(answer.get("omitted", [])) == len(results) + len(hits)


def test_one_size_for_every_tool_measures_the_text_sent() -> None:
    answer = {"messages": [{"text": "語" * 1_000, "quote": '"\n'}], "n": [1, 2]}
    assert fitting.size(answer) == sent(answer)
    # An item's share of an answer, nested two levels deep as messages and hits are.
    grown = {"messages": [*answer["messages"], {"text": "é\x01"}], "n": [1, 2]}
    assert sent(grown) - sent(answer) == fitting.item_size({"text": "é\x01"})


def test_write_receipts_as_sent_never_pass_the_ceiling() -> None:
    # Many short readback messages: compact, they fit; indented as sent, they did not.
    readback = [
        {"position": i, "message_id": f"m{i}", "node_id": f"n{i}", "role": "user", "text": "ok " * 20}
        for i in range(400)
    ]
    receipt = {"conversation_id": "c1", "revision": 3, "durable": True, "readback": readback, "omitted": []}
    answer = fit_receipts({"op": "commit", "receipts": [receipt]}, size=fitting.size)
    assert CEILING - 2_000 < sent(answer) <= CEILING
    assert len(answer["receipts"][0]["readback"]) + answer["receipts"][0]["omitted"][0]["count"] == 400
