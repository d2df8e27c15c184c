"""Recall's record types."""

from __future__ import annotations

from dataclasses import dataclass

from memvault_vault.domain.memory import Memory


@dataclass(frozen=True)
class RecallRow:
    """A memory on a recall page, with the ids of active memories linked to it as similar and of
    active memories sharing its key and scope."""

    memory: Memory
    similar: tuple[str, ...]
    same_key: tuple[str, ...]
