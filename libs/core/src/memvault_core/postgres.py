"""Postgres plumbing shared by the services that keep state there (vault, gateway).

- `Migrations`: one schema's numbered yoyo migrations, applied and rolled back under yoyo's lock,
  refusing a database that a newer memvault migrated (`NewerDatabaseError`), and telling a
  service at start whether its database is older (`missing`) or newer (`unknown`) than its code.
- `create_pool`: an asyncpg pool whose connections skip the reset query on release, with every
  statement traced (opentelemetry-instrumentation-asyncpg: one span per query, the SQL without
  its parameters), so a request's trace shows its queries.
- What a lost database means: `is_connection_failure`, `database_error` (for
  `memvault_core.grpc.build_server(translate_error=...)`: UNAVAILABLE naming the database, never
  its password) and `report_readiness` (the gRPC health status follows the database).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from grpc_health.v1 import health, health_pb2
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

from memvault_core.errors import Unavailable

log = logging.getLogger(__name__)


# --- migrations ---------------------------------------------------------------------------------


class NewerDatabaseError(Exception):
    """The database holds migrations this code does not know: a newer memvault migrated it."""

    def __init__(self, unknown: Sequence[str]) -> None:
        super().__init__(
            f"this database was migrated by a newer memvault: {', '.join(unknown)}; "
            "run that version or restore a backup"
        )


class OlderDatabaseError(Exception):
    """The database lacks migrations this code needs: the migrate command has not run since the upgrade."""

    def __init__(self, missing: Sequence[str], command: str) -> None:
        super().__init__(
            f"this database lacks migrations this memvault needs: {', '.join(missing)}; run `{command}` first"
        )


class UnknownMigrationError(Exception):
    """A migration id this code does not have."""

    def __init__(self, migration_id: str, known: Sequence[str], label: str = "") -> None:
        what = f"{label} migration" if label else "migration"
        super().__init__(f"no {what} {migration_id!r} in this memvault; its migrations: {', '.join(known)}")


@dataclass(frozen=True)
class Migrations:
    """One service's migrations: a folder of yoyo SQL files (`NNNN_name.sql` with `.rollback.sql`).

    `schema`: the Postgres schema the service's tables and yoyo's bookkeeping live in (created when
    missing); None keeps them in the connection's default schema. `label` names the service in
    messages ("gateway migration ..."); `command` is what an operator runs to migrate.
    """

    folder: Path
    command: str
    schema: str | None = None
    label: str = ""

    def ids(self) -> set[str]:
        return {migration.id for migration in self._read()}

    def order(self) -> list[str]:
        """Migration ids in the order `apply` applies them."""
        from yoyo.migrations import topological_sort

        return [migration.id for migration in topological_sort(self._read())]

    def backend(self, dsn: str) -> Any:
        """yoyo's backend for this database (yoyo wants the psycopg 3 driver named in the URL)."""
        from yoyo import get_backend

        if self.schema is not None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
        url = dsn.replace("postgresql://", "postgresql+psycopg://", 1).replace(
            "postgres://", "postgresql+psycopg://", 1
        )
        if self.schema is not None:
            url += ("&" if "?" in url else "?") + f"schema={self.schema}"
        return get_backend(url)

    def apply(self, dsn: str) -> list[str]:
        """Apply pending migrations under yoyo's lock; return the ids applied.

        Raises NewerDatabaseError, applying nothing, when the database has migrations this code lacks:
        its schema may need columns this code never fills."""
        backend = self.backend(dsn)
        migrations = self._read()
        with backend.lock():
            pending = backend.to_apply(migrations)
            self._refuse_unknown(backend, {migration.id for migration in migrations})
            backend.apply_migrations(pending)
        return [migration.id for migration in pending]

    def rollback(self, dsn: str, to: str) -> list[str]:
        """Roll back, newest first and under the migration lock, every applied migration that comes after
        `to` in the order `apply` applies them; return the ids rolled back.

        For going back to an older release, which refuses the newer schema: the rollback files are in
        this (newer) code. Raises NewerDatabaseError when the database has migrations even this code
        lacks, UnknownMigrationError when `to` is not one of its migrations."""
        from yoyo.migrations import MigrationList

        backend = self.backend(dsn)
        migrations = self._read()
        order = self.order()
        if to not in order:
            raise UnknownMigrationError(to, order, self.label)
        later = set(order[order.index(to) + 1 :])
        with backend.lock():
            self._refuse_unknown(backend, set(order))
            chosen = MigrationList([m for m in backend.to_rollback(migrations) if m.id in later])
            backend.rollback_migrations(chosen)
        return [migration.id for migration in chosen]

    async def unknown(self, pool: asyncpg.Pool) -> list[str]:
        """Migrations applied to this database that this code does not know (a newer memvault's)."""
        return sorted(await self._applied(pool) - self.ids())

    async def missing(self, pool: asyncpg.Pool) -> list[str]:
        """This code's migrations not applied to this database: its queries would fail on the old schema."""
        return sorted(self.ids() - await self._applied(pool))

    async def check(self, pool: asyncpg.Pool) -> None:
        """Refuse a database newer or older than this code (NewerDatabaseError, OlderDatabaseError): every
        query is written for this code's schema, and on another one requests would fail one by one,
        far from the cause."""
        if unknown := await self.unknown(pool):
            raise NewerDatabaseError(unknown)
        if missing := await self.missing(pool):
            raise OlderDatabaseError(missing, self.command)

    def _read(self) -> Any:
        from yoyo import read_migrations

        return read_migrations(str(self.folder))

    def _table(self) -> str:
        return "_yoyo_migration" if self.schema is None else f"{self.schema}._yoyo_migration"

    def _refuse_unknown(self, backend: Any, known: set[str]) -> None:
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - known)
        if unknown:
            raise NewerDatabaseError(unknown)

    async def _applied(self, pool: asyncpg.Pool) -> set[str]:
        table = self._table()
        if await pool.fetchval("SELECT to_regclass($1)", table) is None:
            return set()
        rows = await pool.fetch(f"SELECT migration_id FROM {table}")  # noqa: S608 - a name from code, not input
        return {row["migration_id"] for row in rows}


# --- the pool -----------------------------------------------------------------------------------


class PooledConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg's classes are untyped
    """A pool connection handed back without asyncpg's reset query (a round trip on every release).

    The reset undoes session state: session advisory locks, cursors, LISTEN, SET. A pool made by
    `create_pool` must leave none behind: take transaction locks (`pg_advisory_xact_lock`), declare
    cursors only inside a transaction, and LISTEN on a connection of its own.
    """

    def get_reset_query(self) -> str:
        return ""


_instrumentor = AsyncPGInstrumentor()  # type: ignore[no-untyped-call]  # the package is untyped


def trace_queries() -> None:
    """Give every asyncpg statement in this process a client span (idempotent). Parameters are not
    recorded: they hold memory text and secrets."""
    if not _instrumentor.is_instrumented_by_opentelemetry:
        _instrumentor.instrument(capture_parameters=False)


async def create_pool(
    dsn: str, min_size: int = 1, max_size: int = 10, *, server_settings: Mapping[str, str] | None = None
) -> asyncpg.Pool:
    """A pool of `PooledConnection`s, its queries traced (see `trace_queries`)."""
    trace_queries()
    return await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        server_settings=dict(server_settings or {}),
        connection_class=PooledConnection,
    )


# --- when the database is unreachable ---------------------------------------------------------------

# What asyncpg raises while the server is down, restarting or full: a refused or reset socket
# (OSError), class 08 (connection), 57P01-57P03 (shut down, crashed, starting up) and 53300.
_CONNECTION_FAILURES = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.TooManyConnectionsError,
)


def address(dsn: str) -> str:
    """`host:port` of a DSN, without user or password."""
    parts = urlsplit(dsn)
    try:
        port = parts.port or 5432
    except ValueError:
        port = 5432
    return f"{parts.hostname or 'localhost'}:{port}"


def is_connection_failure(error: BaseException) -> bool:
    if isinstance(error, _CONNECTION_FAILURES):
        return True
    # asyncpg's word for a pooled connection the server dropped.
    return isinstance(error, asyncpg.InterfaceError) and "connection is closed" in str(error)


def unreachable(dsn: str) -> Unavailable:
    return Unavailable(f"the database at {address(dsn)} is unreachable; try again once it is back")


DISK_FULL_LOG_EVERY_SECONDS = 60.0


def database_error(dsn: str) -> Callable[[Exception], Unavailable | None]:
    """For `build_server(translate_error=...)`: a lost database connection is `Unavailable`
    (status UNAVAILABLE, naming the database), not INTERNAL; so is a database out of disk space
    (SQLSTATE 53100), which is also logged at ERROR, at most once a minute."""
    logged_at = float("-inf")

    def translate(error: Exception) -> Unavailable | None:
        nonlocal logged_at
        if isinstance(error, asyncpg.exceptions.DiskFullError):
            if time.monotonic() - logged_at >= DISK_FULL_LOG_EVERY_SECONDS:
                logged_at = time.monotonic()
                log.error(
                    "the database is out of disk space; writes are refused until space is freed",
                    extra={"database": address(dsn)},
                )
            return Unavailable(
                f"the database at {address(dsn)} is out of disk space, so nothing was written; "
                "try again once its operator has freed space"
            )
        return unreachable(dsn) if is_connection_failure(error) else None

    return translate


async def report_readiness(
    ping: Callable[[], Awaitable[None]],
    health_servicer: health.aio.HealthServicer,
    service_names: Sequence[str],
    dsn: str,
    interval: float = 5.0,
) -> None:
    """Ping the database every `interval` seconds and set the health status to match, until cancelled.
    Each change is logged once."""
    reachable = True
    while True:
        try:
            await asyncio.wait_for(ping(), timeout=interval)
            now, reason = True, ""
        except Exception as error:  # whatever stops a `SELECT 1` also stops every call
            now, reason = False, f"{type(error).__name__}: {error}".splitlines()[0]
        if now != reachable:
            if now:
                log.info("database reachable again; ready", extra={"database": address(dsn)})
            else:
                log.warning(
                    "database unreachable; reporting NOT_SERVING until it is back",
                    extra={"database": address(dsn), "reason": reason},
                )
            reachable = now
        status = health_pb2.HealthCheckResponse.SERVING if now else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *service_names):
            await health_servicer.set(name, status)
        await asyncio.sleep(interval)
