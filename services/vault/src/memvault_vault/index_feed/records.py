"""The index feed's record types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Document:
    """A memory (or an archived message) as the indexer embeds it, with what the index holds of it now."""

    memory_id: str
    """The memory's id, or the message's."""
    vault_id: str
    content: str
    content_hash: str
    created_at: datetime
    indexed_hash: str
    indexed_model: str
    kind: str = "memory"
    """memory or message."""
    conversation_id: str = ""
    revision: int = 0


@dataclass(frozen=True)
class IndexReport:
    """The indexer's word on one memory: indexed (with this hash and model) or failed (with an error)."""

    memory_id: str
    content_hash: str
    model: str
    state: str
    error: str
    kind: str = "memory"
