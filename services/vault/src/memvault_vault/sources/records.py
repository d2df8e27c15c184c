"""Tracked sources' record types: the source, its pending and past changes, and what a check did."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memvault_vault.domain.sources import ChangeStatus, SourceKind, SourceMode


@dataclass(frozen=True)
class TrackedSource:
    id: str
    vault_id: str
    vault: str
    memory_id: str
    kind: SourceKind
    location: str
    selector: str
    template: str
    mode: SourceMode
    interval_seconds: int
    baseline_hash: str
    baseline_value: Any
    tracked_by: str
    created_at: datetime
    next_check_at: datetime
    last_checked_at: datetime | None = None
    last_error: str = ""
    error_since: datetime | None = None
    pending_changes: int = 0


@dataclass(frozen=True)
class SourceChange:
    id: str
    vault: str
    source_id: str
    memory_id: str
    kind: SourceKind
    location: str
    old_hash: str
    new_hash: str
    new_value: Any
    has_value: bool
    status: ChangeStatus
    detected_at: datetime
    resolved_at: datetime | None = None
    resolved_by: str = ""
    replacement_id: str = ""
    proposed_statement: str = ""
    """For a JSON change, the statement the template renders from the new value (never for text)."""
    old_value: Any = None
    """For a JSON change, the value it replaces (text keeps hashes only)."""
    has_old_value: bool = False
    """False for text, and for changes recorded before the old value was kept."""


@dataclass(frozen=True)
class CheckResult:
    """What one check of one source did: `outcome` is unchanged, reverted, pending, already_pending,
    superseded, proposed (the replacement waits for the owner) or error."""

    source_id: str
    vault: str
    memory_id: str
    outcome: str
    message: str = ""
    change_id: str = ""
    replacement_id: str = ""
    flagged_dependents: tuple[str, ...] = ()
    previous_error: str = ""
    """The source's error before this check ('' if its last check went well)."""


@dataclass(frozen=True)
class SourceHealth:
    sources: list[TrackedSource] = field(default_factory=list)
    errors: int = 0
    overdue: int = 0
    pending_changes: int = 0
