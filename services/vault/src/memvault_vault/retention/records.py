"""Retention's record types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Purged:
    """What one vault lost to retention in one run."""

    vault: str
    rejected: int = 0
    superseded: int = 0
    invalidated: int = 0
    audit_entries: int = 0

    @property
    def memories(self) -> int:
        return self.rejected + self.superseded + self.invalidated


@dataclass(frozen=True)
class RetentionPlan:
    """How this installation runs retention: the vault's in-process loop every `interval_seconds`
    (0: off), else a CronJob running `memvault-vault retention` on `schedule` (cron syntax, as the
    chart passes it in MEMVAULT_VAULT__RETENTION_SCHEDULE); neither: only "clean up now"."""

    interval_seconds: float = 0.0
    schedule: str = ""

    @property
    def runner(self) -> str:
        if self.interval_seconds > 0:
            return "in-process"
        return "cronjob" if self.schedule else "off"


@dataclass(frozen=True)
class RetentionOutlook:
    """For one vault: how retention runs, when it last ran and runs next, what it removes then."""

    runner: str  # in-process, cronjob or off
    interval_seconds: float
    schedule: str
    last_run: datetime | None
    next_run: datetime | None
    due: Purged  # what the next run removes, as things stand
    audit_entries_capped: bool  # due.audit_entries is a lower bound (counting stops at AUDIT_COUNT_CAP)
    next_due_at: datetime | None  # when the next memory or audit entry not due yet becomes due
