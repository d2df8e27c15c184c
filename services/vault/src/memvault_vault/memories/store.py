"""Memories' SQL: writes (with their history, events and audit entry), reads, and lifecycle changes.

Every query is filtered by vault id. The steps taking a connection, which other concepts (review,
imports) run in their own transactions too, are in steps.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memvault_core.errors import Conflict, NotFound
from memvault_vault.audit.store import append_audit
from memvault_vault.database import MEMORY_TABLES, Database, VaultAccess, lock_vault
from memvault_vault.domain.filters import MemoryFilter
from memvault_vault.domain.filters import sql as filter_sql
from memvault_vault.domain.memory import Memory, MemoryType, Status, check_version, content_hash, require_status
from memvault_vault.memories.records import (
    BatchRecord,
    Candidate,
    ExclusionRecord,
    Existing,
    HistoryRecord,
    WriteReport,
    memory_from_row,
)
from memvault_vault.memories.steps import flag_dependents, insert, locked, retire, write_history
from memvault_vault.outbox import events
from memvault_vault.outbox.store import enqueue


class MemoryStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool
        self._statistics = database.statistics

    async def lookup_texts(self, vault: VaultAccess, hashes: Sequence[str]) -> tuple[dict[str, Existing], set[str]]:
        """Memories already holding these texts (by hash), and the hashes excluded from being stored."""
        rows = await self._pool.fetch(
            "SELECT id::text, content_hash, status FROM memory WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
            vault.id,
            list(hashes),
        )
        excluded = await self._pool.fetch(
            "SELECT content_hash FROM exclusion WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
            vault.id,
            list(hashes),
        )
        return (
            {row["content_hash"]: Existing(row["id"], Status(row["status"])) for row in rows},
            {row["content_hash"] for row in excluded},
        )

    async def existing_ids(self, vault: VaultAccess, ids: Sequence[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT id::text FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])", vault.id, list(ids)
        )
        return {row["id"] for row in rows}

    async def write(
        self,
        vault: VaultAccess,
        candidates: Sequence[Candidate],
        *,
        actor: str,
        client: str,
        batch: BatchRecord | None = None,
        audit: tuple[str, dict[str, Any]] = ("memory.remember", {}),
    ) -> WriteReport:
        """Insert candidates in one transaction (with their history, events, batch and audit entry).

        Writes to one vault are serialised, so a text that another write stored since the caller
        looked is caught here (`raced`) instead of failing the whole call.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            report = await insert(conn, vault, candidates, actor=actor, client=client, batch=batch, audit=audit)
        if batch is not None:  # an import: the tables may have grown by a lot since their statistics
            self._statistics.wrote(*MEMORY_TABLES)
        return report

    async def forget(self, vault: VaultAccess, memory_id: str, actor: str) -> bool:
        """Delete a memory and its history, and exclude its text from being stored again."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            content_hash = await conn.fetchval(
                "DELETE FROM memory WHERE vault_id = $1 AND id = $2::uuid RETURNING content_hash",
                vault.id,
                memory_id,
            )
            if content_hash is None:
                return False
            await conn.execute("DELETE FROM memory_history WHERE vault_id = $1 AND memory_id = $2", vault.id, memory_id)
            await conn.execute(
                "INSERT INTO exclusion (vault_id, content_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                vault.id,
                content_hash,
            )
            await enqueue(conn, [events.memory_forgotten(memory_id, vault.id)])
            await append_audit(conn, vault.id, actor, "memory.forget", memory_id, {})
            return True

    async def exclusions(
        self, vault: VaultAccess, *, limit: int, offset: int, only_hash: str | None
    ) -> tuple[list[ExclusionRecord], int]:
        """This vault's exclusions, newest first, and how many there are."""
        rows = await self._pool.fetch(
            "SELECT content_hash, reason, created_at, count(*) OVER () AS total FROM exclusion"
            " WHERE vault_id = $1 AND ($2::text IS NULL OR content_hash = $2)"
            " ORDER BY created_at DESC, content_hash LIMIT $3 OFFSET $4",
            vault.id,
            only_hash,
            limit,
            offset,
        )
        total = rows[0]["total"] if rows else 0
        if not rows and offset:
            total = await self._pool.fetchval(
                "SELECT count(*) FROM exclusion WHERE vault_id = $1 AND ($2::text IS NULL OR content_hash = $2)",
                vault.id,
                only_hash,
            )
        return [ExclusionRecord(r["content_hash"], r["reason"], r["created_at"]) for r in rows], int(total)

    async def lift_exclusion(self, vault: VaultAccess, content_hash: str, actor: str) -> bool:
        """Let a forgotten text be stored again."""
        async with self._pool.acquire() as conn, conn.transaction():
            reason = await conn.fetchval(
                "DELETE FROM exclusion WHERE vault_id = $1 AND content_hash = $2 RETURNING reason",
                vault.id,
                content_hash,
            )
            if reason is None:
                return False
            await append_audit(conn, vault.id, actor, "exclusion.lift", content_hash, {"reason": reason})
            return True

    async def list_memories(
        self,
        vault: VaultAccess,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
        limit: int,
        after: tuple[datetime, str] | None,
        filters: MemoryFilter = MemoryFilter(),  # noqa: B008 (frozen: never changed)
    ) -> list[Memory]:
        rows = await self._pool.fetch(
            f"""
            SELECT * FROM memory m
            WHERE m.vault_id = $1
              AND ($2::text[] IS NULL OR m.status = ANY($2::text[]))
              AND ($3::text[] IS NULL OR m.type = ANY($3::text[]))
              AND m.tags @> $4::text[]
              AND ($5::timestamptz IS NULL OR (m.created_at, m.id) < ($5, $6::uuid))
              {filter_sql(8)}
            ORDER BY m.created_at DESC, m.id DESC
            LIMIT $7
            """,  # noqa: S608 - constant SQL fragments, no input
            vault.id,
            [s.value for s in statuses] or None,
            [t.value for t in types] or None,
            list(tags),
            after[0] if after else None,
            after[1] if after else None,
            limit,
            *filters.sql_args(),
        )
        return [memory_from_row(row, vault.name) for row in rows]

    async def stats(self, vault: VaultAccess) -> dict[str, Any]:
        """Counts by status and type, the index's state, its latest failures: three reads at once."""
        counts, index, failures = await asyncio.gather(
            self._pool.fetch(
                "SELECT status, type, count(*) FROM memory WHERE vault_id = $1 GROUP BY status, type", vault.id
            ),
            self._pool.fetchrow(
                """
                SELECT count(*) FILTER (WHERE s.state = 'indexed' AND s.content_hash = m.index_hash) AS indexed,
                       count(*) FILTER (WHERE s.state = 'failed') AS failed,
                       count(*) FILTER (WHERE s.memory_id IS NULL OR s.content_hash <> m.index_hash) AS pending
                FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id
                WHERE m.vault_id = $1
                """,
                vault.id,
            ),
            self._pool.fetch(
                "SELECT memory_id::text, coalesce(last_error, '') AS error, attempts FROM index_state"
                " WHERE vault_id = $1 AND state = 'failed' ORDER BY updated_at DESC LIMIT 10",
                vault.id,
            ),
        )
        by_status: dict[str, int] = {}
        by_type: dict[str, int] = {}
        for row in counts:
            by_status[row["status"]] = by_status.get(row["status"], 0) + row["count"]
            by_type[row["type"]] = by_type.get(row["type"], 0) + row["count"]
        return {
            "memories": by_status,
            "memories_by_type": by_type,
            "indexed": index["indexed"],
            "index_failed": index["failed"],
            "index_pending": index["pending"],
            "recent_failures": [dict(row) for row in failures],
        }

    async def get_memory(self, vault: VaultAccess, memory_id: str) -> Memory | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM memory WHERE vault_id = $1 AND id = $2::uuid", vault.id, memory_id
        )
        return None if row is None else memory_from_row(row, vault.name)

    async def memories(self, vault: VaultAccess, ids: Sequence[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        rows = await self._pool.fetch(
            "SELECT * FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])", vault.id, list(dict.fromkeys(ids))
        )
        return {str(row["id"]): memory_from_row(row, vault.name) for row in rows}

    async def texts_and_statuses(self, vault: VaultAccess, ids: Sequence[str]) -> dict[str, tuple[str, Status]]:
        """Text and status of these memories: what the duplicate check compares (an import reads thousands,
        so not whole rows)."""
        if not ids:
            return {}
        rows = await self._pool.fetch(
            "SELECT id::text, content, status FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])",
            vault.id,
            list(dict.fromkeys(ids)),
        )
        return {row["id"]: (row["content"], Status(row["status"])) for row in rows}

    async def require_memory(self, vault: VaultAccess, memory_id: str) -> Memory:
        """The memory, or NotFound telling the caller how to find ids."""
        memory = await self.get_memory(vault, memory_id)
        if memory is None:
            raise NotFound(
                f"no memory {memory_id} in vault '{vault.name}'; find ids with recall or list_memories",
                field="memory_id",
            )
        return memory

    async def supersede(
        self,
        vault: VaultAccess,
        old_id: str,
        candidate: Candidate,
        *,
        apply: bool,
        expected_version: int,
        actor: str,
        client: str,
    ) -> tuple[WriteReport, list[str]]:
        """Store `candidate` as the replacement of `old_id`; with `apply`, the old one is superseded now."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            old = await locked(conn, vault, old_id)
            require_status(old, (Status.ACTIVE, Status.PROPOSED), "supersede")
            check_version(old, expected_version)
            report = await insert(
                conn,
                vault,
                [candidate],
                actor=actor,
                client=client,
                batch=None,
                audit=("memory.supersede", {"old": old_id, "applied": apply}),
            )
            if candidate.id in report.raced:
                existing = report.raced[candidate.id]
                raise Conflict(
                    f"the replacement text is already stored as memory {existing.id or '(forgotten)'} "
                    f"({existing.status.value}); supersede {old_id} with different text, or invalidate it",
                    field="content",
                )
            flagged = await retire(conn, vault, [old_id], by=candidate.id, actor=actor) if apply else []
            return report, flagged

    async def edit(
        self,
        vault: VaultAccess,
        memory_id: str,
        *,
        content: str,
        tags: Sequence[str],
        expected_version: int,
        actor: str,
    ) -> tuple[Memory, list[str]]:
        """Change a memory's text and tags in place (same id, one more version in its history)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            memory = await locked(conn, vault, memory_id)
            require_status(memory, (Status.ACTIVE, Status.PROPOSED), "edit")
            check_version(memory, expected_version)
            new_hash = content_hash(content)
            changed = [
                name
                for name, differs in (
                    ("content", content != memory.content),
                    ("tags", sorted(tags) != sorted(memory.tags)),
                )
                if differs
            ]
            if not changed:
                return memory, []
            if new_hash != memory.content_hash:
                holder = await conn.fetchval(
                    "SELECT id::text FROM memory WHERE vault_id = $1 AND content_hash = $2", vault.id, new_hash
                )
                if holder is not None:
                    raise Conflict(
                        f"the new text is already stored as memory {holder}; if {memory_id} is no longer needed, "
                        "invalidate or forget it",
                        field="content",
                    )
                if await conn.fetchval(
                    "SELECT 1 FROM exclusion WHERE vault_id = $1 AND content_hash = $2", vault.id, new_hash
                ):
                    raise Conflict(
                        "the new text was forgotten in this vault and is refused from then on; "
                        "lift its exclusion first if it should be stored again",
                        field="content",
                    )
            await conn.execute(
                "UPDATE memory SET content = $3, content_hash = $4, tags = $5::text[], version = version + 1,"
                " updated_at = now() WHERE vault_id = $1 AND id = $2::uuid",
                vault.id,
                memory_id,
                content,
                new_hash,
                list(tags),
            )
            await write_history(conn, [memory_id], "edited", actor)
            if "content" in changed:
                await enqueue(conn, [events.memory_created(memory_id, vault.id, new_hash)])
            await append_audit(conn, vault.id, actor, "memory.edit", memory_id, {"changed": changed})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return memory_from_row(row, vault.name), changed

    async def invalidate(
        self, vault: VaultAccess, memory_id: str, reason: str, *, apply: bool, expected_version: int, actor: str
    ) -> tuple[Memory, list[str]]:
        """Mark a memory no longer true (its validity ends now), or, without `apply`, flag it for the owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            memory = await locked(conn, vault, memory_id)
            require_status(memory, (Status.ACTIVE, Status.PROPOSED), "invalidate")
            check_version(memory, expected_version)
            flagged: list[str] = []
            if apply:
                await conn.execute(
                    "UPDATE memory SET status = 'invalidated', status_reason = nullif($2, ''),"
                    " valid_to = coalesce(valid_to, now()), version = version + 1, updated_at = now()"
                    " WHERE id = $1::uuid",
                    memory_id,
                    reason,
                )
                await write_history(conn, [memory_id], "invalidated", actor)
                flagged = await flag_dependents(
                    conn, vault, memory_id, f"depends on {memory_id}, which was invalidated", actor, cause=memory_id
                )
            else:
                await conn.execute(
                    "UPDATE memory SET flagged_reason = $2, flagged_at = now(), status_reason = nullif($3, ''),"
                    " version = version + 1, updated_at = now() WHERE id = $1::uuid",
                    memory_id,
                    f"invalidation proposed by {actor}",
                    reason,
                )
                await write_history(conn, [memory_id], "invalidation proposed", actor)
            action = "memory.invalidate" if apply else "memory.propose_invalidation"
            await append_audit(conn, vault.id, actor, action, memory_id, {"flagged_dependents": len(flagged)})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return memory_from_row(row, vault.name), flagged

    async def history(self, vault: VaultAccess, memory_id: str, limit: int) -> list[HistoryRecord]:
        """The newest `limit` versions of a memory, oldest first."""
        rows = await self._pool.fetch(
            """
            SELECT * FROM (
                SELECT version, change, actor, changed_at, coalesce(cause::text, '') AS cause, snapshot::text AS snapshot
                FROM memory_history WHERE vault_id = $1 AND memory_id = $2::uuid
                ORDER BY id DESC LIMIT $3
            ) newest ORDER BY version, changed_at
            """,
            vault.id,
            memory_id,
            limit,
        )
        return [
            HistoryRecord(r["version"], r["change"], r["actor"], r["changed_at"], r["cause"], json.loads(r["snapshot"]))
            for r in rows
        ]

    async def related(self, vault: VaultAccess, memory: Memory, limit: int) -> list[tuple[str, Memory]]:
        """Memories linked to this one, each with how: depends_on, dependent, similar, similar_from,
        supersedes, superseded_by, same_key."""
        return (await self.related_many(vault, [memory], limit))[memory.id]

    async def related_many(
        self, vault: VaultAccess, memories: Sequence[Memory], limit: int
    ) -> dict[str, list[tuple[str, Memory]]]:
        """`related` for each of these memories (up to `limit` links each), by memory id, in one statement."""
        if not memories:
            return {}
        ids = [memory.id for memory in memories]
        rows = await self._pool.fetch(
            """
            WITH p AS (SELECT id, depends_on, similar_to, superseded_by, key, scope FROM memory
                       WHERE vault_id = $1 AND id = ANY($2::uuid[])),
            r AS (
                SELECT p.id AS related_of, 1 AS branch, 'depends_on' AS relation, m.*
                FROM p JOIN memory m ON m.vault_id = $1 AND m.id = ANY(p.depends_on)
                UNION ALL
                SELECT p.id, 2, 'dependent', m.*
                FROM p CROSS JOIN LATERAL (
                    SELECT * FROM memory WHERE vault_id = $1 AND depends_on @> ARRAY[p.id]) m
                UNION ALL
                SELECT p.id, 3, 'similar', m.*
                FROM p JOIN memory m ON m.vault_id = $1 AND m.id = ANY(p.similar_to)
                UNION ALL
                SELECT p.id, 4, 'similar_from', m.*
                FROM p CROSS JOIN LATERAL (
                    SELECT * FROM memory WHERE vault_id = $1 AND similar_to @> ARRAY[p.id]) m
                UNION ALL
                SELECT p.id, 5, 'supersedes', m.*
                FROM memory m JOIN p ON m.superseded_by = p.id
                WHERE m.vault_id = $1 AND m.superseded_by = ANY($2::uuid[])
                UNION ALL
                SELECT p.id, 6, 'superseded_by', m.*
                FROM p JOIN memory m ON m.vault_id = $1 AND m.id = p.superseded_by
                UNION ALL
                SELECT p.id, 7, 'same_key', m.*
                FROM p JOIN memory m ON m.vault_id = $1 AND p.key IS NOT NULL AND m.key = p.key
                    AND m.scope IS NOT DISTINCT FROM p.scope AND m.id <> p.id AND m.status IN ('active', 'proposed')
            )
            SELECT * FROM (
                SELECT r.*, row_number() OVER (PARTITION BY r.related_of ORDER BY r.branch, r.created_at, r.id) AS n
                FROM r
            ) numbered
            WHERE n <= $3
            ORDER BY related_of, n
            """,
            vault.id,
            ids,
            limit,
        )
        seen: dict[str, set[tuple[str, str]]] = {memory_id: set() for memory_id in ids}
        related: dict[str, list[tuple[str, Memory]]] = {memory_id: [] for memory_id in ids}
        for row in rows:
            of, relation, other = str(row["related_of"]), row["relation"], str(row["id"])
            if (relation, other) not in seen[of]:
                seen[of].add((relation, other))
                related[of].append((relation, memory_from_row(row, vault.name)))
        # What a memory replaces that does not (yet) point back at it, read in one more statement.
        missing = {
            memory.id: memory.supersedes
            for memory in memories
            if memory.supersedes and ("supersedes", memory.supersedes) not in seen[memory.id]
        }
        targets = await self.memories(vault, list(missing.values()))
        for memory_id, target in missing.items():
            if target in targets:
                related[memory_id].append(("supersedes", targets[target]))
        return related
