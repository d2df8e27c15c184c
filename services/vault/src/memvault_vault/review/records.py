"""Review's record types."""

from __future__ import annotations

from dataclasses import dataclass

from memvault_vault.domain.memory import Memory


@dataclass(frozen=True)
class Finding:
    memory: Memory
    kinds: list[str]
    related: list[str]
    message: str
