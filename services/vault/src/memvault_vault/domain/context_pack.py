"""Context packs with no I/O: the limits, how a message's tokens and bytes are counted, and how whole
messages are ordered, deduplicated and fitted to a caller's budgets. The same candidates and budgets
always give the same pack and the same pack id."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

MAX_PACK_CONVERSATIONS: Final = 20
MAX_PACK_SEARCHES: Final = 8
MAX_PACK_SEARCH_RESULTS: Final = 20
"""Hits one optional search of a pack may bring (default 5)."""
DEFAULT_PACK_SEARCH_RESULTS: Final = 5
MAX_PACK_TAIL: Final = 200
"""Messages a tail-mode conversation brings at most (tail 0: the whole active timeline)."""
DEFAULT_PACK_BYTES: Final = 32 * 1024
MIN_PACK_BYTES: Final = 4 * 1024
MAX_PACK_BYTES: Final = 48 * 1024
DEFAULT_PACK_TOKENS: Final = 8_000
MIN_PACK_TOKENS: Final = 256
MAX_PACK_TOKENS: Final = 32_000
BYTES_PER_TOKEN: Final = 4
"""Tokens are counted as UTF-8 bytes of text / 4, rounded up, plus MESSAGE_TOKENS per message."""
MESSAGE_TOKENS: Final = 4
MESSAGE_FIELD_BYTES: Final = 360
"""What a packed message's provenance fields take in the answer, at most, besides its text."""
PACK_ENVELOPE_BYTES: Final = 1024
"""What the pack's own fields take in the answer, at most."""

REQUIRED: Final = "required"
RETRIEVED: Final = "retrieved"


@dataclass(frozen=True)
class Candidate:
    """A message that may go into a pack, with where it comes from."""

    conversation_id: str
    revision: int
    message_id: str
    position: int
    text_bytes: int
    authority: str
    rank: int
    """Required: the conversation's index in the request; retrieved: the query's index."""
    score: float = 0.0

    @property
    def tokens(self) -> int:
        return -(-self.text_bytes // BYTES_PER_TOKEN) + MESSAGE_TOKENS

    @property
    def bytes(self) -> int:
        # JSON escaping may grow text; a factor keeps the estimate above what is sent.
        return self.text_bytes + self.text_bytes // 8 + MESSAGE_FIELD_BYTES


@dataclass(frozen=True)
class Fitted:
    kept: list[Candidate]
    tokens: int
    bytes: int
    left_out: int
    duplicates: int


@dataclass(frozen=True)
class Shortfall:
    """The required part alone is over a budget: the budgets it needs, per conversation too."""

    min_max_tokens: int
    min_max_bytes: int
    conversations: list[dict[str, Any]]


def order(candidates: list[Candidate]) -> list[Candidate]:
    """Authority first (required, then retrieved), then the required in request and timeline order,
    the retrieved by score (best first); ids break ties, so the order never depends on timing."""

    def sort_key(c: Candidate) -> tuple[Any, ...]:
        if c.authority == REQUIRED:
            return (0, c.rank, c.position, c.conversation_id, c.message_id)
        return (1, -c.score, c.rank, c.conversation_id, c.position, c.message_id)

    return sorted(candidates, key=sort_key)


def fit(required: list[Candidate], retrieved: list[Candidate], max_tokens: int, max_bytes: int) -> Fitted | Shortfall:
    """Every required message, then whole retrieved ones in order while both budgets hold; one message
    (conversation, revision, message id) appears once, under its highest authority."""
    seen: set[tuple[str, int, str]] = set()
    duplicates = 0
    unique_required: list[Candidate] = []
    for c in order(required):
        ident = (c.conversation_id, c.revision, c.message_id)
        if ident in seen:
            duplicates += 1
            continue
        seen.add(ident)
        unique_required.append(c)
    tokens = sum(c.tokens for c in unique_required)
    used = PACK_ENVELOPE_BYTES + sum(c.bytes for c in unique_required)
    if tokens > max_tokens or used > max_bytes:
        per: dict[str, dict[str, Any]] = {}
        for c in unique_required:
            entry = per.setdefault(
                c.conversation_id,
                {"conversation_id": c.conversation_id, "revision": c.revision, "messages": 0, "tokens": 0, "bytes": 0},
            )
            entry["messages"] += 1
            entry["tokens"] += c.tokens
            entry["bytes"] += c.bytes
        return Shortfall(tokens, used, list(per.values())[:MAX_PACK_CONVERSATIONS])
    kept = list(unique_required)
    left_out = 0
    for c in order(retrieved):
        ident = (c.conversation_id, c.revision, c.message_id)
        if ident in seen:
            duplicates += 1
            continue
        seen.add(ident)
        if tokens + c.tokens > max_tokens or used + c.bytes > max_bytes:
            left_out += 1
            continue
        kept.append(c)
        tokens += c.tokens
        used += c.bytes
    return Fitted(kept, tokens, used, left_out, duplicates)


def pack_id(request: Any, pins: list[tuple[str, int]], kept: list[Candidate]) -> str:
    """The same request over the same pinned revisions and the same messages gives the same id."""
    body = json.dumps(
        [request, pins, [(c.conversation_id, c.revision, c.message_id, c.authority) for c in kept]],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return "pack_" + hashlib.sha256(body.encode()).hexdigest()[:32]
