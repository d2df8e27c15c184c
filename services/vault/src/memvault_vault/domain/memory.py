"""What a memory is, and the rules of its lifecycle; the checks on what callers send are in inputs.py."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from memvault_core import limits
from memvault_core.errors import Conflict


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
    SIMILAR = "similar"
    DUPLICATE = "duplicate"
    EXCLUDED = "excluded"
    SECRET = "secret"  # noqa: S105 (an outcome name)
    INVALID = "invalid"


class ApprovalMode(StrEnum):
    REVIEW = "review"
    AUTO = "auto"


RECALLABLE_BY_DEFAULT = (Status.PROPOSED, Status.ACTIVE)
AS_OF_STATUSES = (Status.PROPOSED, Status.ACTIVE, Status.SUPERSEDED, Status.INVALIDATED)
"""Recall as of a past time: whatever was believed then, even if it has been replaced since."""

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
    valid_to: datetime | None = None
    review_after: datetime | None = None
    no_review: bool = False
    expires_at: datetime | None = None
    depends_on: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    """Free-form JSON object the writer attached (size-capped by `parse_metadata`)."""
    context: str | None = None
    """In an import sent as a sequence (a conversation, a document in parts): the item before this
    one ("" for the first). Search reads a memory together with it; None for memories on their own."""

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
    status_reason: str | None = None
    flagged_reason: str | None = None
    flagged_at: datetime | None = None
    reviewed_at: datetime | None = None
    metadata: dict[str, Any] | None = None

    def expired(self, at: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= at

    def valid_at(self, at: datetime) -> bool:
        """Believed true at `at`: written by then, inside its validity window, and never rejected."""
        if self.status is Status.REJECTED or (self.created_at is not None and self.created_at > at):
            return False
        if self.valid_from is not None and self.valid_from > at:
            return False
        return self.valid_to is None or self.valid_to > at


@dataclass(frozen=True)
class WriteResult:
    outcome: Outcome
    memory_id: str
    status: Status
    message: str = ""
    index: int = 0
    similar_to: tuple[str, ...] = ()
    conflicts_with: tuple[str, ...] = ()
    match: str = ""
    cosine: float = 0.0


@dataclass(frozen=True)
class MemoryWarning:
    kind: str
    memory_id: str
    related: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class RecallHit:
    memory: Memory
    score: float
    may_conflict_with: tuple[str, ...] = ()
    conflicts_with: tuple[str, ...] = ()
    meaning_score: float | None = None
    """The cosine of its meaning to the query's; None when only keywords were searched or it was not scored."""
    keyword_score: float = 0.0
    """Its keyword rank relative to the best keyword hit, 0 to 1."""


@dataclass(frozen=True)
class RecallPage:
    hits: list[RecallHit]
    mode: str
    warnings: list[str] = field(default_factory=list)
    next_cursor: str = ""
    memory_warnings: list[MemoryWarning] = field(default_factory=list)


def initial_status(approval_mode: str, propose: bool) -> Status:
    """Agent writes wait for review unless the vault trusts them (auto mode); proposals always wait."""
    if propose or approval_mode != "auto":
        return Status.PROPOSED
    return Status.ACTIVE


def review_after(memory_type: MemoryType, start: datetime) -> datetime | None:
    delay = REVIEW_AFTER[memory_type]
    return None if delay is None else start + delay


def review_date(draft: Draft, start: datetime) -> datetime | None:
    """The draft's own review date, none if it asked for none, else the default for its type."""
    if draft.no_review:
        return None
    return draft.review_after or review_after(draft.type, start)


def require_status(memory: Memory, allowed: tuple[Status, ...], action: str) -> None:
    """Refuse an action on a memory whose status does not allow it, saying what would work."""
    if memory.status in allowed:
        return
    hint = {
        Status.SUPERSEDED: f"it was superseded by {memory.superseded_by}; act on that one instead",
        Status.REJECTED: "it was rejected; write the memory again if it is true after all",
        Status.INVALIDATED: "it was invalidated; write what is true now as a new memory",
        Status.ACTIVE: "it is already active",
        Status.PROPOSED: "it is still proposed; approve or reject it first",
    }[memory.status]
    raise Conflict(f"cannot {action} memory {memory.id}: {hint}", field="memory_id")


def check_version(memory: Memory, expected: int) -> None:
    if expected and memory.version != expected:
        raise Conflict(
            f"memory {memory.id} is at version {memory.version}, not {expected}: it changed since you read it. "
            "Read it again (explain_memory) and retry",
            field="expected_version",
        )


def fit_page(found: Sequence[tuple[Memory, float]], limit: int) -> tuple[list[tuple[Memory, float]], bool]:
    """The first `limit` results within the result byte budget, and whether more remain."""
    page: list[tuple[Memory, float]] = []
    size = 0
    for memory, score in found[:limit]:
        size += len(memory.content.encode())
        if page and size > limits.MAX_RESULT_BYTES:
            return page, True
        page.append((memory, score))
    return page, len(found) > limit
