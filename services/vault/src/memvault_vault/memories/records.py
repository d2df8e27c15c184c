"""Memories' record types: what a write sends to the store and gets back, and what explain shows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from memvault_vault.domain.duplicates import Decision, DuplicateCheck
from memvault_vault.domain.memory import Draft, Memory, MemoryType, Status, Trust, WriteResult, review_date


@dataclass(frozen=True)
class Candidate:
    """A memory about to be inserted; its id is chosen beforehand so later items of an import can link to it."""

    id: str
    content: str
    content_hash: str
    draft: Draft
    status: Status
    trust: Trust
    outcome: str = "stored"
    similar_to: tuple[str, ...] = ()
    supersedes: str | None = None


@dataclass(frozen=True)
class Existing:
    """A memory that already holds some text (id empty: the text is excluded)."""

    id: str
    status: Status


@dataclass(frozen=True)
class BatchRecord:
    """The import batch a write belongs to: its source, how many items it had, and each outcome's count."""

    source: str
    item_count: int
    outcomes: dict[str, int]


@dataclass(frozen=True)
class WriteReport:
    batch_id: str | None
    inserted: set[str]
    raced: dict[str, Existing]
    """Candidate id -> the memory that took its text between the caller's check and the write."""
    conflicts: dict[str, tuple[str, ...]]
    """Candidate id -> other active memories with the same key and scope."""


@dataclass(frozen=True)
class ExclusionRecord:
    """A text refused from being stored again: only its hash is kept."""

    content_hash: str
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class HistoryRecord:
    version: int
    change: str
    actor: str
    at: datetime
    cause: str
    snapshot: dict[str, Any]


@dataclass(frozen=True)
class WriteSummary:
    """What a remember or import did: one result per item, in order."""

    results: list[WriteResult]
    batch_id: str | None
    check: DuplicateCheck
    notices: list[str]


@dataclass(frozen=True)
class WritePlan:
    decisions: dict[int, Decision]
    """Item index -> what to do with it, for items that reached the duplicate check."""
    fresh: list[int]
    """Item indexes of the texts compared for similarity, in order (decisions name them by position)."""
    statuses: dict[str, Status]
    check: DuplicateCheck
    notices: list[str]


@dataclass(frozen=True)
class SupersedeOutcome:
    result: WriteResult
    applied: bool
    flagged: list[str]
    check: DuplicateCheck
    notices: list[str]


@dataclass(frozen=True)
class HistoryStep:
    version: int
    change: str
    actor: str
    at: datetime
    cause: str
    changed_fields: list[str]
    status: Status
    content: str
    """The text at this version, when it changed (or on creation); empty otherwise."""


@dataclass(frozen=True)
class Explanation:
    memory: Memory
    history: list[HistoryStep]
    related: list[tuple[str, Memory]]
    notes: list[str]
    missing: list[str]


def memory_from_row(row: asyncpg.Record, vault: str) -> Memory:
    """A `memory` row (every column `Memory` has) as a Memory of the vault named `vault`."""

    def ids(values: Sequence[Any] | None) -> tuple[str, ...]:
        return tuple(str(value) for value in values or ())

    def optional_id(value: Any) -> str | None:
        return None if value is None else str(value)

    return Memory(
        id=str(row["id"]),
        vault=vault,
        content=row["content"],
        content_hash=row["content_hash"],
        type=MemoryType(row["type"]),
        status=Status(row["status"]),
        trust=Trust(row["trust"]),
        key=row["key"],
        scope=row["scope"],
        tags=tuple(row["tags"]),
        source=row["source"],
        client=row["client"],
        confidence=row["confidence"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        review_after=row["review_after"],
        expires_at=row["expires_at"],
        depends_on=ids(row["depends_on"]),
        supersedes=optional_id(row["supersedes"]),
        superseded_by=optional_id(row["superseded_by"]),
        similar_to=ids(row["similar_to"]),
        batch_id=optional_id(row["batch_id"]),
        version=row["version"],
        pinned=row["pinned"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        status_reason=row["status_reason"],
        flagged_reason=row["flagged_reason"],
        flagged_at=row["flagged_at"],
        reviewed_at=row["reviewed_at"],
        # Rows read by a query that names its columns (or an older schema) may not carry it.
        metadata=json.loads(row.get("metadata") or "{}") or None,
    )


def row_of(candidate: Candidate, now: datetime) -> dict[str, Any]:
    """A candidate as the row `insert` writes (dates as ISO text, for jsonb_to_recordset)."""
    draft = candidate.draft
    start = draft.valid_from or now
    return {
        "id": candidate.id,
        "content": candidate.content,
        "content_hash": candidate.content_hash,
        "type": draft.type.value,
        "key": draft.key,
        "scope": draft.scope,
        "tags": list(draft.tags),
        "source": draft.source,
        "trust": candidate.trust.value,
        "confidence": draft.confidence,
        "status": candidate.status.value,
        "valid_from": draft.valid_from.isoformat() if draft.valid_from else None,
        "valid_to": draft.valid_to.isoformat() if draft.valid_to else None,
        "review_after": (ra.isoformat() if (ra := review_date(draft, start)) else None),
        "expires_at": draft.expires_at.isoformat() if draft.expires_at else None,
        "depends_on": list(draft.depends_on),
        "similar_to": list(candidate.similar_to),
        "supersedes": candidate.supersedes,
        "context": draft.context,
        "metadata": draft.metadata or {},
    }
