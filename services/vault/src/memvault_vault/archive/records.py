"""The archive's record types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ConversationRecord:
    id: str
    title: str | None
    tags: list[str]
    tags_version: int
    head_revision: int
    message_count: int
    content_sha256: str
    source: str
    external_id: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Receipt:
    conversation_id: str
    revision: int
    content_sha256: str
    message_count: int
    durable: bool = True
    indexing: str = "pending"
    replayed: bool = False
    verified: ConversationRecord | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "revision": self.revision,
            "content_sha256": self.content_sha256,
            "message_count": self.message_count,
        }


@dataclass(frozen=True)
class RevisionRecord:
    number: int
    parent: int | None
    kind: str
    message_count: int
    content_sha256: str
    created_at: datetime
    created_by: str
    head: bool


@dataclass(frozen=True)
class MessageRecord:
    id: str
    node_id: str
    parent_node_id: str | None
    role: str
    content_type: str
    text: str
    content: Any
    created_at: datetime | None
    active: bool
    position: int


@dataclass(frozen=True)
class MessageHit:
    conversation_id: str
    revision: int
    message_id: str
    title: str | None
    role: str
    text: str
    score: float
    position: int


@dataclass(frozen=True)
class ImportRecord:
    id: str
    state: str
    filename: str
    size: int
    sha256: str
    total: int
    next_index: int
    imported: int
    updated: int
    duplicates: int
    failed: int
    parts: int
    received: int
    duplicate_of: str | None
    error: str
    failures: list[tuple[str, str]] = field(default_factory=list)
    format: str = "chatgpt"
    created_at: datetime | None = None


@dataclass(frozen=True)
class ArchiveStats:
    conversations: int
    revisions: int
    messages: int
    tags: int
    raw_bytes: int
    by_source: dict[str, int]
    imports: dict[str, int]
