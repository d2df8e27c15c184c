"""Index maintenance's SQL: a vault's failed index jobs, and sending them to the indexer again."""

from __future__ import annotations

from collections.abc import Sequence

from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess
from memvault_vault.index_admin.records import IndexFailure
from memvault_vault.outbox.events import memories_created
from memvault_vault.outbox.store import enqueue


class IndexAdminStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def failed_total(self) -> int:
        """Failed index jobs in every vault (the events the indexer gave up on, its dead letters)."""
        return int(await self._pool.fetchval("SELECT count(*) FROM index_state WHERE state = 'failed'"))

    async def failures(self, vault: VaultAccess, limit: int) -> tuple[list[IndexFailure], int]:
        rows = await self._pool.fetch(
            "SELECT memory_id::text, coalesce(last_error, '') AS error, attempts, updated_at,"
            " count(*) OVER () AS total FROM index_state"
            " WHERE vault_id = $1 AND state = 'failed' ORDER BY updated_at DESC, memory_id LIMIT $2",
            vault.id,
            limit,
        )
        total = int(rows[0]["total"]) if rows else 0
        if not rows:
            total = int(
                await self._pool.fetchval(
                    "SELECT count(*) FROM index_state WHERE vault_id = $1 AND state = 'failed'", vault.id
                )
            )
        return [IndexFailure(r["memory_id"], r["error"], r["attempts"], r["updated_at"]) for r in rows], total

    async def retry(self, vault: VaultAccess, memory_ids: Sequence[str] | None, actor: str) -> int:
        """Forget the failures of these memories of the vault (all with None), so they count as pending
        again, and send each to the indexer through the outbox, as a write would. Returns how many."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                """
                DELETE FROM index_state s USING memory m
                WHERE s.vault_id = $1 AND s.state = 'failed' AND m.id = s.memory_id
                  AND ($2::uuid[] IS NULL OR s.memory_id = ANY($2::uuid[]))
                RETURNING m.id::text AS memory_id, m.content_hash
                """,
                vault.id,
                list(memory_ids) if memory_ids is not None else None,
            )
            if rows:
                await enqueue(conn, memories_created(vault.id, [(r["memory_id"], r["content_hash"]) for r in rows]))
                await append_audit(conn, vault.id, actor, "index.retry", vault.name, {"memories": len(rows)})
        return len(rows)
