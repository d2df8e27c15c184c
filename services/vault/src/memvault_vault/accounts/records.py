"""Accounts' record types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class AccountMember:
    """One account's role in a vault."""

    subject: str
    display_name: str
    role: str
    since: datetime
