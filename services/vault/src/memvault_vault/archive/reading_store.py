"""The SQL of the archive's reads for agents: search candidates, the context around a message,
pinned pages of several conversations, titles, and counts. Every query is filtered by the vault id."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from memvault_core.errors import NotFound
from memvault_vault.archive import keyword_sql
from memvault_vault.archive.records import ArchiveStats, ConversationRecord, MessageHit, MessageRecord
from memvault_vault.archive.store import _SUMMARY, _summary
from memvault_vault.database import Database, VaultAccess

_MESSAGE = (
    "SELECT m.id::text AS id, m.node_id, m.parent_node_id, m.role, m.content_type, m.text, m.content::text"
    " AS content, m.created_at, rm.active, rm.position, m.message_key"
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
        r["message_key"],
    )


class ArchiveReadStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def keyword_candidates(
        self, vault: VaultAccess, query: str, tags_all: list[str], tags_any: list[str], limit: int
    ) -> list[tuple[str, float, str | None]]:
        """(message id, keyword rank, its text when the vector index does not hold it yet) of the best
        messages of head revisions sharing a word with the query, ranked as recall ranks memories; at
        scale, the clauses past keyword_sql.FULL_RANK_BUDGET are sampled (keyword_sql)."""
        rows = await self._pool.fetch(
            keyword_sql.KEYWORD_CANDIDATES,
            vault.id,
            query,
            tags_all,
            tags_any,
            limit,
            keyword_sql.FULL_RANK_BUDGET,
            keyword_sql.COMMON_WORD_SAMPLE,
            keyword_sql.DENSE_SHARE,
        )
        return [(r["id"], float(r["rank"]), r["pending"]) for r in rows]

    async def hits(
        self, vault: VaultAccess, query: str, message_ids: Sequence[str], tags_all: list[str], tags_any: list[str]
    ) -> dict[str, tuple[MessageHit, datetime, float]]:
        """These messages as references with their creation time and keyword rank for the query, when a
        head revision of the vault lists them and the tags match (an older revision's message, another
        vault's, or one of a deleted conversation is left out)."""
        if not message_ids:
            return {}
        rows = await self._pool.fetch(
            keyword_sql.RANKED_HITS, vault.id, query, tags_all, tags_any, list(dict.fromkeys(message_ids))
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
                float(r["rank"]),
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

    async def by_ids(
        self,
        vault: VaultAccess,
        conversation_id: str,
        revision: int,
        node_ids: list[str],
        keys: list[str],
        message_ids: list[str],
    ) -> list[MessageRecord]:
        """The messages of a revision (every branch) whose source node id, stable key or id is asked for."""
        rows = await self._pool.fetch(
            f"{_MESSAGE} WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3"
            " AND (m.node_id = ANY($4::text[]) OR m.message_key = ANY($5::text[]) OR m.id = ANY($6::uuid[]))"
            " ORDER BY rm.position",
            conversation_id,
            vault.id,
            revision,
            node_ids,
            keys,
            message_ids,
        )
        return [_message(r) for r in rows]

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
