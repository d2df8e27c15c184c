"""Review's SQL: approve, reject, mark reviewed, the review queue and the audit findings."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memvault_core.errors import InvalidArgument
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess, lock_vault
from memvault_vault.domain.memory import Memory, Status, check_version, require_status
from memvault_vault.memories.records import memory_from_row
from memvault_vault.memories.steps import flag_dependents, locked, retire, same_key_active, write_history

_FINDINGS = """
    SELECT * FROM (
        SELECT m.*,
               array_remove(ARRAY[
                   CASE WHEN m.expires_at IS NOT NULL AND m.expires_at <= now() THEN 'expired' END,
                   CASE WHEN cardinality(k.ids) > 0 THEN 'conflict' END,
                   CASE WHEN cardinality(s.ids) > 0 THEN 'may_conflict' END,
                   CASE WHEN m.review_after IS NOT NULL AND m.review_after <= now() THEN 'past_review' END,
                   CASE WHEN m.flagged_reason IS NOT NULL THEN 'flagged' END
               ], NULL) AS kinds,
               k.ids || s.ids AS related
        FROM memory m
        CROSS JOIN LATERAL (
            SELECT ARRAY(SELECT o.id::text FROM memory o
                         WHERE m.status = 'active' AND m.key IS NOT NULL AND o.vault_id = m.vault_id
                           AND o.key = m.key AND o.scope IS NOT DISTINCT FROM m.scope AND o.id <> m.id
                           AND o.status = 'active') AS ids) k
        CROSS JOIN LATERAL (
            SELECT ARRAY(SELECT o.id::text FROM memory o
                         WHERE m.status = 'active' AND o.vault_id = m.vault_id AND o.id <> m.id
                           AND o.status = 'active' AND (o.id = ANY(m.similar_to) OR o.similar_to @> ARRAY[m.id]))
                   AS ids) s
        WHERE m.vault_id = $1 AND m.status IN ('active', 'proposed')
          -- Only rows that can hold a kind asked for reach the lateral look-ups (a vault of 100,000
          -- memories asked for 'flagged' reads the few flagged ones, not every row's relations).
          AND (('expired' = ANY($2::text[]) AND m.expires_at <= now())
               OR ('past_review' = ANY($2::text[]) AND m.review_after <= now())
               OR ('flagged' = ANY($2::text[]) AND m.flagged_reason IS NOT NULL)
               OR ($2::text[] && ARRAY['conflict', 'may_conflict'] AND m.status = 'active'))
    ) f
"""

_FINDING_COUNTS = (
    "WITH findings AS (" + _FINDINGS + ") SELECT kind, count(*) FROM findings, unnest(kinds) AS kind"  # noqa: S608 (constants)
    " WHERE kind = ANY($2::text[]) GROUP BY kind"
)


class ReviewStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def approve(
        self,
        vault: VaultAccess,
        memory_id: str,
        *,
        replace_similar: bool,
        replace_ids: Sequence[str],
        expected_version: int,
        actor: str,
    ) -> tuple[Memory, list[str], list[str]]:
        """Make a proposed memory active; supersede what it replaces. Returns it, the superseded and the flagged."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            memory = await locked(conn, vault, memory_id)
            require_status(memory, (Status.PROPOSED,), "approve")
            check_version(memory, expected_version)
            same_key = (await same_key_active(conn, vault, [memory_id])).get(memory_id, ())
            replaceable = dict.fromkeys(
                [*([memory.supersedes] if memory.supersedes else []), *memory.similar_to, *same_key]
            )
            if replace_ids:
                for i, other in enumerate(replace_ids):
                    if other not in replaceable:
                        raise InvalidArgument(
                            f"replace_ids[{i}] {other} is not a memory this one is similar to, replaces or shares a "
                            f"key with; it can replace: {', '.join(replaceable) or 'nothing'}",
                            field=f"replace_ids[{i}]",
                        )
                chosen = list(dict.fromkeys(replace_ids))
            elif replace_similar:
                chosen = list(replaceable)
            else:
                chosen = [memory.supersedes] if memory.supersedes else []
            live = [
                row["id"]
                for row in await conn.fetch(
                    "SELECT id::text FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])"
                    " AND status IN ('active', 'proposed') AND id <> $3::uuid FOR UPDATE",
                    vault.id,
                    chosen,
                    memory_id,
                )
            ]
            await conn.execute(
                "UPDATE memory SET status = 'active', reviewed_at = now(), version = version + 1, updated_at = now()"
                " WHERE id = $1::uuid",
                memory_id,
            )
            await write_history(conn, [memory_id], "approved", actor)
            flagged = await retire(conn, vault, live, by=memory_id, actor=actor)
            await append_audit(
                conn,
                vault.id,
                actor,
                "memory.approve",
                memory_id,
                {"superseded": live, "flagged_dependents": len(flagged)},
            )
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return memory_from_row(row, vault.name), live, flagged

    async def reject(
        self, vault: VaultAccess, memory_id: str, reason: str, *, expected_version: int, actor: str
    ) -> Memory:
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            memory = await locked(conn, vault, memory_id)
            require_status(memory, (Status.PROPOSED,), "reject")
            check_version(memory, expected_version)
            await conn.execute(
                "UPDATE memory SET status = 'rejected', status_reason = nullif($2, ''), reviewed_at = now(),"
                " version = version + 1, updated_at = now() WHERE id = $1::uuid",
                memory_id,
                reason,
            )
            await write_history(conn, [memory_id], "rejected", actor)
            flagged = await flag_dependents(
                conn, vault, memory_id, f"depends on {memory_id}, which was rejected", actor, cause=memory_id
            )
            await append_audit(conn, vault.id, actor, "memory.reject", memory_id, {"flagged_dependents": len(flagged)})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return memory_from_row(row, vault.name)

    async def mark_reviewed(
        self, vault: VaultAccess, memory_id: str, next_review: datetime | None, *, expected_version: int, actor: str
    ) -> Memory:
        """Clear a memory's flag and set its next review date: the owner checked it and it still holds."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            memory = await locked(conn, vault, memory_id)
            require_status(memory, (Status.ACTIVE, Status.PROPOSED), "mark as reviewed")
            check_version(memory, expected_version)
            await conn.execute(
                "UPDATE memory SET flagged_reason = NULL, flagged_at = NULL, reviewed_at = now(), review_after = $2,"
                " status_reason = CASE WHEN flagged_reason LIKE 'invalidation proposed%' THEN NULL ELSE status_reason END,"
                " version = version + 1, updated_at = now() WHERE id = $1::uuid",
                memory_id,
                next_review,
            )
            await write_history(conn, [memory_id], "reviewed", actor)
            await append_audit(conn, vault.id, actor, "memory.review", memory_id, {})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return memory_from_row(row, vault.name)

    async def audit_findings(
        self, vault: VaultAccess, kinds: Sequence[str], limit: int, after_id: str | None
    ) -> tuple[list[tuple[Memory, list[str], list[str]]], dict[str, int]]:
        """Active and proposed memories that need attention, by id; and the count of each kind in the vault."""
        rows = await self._pool.fetch(
            _FINDINGS + " WHERE cardinality(f.kinds) > 0 AND f.kinds && $2::text[]"
            " AND ($3::uuid IS NULL OR f.id > $3::uuid) ORDER BY f.id LIMIT $4",
            vault.id,
            list(kinds),
            after_id,
            limit,
        )
        counts = await self._pool.fetch(
            _FINDING_COUNTS,
            vault.id,
            list(kinds),
        )
        found = [(memory_from_row(row, vault.name), list(row["kinds"]), list(row["related"])) for row in rows]
        return found, {row["kind"]: row["count"] for row in counts}

    async def review_queue(
        self, vault: VaultAccess, limit: int, after: tuple[datetime, str] | None
    ) -> tuple[list[Memory], int]:
        """Proposed memories, oldest first, and how many there are."""
        rows = await self._pool.fetch(
            "SELECT * FROM memory WHERE vault_id = $1 AND status = 'proposed'"
            " AND ($2::timestamptz IS NULL OR (created_at, id) > ($2, $3::uuid))"
            " ORDER BY created_at, id LIMIT $4",
            vault.id,
            after[0] if after else None,
            after[1] if after else None,
            limit,
        )
        total = await self._pool.fetchval(
            "SELECT count(*) FROM memory WHERE vault_id = $1 AND status = 'proposed'", vault.id
        )
        return [memory_from_row(row, vault.name) for row in rows], int(total)
