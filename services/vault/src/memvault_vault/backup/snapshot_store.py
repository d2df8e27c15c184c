"""What a backup reads: one consistent snapshot of a vault (a repeatable-read, read-only transaction,
opened by `BackupStore.snapshot`), read with server-side cursors; Postgres itself encodes each row as a
line of JSON, so every column is carried and memory stays flat. Every query is filtered by the vault id."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg

from memvault_vault.backup import later_kinds

FETCH = 500
"""Rows per round trip of a cursor, and memories per batch of a backup."""

# Each kind of record: Postgres writes the line (to_jsonb carries every column, present and future),
# without the vault id and the columns Postgres computes.
_LINES: dict[str, str] = {
    "settings": "SELECT (jsonb_build_object('kind', 'settings') || (to_jsonb(s) - 'vault_id'))::text"
    " FROM vault_settings s WHERE s.vault_id = $1",
    "guide": "SELECT (jsonb_build_object('kind', 'guide') || (to_jsonb(g) - 'vault_id'))::text"
    " FROM operating_guide g WHERE g.vault_id = $1",
    "guide_version": "SELECT (jsonb_build_object('kind', 'guide_version') || (to_jsonb(h) - 'vault_id' - 'id'))::text"
    " FROM operating_guide_history h WHERE h.vault_id = $1 ORDER BY h.version",
    "batch": "SELECT (jsonb_build_object('kind', 'batch') || (to_jsonb(b) - 'vault_id'))::text"
    " FROM import_batch b WHERE b.vault_id = $1 ORDER BY b.created_at, b.id",
    "exclusion": "SELECT (jsonb_build_object('kind', 'exclusion') || (to_jsonb(e) - 'vault_id'))::text"
    " FROM exclusion e WHERE e.vault_id = $1 ORDER BY e.created_at, e.content_hash",
    "history": "SELECT (jsonb_build_object('kind', 'history') || (to_jsonb(h) - 'vault_id' - 'id'))::text"
    " FROM memory_history h WHERE h.vault_id = $1 ORDER BY h.id",
    "audit": "SELECT (jsonb_build_object('kind', 'audit') || (to_jsonb(a) - 'vault_id' - 'id' - 'account_id'))::text"
    " FROM audit_log a WHERE a.vault_id = $1 ORDER BY a.id",
    **later_kinds.LINES,
}
_MEMORIES = (
    "SELECT m.id::text, m.index_hash,"
    " (jsonb_build_object('kind', 'memory') || (to_jsonb(m) - 'vault_id' - 'search' - 'index_hash'))::text"
    " FROM memory m WHERE m.vault_id = $1 ORDER BY m.created_at, m.id"
)


class Snapshot:
    """One consistent view of a vault, read kind by kind."""

    def __init__(self, conn: asyncpg.Connection, vault_id: str) -> None:
        self._conn = conn
        self._vault_id = vault_id

    async def count_memories(self) -> int:
        return int(await self._conn.fetchval("SELECT count(*) FROM memory WHERE vault_id = $1", self._vault_id))

    async def count_conversations(self) -> int:
        return int(
            await self._conn.fetchval("SELECT count(*) FROM archive_conversation WHERE vault_id = $1", self._vault_id)
        )

    async def lines(self, kind: str) -> AsyncIterator[str]:
        # a raw import's line is up to 1 MiB of bytes (base64): a few at a time, not FETCH of them
        prefetch = 2 if kind == "import_chunk" else FETCH
        async for row in self._conn.cursor(_LINES[kind], self._vault_id, prefetch=prefetch):
            yield row[0]

    async def memories(self) -> AsyncIterator[list[tuple[str, str, str]]]:
        """(id, index hash, line) of every memory, a batch at a time."""
        batch: list[tuple[str, str, str]] = []
        async for row in self._conn.cursor(_MEMORIES, self._vault_id, prefetch=FETCH):
            batch.append((row[0], row[1], row[2]))
            if len(batch) >= FETCH:
                yield batch
                batch = []
        if batch:
            yield batch
