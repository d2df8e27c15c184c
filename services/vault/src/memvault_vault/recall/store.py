"""Recall's SQL: full-text search ranked with BM25's idf, the vector hits' keyword ranks, and the page read whole."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.filters import MemoryFilter
from memvault_vault.domain.filters import sql as filter_sql
from memvault_vault.domain.fusion import Found
from memvault_vault.domain.memory import MemoryType, Status
from memvault_vault.memories.records import memory_from_row
from memvault_vault.recall import keyword_sql
from memvault_vault.recall.keyword_sql import CUT, KEYWORD_RANK_BUDGET, RANK, RARE_LEXEME_DOCS
from memvault_vault.recall.records import RecallRow

_TERMS = keyword_sql.terms("memory")

# The columns `_memory` reads: recall fetches them only for the memories it returns, never the
# search vector or the index hash.
_COLUMNS = """
    m.id, m.content, m.content_hash, m.type, m.status, m.trust, m.key, m.scope, m.tags, m.source, m.client,
    m.confidence, m.valid_from, m.valid_to, m.review_after, m.expires_at, m.depends_on, m.supersedes,
    m.superseded_by, m.similar_to, m.batch_id, m.version, m.pinned, m.created_at, m.updated_at,
    m.status_reason, m.flagged_reason, m.flagged_at, m.reviewed_at
"""

# Recall's filters, shared by both of its searches: $3 statuses, $4 types (NULL: any), $5 tags (all
# of them), $6 include expired, $7 as of (NULL: now); each query adds the MemoryFilter's
# (`filter_sql`) after its own parameters. As of a past moment, a memory counts only if it
# was written by then, valid then, and never rejected; it is expired if it had expired by then.
_RECALL_FILTERS = """
          AND m.status = ANY($3::text[])
          AND ($4::text[] IS NULL OR m.type = ANY($4::text[]))
          AND m.tags @> $5::text[]
          AND ($6::bool OR m.expires_at IS NULL OR m.expires_at > coalesce($7::timestamptz, now()))
          AND ($7::timestamptz IS NULL OR (
              m.status <> 'rejected' AND m.created_at <= $7
              AND (m.valid_from IS NULL OR m.valid_from <= $7)
              AND (m.valid_to IS NULL OR m.valid_to > $7)))
"""

# Which memories are ranked: those matching the lexemes of `cut` (keyword_sql.CUT); when these would
# still match more than KEYWORD_RANK_BUDGET memories (their document counts summed), only memories
# holding lexemes of two different query words, or one rare lexeme, are ranked: ranking reads every
# matched row, and in a large vault of similar memories that is tens of thousands of rows for a
# three-word query.
_KEYWORD = f"""
    WITH {_TERMS}, {CUT},
    matching AS MATERIALIZED (
        SELECT (CASE
            WHEN (SELECT coalesce(sum(df), 0) FROM (SELECT DISTINCT lexeme, df FROM cut) AS c) <= {KEYWORD_RANK_BUDGET}
              OR (SELECT count(DISTINCT word) FROM cut) < 2
                THEN (SELECT coalesce(string_agg(DISTINCT literal, ' | '), '') FROM cut)
            ELSE (SELECT string_agg(DISTINCT clause, ' | ') FROM (
                SELECT '(' || a.literal || ' & ' || b.literal || ')' AS clause
                FROM cut a JOIN cut b ON a.lexeme < b.lexeme AND a.word <> b.word
                UNION ALL
                SELECT literal FROM cut WHERE df <= {RARE_LEXEME_DOCS}
            ) AS clauses)
        END)::tsquery AS query
    ),
    ranked AS (
        SELECT m.id, m.status, m.created_at, {RANK} AS rank
        FROM memory m, matching
        WHERE m.vault_id = $1
          AND m.search @@ matching.query
          {_RECALL_FILTERS}
          {filter_sql(10)}
        ORDER BY rank DESC, m.created_at DESC, m.id
        LIMIT $8 OFFSET $9
    )
    SELECT id::text, status, created_at, rank FROM ranked
    ORDER BY rank DESC, created_at DESC, id
"""  # noqa: S608 - joins constant SQL fragments, no input


def _found(row: asyncpg.Record) -> Found:
    return Found(row["id"], Status(row["status"]), row["created_at"], float(row["rank"]))


def _recall_filter_args(
    statuses: Sequence[Status],
    types: Sequence[MemoryType],
    tags: Sequence[str],
    include_expired: bool,
    as_of: datetime | None,
) -> tuple[Any, ...]:
    """The parameters $3 to $7 of `_RECALL_FILTERS`."""
    return ([s.value for s in statuses], [t.value for t in types] or None, list(tags), include_expired, as_of)


class RecallStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def keyword_search(
        self,
        vault: VaultAccess,
        query: str,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
        limit: int,
        offset: int,
        include_expired: bool = False,
        as_of: datetime | None = None,
        filters: MemoryFilter = MemoryFilter(),  # noqa: B008 (frozen: never changed)
    ) -> list[Found]:
        """The vault's best full-text matches that pass recall's filters, best first (read whole with `recall_page`)."""
        rows = await self._pool.fetch(
            _KEYWORD,
            vault.id,
            query,
            *_recall_filter_args(statuses, types, tags, include_expired, as_of),
            limit,
            offset,
            *filters.sql_args(),
        )
        return [_found(row) for row in rows]

    async def recently_replaced(
        self, vault: VaultAccess, ids: Sequence[str], since: datetime
    ) -> dict[str, list[tuple[str, datetime]]]:
        """For each of `ids`: the memories it superseded at or after `since`, with when (oldest first)."""
        if not ids:
            return {}
        found: dict[str, list[tuple[str, datetime]]] = {}
        for row in await self._pool.fetch(
            "SELECT superseded_by::text AS new, id::text AS old, valid_to FROM memory"
            " WHERE vault_id = $1 AND superseded_by = ANY($2::uuid[]) AND status = 'superseded' AND valid_to >= $3"
            " ORDER BY valid_to, id",
            vault.id,
            list(ids),
            since,
        ):
            found.setdefault(row["new"], []).append((row["old"], row["valid_to"]))
        return found

    async def has_search_terms(self, query: str) -> bool:
        """False when every word of the query is a stopword (such as 'what' or 'the')."""
        count = await self._pool.fetchval("SELECT length(to_tsvector('english', $1))", query)
        return bool(count)

    async def memories_by_ids(
        self,
        vault: VaultAccess,
        ids: Sequence[str],
        query: str,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
        include_expired: bool = False,
        as_of: datetime | None = None,
        filters: MemoryFilter = MemoryFilter(),  # noqa: B008 (frozen: never changed)
    ) -> list[Found]:
        """These memories of the vault that pass recall's filters, each with its keyword rank (0 when no word matches)."""
        if not ids:
            return []
        rows = await self._pool.fetch(
            f"""
            WITH {_TERMS}
            SELECT m.id::text, m.status, m.created_at, {RANK} AS rank
            FROM memory m
            WHERE m.vault_id = $1
              AND m.id = ANY($8::uuid[])
              {_RECALL_FILTERS}
              {filter_sql(9)}
            """,  # noqa: S608 - constant SQL fragments, no input
            vault.id,
            query,
            *_recall_filter_args(statuses, types, tags, include_expired, as_of),
            list(ids),
            *filters.sql_args(),
        )
        return [_found(row) for row in rows]

    async def recall_page(self, vault: VaultAccess, ids: Sequence[str]) -> dict[str, RecallRow]:
        """The memories recall returns, whole, each with the active memories linked to it as similar
        (either way) and the active memories sharing its key and scope. A memory deleted since it
        was found is missing."""
        if not ids:
            return {}
        rows = await self._pool.fetch(
            f"""
            SELECT {_COLUMNS},
                   ARRAY(SELECT o.id::text FROM memory o
                         WHERE o.id = ANY(m.similar_to) AND o.vault_id = m.vault_id AND o.status = 'active'
                         UNION
                         SELECT o.id::text FROM memory o
                         WHERE o.similar_to @> ARRAY[m.id] AND o.vault_id = m.vault_id AND o.id <> m.id
                           AND o.status = 'active') AS similar_active,
                   ARRAY(SELECT o.id::text FROM memory o
                         WHERE o.vault_id = m.vault_id AND o.id <> m.id AND o.status = 'active'
                           AND m.key IS NOT NULL AND o.key = m.key AND o.scope IS NOT DISTINCT FROM m.scope) AS same_key
            FROM memory m WHERE m.vault_id = $1 AND m.id = ANY($2::uuid[])
            """,  # noqa: S608 - constant SQL fragments, no input
            vault.id,
            list(ids),
        )
        return {
            str(row["id"]): RecallRow(
                memory_from_row(row, vault.name), tuple(row["similar_active"]), tuple(row["same_key"])
            )
            for row in rows
        }
