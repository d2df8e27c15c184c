"""The guide's record types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class GuideRecord:
    text: str
    version: int
    default_revision: str
    updated_by: str
    updated_at: datetime | None


@dataclass(frozen=True)
class GuideView:
    vault: str
    text: str
    version: int
    newer_default_available: bool
    default_revision: str
    default_text: str
    updated_at: datetime | None
    updated_by: str
