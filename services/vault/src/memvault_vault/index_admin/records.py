"""Record types of index maintenance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class IndexFailure:
    memory_id: str
    error: str
    attempts: int
    failed_at: datetime
