"""The index feed's SQL: documents for the indexer, its reports, and the writes it has not indexed yet."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import asyncpg

from memvault_vault.database import Database, VaultAccess
from memvault_vault.index_feed.records import Document, IndexReport


class IndexFeedStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool
        self._statistics = database.statistics

    async def lag(self) -> tuple[int, float]:
        """Memories, in every vault, whose current text the index does not hold yet (failed ones
        not counted), and the age in seconds of the oldest such text (from its last change)."""
        row = await self._pool.fetchrow(
            """
            SELECT count(*) AS pending, coalesce(extract(epoch FROM now() - min(m.updated_at)), 0) AS age
            FROM index_pending p JOIN memory m ON m.id = p.memory_id
            LEFT JOIN index_state s ON s.memory_id = p.memory_id AND s.state = 'failed'
            WHERE s.memory_id IS NULL
            """
        )
        return int(row["pending"]), float(row["age"])

    async def unindexed_for_compare(self, vault: VaultAccess, limit: int) -> tuple[list[tuple[str, str]], int]:
        """(id, text) of the newest memories a duplicate check compares with whose text the index does not hold
        yet, and how many such memories there are (failed ones not counted: they are reported elsewhere)."""
        rows = await self._pool.fetch(
            """
            SELECT m.id::text, memvault_index_text(m.content, m.context, m.valid_from) AS content,
                   count(*) OVER () AS total
            FROM index_pending p JOIN memory m ON m.id = p.memory_id
            LEFT JOIN index_state s ON s.memory_id = m.id
            WHERE p.vault_id = $1 AND m.status IN ('proposed', 'active', 'superseded')
              AND (s.memory_id IS NULL OR s.state <> 'failed')
              AND p.created_at > now() - interval '1 hour'
            ORDER BY p.created_at DESC
            LIMIT $2
            """,
            vault.id,
            limit,
        )
        return [(row["id"], row["content"]) for row in rows], (int(rows[0]["total"]) if rows else 0)

    async def unindexed_recent(self, vault: VaultAccess, limit: int) -> list[tuple[str, str]]:
        """(id, text) of the newest memories whose current text the index does not hold yet."""
        rows = await self._pool.fetch(
            """
            SELECT m.id::text, memvault_index_text(m.content, m.context, m.valid_from) AS content
            FROM index_pending p JOIN memory m ON m.id = p.memory_id
            WHERE p.vault_id = $1 AND m.status IN ('proposed', 'active')
              -- Only recent writes: older unindexed memories are failures, which keyword search covers.
              AND p.created_at > now() - interval '15 minutes'
            ORDER BY p.created_at DESC
            LIMIT $2
            """,
            vault.id,
            limit,
        )
        return [(row["id"], row["content"]) for row in rows]

    async def unindexed_older(self, vault: VaultAccess) -> int:
        """Memories not in the index that recall cannot score from their text (written over 15 minutes ago):
        a restore or reindex still catching up, or failures. Keyword search alone finds them."""
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM index_pending WHERE vault_id = $1 AND created_at <= now() - interval '15 minutes'",
                vault.id,
            )
        )

    async def documents(self, ids: Sequence[str]) -> list[Document]:
        return _documents(
            await self._pool.fetch(
                "SELECT m.id::text AS memory_id, m.vault_id::text, memvault_index_text(m.content, m.context, m.valid_from)"
                " AS content, m.index_hash AS content_hash, m.created_at,"
                " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
                " FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed'"
                " WHERE m.id = ANY($1::uuid[])",
                list(ids),
            )
        )

    async def documents_after(self, after_id: str | None, limit: int) -> list[Document]:
        return _documents(
            await self._pool.fetch(
                "SELECT m.id::text AS memory_id, m.vault_id::text, memvault_index_text(m.content, m.context, m.valid_from)"
                " AS content, m.index_hash AS content_hash, m.created_at,"
                " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
                " FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed'"
                " WHERE $1::uuid IS NULL OR m.id > $1::uuid ORDER BY m.id LIMIT $2",
                after_id,
                limit,
            )
        )

    async def count_documents(self) -> int:
        """Every memory of the installation: what a full reindex goes through (its progress total)."""
        return int(await self._pool.fetchval("SELECT count(*) FROM memory"))

    async def report_indexed(self, reports: Sequence[IndexReport]) -> None:
        """Record (memory id, content hash, model, state, error) for memories that still exist; a memory
        whose current text is now indexed is no longer pending.

        The memory's row is locked first, as a delete locks it before its index rows; a memory being
        deleted right now is skipped, not waited for (the wait would end in a foreign-key error, or
        in a deadlock with the delete when both reach the index rows in opposite order)."""
        # One statement for the whole report (it was one per memory): the indexer reports a batch of up to
        # 256 events at a time. A memory reported twice in one call keeps its last state (a failure counts
        # as one attempt); its pending row goes when any of its reports says its current text is indexed.
        if not reports:
            return
        await self._pool.execute(
            """
            WITH given AS (
                SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[])
                    WITH ORDINALITY AS g (memory_id, content_hash, model, state, error, position)
            ), latest AS (
                SELECT DISTINCT ON (memory_id) * FROM given ORDER BY memory_id, position DESC
            ), present AS (
                SELECT m.id, m.vault_id, m.index_hash FROM memory m
                WHERE m.id IN (SELECT memory_id FROM given) ORDER BY m.id
                FOR KEY SHARE SKIP LOCKED
            ), reported AS (
                INSERT INTO index_state (memory_id, vault_id, content_hash, model, state, attempts, last_error)
                SELECT m.id, m.vault_id, l.content_hash, l.model, l.state,
                       CASE WHEN l.state = 'failed' THEN 1 ELSE 0 END, nullif(l.error, '')
                FROM latest l JOIN present m ON m.id = l.memory_id
                ORDER BY m.id
                ON CONFLICT (memory_id) DO UPDATE SET
                    content_hash = EXCLUDED.content_hash, model = EXCLUDED.model, state = EXCLUDED.state,
                    attempts = CASE WHEN EXCLUDED.state = 'failed' THEN index_state.attempts + 1 ELSE 0 END,
                    last_error = EXCLUDED.last_error, updated_at = now()
                RETURNING memory_id
            )
            DELETE FROM index_pending p USING reported r, given g, present m
            WHERE p.memory_id = r.memory_id AND g.memory_id = r.memory_id AND m.id = r.memory_id
              AND g.state = 'indexed' AND m.index_hash = g.content_hash
            """,
            [r.memory_id for r in reports],
            [r.content_hash for r in reports],
            [r.model for r in reports],
            [r.state for r in reports],
            [r.error for r in reports],
        )
        self._statistics.wrote("index_state", "index_pending")

    # --- archived messages (docs/archive.md): immutable, so indexed once per model --------------------

    _MESSAGES = (
        "SELECT m.id::text AS memory_id, m.vault_id::text, d.content, md5(d.content) AS content_hash,"
        " coalesce(m.created_at, c.created_at) AS created_at, m.conversation_id::text,"
        " (SELECT min(rm.revision) FROM archive_revision_message rm WHERE rm.message_id = m.id) AS revision,"
        " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
        " FROM archive_message m JOIN archive_conversation c ON c.id = m.conversation_id"
        # What is embedded: the date, the text and the message before it, as for a memory of a sequence.
        " CROSS JOIN LATERAL (SELECT coalesce(memvault_index_text(m.text, coalesce(m.context, ''),"
        " coalesce(m.created_at, c.created_at)),"
        " m.text) AS content) d"
        " LEFT JOIN archive_message_index s ON s.message_id = m.id AND s.state = 'indexed'"
    )

    async def message_documents(self, ids: Sequence[str]) -> list[Document]:
        rows = await self._pool.fetch(self._MESSAGES + " WHERE m.id = ANY($1::uuid[]) AND m.text <> ''", list(ids))
        return _messages(rows)

    async def message_documents_after(self, after_id: str | None, limit: int) -> list[Document]:
        rows = await self._pool.fetch(
            self._MESSAGES + " WHERE ($1::uuid IS NULL OR m.id > $1::uuid) AND m.text <> '' ORDER BY m.id LIMIT $2",
            after_id,
            limit,
        )
        return _messages(rows)

    async def count_messages(self) -> int:
        return int(await self._pool.fetchval("SELECT count(*) FROM archive_message WHERE text <> ''"))

    async def report_messages(self, reports: Sequence[IndexReport]) -> None:
        """Record what the indexer did with archived messages that still exist (a deleted one is skipped)."""
        await self._pool.executemany(
            """
            INSERT INTO archive_message_index (message_id, vault_id, content_hash, model, state, attempts, last_error)
            SELECT m.id, m.vault_id, $2, $3, $4, CASE WHEN $4 = 'failed' THEN 1 ELSE 0 END, nullif($5, '')
            FROM archive_message m WHERE m.id = $1::uuid
            FOR KEY SHARE SKIP LOCKED
            ON CONFLICT (message_id) DO UPDATE SET
                content_hash = EXCLUDED.content_hash, model = EXCLUDED.model, state = EXCLUDED.state,
                attempts = CASE WHEN EXCLUDED.state = 'failed' THEN archive_message_index.attempts + 1 ELSE 0 END,
                last_error = EXCLUDED.last_error, updated_at = now()
            """,
            [(r.memory_id, r.content_hash, r.model, r.state, r.error) for r in reports],
        )
        self._statistics.wrote("archive_message_index")


def _messages(rows: Iterable[asyncpg.Record]) -> list[Document]:
    return [
        Document(
            row["memory_id"],
            row["vault_id"],
            row["content"],
            row["content_hash"],
            row["created_at"],
            row["indexed_hash"],
            row["indexed_model"],
            kind="message",
            conversation_id=row["conversation_id"],
            revision=int(row["revision"] or 1),
        )
        for row in rows
    ]


def _documents(rows: Iterable[asyncpg.Record]) -> list[Document]:
    return [
        Document(
            row["memory_id"],
            row["vault_id"],
            row["content"],
            row["content_hash"],
            row["created_at"],
            row["indexed_hash"],
            row["indexed_model"],
        )
        for row in rows
    ]
