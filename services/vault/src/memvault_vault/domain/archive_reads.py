"""Rules of the archive's reads for agents, with no I/O: byte budgets, how many items a call takes,
and the compact shape (and so the size) of a search hit and a message as the MCP tools return them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final

from memvault_core.errors import InvalidArgument, LimitExceeded

DEFAULT_BUDGET_BYTES: Final = 32 * 1024
MIN_BUDGET_BYTES: Final = 4 * 1024
MAX_BUDGET_BYTES: Final = 48 * 1024
"""A search page or a batch read answers in at most this many bytes of compact JSON (default, bounds)."""
ENVELOPE_BYTES: Final = 512
"""Kept free of the budget for the answer's own fields (ids, counts, mode, warnings), besides the cursor."""
MAX_CONTEXT_MESSAGES: Final = 10
DEFAULT_CONTEXT_MESSAGES: Final = 3
MAX_BATCH_CONVERSATIONS: Final = 20
MAX_RESOLVE_TITLES: Final = 20
RESOLVE_PER_TITLE: Final = 20
BATCH_FETCH: Final = 64
"""Messages read per conversation per query while a batch page fills."""
SEARCH_CANDIDATES: Final = 50
"""Keyword and vector candidates each; pages of a search go at most this deep."""


def budget(max_bytes: int) -> int:
    """The caller's byte budget, checked: 0 is the default."""
    if max_bytes == 0:
        return DEFAULT_BUDGET_BYTES
    if max_bytes < MIN_BUDGET_BYTES:
        raise InvalidArgument(f"max_bytes must be at least {MIN_BUDGET_BYTES}", field="max_bytes")
    if max_bytes > MAX_BUDGET_BYTES:
        raise LimitExceeded(f"max_bytes is at most {MAX_BUDGET_BYTES}", field="max_bytes")
    return max_bytes


def size(value: Any) -> int:
    """Bytes of a value as compact UTF-8 JSON (how budgets are counted)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def message_item(
    message_id: str, position: int, role: str, content_type: str, text: str, created_at: datetime | None
) -> dict[str, Any]:
    """A message in a batch read or a context answer."""
    return {
        "message_id": message_id,
        "position": position,
        "role": role,
        "content_type": content_type,
        "text": text,
        "created_at": iso(created_at),
    }


def hit_item(
    conversation_id: str,
    title: str | None,
    revision: int,
    message_id: str,
    position: int,
    role: str,
    snippet: str,
    score: float,
) -> dict[str, Any]:
    """A search hit: a compact reference to read around with the context read."""
    return {
        "kind": "message",
        "conversation_id": conversation_id,
        "title": title,
        "revision": revision,
        "message_id": message_id,
        "position": position,
        "role": role,
        "snippet": snippet,
        "score": round(score, 4),
    }
