"""Archive answers fitted under RESULT_CEILING with no I/O: whole items while they fit, a message larger
than any answer could hold named as bounded metadata (never cut) with the read that returns it whole,
and what did not fit named in `omitted` as ready-made `archive_read` requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from memvault_mcp.tools.fitting import CEILING, SLACK, item_size, size

RESULT_CEILING = CEILING
"""Bytes of one archive tool result, measured as every tool's (`fitting.size`); the rest is named in `omitted`."""

Omit = Callable[[list[dict[str, Any]], list[dict[str, Any]]], list[dict[str, Any]]]
"""(items consumed so far, items left) -> the `omitted` entries that name the ones left."""


def whole_read(vault: str, conversation_id: str, revision: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """How a message too large for any answer is named: where it is, how large, and the /api/v1 read
    that returns it whole (no MCP answer can)."""

    def note(item: dict[str, Any]) -> dict[str, Any]:
        return {
            "message_id": item["message_id"],
            "node_id": item.get("node_id"),
            "position": item["position"],
            "bytes": len(item["text"].encode()),
            # By message id (exact and short whatever the node id), every part quoted; `<vault>` only when
            # the caller named no vault and its default could not be looked up (archive._fit_linked).
            "read_whole": f"GET /api/v1/vaults/{quote(vault, safe='') if vault else '<vault>'}/conversations/"
            f"{quote(conversation_id, safe='')}/messages?"
            + urlencode({"revision": revision, "message_id": item["message_id"]}),
        }

    return note


def fit(
    answer: dict[str, Any],
    key: str,
    items: list[dict[str, Any]],
    omit: Omit,
    oversized: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Admit whole items in order while the answer stays under the ceiling. With `oversized`, an item
    larger than any answer could hold is named in `oversized` by it and passed over; at the first item
    that does not fit, `omit` names it and the rest in `omitted`."""
    kept: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    consumed: list[dict[str, Any]] = []
    # Room for the largest `omitted` this answer could carry (every item left) and every key it may hold.
    skeleton = {**answer, key: [], "oversized": [], "omitted": omit([], items) if items else []}
    used = size(skeleton) + SLACK
    alone = RESULT_CEILING - used
    for index, item in enumerate(items):
        cost = item_size(item)
        if oversized is not None and cost > alone:
            note = oversized(item)
            cost, target = item_size(note), notes
        else:
            note, target = item, kept
        if used + cost > RESULT_CEILING:
            answer["omitted"] = omit(consumed, items[index:])
            break
        target.append(note)
        consumed.append(item)
        used += cost
    answer[key] = kept
    if notes:
        answer["oversized"] = notes
    return answer


def fit_around(
    answer: dict[str, Any],
    items: list[dict[str, Any]],
    centre: int,
    more: dict[str, Any],
    oversized: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """The context around one message under the ceiling: that message first, then its neighbours
    outwards, one side after the other. A side stops at its first message that does not fit; the
    messages past it are named in `omitted` as a conversation read of exactly those positions."""
    # The two `omitted` entries at their largest: every item left, the widest position, the limit.
    widest = -(max((abs(item["position"]) for item in items), default=0) + 1)
    entry = {
        "count": len(items),
        "read": {"tool": "archive_read", **more, "after_position": widest, "limit": len(items)},
    }
    used = size({**answer, "messages": [], "oversized": [], "omitted": [entry, entry]}) + SLACK
    alone = RESULT_CEILING - used
    order = [centre] + [i for step in range(1, len(items)) for i in (centre - step, centre + step)]
    kept: dict[int, dict[str, Any]] = {}
    notes: dict[int, dict[str, Any]] = {}
    low, high = centre, centre  # the consumed window; a side is closed once it stopped
    closed = {"before": False, "after": False}
    for index in order:
        if not 0 <= index < len(items):
            continue
        side = "before" if index < centre else "after"
        if closed[side]:
            continue
        item = items[index]
        cost = item_size(item)
        target, value = kept, item
        if cost > alone:
            value = oversized(item)
            cost, target = item_size(value), notes
        if used + cost > RESULT_CEILING:  # never the centre: alone, it or its note always fits
            closed[side] = True
            continue
        target[index] = value
        used += cost
        low, high = min(low, index), max(high, index)
    answer["messages"] = [kept[i] for i in sorted(kept)]
    if notes:
        answer["oversized"] = [notes[i] for i in sorted(notes)]
    omitted = []
    if low > 0:
        omitted.append(
            {
                "count": low,
                "read": {"tool": "archive_read", **more, "after_position": items[0]["position"] - 1, "limit": low},
            }
        )
    if high < len(items) - 1:
        rest = len(items) - 1 - high
        omitted.append(
            {
                "count": rest,
                "read": {"tool": "archive_read", **more, "after_position": items[high]["position"], "limit": rest},
            }
        )
    if omitted:
        answer["omitted"] = omitted
    return answer
