"""The indexer's own Prometheus series: embedding time, and what JetStream holds for it (events
not yet consumed, dead letters), sampled by the consumer on its own connection every
`MEMVAULT_METRICS__SAMPLE_SECONDS`. gRPC latency and errors come from `memvault_core.metrics`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from prometheus_client import Counter, Gauge, Histogram

from memvault_core.metrics import NAMESPACE, REGISTRY

ResultT = TypeVar("ResultT")

EMBED_SECONDS = Histogram(
    "embedding_seconds",
    "Time one embedding call took (a batch of texts), in a worker thread.",
    namespace=NAMESPACE,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
EMBED_TEXTS = Counter(
    "embedded_texts", "Texts embedded (cache hits not counted).", namespace=NAMESPACE, registry=REGISTRY
)
EVENTS_PENDING = Gauge(
    "indexer_events_pending",
    "Events in the stream the indexer has not acknowledged yet (waiting and in flight): the index lag in events.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
DEAD_LETTERS = Gauge(
    "dead_letters",
    "Events in the dead-letter stream (the indexer gave up on them after its retries).",
    namespace=NAMESPACE,
    registry=REGISTRY,
)


def timed_embedding(embed: Callable[[Sequence[str]], ResultT], texts: Sequence[str]) -> ResultT:
    """`embed(texts)`, timed (runs in the worker thread the caller chose)."""
    started = time.perf_counter()
    result = embed(texts)
    EMBED_SECONDS.observe(time.perf_counter() - started)
    EMBED_TEXTS.inc(len(texts))
    return result
