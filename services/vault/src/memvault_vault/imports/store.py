"""Imports' SQL: the batches of a vault, and undoing one."""

from __future__ import annotations

import json
from datetime import datetime

import asyncpg

from memvault_core.errors import Conflict
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess, lock_vault
from memvault_vault.imports.records import BatchInfo, UndoReport
from memvault_vault.memories.steps import write_history
from memvault_vault.outbox import events
from memvault_vault.outbox.store import enqueue

# A memory put back exactly as a history snapshot holds it (every column but the generated one).
_RESTORE = """
    UPDATE memory m SET
        (content, content_hash, type, key, scope, tags, source, client, trust, confidence, status, valid_from,
         valid_to, review_after, expires_at, depends_on, supersedes, superseded_by, similar_to, batch_id, version,
         pinned, created_at, updated_at, status_reason, flagged_reason, flagged_at, reviewed_at)
      = (SELECT s.content, s.content_hash, s.type, s.key, s.scope, s.tags, s.source, s.client, s.trust,
                s.confidence, s.status, s.valid_from, s.valid_to, s.review_after, s.expires_at, s.depends_on,
                s.supersedes, s.superseded_by, s.similar_to, s.batch_id, s.version, s.pinned, s.created_at,
                s.updated_at, s.status_reason, s.flagged_reason, s.flagged_at, s.reviewed_at
         FROM jsonb_populate_record(NULL::memory, $2::jsonb) s)
    WHERE m.id = $1::uuid
"""


class ImportStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def batches(self, vault: VaultAccess, limit: int, before: tuple[datetime, str] | None) -> list[BatchInfo]:
        rows = await self._pool.fetch(
            "SELECT id::text, source, actor, item_count, stored_count, created_at, undone_at, outcomes::text"
            " FROM import_batch WHERE vault_id = $1"
            " AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))"
            " ORDER BY created_at DESC, id DESC LIMIT $4",
            vault.id,
            before[0] if before else None,
            before[1] if before else None,
            limit,
        )
        return [_batch(row) for row in rows]

    async def undo_batch(self, vault: VaultAccess, batch_id: str, actor: str) -> UndoReport | None:
        """Delete the batch's memories and put back every other memory it changed; None if no such batch.

        A memory outside the batch that only the batch changed (superseded by one of its memories,
        flagged because of one) is restored exactly as it was. One that changed since for another
        reason keeps that change and only loses its links to the batch.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            row = await conn.fetchrow(
                "SELECT id::text, source, actor, item_count, stored_count, created_at, undone_at, outcomes::text"
                " FROM import_batch WHERE vault_id = $1 AND id = $2::uuid FOR UPDATE",
                vault.id,
                batch_id,
            )
            if row is None:
                return None
            if row["undone_at"] is not None:
                raise Conflict(
                    f"import {batch_id} was already undone at {row['undone_at'].isoformat()}", field="batch_id"
                )
            ids = [
                r["id"]
                for r in await conn.fetch(
                    "SELECT id::text FROM memory WHERE vault_id = $1 AND batch_id = $2::uuid", vault.id, batch_id
                )
            ]
            touched = await conn.fetch(
                """
                SELECT h.memory_id::text AS id, min(h.version) AS first
                FROM memory_history h
                WHERE h.vault_id = $1 AND h.cause = ANY($2::uuid[]) AND h.memory_id <> ALL($2::uuid[])
                GROUP BY h.memory_id
                """,
                vault.id,
                ids,
            )
            restored = 0
            kept: list[str] = []
            for t in touched:
                other = await conn.fetchval(
                    "SELECT count(*) FROM memory_history WHERE memory_id = $1::uuid AND version >= $2"
                    " AND (cause IS NULL OR cause <> ALL($3::uuid[]))",
                    t["id"],
                    t["first"],
                    ids,
                )
                before = await conn.fetchval(
                    "SELECT snapshot::text FROM memory_history WHERE memory_id = $1::uuid AND version < $2"
                    " ORDER BY version DESC, id DESC LIMIT 1",
                    t["id"],
                    t["first"],
                )
                if other == 0 and before is not None:
                    await conn.execute(_RESTORE, t["id"], before)
                    await conn.execute(
                        "DELETE FROM memory_history WHERE memory_id = $1::uuid AND version >= $2", t["id"], t["first"]
                    )
                    restored += 1
                else:
                    kept.append(t["id"])
            # Memories written or changed since that still point at the batch: links removed, the rest kept.
            linked = await conn.fetch(
                """
                UPDATE memory m SET
                    similar_to = ARRAY(SELECT x FROM unnest(m.similar_to) x WHERE x <> ALL($2::uuid[])),
                    depends_on = ARRAY(SELECT x FROM unnest(m.depends_on) x WHERE x <> ALL($2::uuid[])),
                    status = CASE WHEN m.superseded_by = ANY($2::uuid[]) THEN 'active' ELSE m.status END,
                    valid_to = CASE WHEN m.superseded_by = ANY($2::uuid[]) THEN NULL ELSE m.valid_to END,
                    superseded_by = CASE WHEN m.superseded_by = ANY($2::uuid[]) THEN NULL ELSE m.superseded_by END,
                    supersedes = CASE WHEN m.supersedes = ANY($2::uuid[]) THEN NULL ELSE m.supersedes END,
                    version = m.version + 1, updated_at = now()
                WHERE m.vault_id = $1 AND m.id <> ALL($2::uuid[])
                  AND (m.similar_to && $2::uuid[] OR m.depends_on && $2::uuid[]
                       OR m.superseded_by = ANY($2::uuid[]) OR m.supersedes = ANY($2::uuid[]))
                RETURNING m.id::text
                """,
                vault.id,
                ids,
            )
            unlinked = [r["id"] for r in linked]
            await write_history(conn, unlinked, "import undone", actor)
            kept = list(dict.fromkeys([*kept, *unlinked]))
            await conn.execute(
                "DELETE FROM memory_history WHERE vault_id = $1 AND memory_id = ANY($2::uuid[])", vault.id, ids
            )
            await conn.execute("DELETE FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])", vault.id, ids)
            await enqueue(conn, [events.memory_forgotten(memory_id, vault.id) for memory_id in ids])
            undone = await conn.fetchrow(
                "UPDATE import_batch SET undone_at = now(), undone_by = $2 WHERE id = $1::uuid"
                " RETURNING id::text, source, actor, item_count, stored_count, created_at, undone_at, outcomes::text",
                batch_id,
                actor,
            )
            await append_audit(
                conn,
                vault.id,
                actor,
                "batch.undo",
                batch_id,
                {"removed": len(ids), "restored": restored, "kept_changes": len(kept)},
            )
            return UndoReport(_batch(undone), len(ids), restored, kept)


def _batch(row: asyncpg.Record) -> BatchInfo:
    return BatchInfo(
        row["id"],
        row["source"],
        row["actor"],
        row["item_count"],
        row["stored_count"],
        row["created_at"],
        row["undone_at"],
        json.loads(row["outcomes"] or "{}"),
    )
