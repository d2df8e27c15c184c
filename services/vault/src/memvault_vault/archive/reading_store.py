"""The SQL of the archive's reads for agents: search candidates, the context around a message,
pinned pages of several conversations, titles, and counts. Every query is filtered by the vault id."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from memvault_core.errors import NotFound
from memvault_vault.archive.records import ArchiveStats, ConversationRecord, MessageHit, MessageRecord
from memvault_vault.archive.store import _SUMMARY, _summary
from memvault_vault.database import Database, VaultAccess

_MESSAGE = (
    "SELECT m.id::text AS id, m.node_id, m.parent_node_id, m.role, m.content_type, m.text, m.content::text"
    " AS content, m.created_at, rm.active, rm.position"
    " FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
)


def _message(r: asyncpg.Record) -> MessageRecord:
    return MessageRecord(
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
    )


RANK_BUDGET = 2_000
"""Messages (estimated) whose every match is ranked; the query's commoner words beyond it are sampled."""
COMMON_WORD_SAMPLE = 1_000
"""Messages ranked of each sampled word and of each pair of them."""
RANKED_DEEP = 200
"""The best ranked matches filtered to head revisions (then the best `limit` kept)."""
COMMON_WORDS_REFRESH_SECONDS = 300.0

# $1 vault, $2 query, $3 tags (all), $4 tags (any), $5 limit, $6/$7 the common lexemes and their
# estimated messages, $8 RANK_BUDGET, $9 COMMON_WORD_SAMPLE, $10 the estimate of a lexeme the statistics
# do not list (fewer than the least common listed), ($11 RANKED_DEEP).
_MATCHES = """
    words AS (
        SELECT w.lexeme, coalesce(e.est, $10::float8) AS est
        FROM (SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', $2))) AS w
        LEFT JOIN unnest($6::text[], $7::float8[]) AS e (lexeme, est) ON e.lexeme = w.lexeme
    ),
    split AS (SELECT lexeme, sum(est) OVER (ORDER BY est, lexeme) <= $8 AS ranked FROM words),
    q AS (
        SELECT replace(plainto_tsquery('english', $2)::text, ' & ', ' | ')::tsquery AS q,
               (SELECT string_agg(quote_literal(lexeme), ' | ') FROM split WHERE ranked)::tsquery AS every
    ),
    sampled AS (
        SELECT quote_literal(lexeme)::tsquery AS t FROM split WHERE NOT ranked
        UNION ALL
        SELECT (quote_literal(a.lexeme) || ' & ' || quote_literal(b.lexeme))::tsquery FROM split a
        JOIN split b ON a.lexeme < b.lexeme WHERE NOT a.ranked AND NOT b.ranked
    ),
    tagged AS (SELECT cardinality($3::text[]) + cardinality($4::text[]) > 0 AS wanted),
    matches AS (
        (SELECT m.id, m.conversation_id, m.search FROM archive_message m, q, tagged
         WHERE q.every IS NOT NULL AND m.vault_id = $1 AND m.search @@ q.every
           AND (NOT tagged.wanted OR EXISTS (SELECT 1 FROM archive_conversation c WHERE c.id = m.conversation_id
                AND c.tags @> $3::text[] AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[]))))
        UNION ALL
        (SELECT f.id, f.conversation_id, f.search FROM sampled CROSS JOIN LATERAL (
            SELECT m.id, m.conversation_id, m.search FROM archive_message m, q, tagged
            WHERE m.vault_id = $1 AND m.search @@ sampled.t AND (q.every IS NULL OR NOT m.search @@ q.every)
              AND (NOT tagged.wanted OR EXISTS (SELECT 1 FROM archive_conversation c WHERE c.id = m.conversation_id
                   AND c.tags @> $3::text[] AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])))
            LIMIT $9) AS f)
    )
"""
_RANKED = """,
    ranked AS (
        SELECT u.id, u.conversation_id, ts_rank_cd(u.search, q.q) AS rank
        FROM (SELECT DISTINCT ON (id) id, conversation_id, search FROM matches ORDER BY id) AS u, q
        WHERE u.search @@ q.q ORDER BY rank DESC, u.id {deep}
    )
    SELECT r.id::text AS id, r.rank, CASE WHEN EXISTS (SELECT 1 FROM archive_message_index s
        WHERE s.message_id = r.id AND s.state = 'indexed') THEN NULL
        ELSE (SELECT coalesce(memvault_index_text(m.text, coalesce(m.context, ''), m.created_at), m.text)
              FROM archive_message m WHERE m.id = r.id) END AS pending
    FROM ranked r
    WHERE EXISTS (SELECT 1 FROM archive_revision_message rm JOIN archive_conversation c
        ON c.id = rm.conversation_id AND rm.revision = c.head_revision
        WHERE rm.message_id = r.id AND rm.conversation_id = r.conversation_id AND c.vault_id = $1)
    ORDER BY r.rank DESC, r.id LIMIT $5
"""
_KEYWORD = "WITH" + _MATCHES + _RANKED
# The same parameters but RANKED_DEEP ($5 is declared, unused).
_COUNTED = ", q2 AS (SELECT $5::int AS unused) SELECT count(DISTINCT id) FROM matches, q WHERE matches.search @@ q.q"
_KEYWORD_COUNT = "WITH" + _MATCHES + _COUNTED


class ArchiveReadStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool
        self._common: dict[str, float] = {}
        self._common_at = -COMMON_WORDS_REFRESH_SECONDS

    async def keyword_candidates(
        self, vault: VaultAccess, query: str, tags_all: list[str], tags_any: list[str], limit: int
    ) -> list[tuple[str, float, str | None]]:
        """(message id, full-text rank, its text when the vector index does not hold it yet) of the best
        messages of head revisions sharing a word with the query.

        The query's words are joined by OR: a message sharing some of a question's words is a candidate,
        ranked by how many and how close (ts_rank_cd). Ranking is the cost: a GIN index finds the
        messages holding a word quickly, but ts_rank_cd then reads every one of them, and a common word
        is in a large share of a big archive (tests/bench/archive_search.py). So the query's words are
        taken rarest first, by the table's statistics (a word they do not list counts as the least common
        one they do), while the messages they are estimated to be in stay within RANK_BUDGET: every
        message holding one of them is ranked. Of each other word, and of each pair of them, the first
        COMMON_WORD_SAMPLE messages are ranked (all of them when it is in fewer: a sampled rare word
        loses nothing). Without statistics (a small or new archive) every match is ranked. The best
        RANKED_DEEP are then filtered to head revisions (a message only an older revision lists is
        rare: replaced or edited away); should that leave too few, every match is filtered first."""
        common = await self._common_words()
        unlisted = min(common.values(), default=0.0)
        args: tuple[Any, ...] = (vault.id, query, tags_all, tags_any, limit, list(common), list(common.values()))
        args += (RANK_BUDGET, COMMON_WORD_SAMPLE, unlisted)
        rows = await self._pool.fetch(_KEYWORD.format(deep="LIMIT $11"), *args, RANKED_DEEP)
        if len(rows) < limit and await self._pool.fetchval(_KEYWORD_COUNT, *args) > RANKED_DEEP:
            rows = await self._pool.fetch(_KEYWORD.format(deep=""), *args)
        return [(r["id"], float(r["rank"]), r["pending"]) for r in rows]

    async def _common_words(self) -> dict[str, float]:
        """Lexemes the statistics of archive_message.search list as common, with the number of messages
        each is estimated to be in (ANALYZE, autovacuum's or a manual one, keeps them; read again every
        few minutes)."""
        now = time.monotonic()
        if now - self._common_at < COMMON_WORDS_REFRESH_SECONDS:
            return self._common
        row = await self._pool.fetchrow(
            "SELECT s.most_common_elems::text::text[] AS words, s.most_common_elem_freqs AS freqs,"
            " c.reltuples FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename"
            " AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = s.schemaname)"
            " WHERE s.schemaname = current_schema() AND s.tablename = 'archive_message' AND s.attname = 'search'"
        )
        found: dict[str, float] = {}
        if row is not None and row["words"] and row["freqs"]:
            rows = max(float(row["reltuples"]), 0.0)
            found = {w: f * rows for w, f in zip(row["words"], row["freqs"], strict=False)}
        self._common, self._common_at = found, now
        return found

    async def hits(
        self, vault: VaultAccess, message_ids: Sequence[str], tags_all: list[str], tags_any: list[str]
    ) -> dict[str, tuple[MessageHit, datetime]]:
        """These messages as references, when a head revision of the vault lists them and the tags match
        (an older revision's message, another vault's, or one of a deleted conversation is left out)."""
        # Driven from the ids, one message at a time (LATERAL): a plan made for any parameters (asyncpg's
        # prepared statements get one after five calls) otherwise starts from the conversations matching
        # the tags, which without tags is every message of the vault (seconds at 1,000,000).
        rows = await self._pool.fetch(
            "SELECT m.id::text AS id, m.text, m.role, h.conversation_id, h.title, h.head_revision, h.position,"
            " coalesce(m.created_at, h.created_at) AS created_at"
            " FROM unnest($2::uuid[]) AS wanted (id)"
            " JOIN archive_message m ON m.id = wanted.id AND m.vault_id = $1"
            " CROSS JOIN LATERAL (SELECT c.id::text AS conversation_id, c.title, c.head_revision, rm.position,"
            " c.created_at FROM archive_revision_message rm"
            " JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision"
            " WHERE rm.message_id = m.id AND c.vault_id = $1 AND c.tags @> $3::text[]"
            " AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])"
            " ORDER BY rm.position LIMIT 1) AS h",
            vault.id,
            list(dict.fromkeys(message_ids)),
            tags_all,
            tags_any,
        )
        return {
            r["id"]: (
                MessageHit(
                    r["conversation_id"],
                    r["head_revision"],
                    r["id"],
                    r["title"],
                    r["role"],
                    r["text"],
                    0.0,
                    r["position"],
                ),
                r["created_at"],
            )
            for r in rows
        }

    async def locate(self, vault: VaultAccess, message_id: str) -> str:
        """The conversation a message of the vault belongs to."""
        found = await self._pool.fetchval(
            "SELECT conversation_id::text FROM archive_message WHERE id = $1 AND vault_id = $2", message_id, vault.id
        )
        if found is None:
            raise NotFound(f"no message {message_id} in vault '{vault.name}'", field="message_id")
        return str(found)

    async def around(
        self, vault: VaultAccess, conversation_id: str, revision: int, message_id: str, before: int, after: int
    ) -> tuple[int, list[MessageRecord]] | None:
        """(position of the message, the messages of the active timeline around it) at a revision; None when
        the revision does not list the message on its active timeline."""
        position = await self._pool.fetchval(
            "SELECT position FROM archive_revision_message WHERE conversation_id = $1 AND vault_id = $2"
            " AND revision = $3 AND message_id = $4",
            conversation_id,
            vault.id,
            revision,
            message_id,
        )
        if position is None:
            return None
        rows = await self._pool.fetch(
            f"({_MESSAGE} WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3 AND rm.active"
            " AND rm.position < $4 ORDER BY rm.position DESC LIMIT $5)"
            f" UNION ALL ({_MESSAGE} WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3"
            " AND (rm.active OR rm.position = $4) AND rm.position >= $4 ORDER BY rm.position LIMIT $6)",
            conversation_id,
            vault.id,
            revision,
            position,
            before,
            after + 1,
        )
        return int(position), sorted((_message(r) for r in rows), key=lambda m: m.position)

    async def page(
        self, vault: VaultAccess, conversation_id: str, revision: int, *, graph: bool, after: int, limit: int
    ) -> list[MessageRecord]:
        rows = await self._pool.fetch(
            f"{_MESSAGE} WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3"
            " AND rm.position > $4 AND ($5 OR rm.active) ORDER BY rm.position LIMIT $6",
            conversation_id,
            vault.id,
            revision,
            after,
            graph,
            limit,
        )
        return [_message(r) for r in rows]

    async def pinned(self, vault: VaultAccess, conversation_id: str, revision: int) -> tuple[ConversationRecord, int]:
        """The conversation and the revision a read pins (its head for 0); NotFound for another vault's."""
        row = await self._pool.fetchrow(_SUMMARY + " WHERE c.id = $1 AND c.vault_id = $2", conversation_id, vault.id)
        if row is None:
            raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
        record = _summary(row)
        if revision == 0:
            return record, record.head_revision
        exists = await self._pool.fetchval(
            "SELECT 1 FROM archive_revision WHERE conversation_id = $1 AND vault_id = $2 AND number = $3",
            conversation_id,
            vault.id,
            revision,
        )
        if not exists:
            raise NotFound(f"conversation {conversation_id} has no revision {revision}", field="revision")
        return record, revision

    async def count_messages(self, vault: VaultAccess, conversation_id: str, revision: int, graph: bool) -> int:
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM archive_revision_message WHERE conversation_id = $1 AND vault_id = $2"
                " AND revision = $3 AND ($4 OR active)",
                conversation_id,
                vault.id,
                revision,
                graph,
            )
        )

    async def by_titles(self, vault: VaultAccess, titles: list[str], per_title: int) -> list[ConversationRecord]:
        rows = await self._pool.fetch(
            _SUMMARY + " WHERE c.vault_id = $1 AND c.title = ANY($2::text[]) ORDER BY c.updated_at DESC, c.id DESC"
            " LIMIT $3",
            vault.id,
            titles,
            per_title * len(titles),
        )
        return [_summary(r) for r in rows]

    async def stats(self, vault: VaultAccess) -> ArchiveStats:
        row = await self._pool.fetchrow(
            """
            SELECT (SELECT count(*) FROM archive_conversation WHERE vault_id = $1) AS conversations,
                   (SELECT count(*) FROM archive_revision WHERE vault_id = $1) AS revisions,
                   (SELECT count(*) FROM archive_message WHERE vault_id = $1 AND text <> '') AS messages,
                   (SELECT count(*) FROM archive_message_index WHERE vault_id = $1 AND state = 'indexed') AS indexed,
                   (SELECT count(*) FROM archive_message_index WHERE vault_id = $1 AND state = 'failed') AS failed,
                   (SELECT count(*) FROM archive_import WHERE vault_id = $1) AS imports,
                   (SELECT count(*) FROM archive_import WHERE vault_id = $1 AND state IN ('queued', 'running'))
                       AS imports_running,
                   (SELECT model FROM archive_message_index WHERE vault_id = $1 AND state = 'indexed'
                    ORDER BY updated_at DESC LIMIT 1) AS model,
                   (SELECT count(DISTINCT t) FROM archive_conversation, unnest(tags) t WHERE vault_id = $1) AS tags,
                   (SELECT coalesce(sum(length(data)), 0) FROM archive_import_chunk WHERE vault_id = $1)
                       AS raw_bytes
            """,
            vault.id,
        )
        errors = await self._pool.fetch(
            "SELECT DISTINCT coalesce(last_error, '') AS error FROM archive_message_index"
            " WHERE vault_id = $1 AND state = 'failed' LIMIT 5",
            vault.id,
        )
        sources = await self._pool.fetch(
            "SELECT source, count(*) FROM archive_conversation WHERE vault_id = $1 GROUP BY source", vault.id
        )
        states = await self._pool.fetch(
            "SELECT state, count(*) FROM archive_import WHERE vault_id = $1 GROUP BY state", vault.id
        )
        return ArchiveStats(
            conversations=int(row["conversations"]),
            revisions=int(row["revisions"]),
            messages=int(row["messages"]),
            indexed=int(row["indexed"]),
            pending=max(0, int(row["messages"]) - int(row["indexed"]) - int(row["failed"])),
            failed=int(row["failed"]),
            imports=int(row["imports"]),
            imports_running=int(row["imports_running"]),
            index_model=row["model"] or "",
            last_errors=[r["error"] for r in errors],
            tags=int(row["tags"]),
            raw_bytes=int(row["raw_bytes"]),
            by_source={r[0]: int(r[1]) for r in sources},
            imports_by_state={r[0]: int(r[1]) for r in states},
        )
