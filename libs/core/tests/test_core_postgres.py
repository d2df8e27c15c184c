"""Postgres plumbing: migrations applied, refused and rolled back; the pool's queries traced without
their parameters; a lost database named without its password, and readiness following it."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from grpc_health.v1 import health, health_pb2
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memvault_core.errors import Unavailable
from memvault_core.postgres import (
    Migrations,
    NewerDatabaseError,
    OlderDatabaseError,
    PooledConnection,
    UnknownMigrationError,
    address,
    create_pool,
    database_error,
    is_connection_failure,
    report_readiness,
)

FIRST = ("0001_notes", "CREATE TABLE note (id int PRIMARY KEY, text text NOT NULL);", "DROP TABLE note;")
SECOND = ("0002_tags", "CREATE TABLE tag (note_id int REFERENCES note (id), name text);", "DROP TABLE tag;")


def migrations_folder(root: Path, *migrations: tuple[str, str, str]) -> Path:
    folder = root / "migrations"
    folder.mkdir()
    previous = ""
    for name, up, down in migrations:
        depends = f"-- depends: {previous}\n" if previous else ""
        (folder / f"{name}.sql").write_text(depends + up + "\n")
        (folder / f"{name}.rollback.sql").write_text(depends + down + "\n")
        previous = name
    return folder


@pytest_asyncio.fixture
async def pool(fresh_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(fresh_dsn, 1, 2, server_settings={"jit": "off"})
    yield pool
    await pool.close()


@pytest.mark.integration
@pytest.mark.parametrize("schema", [None, "plumbing"])
async def test_migrations_apply_once_and_tell_an_older_database_from_a_current_one(
    fresh_dsn: str, pool: asyncpg.Pool, tmp_path: Path, schema: str | None
) -> None:
    migrations = Migrations(migrations_folder(tmp_path, FIRST, SECOND), command="memvault-test migrate", schema=schema)
    assert await migrations.missing(pool) == ["0001_notes", "0002_tags"]
    with pytest.raises(OlderDatabaseError, match=r"0001_notes, 0002_tags; run `memvault-test migrate` first"):
        await migrations.check(pool)

    assert migrations.apply(fresh_dsn) == ["0001_notes", "0002_tags"]
    assert migrations.apply(fresh_dsn) == []
    assert await migrations.missing(pool) == []
    assert await migrations.unknown(pool) == []
    await migrations.check(pool)
    where = schema or "public"
    tables = await pool.fetch("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", where)
    assert {"note", "tag", "_yoyo_migration"} <= {row["table_name"] for row in tables}


@pytest.mark.integration
async def test_a_database_migrated_by_newer_code_is_refused_and_left_alone(
    fresh_dsn: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    newer = Migrations(migrations_folder(tmp_path, FIRST, SECOND), command="memvault-test migrate")
    newer.apply(fresh_dsn)
    older_folder = tmp_path / "older"
    older_folder.mkdir()
    older = Migrations(migrations_folder(older_folder, FIRST), command="memvault-test migrate")

    assert await older.unknown(pool) == ["0002_tags"]
    with pytest.raises(NewerDatabaseError, match="newer memvault: 0002_tags; run that version or restore a backup"):
        await older.check(pool)
    with pytest.raises(NewerDatabaseError, match="0002_tags"):
        older.apply(fresh_dsn)
    with pytest.raises(NewerDatabaseError, match="0002_tags"):
        older.rollback(fresh_dsn, "0001_notes")
    assert await pool.fetchval("SELECT to_regclass('tag')") is not None  # nothing was undone


@pytest.mark.integration
async def test_rollback_undoes_what_came_after_a_migration_newest_first(
    fresh_dsn: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    migrations = Migrations(migrations_folder(tmp_path, FIRST, SECOND), command="memvault-test migrate", label="test")
    migrations.apply(fresh_dsn)
    await pool.execute("INSERT INTO note VALUES (1, 'kept')")

    with pytest.raises(UnknownMigrationError, match=r"no test migration '0099_x'.*0001_notes, 0002_tags"):
        migrations.rollback(fresh_dsn, "0099_x")
    assert migrations.rollback(fresh_dsn, "0001_notes") == ["0002_tags"]
    assert migrations.rollback(fresh_dsn, "0001_notes") == []
    assert await pool.fetchval("SELECT to_regclass('tag')") is None
    assert await pool.fetchval("SELECT text FROM note") == "kept"
    assert await migrations.missing(pool) == ["0002_tags"]
    assert migrations.apply(fresh_dsn) == ["0002_tags"]


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished spans of this process (a provider of its own unless telemetry was set up already)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


@pytest.mark.integration
async def test_each_query_is_a_span_under_the_request_without_its_parameters(
    pool: asyncpg.Pool, spans: InMemorySpanExporter
) -> None:
    spans.clear()
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("recall") as request:
        assert await pool.fetchval("SELECT $1::text || ' found'", "my bank password is hunter2") == (
            "my bank password is hunter2 found"
        )
        await pool.execute("SELECT pg_notify('memvault_test', '')")
    queries = [s for s in spans.get_finished_spans() if s.name != "recall"]
    assert [s.name for s in queries] == ["SELECT", "SELECT"]
    for span in queries:
        assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
        assert span.kind is trace.SpanKind.CLIENT
        attributes = dict(span.attributes or {})
        assert any("SELECT" in str(value) for value in attributes.values())  # the statement, with placeholders
        assert not any("hunter2" in str(value) for value in attributes.values())


@pytest.mark.integration
async def test_the_pool_applies_server_settings_and_skips_the_reset_round_trip(pool: asyncpg.Pool) -> None:
    assert await pool.fetchval("SHOW jit") == "off"
    async with pool.acquire() as conn:
        assert isinstance(conn, PooledConnection)
        assert conn.get_reset_query() == ""


@pytest.mark.unit
def test_a_lost_database_is_unavailable_naming_host_and_port_but_never_the_password() -> None:
    dsn = "postgresql://memvault:s3cret-pw@db.internal:6543/memvault"
    assert address(dsn) == "db.internal:6543"
    assert address("postgresql://localhost/x") == "localhost:5432"
    translate = database_error(dsn)
    error = translate(ConnectionRefusedError(111, "refused"))
    assert isinstance(error, Unavailable)
    assert "db.internal:6543" in error.message and "s3cret" not in error.message
    assert translate(asyncpg.InterfaceError("connection is closed")) is not None
    assert translate(ValueError("a bug, not an outage")) is None


@pytest.mark.integration
async def test_a_server_nobody_answers_is_a_connection_failure() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Exception) as raised:  # noqa: PT011 - which one is asyncpg's business
        await create_pool(f"postgresql://postgres@127.0.0.1:{port}/postgres", 1, 1)
    assert is_connection_failure(raised.value)


@pytest.mark.unit
async def test_readiness_follows_the_database_down_and_back() -> None:
    up = asyncio.Event()
    up.set()

    async def ping() -> None:
        if not up.is_set():
            raise ConnectionRefusedError(111, "refused")

    servicer = health.aio.HealthServicer()
    await servicer.set("memvault.test.v1.TestService", health_pb2.HealthCheckResponse.NOT_SERVING)

    async def status() -> int:
        response = await servicer.Check(health_pb2.HealthCheckRequest(service="memvault.test.v1.TestService"), None)
        return int(response.status)

    async def becomes(wanted: int) -> None:
        async with asyncio.timeout(5):
            while await status() != wanted:  # noqa: ASYNC110 - polling the servicer, with a deadline
                await asyncio.sleep(0.01)

    task = asyncio.create_task(
        report_readiness(ping, servicer, ["memvault.test.v1.TestService"], "postgresql://db:5432/x", interval=0.02)
    )
    try:
        await becomes(health_pb2.HealthCheckResponse.SERVING)
        up.clear()
        await becomes(health_pb2.HealthCheckResponse.NOT_SERVING)
        up.set()
        await becomes(health_pb2.HealthCheckResponse.SERVING)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.unit
def test_a_database_out_of_disk_space_is_unavailable_and_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    translate = database_error("postgresql://memvault:s3cret@db.internal:5433/memvault")
    full = asyncpg.exceptions.DiskFullError('could not extend file "base/16384/16500": No space left on device')
    with caplog.at_level(logging.ERROR):
        first, second = translate(full), translate(full)
    assert first is not None and second is not None
    assert first.message == (
        "the database at db.internal:5433 is out of disk space, so nothing was written; "
        "try again once its operator has freed space"
    )
    assert [r.getMessage() for r in caplog.records] == [
        "the database is out of disk space; writes are refused until space is freed"
    ]
    assert "s3cret" not in caplog.text
