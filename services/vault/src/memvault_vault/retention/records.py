"""Retention's record types."""

from __future__ import annotations

from dataclasses import dataclass


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
