"""Rules of the archive's reads for agents, with no I/O: byte budgets, how many items a call takes,
and the compact shape (and so the size) of a search hit and a message as the MCP tools return them."""

from __future__ import annotations

import json
import uuid
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


MAX_MESSAGE_LOOKUPS: Final = 100
"""Source node ids, stable keys and message ids together in one read of messages by id."""
MAX_NODE_ID_CHARS: Final = 200
MAX_MESSAGES_ANSWER_BYTES: Final = 3_584 * 1024
"""Bytes of the messages one GetMessages answer carries: under gRPC's 4 MiB with room for the envelope
(the messages' other fields are counted at MESSAGE_ENVELOPE_BYTES each, more than they take)."""
MESSAGE_ENVELOPE_BYTES: Final = 128


def answer_share(sizes: list[int]) -> int:
    """How many of these messages (their sizes in bytes, in order) one answer carries: while they fit
    under MAX_MESSAGES_ANSWER_BYTES, and always the first."""
    used = 0
    for count, size in enumerate(sizes):
        used += size + MESSAGE_ENVELOPE_BYTES
        if used > MAX_MESSAGES_ANSWER_BYTES and count:
            return count
    return len(sizes)


def message_bytes(text: str, content: Any, *names: str | None) -> int:
    """Bytes of one message's text, content (as JSON) and names in an answer."""
    held = len(json.dumps(content, ensure_ascii=False).encode()) if content is not None else 0
    return len(text.encode()) + held + sum(len((n or "").encode()) for n in names)


def lookups(node_ids: list[str], keys: list[str], message_ids: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The node ids, keys and message ids of a read by id, checked and deduplicated (order kept)."""
    node_ids, keys, message_ids = (list(dict.fromkeys(v)) for v in (node_ids, keys, message_ids))
    if not node_ids and not keys and not message_ids:
        raise InvalidArgument(
            "give node_ids, keys or message_ids: 1-100 source node ids, stable message keys or message ids",
            field="node_ids",
        )
    if len(node_ids) + len(keys) + len(message_ids) > MAX_MESSAGE_LOOKUPS:
        raise LimitExceeded(
            f"at most {MAX_MESSAGE_LOOKUPS} node ids, keys and message ids per read; send the rest in another call",
            field="node_ids",
        )
    for field, values in (("node_ids", node_ids), ("keys", keys)):
        if any(not value or len(value) > MAX_NODE_ID_CHARS for value in values):
            raise InvalidArgument(f"each of {field} must be 1-{MAX_NODE_ID_CHARS} characters", field=field)
    checked = []
    for value in message_ids:
        try:
            checked.append(str(uuid.UUID(value)) if len(value) <= 64 else "")
        except ValueError:
            checked.append("")
        if not checked[-1]:
            raise InvalidArgument("each of message_ids must be a message id (a UUID)", field="message_ids")
    return node_ids, keys, list(dict.fromkeys(checked))
