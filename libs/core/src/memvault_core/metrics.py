"""Prometheus metrics: the series the services share, and serving them on a port of their own.

Each service serves its metrics on `MEMVAULT_METRICS__HOST`:`MEMVAULT_METRICS__PORT` at
`MEMVAULT_METRICS__PATH` when `MEMVAULT_METRICS__ENABLED` is true, from a thread (a scrape never
waits for the event loop). The port is not the service's own: the gateway's is public, and metrics
are for the cluster's Prometheus.

Every series names the process in a `component` label (gateway, mcp, vault, indexer; not
`service`, which Prometheus's Kubernetes discovery sets to the Service's name). Label values are
bounded and never carry what a caller sent: routes are templates
(`/api/v1/vaults/{vault}/memories/{memory_id}`), gRPC methods and tool names are the ones the
service declares (anything else is `unknown`), statuses are codes. Memory text, tokens and vault
names never become a label.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

NAMESPACE = "memvault"

# Seconds, from a fast indexed lookup to a slow bulk import or embedding batch.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class MetricsSettings(BaseModel):
    """Where a service serves its Prometheus metrics (`MEMVAULT_METRICS__*`)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=1, le=65535)
    path: str = Field(default="/metrics", pattern=r"^/[A-Za-z0-9/_.-]*$")
    sample_seconds: float = Field(default=15.0, gt=0, le=3600)
    """How often a service samples what it must ask a database or NATS for (outbox, index lag)."""


REGISTRY = CollectorRegistry()
"""Every memvault series, apart from the client library's process and platform collectors."""

GRPC_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time a gRPC call took to handle, by method and status code.",
    ["component", "method", "code"],
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "http_request_duration_seconds",
    "Time an HTTP request took, by route template, method and status code.",
    ["component", "route", "method", "status"],
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
ERRORS = Counter(
    "errors",
    "Requests that ended in a server error (HTTP 5xx but 503, gRPC INTERNAL/UNKNOWN, an MCP tool's internal error),"
    " by where.",
    ["component", "where"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
POOL_CONNECTIONS = Gauge(
    "db_pool_connections",
    "Postgres connections in a service's pool: `in_use`, `open` and the `max` it may open.",
    ["component", "state"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)

# Where each service can fail with a server error: those counters start at 0, so an alert's rate()
# sees a series from the first scrape instead of none until the first error.
_ERROR_PLACES = {"gateway": ("http",), "mcp": ("http", "tool"), "vault": ("grpc",), "indexer": ("grpc",)}

_HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNKNOWN = "unknown"


class Pool(Protocol):
    def get_size(self) -> int: ...
    def get_idle_size(self) -> int: ...
    def get_max_size(self) -> int: ...


def track_pool(service: str, pool: Pool) -> None:
    """Report `pool`'s use at each scrape (asyncpg's counters are plain attributes, safe to read from
    the metrics thread)."""
    POOL_CONNECTIONS.labels(service, "in_use").set_function(lambda: pool.get_size() - pool.get_idle_size())
    POOL_CONNECTIONS.labels(service, "open").set_function(pool.get_size)
    POOL_CONNECTIONS.labels(service, "max").set_function(pool.get_max_size)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a log line each."""


class MetricsServer:
    """The metrics endpoint, served from a daemon thread until `stop`."""

    def __init__(self, settings: MetricsSettings, registry: CollectorRegistry = REGISTRY) -> None:
        exposition = make_wsgi_app(registry)
        path = settings.path

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != path:
                start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
                return [f"metrics are at {path}\n".encode()]
            return exposition(environ, start_response)  # type: ignore[no-any-return]

        self._server: WSGIServer = make_server(
            settings.host, settings.port, app, ThreadingWSGIServer, handler_class=_QuietHandler
        )
        self.port = int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_metrics(service: str, settings: MetricsSettings) -> MetricsServer | None:
    """Start the metrics endpoint when the settings enable it (None when they do not); a port that
    cannot be had stops the start with one line naming the setting (SystemExit)."""
    if not settings.enabled:
        return None
    try:
        server = MetricsServer(settings)
    except OSError as error:
        raise SystemExit(
            f"memvault-{service}: cannot serve metrics on {settings.host}:{settings.port} "
            f"(MEMVAULT_METRICS__HOST / MEMVAULT_METRICS__PORT): {error.strerror or error}"
        ) from None
    for where in _ERROR_PLACES.get(service, ()):
        ERRORS.labels(service, where)
    log.info("metrics served", extra={"service": service, "port": server.port, "path": settings.path})
    return server


async def sample_periodically(
    name: str, sample: Callable[[], Awaitable[None]], every: float, sleep: Callable[[float], Awaitable[None]]
) -> None:
    """Run `sample` every `every` seconds; a failed sample is logged (once a minute at most) and
    the next one tried, so gauges go stale rather than the service down."""
    last_logged = 0.0
    while True:
        try:
            await sample()
        except Exception as error:  # a database or NATS outage: try again next time
            now = time.monotonic()
            if now - last_logged > 60:
                log.warning("metrics sample failed", extra={"sample": name, "error": type(error).__name__})
                last_logged = now
        await sleep(every)


class HttpMetrics:
    """ASGI middleware timing each HTTP request by its route template (never the raw path).

    The template is the `path` of the route that answered (`scope["route"]`, which FastAPI and
    Starlette set while routing); a request no route matched is `unmatched`."""

    def __init__(self, app: Any, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None)
            method = scope.get("method", "")
            HTTP_SECONDS.labels(
                self.service,
                route if isinstance(route, str) and route else "unmatched",
                method if method in _HTTP_METHODS else "other",
                str(status),
            ).observe(time.perf_counter() - started)
            if status >= 500 and status != 503:  # 503: a dependency is away (an outage, not a bug)
                ERRORS.labels(self.service, "http").inc()
