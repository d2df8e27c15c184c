"""The archive's SQL, as one `ArchiveStore` in three parts: writing revisions (revision_store.py),
uploads and import jobs (import_store.py), and here the reads of conversations, their revisions and
messages. Revisions are written once and never changed; the head is the only thing that moves. Every
query is filtered by the vault id."""

from __future__ import annotations

import json

import asyncpg

from memvault_core.errors import NotFound
from memvault_vault.archive.import_store import ArchiveImportStore
from memvault_vault.archive.records import ConversationRecord, MessageRecord, RevisionRecord
from memvault_vault.database import VaultAccess

_SUMMARY = """
    SELECT c.id::text AS id, c.title, c.tags, c.tags_version, c.head_revision, c.source,
           coalesce(c.external_id, '') AS external_id, c.created_at, c.updated_at,
           r.message_count, r.content_sha256, c.derived_from::text AS derived_from
    FROM archive_conversation c
    JOIN archive_revision r ON r.conversation_id = c.id AND r.number = c.head_revision
"""


def _summary(row: asyncpg.Record) -> ConversationRecord:
    return ConversationRecord(
        id=row["id"],
        title=row["title"],
        tags=list(row["tags"]),
        tags_version=row["tags_version"],
        head_revision=row["head_revision"],
        message_count=row["message_count"],
        content_sha256=row["content_sha256"],
        source=row["source"],
        external_id=row["external_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        derived_from=json.loads(row["derived_from"]) if row["derived_from"] else None,
    )


class ArchiveStore(ArchiveImportStore):
    """The archive's SQL: revisions, imports (the parts it builds on) and reads."""

    async def conversation(self, vault: VaultAccess, conversation_id: str) -> ConversationRecord:
        row = await self._pool.fetchrow(_SUMMARY + " WHERE c.id = $1 AND c.vault_id = $2", conversation_id, vault.id)
        if row is None:
            raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
        return _summary(row)

    async def conversations(
        self, vault: VaultAccess, tags_all: list[str], tags_any: list[str], limit: int, offset: int
    ) -> list[ConversationRecord]:
        rows = await self._pool.fetch(
            _SUMMARY + " WHERE c.vault_id = $1 AND c.tags @> $2::text[]"
            " AND (cardinality($3::text[]) = 0 OR c.tags && $3::text[])"
            " ORDER BY c.updated_at DESC, c.id DESC LIMIT $4 OFFSET $5",
            vault.id,
            tags_all,
            tags_any,
            limit,
            offset,
        )
        return [_summary(r) for r in rows]

    async def revisions(
        self, vault: VaultAccess, conversation_id: str, limit: int, before: int
    ) -> list[RevisionRecord]:
        head = (await self.conversation(vault, conversation_id)).head_revision
        rows = await self._pool.fetch(
            "SELECT number, parent, kind, message_count, content_sha256, created_at, created_by FROM archive_revision"
            " WHERE conversation_id = $1 AND vault_id = $2 AND ($3 = 0 OR number < $3) ORDER BY number DESC LIMIT $4",
            conversation_id,
            vault.id,
            before,
            limit,
        )
        return [
            RevisionRecord(
                r["number"],
                r["parent"],
                r["kind"],
                r["message_count"],
                r["content_sha256"],
                r["created_at"],
                r["created_by"],
                r["number"] == head,
            )
            for r in rows
        ]

    async def has_revision(self, vault: VaultAccess, conversation_id: str, revision: int) -> bool:
        return bool(
            await self._pool.fetchval(
                "SELECT 1 FROM archive_revision WHERE conversation_id = $1 AND vault_id = $2 AND number = $3",
                conversation_id,
                vault.id,
                revision,
            )
        )

    async def messages(
        self, vault: VaultAccess, conversation_id: str, revision: int, *, active_only: bool, after: int, limit: int
    ) -> list[MessageRecord]:
        rows = await self._pool.fetch(
            "SELECT m.id::text AS id, m.node_id, m.parent_node_id, m.role, m.content_type, m.text, m.content::text"
            " AS content, m.created_at, rm.active, rm.position, m.message_key"
            " FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
            " WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3 AND rm.position > $4"
            " AND (NOT $5 OR rm.active) ORDER BY rm.position LIMIT $6",
            conversation_id,
            vault.id,
            revision,
            after,
            active_only,
            limit,
        )
        return [
            MessageRecord(
                r["id"],
                r["node_id"],
                r["parent_node_id"],
                r["role"],
                r["content_type"],
                r["text"],
                r["content"],
                r["created_at"],
                r["active"],
                r["position"],
                r["message_key"],
            )
            for r in rows
        ]
