"""The audit log's SQL: entries appended in the caller's transaction, and read back per vault or account."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import asyncpg

from memvault_vault.audit.records import AuditRecord
from memvault_vault.database import Database, VaultAccess


async def append_audit(
    conn: asyncpg.Connection,
    vault_id: str | None,
    actor: str,
    action: str,
    target: str,
    details: dict[str, Any],
) -> None:
    await conn.execute(
        "INSERT INTO audit_log (vault_id, actor, action, target, details) VALUES ($1, $2, $3, $4, $5::jsonb)",
        vault_id,
        actor,
        action,
        target,
        json.dumps(details),
    )


class AuditStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def vault_audit(
        self,
        vault: VaultAccess,
        *,
        actor: str,
        action: str,
        target: str,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        before_id: int,
    ) -> list[AuditRecord]:
        """One vault's audit entries, newest first, filtered; an action ending in '.' is a prefix."""
        prefix = action.endswith(".")
        rows = await self._pool.fetch(
            """
            SELECT l.id, $2::text AS vault, l.actor, l.action, l.target, l.details::text AS details, l.at
            FROM audit_log l
            WHERE l.vault_id = $1
              AND ($3 = '' OR l.actor = $3)
              AND ($4 = '' OR (CASE WHEN $5 THEN starts_with(l.action, $4) ELSE l.action = $4 END))
              AND ($6 = '' OR l.target = $6)
              AND ($7::timestamptz IS NULL OR l.at >= $7)
              AND ($8::timestamptz IS NULL OR l.at < $8)
              AND ($9::bigint = 0 OR l.id < $9)
            ORDER BY l.id DESC
            LIMIT $10
            """,
            vault.id,
            vault.name,
            actor,
            action,
            prefix,
            target,
            since,
            until,
            before_id,
            limit,
        )
        return [
            AuditRecord(r["id"], r["vault"], r["actor"], r["action"], r["target"], r["details"], r["at"]) for r in rows
        ]

    async def audit_event(
        self, vault: VaultAccess, actor: str, action: str, target: str, details: dict[str, Any]
    ) -> None:
        """An audit entry on its own, for something refused before any write (a secret, say)."""
        async with self._pool.acquire() as conn:
            await append_audit(conn, vault.id, actor, action, target, details)

    async def append_account_audit(
        self, subject: str, vault: VaultAccess | None, actor: str, action: str, target: str, details: dict[str, Any]
    ) -> None:
        """An audit entry about `subject`'s account (and, if given, one of its vaults)."""
        async with self._pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO audit_log (vault_id, account_id, actor, action, target, details)"
                " SELECT $1, a.id, $3, $4, $5, $6::jsonb FROM account a WHERE a.subject = $2",
                vault.id if vault else None,
                subject,
                actor,
                action,
                target,
                json.dumps(details),
            )

    async def account_audit(self, subject: str, limit: int, before_id: int) -> list[AuditRecord]:
        """Entries about `subject`'s account or about vaults it owns, newest first."""
        rows = await self._pool.fetch(
            """
            WITH me AS (SELECT id FROM account WHERE subject = $1),
                 owned AS (SELECT m.vault_id FROM membership m, me WHERE m.account_id = me.id AND m.role = 'owner')
            SELECT l.id, coalesce(v.name, '') AS vault, l.actor, l.action, l.target, l.details::text AS details, l.at
            FROM audit_log l LEFT JOIN vault v ON v.id = l.vault_id
            WHERE (l.account_id = (SELECT id FROM me) OR l.vault_id IN (SELECT vault_id FROM owned))
              AND ($3::bigint = 0 OR l.id < $3)
            ORDER BY l.id DESC
            LIMIT $2
            """,
            subject,
            limit,
            before_id,
        )
        return [
            AuditRecord(r["id"], r["vault"], r["actor"], r["action"], r["target"], r["details"], r["at"]) for r in rows
        ]
