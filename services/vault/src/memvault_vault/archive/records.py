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
    derived_from: dict[str, Any] | None = None


@dataclass(frozen=True)
class Receipt:
    conversation_id: str
    revision: int
    content_sha256: str
    message_count: int
    durable: bool = True
    indexing: str = "pending"
    indexing_pending: int = 0
    replayed: bool = False
    verified: ConversationRecord | None = None
    # Keyed upserts and copies (archive/writes.py): what changed, where a copy came from, and with
    # verify the messages this write committed, read back (bounded; `omitted` names the rest).
    changes: dict[str, int] = field(default_factory=dict)
    derived_from: dict[str, Any] | None = None
    readback: list[MessageRecord] = field(default_factory=list)
    omitted: list[Any] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        kept: dict[str, Any] = {
            "conversation_id": self.conversation_id,
            "revision": self.revision,
            "content_sha256": self.content_sha256,
            "message_count": self.message_count,
        }
        if self.changes:
            kept["changes"] = self.changes
        if self.derived_from:
            kept["derived_from"] = self.derived_from
        return kept


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
    key: str | None = None


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
    retrying: int = 0
    """Failed conversations a retry asked for again that the job has not reached yet."""


@dataclass(frozen=True)
class MessageIndexFailure:
    """An archived message the indexer gave up on (a failed message index job)."""

    message_id: str
    conversation_id: str
    error: str
    attempts: int
    failed_at: datetime


@dataclass(frozen=True)
class CanonicalHit:
    """One hit of the operator's keyword search over the canonical store (`archive search`)."""

    kind: str  # "message" or "memory"
    vault: str
    id: str  # the conversation's or the memory's id
    revision: int  # the conversation's revision listing the message, or the memory's version
    message_id: str  # "" for a memory
    role: str  # the message's role, or the memory's status
    snippet: str
    rank: float


@dataclass(frozen=True)
class ArchiveStats:
    conversations: int
    revisions: int
    messages: int
    indexed: int
    pending: int
    failed: int
    imports: int
    imports_running: int
    index_model: str
    last_errors: list[str]
    tags: int
    raw_bytes: int
    by_source: dict[str, int]
    imports_by_state: dict[str, int]


@dataclass(frozen=True)
class SearchPage:
    query: str
    """The query searched (a continuation's comes from its cursor)."""
    hits: list[MessageHit]
    next_cursor: str
    mode: str
    warnings: list[str]
    used_bytes: int
    max_bytes: int


@dataclass(frozen=True)
class Oversized:
    message_id: str
    position: int
    bytes: int


@dataclass(frozen=True)
class BatchResult:
    request_index: int
    conversation_id: str
    revision: int = 0
    title: str | None = None
    messages: list[MessageRecord] = field(default_factory=list)
    oversized: list[Oversized] = field(default_factory=list)
    complete: bool = False
    error: str = ""
    message_count: int = 0


@dataclass(frozen=True)
class BatchPage:
    results: list[BatchResult]
    next_cursor: str
    used_bytes: int
    max_bytes: int
    completed: int
    remaining: int


# --- the vault map (vault_map) -------------------------------------------------------------------


@dataclass(frozen=True)
class MapGroup:
    tag: str
    memories: int
    conversations: int
    own_memories: int = 0
    own_conversations: int = 0


@dataclass(frozen=True)
class MapItem:
    kind: str
    id: str
    label: str
    group: str
    tags: list[str]
    sources: int = 0
    derived_from: dict[str, Any] | None = None


@dataclass(frozen=True)
class MapLink:
    kind: str
    from_id: str
    to_id: str
    to_label: str
    to_drawn: bool


@dataclass
class VaultMap:
    groups: list[MapGroup] = field(default_factory=list)
    items: list[MapItem] = field(default_factory=list)
    links: list[MapLink] = field(default_factory=list)
    memories: int = 0
    conversations: int = 0
    other_tags: int = 0
