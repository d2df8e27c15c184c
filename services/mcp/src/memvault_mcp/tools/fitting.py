"""Keeping recall's answer under the result ceiling: whole memories and conversation hits are admitted
in rank order while the answer fits; each one that does not is named in `omitted` with the read request
that returns it, so nothing a page found is lost."""

from __future__ import annotations

from typing import Any

import pydantic_core

CEILING = 48 * 1024
"""Bytes of one tool result, as the agent receives its text (see `size`)."""

SLACK = 64
"""Bytes held back for what an incremental count leaves out (a non-empty list's closing line)."""

MIN_SEARCH_BYTES = 4 * 1024
DEFAULT_SEARCH_BYTES = 32 * 1024
"""The archive search's byte budget bounds (its max_bytes argument)."""


def _text(value: Any) -> bytes:
    # Exactly how the MCP SDK turns a tool's dict into the text block it sends
    # (mcp/server/mcpserver/utilities/func_metadata.py, _convert_to_content): UTF-8, indented by 2.
    return pydantic_core.to_json(value, fallback=str, indent=2)


def size(value: Any) -> int:
    """Bytes of `value` as the text an agent receives for it: every tool's answer is measured so."""
    return len(_text(value))


def item_size(item: Any, depth: int = 2) -> int:
    """Bytes `item` adds as one more element of a list `depth` levels deep (answer -> list -> item):
    its text with every line indented 2 * depth spaces, and the comma and line break that join it."""
    text = _text(item)
    return len(text) + (text.count(b"\n") + 1) * 2 * depth + 2


def _read_memory(vault: str, item: dict[str, Any]) -> dict[str, Any]:
    read = {"tool": "explain_memory", "memory_id": item["id"], **({"vault": vault} if vault else {})}
    return {"kind": "memory", "read": read}


def _read_message(vault: str, item: dict[str, Any]) -> dict[str, Any]:
    read = {
        "tool": "archive_read",
        "mode": "context",
        "message_id": item["message_id"],
        "revision": item["revision"],
        **({"vault": vault} if vault else {}),
    }
    return {"kind": "message", "read": read}


def fit_recall(answer: dict[str, Any]) -> dict[str, Any]:
    """`answer` with `results` and `conversation_hits` cut so the whole stays under CEILING; each item cut
    becomes an `omitted` entry. Space for every entry is held back first, so the entries always fit."""
    vault = answer.get("vault") or ""
    lists = [("results", _read_memory), ("conversation_hits", _read_message)]
    items = {key: answer.get(key) or [] for key, _ in lists}
    base = {**answer, **{key: [] for key in items if key in answer}, "omitted": []}
    entries = {key: [read(vault, item) for item in items[key]] for key, read in lists}
    total = size(base) + SLACK + sum(item_size(entry) for key in entries for entry in entries[key])
    omitted: list[dict[str, Any]] = []
    for key, _ in lists:
        kept = 0
        for item, entry in zip(items[key], entries[key], strict=True):
            grown = total - item_size(entry) + item_size(item)
            if grown > CEILING:
                break
            total = grown
            kept += 1
        if key in answer:
            answer[key] = items[key][:kept]
        omitted += entries[key][kept:]
    if omitted:
        answer["omitted"] = omitted
    return answer
