"""The planner's statistics taken again after bulk writes: the rule for stale, one process at a time,
a locked table skipped rather than waited for, and the refresher's background work (memvault_core.pg_statistics)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from memvault_core.pg_statistics import LOCK_KEY, StatisticsRefresher, refresh_statistics, report_counts_now
from memvault_core.postgres import create_pool

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def pool(fresh_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(fresh_dsn, 1, 3)
    await pool.execute("CREATE TABLE note (id int PRIMARY KEY, text text NOT NULL); CREATE TABLE tag (name text)")
    yield pool
    await pool.close()


async def add_notes(pool: asyncpg.Pool, ids: range, *, report: bool = True) -> None:
    """Insert notes; with `report`, have the server count them at once (a backend that reported less
    than a second ago holds its counts back until it has been idle for 10 s)."""
    async with pool.acquire() as conn:
        await conn.executemany("INSERT INTO note VALUES ($1, 'x')", [(i,) for i in ids])
        if report:
            await report_counts_now(conn)


async def changed(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'note'"))


async def test_statistics_are_taken_again_once_more_rows_changed_than_the_rule_allows(pool: asyncpg.Pool) -> None:
    stale = {"stale_rows": 50, "stale_fraction": 0.5}
    await add_notes(pool, range(40))
    assert await refresh_statistics(pool, ["note", "no_such_table"], **stale) == []  # 40 of 50 + 0
    await add_notes(pool, range(40, 60))
    assert await refresh_statistics(pool, ["note"], **stale) == ["note"]
    assert await pool.fetchval("SELECT reltuples FROM pg_class WHERE oid = 'note'::regclass") == 60
    await add_notes(pool, range(60, 130))
    assert await refresh_statistics(pool, ["note"], **stale) == []  # 70 of 50 + 30
    await add_notes(pool, range(130, 150))
    assert await refresh_statistics(pool, ["note"], **stale) == ["note"]
    assert await changed(pool) == 0


async def test_another_process_refreshing_or_holding_the_table_is_not_waited_for(pool: asyncpg.Pool) -> None:
    await add_notes(pool, range(300))
    async with pool.acquire() as other, other.transaction():  # another process is refreshing
        await other.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", LOCK_KEY)
        assert await refresh_statistics(pool, ["note"], stale_rows=10) is None
    async with pool.acquire() as other, other.transaction():  # a vacuum, say: ANALYZE would wait for it
        await other.execute("LOCK TABLE note IN SHARE UPDATE EXCLUSIVE MODE")
        assert await asyncio.wait_for(refresh_statistics(pool, ["note"], stale_rows=10), timeout=5) == []
    assert await changed(pool) == 300
    assert await refresh_statistics(pool, ["note"], stale_rows=10) == ["note"]


async def test_a_table_this_role_does_not_own_is_not_called_analyzed(fresh_dsn: str, pool: asyncpg.Pool) -> None:
    role = f"reader_{uuid.uuid4().hex[:8]}"
    await pool.execute(f"CREATE ROLE {role} LOGIN; GRANT SELECT ON note TO {role}")
    try:
        await add_notes(pool, range(100))
        guest = await asyncpg.connect(fresh_dsn, user=role)
        await guest.close()
        other = await create_pool(fresh_dsn, 1, 1, server_settings={"role": role})
        try:
            assert await refresh_statistics(other, ["note"], stale_rows=10) == []
        finally:
            await other.close()
    finally:
        await pool.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


async def test_the_refresher_looks_again_once_the_last_writes_counts_have_reached_the_server(
    fresh_dsn: str, pool: asyncpg.Pool
) -> None:
    refresher = StatisticsRefresher(pool, interval=0.0, settle=11.0, stale_rows=50, stale_fraction=0.0)
    writer = await asyncpg.connect(fresh_dsn)  # a backend of its own: only these inserts' counts
    try:
        await writer.executemany("INSERT INTO note VALUES ($1, 'x')", [(i,) for i in range(30)])
        await report_counts_now(writer)  # reported just now, so the next ones are held back for 10 s
        await writer.executemany("INSERT INTO note VALUES ($1, 'x')", [(i,) for i in range(30, 130)])
        refresher.wrote("note")
        started = time.monotonic()
        await asyncio.sleep(0.5)
        assert refresher.analyzed == [] and await changed(pool) == 30  # what the first look saw
        await refresher.idle()
        assert refresher.analyzed == ["note"]
        assert 10.5 < time.monotonic() - started < 20
    finally:
        await writer.close()


async def test_a_table_named_while_the_refresher_waits_to_settle_is_checked_at_once(pool: asyncpg.Pool) -> None:
    refresher = StatisticsRefresher(pool, interval=0.1, settle=30.0, stale_rows=10, stale_fraction=0.0)
    refresher.wrote("note")  # nothing changed yet: the first look finds nothing, then waits to settle
    await asyncio.sleep(0.3)
    await add_notes(pool, range(30))
    refresher.wrote("note")
    await asyncio.sleep(0.5)
    assert refresher.analyzed == ["note"]
    started = time.monotonic()
    await refresher.close(finish=True)  # the last look now, not after 30 s
    assert time.monotonic() - started < 5


async def test_the_refresher_checks_what_it_is_asked_meanwhile_and_after_another_process(pool: asyncpg.Pool) -> None:
    await add_notes(pool, range(30))
    async with pool.acquire() as tags:
        await tags.executemany("INSERT INTO tag VALUES ($1)", [(str(i),) for i in range(30)])
        await report_counts_now(tags)
    refresher = StatisticsRefresher(pool, interval=0.2, settle=0.3, stale_rows=10, stale_fraction=0.0)
    async with pool.acquire() as other, other.transaction():  # another process is refreshing
        await other.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", LOCK_KEY)
        refresher.wrote("note")
        await asyncio.sleep(0.1)
        refresher.wrote("tag")  # while the first look is under way: the next one checks it
        await asyncio.sleep(0.3)
        assert refresher.analyzed == []
    await refresher.idle()
    assert sorted(refresher.analyzed) == ["note", "tag"]


async def test_closing_stops_the_refresher_or_lets_it_finish_first(pool: asyncpg.Pool) -> None:
    await add_notes(pool, range(30))
    stopped = StatisticsRefresher(pool, stale_rows=10)
    stopped.wrote("note")
    await stopped.close()
    assert stopped.analyzed == [] and await changed(pool) == 30
    finished = StatisticsRefresher(pool, stale_rows=10)
    finished.wrote("note")
    await asyncio.wait_for(finished.close(finish=True), timeout=5)  # without the look after `settle`
    assert finished.analyzed == ["note"]


async def test_a_failure_is_logged_and_never_reaches_the_writer(
    fresh_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    closed = await create_pool(fresh_dsn, 1, 1)
    await closed.close()
    broken = StatisticsRefresher(closed, interval=0.0, settle=0.0)
    with caplog.at_level(logging.WARNING, logger="memvault_core.pg_statistics"):
        broken.wrote("note")
        await broken.idle()
    assert broken.analyzed == []
    assert "could not refresh the planner's statistics" in caplog.text
