"""What a memory is, and the rules for writing one."""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded


class MemoryType(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    CONSTRAINT = "constraint"
    ASSUMPTION = "assumption"
    OBSERVATION = "observation"
    INSTRUCTION = "instruction"


class Status(StrEnum):
    PROPOSED = "proposed"
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"
    INVALIDATED = "invalidated"


class Trust(StrEnum):
    STATED = "stated"
    INFERRED = "inferred"
    IMPORTED = "imported"
    SYNCED = "synced"


class Outcome(StrEnum):
    STORED = "stored"
    DUPLICATE = "duplicate"
    EXCLUDED = "excluded"


RECALLABLE_BY_DEFAULT = (Status.PROPOSED, Status.ACTIVE)

# How long until a memory of each type should be checked again; None: never.
REVIEW_AFTER: dict[MemoryType, timedelta | None] = {
    MemoryType.ASSUMPTION: timedelta(days=30),
    MemoryType.CONSTRAINT: timedelta(days=90),
    MemoryType.FACT: timedelta(days=180),
    MemoryType.DECISION: timedelta(days=180),
    MemoryType.PREFERENCE: timedelta(days=365),
    MemoryType.OBSERVATION: None,
    MemoryType.INSTRUCTION: None,
}

_WHITESPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """The form two texts share when they differ only in case and whitespace."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()


@dataclass(frozen=True)
class Draft:
    """A memory as a caller proposes it, before the vault stores it."""

    content: str
    type: MemoryType = MemoryType.FACT
    key: str | None = None
    scope: str | None = None
    tags: tuple[str, ...] = ()
    source: str = ""
    trust: Trust | None = None
    confidence: float | None = None
    valid_from: datetime | None = None

    @property
    def hash(self) -> str:
        return content_hash(self.content)


@dataclass(frozen=True)
class Memory:
    id: str
    vault: str
    content: str
    content_hash: str
    type: MemoryType
    status: Status
    trust: Trust
    key: str | None = None
    scope: str | None = None
    tags: tuple[str, ...] = ()
    source: str = ""
    client: str = ""
    confidence: float | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    review_after: datetime | None = None
    expires_at: datetime | None = None
    depends_on: tuple[str, ...] = ()
    supersedes: str | None = None
    superseded_by: str | None = None
    similar_to: tuple[str, ...] = ()
    batch_id: str | None = None
    version: int = 1
    pinned: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class WriteResult:
    outcome: Outcome
    memory_id: str
    status: Status
    message: str = ""
    index: int = 0


@dataclass(frozen=True)
class RecallHit:
    memory: Memory
    score: float


@dataclass(frozen=True)
class RecallPage:
    hits: list[RecallHit]
    mode: str
    warnings: list[str] = field(default_factory=list)
    next_cursor: str = ""


def _prefix(index: int | None) -> str:
    return "" if index is None else f"items[{index}]."


def validate_draft(draft: Draft, index: int | None = None) -> Draft:
    """Check a draft against every rule and limit; return it tidied (trimmed text, lower-case tags).

    `index` names the item of a bulk call in error messages.
    """
    at = _prefix(index)
    content = draft.content.strip()
    if not content:
        raise InvalidArgument(f"{at}content is empty; write the memory as one or more sentences", field=f"{at}content")
    if len(content) > limits.MAX_CONTENT_CHARS:
        parts = -(-len(content) // limits.MAX_CONTENT_CHARS)
        raise LimitExceeded(
            f"{at}content is {len(content)} characters; the limit is {limits.MAX_CONTENT_CHARS} "
            f"(max_content_chars). Split it into {parts} or more memories of at most "
            f"{limits.MAX_CONTENT_CHARS} characters, one idea each",
            field=f"{at}content",
            limit=limits.MAX_CONTENT_CHARS,
        )
    tags = tuple(dict.fromkeys(tag.strip().lower() for tag in draft.tags))
    if len(tags) > limits.MAX_TAGS:
        raise LimitExceeded(
            f"{at}tags has {len(tags)} tags; the limit is {limits.MAX_TAGS} (max_tags). Keep the most specific ones",
            field=f"{at}tags",
            limit=limits.MAX_TAGS,
        )
    for tag in tags:
        if not tag or len(tag) > limits.MAX_TAG_CHARS or any(ch.isspace() for ch in tag):
            raise InvalidArgument(
                f"{at}tags contains {tag[: limits.MAX_TAG_CHARS]!r}; a tag is 1 to {limits.MAX_TAG_CHARS} characters "
                "without spaces, such as 'homelab' or 'project:memvault'",
                field=f"{at}tags",
            )
    for name, value, limit in (
        ("key", draft.key, limits.MAX_KEY_CHARS),
        ("scope", draft.scope, limits.MAX_KEY_CHARS),
        ("source", draft.source, limits.MAX_SOURCE_CHARS),
    ):
        if value is not None and len(value) > limit:
            raise LimitExceeded(
                f"{at}{name} is {len(value)} characters; the limit is {limit}. Shorten it",
                field=f"{at}{name}",
                limit=limit,
            )
    if draft.confidence is not None and not 0 < draft.confidence <= 1:
        raise InvalidArgument(
            f"{at}confidence must be above 0 and at most 1, such as 0.8; leave it out when unknown",
            field=f"{at}confidence",
        )
    key = (draft.key or "").strip() or None
    scope = (draft.scope or "").strip() or None
    if scope and not key:
        raise InvalidArgument(
            f"{at}scope needs a key; a scope narrows where a keyed memory applies", field=f"{at}scope"
        )
    return Draft(
        content=content,
        type=draft.type,
        key=key,
        scope=scope,
        tags=tags,
        source=draft.source.strip(),
        trust=draft.trust,
        confidence=draft.confidence,
        valid_from=draft.valid_from,
    )


def validate_bulk(drafts: list[Draft]) -> list[Draft]:
    """Validate every item of a bulk call before any is written."""
    if not drafts:
        raise InvalidArgument("items is empty; send at least one memory", field="items")
    if len(drafts) > limits.MAX_BULK_ITEMS:
        raise LimitExceeded(
            f"items has {len(drafts)} memories; the limit is {limits.MAX_BULK_ITEMS} per call (max_bulk_items). "
            f"Send them in {-(-len(drafts) // limits.MAX_BULK_ITEMS)} calls of at most {limits.MAX_BULK_ITEMS}",
            field="items",
            limit=limits.MAX_BULK_ITEMS,
        )
    return [validate_draft(draft, index) for index, draft in enumerate(drafts)]


def validate_query(query: str) -> str:
    query = query.strip()
    if not query:
        raise InvalidArgument("query is empty; describe what you want to remember, in words", field="query")
    if len(query) > limits.MAX_QUERY_CHARS:
        raise LimitExceeded(
            f"query is {len(query)} characters; the limit is {limits.MAX_QUERY_CHARS} (max_query_chars). "
            "Ask about one thing at a time",
            field="query",
            limit=limits.MAX_QUERY_CHARS,
        )
    return query


def validate_page_size(limit: int, default: int, maximum: int, field_name: str = "limit") -> int:
    if limit == 0:
        return default
    if limit < 0:
        raise InvalidArgument(f"{field_name} must be positive, at most {maximum}", field=field_name)
    if limit > maximum:
        raise LimitExceeded(
            f"{field_name} is {limit}; at most {maximum} per page. Ask for {maximum} and follow next_cursor",
            field=field_name,
            limit=maximum,
        )
    return limit


def parse_memory_id(value: str, field_name: str = "memory_id") -> str:
    """A memory id in canonical form, or InvalidArgument naming the field."""
    try:
        return str(uuid.UUID(value.strip()))
    except (ValueError, AttributeError):
        raise InvalidArgument(
            f"{field_name} {value[:60]!r} is not a memory id; ids look like "
            "'3f2b8c4e-9a1d-4e5f-8b7c-2d1e0f9a8b7c' and come from recall or list_memories",
            field=field_name,
        ) from None


def initial_status(approval_mode: str, propose: bool) -> Status:
    """Agent writes wait for review unless the vault trusts them (auto mode); proposals always wait."""
    if propose or approval_mode != "auto":
        return Status.PROPOSED
    return Status.ACTIVE


def review_after(memory_type: MemoryType, start: datetime) -> datetime | None:
    delay = REVIEW_AFTER[memory_type]
    return None if delay is None else start + delay
