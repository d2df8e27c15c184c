"""What backup, restore and export hand around: plain records, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class VaultRef:
    """A vault by id and name, once the caller's right to it is settled."""

    id: str
    name: str


@dataclass(frozen=True)
class ExportRow:
    """One active memory as a readable export shows it."""

    type: str
    content: str
    key: str | None
    scope: str | None
    tags: list[str]
    source: str
    client: str
    trust: str
    created_at: datetime
    updated_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    id: str


@dataclass(frozen=True)
class BackupChunk:
    """The next bytes of a backup file, and how far through the vault's memories it is."""

    data: bytes
    memories_done: int
    memories_total: int


@dataclass(frozen=True)
class RestoreReport:
    """What a restore wrote, per kind of record, and what the caller should know."""

    vault: str
    counts: dict[str, int]
    embeddings_kept: int
    reembedding: int
    notices: list[str] = field(default_factory=list)
