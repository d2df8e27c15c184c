"""The vault's database, shared by every concept: the connection pool, the vault as one account may
use it, and the per-vault write lock. (Pool setup, migrations and what a lost connection means
are `memvault_core.postgres`, shared with the gateway.)"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from memvault_core.postgres import create_pool


@dataclass(frozen=True)
class VaultAccess:
    """A vault as one account may use it."""

    id: str
    name: str
    role: str
    approval_mode: str
    delete_after: datetime | None = None
    """Set while the vault is pending deletion (read-only until it is deleted, unless cancelled)."""

    @property
    def writable(self) -> bool:
        return self.role in ("owner", "editor")


class Database:
    """The vault's connection pool; each concept's store reads and writes through `pool`.

    The pool skips asyncpg's reset query on release (`memvault_core.postgres.PooledConnection`):
    the vault's locks are transaction locks, it declares no cursors outside a transaction, and the
    outbox relay listens on a connection of its own."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Database:
        # JIT compiles a plan for a query the planner thinks is costly; recall's full-text query in a large
        # vault crosses that line and pays tens of milliseconds to compile what runs in a few.
        # Synchronized scans start a large table's scan where the last one was: archive search samples a
        # very common word by reading the table in order (archive/keyword_sql.py), and the same search
        # should rank the same sample each time.
        settings = {"jit": "off", "synchronize_seqscans": "off"}
        return cls(await create_pool(dsn, min_size, max_size, server_settings=settings))

    async def close(self) -> None:
        await self.pool.close()

    async def ping(self) -> None:
        await self.pool.fetchval("SELECT 1")


async def lock_vault(conn: asyncpg.Connection, vault_id: str) -> None:
    """Writes to one vault are serialised (so an exact duplicate that slips in between is still caught)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", vault_id)
