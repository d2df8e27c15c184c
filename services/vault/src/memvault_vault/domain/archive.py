"""Rules of the conversation archive with no I/O: limits, what a valid message and tag list are,
the hashes that pin a revision, and how a caller's write is fingerprinted for idempotency."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from memvault_core.errors import InvalidArgument, LimitExceeded

MAX_MESSAGES_PER_WRITE: Final = 500
"""Messages in one create, append or replace."""

MAX_MESSAGE_CHARS: Final = 100_000
"""Characters of text in one message written through the API (imports keep longer ones whole)."""

MAX_TITLE_CHARS: Final = 500
MAX_TAGS: Final = 20
MAX_TAG_CHARS: Final = 64
MAX_IDEMPOTENCY_KEY_CHARS: Final = 200
MAX_LIST_RESULTS: Final = 100
DEFAULT_LIST_RESULTS: Final = 20
MAX_PAGE_MESSAGES: Final = 200
DEFAULT_PAGE_MESSAGES: Final = 50
MAX_SEARCH_RESULTS: Final = 50
DEFAULT_SEARCH_RESULTS: Final = 10
MAX_QUERY_CHARS: Final = 1_000
MAX_IMPORT_BYTES: Final = 2 * 1024 * 1024 * 1024
"""Bytes in one uploaded export (kept in Postgres in parts)."""
MAX_IMPORT_PART_BYTES: Final = 3 * 1024 * 1024
"""Bytes in one uploaded part (under the 4 MiB gRPC message limit)."""
IMPORT_CHECKPOINT_CONVERSATIONS: Final = 25
"""Conversations processed per checkpoint of an import job; a restart repeats at most this many."""

ROLES: Final = frozenset({"user", "assistant", "system", "tool"})
_TAG = re.compile(r"^[a-z0-9][a-z0-9._:/-]*$")
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


@dataclass(frozen=True)
class MessageInput:
    """A message as it will be stored: from a caller's draft or a parsed export node."""

    node_id: str
    parent_node_id: str | None
    role: str
    content_type: str
    text: str
    content: Any = None
    metadata: Any = None
    created_at: datetime | None = None
    active: bool = True
    key: str | None = None

    @property
    def content_hash(self) -> str:
        return message_hash(self.role, self.content_type, self.text, self.content)


def message_hash(role: str, content_type: str, text: str, content: Any) -> str:
    body = json.dumps([role, content_type, text, content], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def revision_hash(message_hashes: list[tuple[str, str | None, str, bool]]) -> str:
    """sha256 over (node, parent, message hash, active) in order: equal transcripts hash the same."""
    digest = hashlib.sha256()
    for node, parent, content_hash, active in message_hashes:
        digest.update(f"{node}\x1f{parent or ''}\x1f{content_hash}\x1f{int(active)}\x1e".encode())
    return digest.hexdigest()


def validate_drafts(drafts: list[tuple[str, str, str, datetime | None]], *, allow_empty: bool) -> None:
    """Check (role, text, content_type, created_at) drafts before anything is written."""
    if not drafts and not allow_empty:
        raise InvalidArgument("messages must hold at least one message", field="messages")
    if len(drafts) > MAX_MESSAGES_PER_WRITE:
        raise LimitExceeded(
            f"at most {MAX_MESSAGES_PER_WRITE} messages per write (max_messages_per_write); "
            f"send {MAX_MESSAGES_PER_WRITE} now and append the rest",
            field="messages",
        )
    for index, (role, text, content_type, _) in enumerate(drafts):
        if role not in ROLES:
            raise InvalidArgument(
                f"messages[{index}].role must be one of {', '.join(sorted(ROLES))}", field="messages.role"
            )
        if not text.strip():
            raise InvalidArgument(f"messages[{index}].text is empty", field="messages.text")
        if len(text) > MAX_MESSAGE_CHARS:
            raise LimitExceeded(
                f"messages[{index}].text has {len(text)} characters, over max_message_chars "
                f"({MAX_MESSAGE_CHARS}); split it into several messages",
                field="messages.text",
            )
        if content_type and not _KEY.match(content_type):
            raise InvalidArgument(f"messages[{index}].content_type is not a plain name", field="messages.content_type")


def normalize_tags(tags: list[str]) -> list[str]:
    """Lowercased, trimmed, deduplicated in first-seen order; at most MAX_TAGS."""
    seen: list[str] = []
    for raw in tags:
        tag = raw.strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS or not _TAG.match(tag):
            raise InvalidArgument(
                f"tag {tag[:40]!r} must be 1-{MAX_TAG_CHARS} of a-z, 0-9, '.', '_', ':', '/', '-' "
                "starting with a letter or digit",
                field="tags",
            )
        if tag not in seen:
            seen.append(tag)
    if len(seen) > MAX_TAGS:
        raise LimitExceeded(f"at most {MAX_TAGS} tags (max_tags); {len(seen)} given", field="tags")
    return seen


def validate_title(title: str) -> str | None:
    title = title.strip()
    if len(title) > MAX_TITLE_CHARS:
        raise LimitExceeded(f"title is longer than {MAX_TITLE_CHARS} characters", field="title")
    return title or None


def validate_idempotency_key(key: str) -> str:
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS or (key and not _KEY.match(key)):
        raise InvalidArgument(
            f"idempotency_key must be up to {MAX_IDEMPOTENCY_KEY_CHARS} of letters, digits, '.', '_', ':', '/', '-'",
            field="idempotency_key",
        )
    return key


def request_hash(operation: str, *parts: Any) -> str:
    """What an idempotency key stands for: the same key with a different hash is a conflict."""
    body = json.dumps([operation, *parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def parse_conversation_id(value: str, field: str = "conversation_id") -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgument(f"{field} must be a conversation id (a UUID)", field=field) from None


def parse_base_revision(value: int) -> int:
    if value < 1:
        raise InvalidArgument(
            "base_revision is required: the head revision you last read (list_revisions or the last receipt)",
            field="base_revision",
        )
    return value


def snippet(text: str, query: str, width: int = 240) -> str:
    """A window of the text around the first query word found in it."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    starts = [lowered.find(word.lower()) for word in query.split() if len(word) > 2]
    start = min((s for s in starts if s >= 0), default=0)
    begin = max(0, start - width // 3)
    window = flat[begin : begin + width]
    return ("…" if begin else "") + window + ("…" if begin + width < len(flat) else "")
