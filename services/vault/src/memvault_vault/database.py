"""The vault's database, shared by every concept: the connection pool, the vault as one account may
use it, and the per-vault write lock.

And what the vault does when Postgres cannot be reached: calls fail UNAVAILABLE, naming the
database (never its password), and the gRPC health service reports NOT_SERVING until it is back,
so the gateway's /readyz and Kubernetes notice."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg
from grpc_health.v1 import health, health_pb2

from memvault_core.errors import Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VaultAccess:
    """A vault as one account may use it."""

    id: str
    name: str
    role: str
    approval_mode: str

    @property
    def writable(self) -> bool:
        return self.role in ("owner", "editor")


class _PooledConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg's classes are untyped
    """A pool connection handed back without asyncpg's reset query (a round trip on every release).

    The reset undoes session state: session advisory locks, cursors, LISTEN, SET. The vault's pool
    leaves none behind (its locks are transaction locks, it declares no cursors outside a
    transaction, the relay listens on a connection of its own), so the reset would only cost time.
    """

    def get_reset_query(self) -> str:
        return ""


class Database:
    """The vault's connection pool; each concept's store reads and writes through `pool`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Database:
        # JIT compiles a plan for a query the planner thinks is costly; recall's full-text query in a large
        # vault crosses that line and pays tens of milliseconds to compile what runs in a few.
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            server_settings={"jit": "off"},
            connection_class=_PooledConnection,
        )
        return cls(pool)

    async def close(self) -> None:
        await self.pool.close()

    async def ping(self) -> None:
        await self.pool.fetchval("SELECT 1")


async def lock_vault(conn: asyncpg.Connection, vault_id: str) -> None:
    """Writes to one vault are serialised (so an exact duplicate that slips in between is still caught)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", vault_id)


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


def database_error(dsn: str) -> Callable[[Exception], Unavailable | None]:
    """For `build_server(translate_error=...)`: a lost database connection is `Unavailable`
    (status UNAVAILABLE, naming the database), not INTERNAL."""

    def translate(error: Exception) -> Unavailable | None:
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
