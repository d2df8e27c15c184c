"""Deleting the vaults whose deletion grace period has passed (`accounts.service.DELETION_GRACE`).

An owner's "delete this vault" only marks it (`vault.delete_after`): it is read-only from then on and
the owner can cancel. The retention runner (`run_periodically`, `memvault-vault retention`) calls
`delete_due_vaults` with its clock's time; a vault whose `delete_after` has passed is deleted in one
transaction per vault: every row of it goes (the tables cascade from `vault`), the index is told to
drop each memory's and conversation's points through the outbox, and each owner's account keeps an
audit entry `vault.deleted` (the vault's own log goes with it).
"""

from __future__ import annotations

import json
from datetime import datetime

import asyncpg

from memvault_vault.database import lock_vault
from memvault_vault.outbox import events
from memvault_vault.outbox.store import enqueue

ACTOR = "memvault:retention"
EVENTS_PER_ROUND_TRIP = 1000


async def delete_due_vaults(pool: asyncpg.Pool, now: datetime, *, dry_run: bool = False) -> list[str]:
    """Delete every vault whose grace period ended at or before `now`; the names deleted (or, with
    `dry_run`, that would be), in name order. A vault cancelled meanwhile is left alone."""
    due = await pool.fetch(
        "SELECT id::text AS id, name FROM vault WHERE delete_after IS NOT NULL AND delete_after <= $1 ORDER BY name",
        now,
    )
    if dry_run:
        return [row["name"] for row in due]
    deleted = []
    for row in due:
        async with pool.acquire() as conn, conn.transaction():
            if await _delete_vault(conn, row["id"], now):
                deleted.append(row["name"])
    return deleted


async def _delete_vault(conn: asyncpg.Connection, vault_id: str, now: datetime) -> bool:
    await lock_vault(conn, vault_id)  # no write of this vault is half-way (none may start: it is read-only)
    vault = await conn.fetchrow(
        "SELECT name, delete_after, deletion_requested_by FROM vault"
        " WHERE id = $1 AND delete_after IS NOT NULL AND delete_after <= $2 FOR UPDATE",
        vault_id,
        now,
    )
    if vault is None:  # cancelled, or deleted by another replica
        return False
    owners = [
        r["account_id"]
        for r in await conn.fetch("SELECT account_id FROM membership WHERE vault_id = $1 AND role = 'owner'", vault_id)
    ]
    counts = {"memories": 0, "conversations": 0}
    async with conn.transaction():  # a savepoint: cursors need one
        batch: list[events.OutboxEvent] = []
        async for r in conn.cursor("SELECT id::text FROM memory WHERE vault_id = $1", vault_id):
            batch.append(events.memory_forgotten(r["id"], vault_id))
            counts["memories"] += 1
            if len(batch) >= EVENTS_PER_ROUND_TRIP:
                await enqueue(conn, batch)
                batch = []
        async for r in conn.cursor("SELECT id::text FROM archive_conversation WHERE vault_id = $1", vault_id):
            batch.append(events.conversation_deleted(r["id"], vault_id))
            counts["conversations"] += 1
            if len(batch) >= EVENTS_PER_ROUND_TRIP:
                await enqueue(conn, batch)
                batch = []
        if batch:
            await enqueue(conn, batch)
    await conn.execute("DELETE FROM vault WHERE id = $1", vault_id)
    details = {
        **counts,
        "scheduled_by": vault["deletion_requested_by"] or "",
        "delete_after": vault["delete_after"].isoformat(),
    }
    await conn.executemany(
        "INSERT INTO audit_log (vault_id, account_id, actor, action, target, details)"
        " VALUES (NULL, $1, $2, 'vault.deleted', $3, $4::jsonb)",
        [(account_id, ACTOR, vault["name"], json.dumps(details)) for account_id in owners],
    )
    return True
