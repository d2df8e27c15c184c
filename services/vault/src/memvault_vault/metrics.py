"""The vault's own Prometheus series, sampled from Postgres every `MEMVAULT_METRICS__SAMPLE_SECONDS`:
the outbox (events the relay has not published yet), the index lag (memories whose current text the
indexer has not reported indexed) and the failed index jobs (the dead letters, as the vault records
them). gRPC latency, errors and the pool come from `memvault_core.metrics`."""

from __future__ import annotations

import asyncio

from prometheus_client import Gauge

from memvault_core.metrics import NAMESPACE, REGISTRY, sample_periodically, track_pool
from memvault_vault.database import Database
from memvault_vault.index_admin.store import IndexAdminStore
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.outbox.store import backlog

OUTBOX_DEPTH = Gauge(
    "outbox_depth", "Events written but not yet published to NATS.", namespace=NAMESPACE, registry=REGISTRY
)
OUTBOX_OLDEST_SECONDS = Gauge(
    "outbox_oldest_age_seconds",
    "Age of the oldest event not yet published (0 when the outbox is drained).",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
INDEX_PENDING = Gauge(
    "index_pending",
    "Memories whose current text is not indexed yet (failed ones not counted).",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
INDEX_LAG_SECONDS = Gauge(
    "index_lag_seconds",
    "Age of the oldest memory text waiting to be indexed, from its last change (0 when none waits).",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
INDEX_FAILED = Gauge(
    "index_failed",
    "Failed index jobs (dead letters) recorded in the vault, in every vault.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)


class VaultMetrics:
    def __init__(self, database: Database) -> None:
        self._database = database
        self._feed = IndexFeedStore(database)
        self._admin = IndexAdminStore(database)
        track_pool("vault", database.pool)

    async def sample(self) -> None:
        """Read the outbox, the index lag and the failures once and set the gauges."""
        depth, oldest = await backlog(self._database.pool)
        OUTBOX_DEPTH.set(depth)
        OUTBOX_OLDEST_SECONDS.set(oldest)
        pending, lag = await self._feed.lag()
        INDEX_PENDING.set(pending)
        INDEX_LAG_SECONDS.set(lag)
        INDEX_FAILED.set(await self._admin.failed_total())

    async def run(self, every: float) -> None:
        await sample_periodically("vault", self.sample, every, asyncio.sleep)
