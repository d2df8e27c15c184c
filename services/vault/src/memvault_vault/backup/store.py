"""The SQL of backup, restore and export: `BackupStore` finds vaults, opens a backup's snapshot
(snapshot_store.py) or a restore's transaction (restore_store.py), audits, and reads the export.

A backup reads one consistent snapshot (a repeatable-read, read-only transaction) with server-side
cursors, and Postgres itself encodes each row as a line of JSON, so every column is carried and
memory stays flat. A restore stages the file's records in a temporary table inside one
transaction and writes them into the vault only after the whole file checked out; any error, or
the caller going away, rolls everything back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from memvault_core.errors import InvalidArgument
from memvault_core.pg_statistics import report_counts_now
from memvault_vault.backup.records import ExportRow, VaultRef
from memvault_vault.backup.restore_store import RestoreSession, _refused
from memvault_vault.backup.snapshot_store import FETCH, Snapshot
from memvault_vault.database import ARCHIVE_TABLES, MEMORY_TABLES, Database, lock_vault

RESTORED_TABLES = (*MEMORY_TABLES, "exclusion", *ARCHIVE_TABLES, "archive_message_index")
"""The large tables a restore may fill."""


class BackupStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool
        self._statistics = database.statistics

    async def vault_named(self, name: str) -> VaultRef | None:
        """A vault by name (or id), for the maintenance commands (no account involved). Names are unique per
        account, so two accounts' vaults may share one: then the vault's id is needed."""
        rows = await self._pool.fetch(
            "SELECT id::text, name FROM vault WHERE name = $1 OR id::text = $1 ORDER BY created_at", name
        )
        if len(rows) > 1:
            raise InvalidArgument(
                f"{len(rows)} accounts have a vault named '{name}'; give the vault's id instead: "
                + ", ".join(row[0] for row in rows),
                field="vault",
            )
        return VaultRef(rows[0][0], rows[0][1]) if rows else None

    async def vault_names(self) -> list[str]:
        return [row[0] for row in await self._pool.fetch("SELECT name FROM vault ORDER BY name")]

    @asynccontextmanager
    async def snapshot(self, vault_id: str) -> AsyncIterator[Snapshot]:
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield Snapshot(conn, vault_id)

    async def audit(self, vault: VaultRef, actor: str, action: str, details: dict[str, Any]) -> None:
        await self._pool.execute(
            "INSERT INTO audit_log (vault_id, actor, action, target, details) VALUES ($1, $2, $3, $4, $5::jsonb)",
            vault.id,
            actor,
            action,
            vault.name,
            json.dumps(details),
        )

    @asynccontextmanager
    async def restore_session(self, vault: VaultRef) -> AsyncIterator[RestoreSession]:
        """A transaction holding the vault's write lock, with an empty staging table; commits on a clean exit."""
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_vault(conn, vault.id)
            await conn.execute(
                "CREATE TEMP TABLE restore_record (seq bigserial PRIMARY KEY, kind text NOT NULL, ref uuid, body jsonb NOT NULL)"
                " ON COMMIT DROP"
            )
            await conn.execute("CREATE TEMP TABLE restore_id (old uuid PRIMARY KEY, new uuid NOT NULL) ON COMMIT DROP")
            await conn.execute(
                "CREATE OR REPLACE FUNCTION pg_temp.restored_id(value text) RETURNS uuid LANGUAGE sql STABLE AS"
                " $$ SELECT coalesce((SELECT new FROM restore_id WHERE old = value::uuid), value::uuid) $$"
            )
            try:
                yield RestoreSession(conn, vault)
            except (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError) as error:
                raise _refused(error) from None
            await report_counts_now(conn)  # once committed, so the refresh below sees them
        self._statistics.wrote(*RESTORED_TABLES)

    async def export_rows(self, vault_id: str) -> AsyncIterator[ExportRow]:
        """Active memories grouped by type (in the order of the type list), oldest first within a type."""
        async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            async for row in conn.cursor(
                "SELECT type, content, key, scope, tags, source, client, trust, created_at, updated_at, valid_from,"
                " valid_to, id::text FROM memory WHERE vault_id = $1 AND status = 'active'"
                " ORDER BY array_position(ARRAY['fact', 'preference', 'decision', 'constraint', 'assumption',"
                " 'observation', 'instruction'], type), created_at, id",
                vault_id,
                prefetch=FETCH,
            ):
                yield ExportRow(*row)
