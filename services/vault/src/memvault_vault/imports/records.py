"""Imports' record types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class BatchInfo:
    id: str
    source: str
    actor: str
    item_count: int
    stored_count: int
    created_at: datetime
    undone_at: datetime | None
    outcomes: dict[str, int]


@dataclass(frozen=True)
class UndoReport:
    batch: BatchInfo
    removed: int
    restored: int
    kept_changes: list[str]
