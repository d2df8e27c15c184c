"""The vault's database, shared by every concept: the connection pool, the vault as one account may
use it, the per-vault write lock, and the planner's statistics kept fresh after bulk writes. (Pool setup, migrations and what a lost connection means
are `memvault_core.postgres`, shared with the gateway.)"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from memvault_core.pg_statistics import StatisticsRefresher
from memvault_core.postgres import create_pool

IO_CONCURRENCY = 64
"""Pages a bitmap heap scan asks for ahead (Postgres's `effective_io_concurrency`; its default, 1, reads
one page at a time): at 1,000,000 archived messages, their pages on disk, a rare word's first keyword
statement took 67.6 ms at 1 and 35.2 ms at 64 (p50; `tests.bench.archive_search_sql --read-ahead 1,64`)."""


MEMORY_TABLES = (
    "memory",
    "memory_history",
    "index_pending",
    "memory_tag_stats",
    "vault_text_stats",
    "vault_lexeme_stats",
)
"""What a write of memories grows (with the counts its triggers keep, which recall reads): the tables
`Database.statistics` is told about after an import."""

ARCHIVE_TABLES = (
    "archive_conversation",
    "archive_revision",
    "archive_revision_message",
    "archive_message",
    "archive_text_stats",
    "archive_lexeme_stats",
)
"""What writing conversations grows (with the counts its triggers keep, which archive search reads)."""


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
        self.statistics = StatisticsRefresher(pool)
        """Stores name the tables a bulk write changed (`statistics.wrote(...)`): an import, the
        indexer's reports, an archive import's checkpoint, a restore."""

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Database:
        # JIT compiles a plan for a query the planner thinks is costly; recall's full-text query in a large
        # vault crosses that line and pays tens of milliseconds to compile what runs in a few.
        # Synchronized scans start a large table's scan where the last one was: archive search samples a
        # very common word by reading the table in order (archive/keyword_sql.py), and the same search
        # should rank the same sample each time.
        # A search's bitmap heap scans (every full-text match is read to be ranked) ask the kernel for
        # the next pages ahead of reading them, several at once, instead of one read at a time: a rare
        # word's first search reads about a thousand heap pages the buffers do not hold
        # (docs/benchmarks.md, archive-search).
        settings = {"jit": "off", "synchronize_seqscans": "off"}
        if await _reads_ahead(dsn):
            settings["effective_io_concurrency"] = str(IO_CONCURRENCY)
        return cls(await create_pool(dsn, min_size, max_size, server_settings=settings))

    async def close(self, *, finish_statistics: bool = False) -> None:
        """`finish_statistics`: a command that wrote in bulk (a restore) refreshes what it asked for first."""
        await self.statistics.close(finish=finish_statistics)
        await self.pool.close()

    async def ping(self) -> None:
        await self.pool.fetchval("SELECT 1")


async def _reads_ahead(dsn: str) -> bool:
    """Whether the server takes `effective_io_concurrency` = IO_CONCURRENCY: a server built without
    posix_fadvise (macOS) refuses every value but 0, and the vault then reads as before."""
    try:
        conn = await asyncpg.connect(dsn, server_settings={"effective_io_concurrency": str(IO_CONCURRENCY)})
    except asyncpg.InvalidParameterValueError:
        return False
    await conn.close()
    return True


async def lock_vault(conn: asyncpg.Connection, vault_id: str) -> None:
    """Writes to one vault are serialised (so an exact duplicate that slips in between is still caught).

    Every transaction that changes a vault's memories takes this lock first, before any row lock: the
    count triggers (memory_tag_stats, vault_text_stats) then meet their counter rows one writer at a time,
    so two writers whose statements reach the same counters in crossing order cannot deadlock.
    A transaction over several vaults takes their locks in one order (by id)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", vault_id)
