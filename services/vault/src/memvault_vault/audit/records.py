"""The audit log's record types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class AuditRecord:
    id: int
    vault: str
    actor: str
    action: str
    target: str
    details_json: str
    at: datetime
