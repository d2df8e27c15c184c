"""What the vault does when Postgres cannot be reached: calls fail UNAVAILABLE, naming the
database (never its password), and the gRPC health service reports NOT_SERVING until it is back,
so the gateway's /readyz and Kubernetes notice."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

import asyncpg
from grpc_health.v1 import health, health_pb2

from memvault_core.errors import Unavailable

log = logging.getLogger(__name__)

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
