"""The planner's statistics taken again (ANALYZE) after bulk writes, without waiting for autovacuum.

Why it matters: a large import into a new vault grows `memory` from nothing to tens of thousands of rows
in a minute or two. A statement a connection has run five times keeps one generic plan, made for the
table as its statistics last described it, until they are taken again. With none taken while a vault
grew to 18,000 memories, the duplicate check by content hash read the whole table (140-200 ms a call
instead of 2.5), and the index feed joined every indexed memory to every document it sent (350 ms
instead of about 2; docs/benchmarks.md, `bench:stale-statistics`). Autovacuum looks once a minute at the
most (and some servers run with it off): an import grows its tables faster than that.

Writers name the tables they changed (`StatisticsRefresher.wrote`); the refresher checks their counts
of changed rows in the background and analyzes the stale ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

import asyncpg

log = logging.getLogger(__name__)

STALE_ROWS = 1_000
STALE_FRACTION = 0.2
"""A table's statistics are stale once more rows changed since they were taken than STALE_ROWS plus
STALE_FRACTION of the rows they counted (autovacuum's own rule is 50 rows plus a tenth)."""

REFRESH_INTERVAL = 1.0
"""Seconds between one process's refreshes at the most."""

SETTLE_SECONDS = 11.0
"""How long after its last refresh the refresher looks once more at the tables it was asked about.
A backend that reported its counts of changed rows less than a second ago holds the next ones back
until it is idle for 10 s (Postgres 15 and later), so the last writes of an import reach the server's
counts after the import has asked; this look sees them."""

LOCK_RETRY = 0.5
"""Seconds before looking again at tables another process was refreshing."""

LOCK_KEY = "memvault statistics"
"""The transaction lock that lets one process at a time refresh (`hashtextextended(LOCK_KEY, 0)`)."""


async def refresh_statistics(
    pool: asyncpg.Pool, tables: Sequence[str], *, stale_rows: int = STALE_ROWS, stale_fraction: float = STALE_FRACTION
) -> list[str] | None:
    """ANALYZE each of `tables` (names as the pool's search path finds them) whose statistics are stale;
    the ones analyzed, or None when another process is refreshing (a transaction lock: nobody waits).

    A table someone holds a lock on that ANALYZE conflicts with (a vacuum, an index built concurrently)
    is skipped rather than waited for, and so is one this role may not analyze (it does not own it):
    neither is in the answer."""
    skipped: set[str] = set()

    def on_notice(_conn: asyncpg.Connection, message: asyncpg.PostgresLogMessage) -> None:
        # "skipping analyze of "memory" --- lock not available", "skipping "memory" --- only table or
        # database owner can analyze it" (later versions: "permission denied to analyze "memory",
        # skipping it"): the table's name is the first quoted word. (A server answering in another
        # language than English has these tables called analyzed in the log; nothing else changes.)
        text = str(message)
        if "skipping" in text and '"' in text:
            skipped.add(text.split('"')[1])

    async with pool.acquire() as conn:
        conn.add_log_listener(on_notice)
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL client_min_messages = warning")  # the notices below reach us
                taken = await conn.fetchval("SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", LOCK_KEY)
                if not taken:
                    return None
                rows = await conn.fetch(
                    "SELECT s.relid::regclass::text AS name, c.relname FROM unnest($1::text[]) AS t (name)"
                    " JOIN pg_stat_all_tables s ON s.relid = to_regclass(t.name)"
                    " JOIN pg_class c ON c.oid = s.relid"
                    " WHERE s.n_mod_since_analyze > $2 + $3 * greatest(c.reltuples, 0)"
                    " ORDER BY 1",
                    list(tables),
                    stale_rows,
                    stale_fraction,
                )
                for row in rows:
                    # The name comes back from regclass, quoted as SQL needs it; ANALYZE takes no parameters.
                    await conn.execute(f"ANALYZE (SKIP_LOCKED) {row['name']}")
        finally:
            conn.remove_log_listener(on_notice)
    return [row["name"] for row in rows if row["relname"] not in skipped]


async def report_counts_now(conn: asyncpg.Connection) -> None:
    """Have this connection's counts of changed rows reach the server as soon as it is idle (at the end of
    the transaction this runs in) rather than up to 10 s later. Postgres 15 and later; before, a
    backend reports them at the end of a transaction at least half a second after its last report."""
    if conn.get_server_version() >= (15, 0):
        await conn.execute("SELECT pg_stat_force_next_flush()")  # done as the backend goes idle, before it answers


class StatisticsRefresher:
    """Takes the statistics of the tables writes name (`wrote`) again in the background once stale.

    One refresh runs at a time per process, at most one every `interval` seconds; tables named
    meanwhile are checked by the next, and all of them once more when `settle` seconds have passed
    with nothing named. Tables another process was refreshing are checked again LOCK_RETRY seconds
    later. A failure is logged and never reaches the write; the next write asks again."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        interval: float = REFRESH_INTERVAL,
        settle: float = SETTLE_SECONDS,
        stale_rows: int = STALE_ROWS,
        stale_fraction: float = STALE_FRACTION,
    ) -> None:
        self._pool = pool
        self.interval = interval
        self.settle = settle
        self.stale_rows = stale_rows
        self.stale_fraction = stale_fraction
        self._tables: set[str] = set()
        self._later: set[str] = set()
        self._asked = asyncio.Event()
        self._finishing = False
        self._task: asyncio.Task[None] | None = None
        self._last = float("-inf")
        self.analyzed: list[str] = []
        """Every table analyzed so far, in order (for tests and logs)."""

    def wrote(self, *tables: str) -> None:
        self._tables.update(tables)
        self._asked.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def idle(self) -> None:
        """Until nothing is left to check, the look after `settle` included."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    async def close(self, *, finish: bool = False) -> None:
        """Stop, forgetting what was asked for; with `finish`, first check it, without waiting for
        `settle` (a command about to exit that made sure its counts have reached the server)."""
        if finish:
            self._finishing = True
            self._asked.set()
            try:
                await self.idle()
            finally:
                self._finishing = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._tables.clear()
        self._later.clear()

    async def _run(self) -> None:
        while self._tables or self._later:
            if self._tables:
                await asyncio.sleep(max(0.0, self._last + self.interval - time.monotonic()))
                await self._refresh(final=False)
                continue
            self._asked.clear()
            if not self._finishing:
                # Until `settle` passes with nothing named, or something is; `timeout` rather than `wait_for`,
                # which would start a task of its own that a caller counting its tasks would see.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settle):
                        await self._asked.wait()
                if self._tables:
                    continue
            self._tables, self._later = self._later, set()
            await self._refresh(final=True)

    async def _refresh(self, *, final: bool) -> None:
        tables, self._tables = sorted(self._tables), set()
        if not final:
            self._later.update(tables)
        self._last = time.monotonic()
        started = time.perf_counter()
        try:
            analyzed = await refresh_statistics(
                self._pool, tables, stale_rows=self.stale_rows, stale_fraction=self.stale_fraction
            )
        except Exception as error:  # a lost connection: the next write asks again
            log.warning("could not refresh the planner's statistics", extra={"error": type(error).__name__})
            return
        if analyzed is None:  # another process is refreshing: look again once it is likely done
            self._later.update(tables)
            await asyncio.sleep(LOCK_RETRY)
        elif analyzed:
            self.analyzed += analyzed
            log.info(
                "planner statistics refreshed",
                extra={"tables": analyzed, "ms": round(1000 * (time.perf_counter() - started), 1)},
            )
