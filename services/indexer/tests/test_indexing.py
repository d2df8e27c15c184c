"""When the indexer asks an embedded Qdrant Edge to build its HNSW index."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import numpy as np
import pytest

from memvault_indexer import indexing
from memvault_indexer.indexing import Indexer
from memvault_indexer.store import EdgeVectorStore, IndexedMemory


class CountingEdgeStore(EdgeVectorStore):
    """The real embedded store, counting the optimizations it runs."""

    optimized = 0

    async def optimize(self) -> bool:
        self.optimized += 1
        return await super().optimize()


async def add_points(store: EdgeVectorStore, indexer: Indexer, count: int) -> None:
    vectors = np.random.default_rng(count).standard_normal((count, 8)).astype(np.float32)
    await store.upsert([IndexedMemory(uuid.uuid4(), "v1", vector, "h") for vector in vectors])
    indexer._since_optimize += count  # what indexing a batch adds


@pytest.mark.integration
async def test_new_points_are_indexed_after_a_large_burst_or_once_writes_pause(tmp_path: Path) -> None:
    store = CountingEdgeStore(tmp_path, model="test", dimension=8)
    await store.ensure_collection()
    indexer = Indexer(None, store, None)  # type: ignore[arg-type]  # only the store is used here
    await add_points(store, indexer, 5000)
    await indexer.optimize_if_due()
    assert store.optimized == 1  # the first 5,000 are all new

    await add_points(store, indexer, 600)  # over 500 but under a fifth of the collection
    await indexer.optimize_if_due(idle_seconds=1.0)
    assert store.optimized == 1  # writes are still coming: wait for more

    await indexer.optimize_if_due(idle_seconds=indexing.OPTIMIZE_WHEN_IDLE_SECONDS)
    assert store.optimized == 2  # writes paused: index them now
    await indexer.optimize_if_due(idle_seconds=indexing.OPTIMIZE_WHEN_IDLE_SECONDS + 60)
    assert store.optimized == 2  # nothing new since

    await add_points(store, indexer, indexing.OPTIMIZE_AFTER_POINTS - 1)
    await indexer.optimize_if_due(idle_seconds=indexing.OPTIMIZE_WHEN_IDLE_SECONDS)
    assert store.optimized == 2  # too few to be worth copying the shard
    assert await store.count("v1") == 5000 + 600 + indexing.OPTIMIZE_AFTER_POINTS - 1
    await store.close()


@pytest.mark.integration
async def test_a_burst_below_the_indexing_threshold_builds_nothing_until_writes_pause(tmp_path: Path) -> None:
    store = CountingEdgeStore(tmp_path, model="test", dimension=8)
    await store.ensure_collection()
    indexer = Indexer(None, store, None)  # type: ignore[arg-type]  # only the store is used here
    await add_points(store, indexer, 1000)
    await indexer.optimize_if_due(idle_seconds=indexing.OPTIMIZE_WHEN_IDLE_SECONDS)
    assert store.optimized == 1
    for _ in range(8):  # an import of 2,000 in batches, writes still coming
        await add_points(store, indexer, 250)
        await indexer.optimize_if_due(idle_seconds=0.5)
    assert store.optimized == 1  # 2,000 new points, two thirds of the collection, but no copy during the burst
    await indexer.optimize_if_due(idle_seconds=indexing.OPTIMIZE_WHEN_IDLE_SECONDS)
    assert store.optimized == 2  # the burst is over
    await store.close()


class SlowEmbedder:
    """A deterministic embedder that takes a while and counts the texts it embeds."""

    name = "slow"
    dimension = 8

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        import time

        time.sleep(0.3)
        self.embedded.extend(texts)
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(8) for t in texts]
        return np.asarray(rows, dtype=np.float32)


@pytest.mark.unit
async def test_a_call_sent_again_after_its_deadline_reuses_the_embedding_under_way() -> None:
    embedder = SlowEmbedder()
    indexer = Indexer(embedder, None, None)  # type: ignore[arg-type]  # only the embedder is used here
    texts = [f"memory {i}" for i in range(5)]
    first = asyncio.create_task(indexer.embed(texts))
    await asyncio.sleep(0.05)
    first.cancel()  # the caller's deadline passed: gRPC cancels the handler
    again = await indexer.embed([*texts, "one more"])
    assert embedder.embedded == [*texts, "one more"]  # each text embedded once
    assert np.array_equal(again[:5], await indexer.embed(texts))  # and kept, though the first call was cancelled
    assert len(embedder.embedded) == 6


@pytest.mark.integration
async def test_a_search_and_a_scoring_call_sent_together_embed_the_query_once(tmp_path: Path) -> None:
    # Archive search asks for the nearest messages while Postgres ranks the keyword side, then has the
    # keyword hits scored against the same query: the second call waits for the first one's embedding.
    embedder = SlowEmbedder()
    store = EdgeVectorStore(tmp_path, model="slow", dimension=8)
    await store.ensure_collection()
    ids = [uuid.uuid4() for _ in range(20)]
    vectors = np.random.default_rng(1).standard_normal((20, 8)).astype(np.float32)
    await store.upsert([IndexedMemory(i, "v1", v, "h", kind="message") for i, v in zip(ids, vectors, strict=True)])
    indexer = Indexer(embedder, store, None)  # type: ignore[arg-type]  # no feed: nothing is indexed here

    nearest = asyncio.create_task(indexer.search("v1", "where is the ferry", 5, messages=True))
    await asyncio.sleep(0.05)  # the query is being embedded
    scored = await indexer.search("v1", "where is the ferry", 0, [str(ids[0]), str(ids[1])], messages=True)
    near = await nearest
    assert embedder.embedded == ["where is the ferry"]
    assert set(scored) == {str(ids[0]), str(ids[1])} and len(near) == 5
    query = embedder.embed(["where is the ferry"])[0]
    query /= np.linalg.norm(query)
    for memory_id in scored:
        vector = vectors[ids.index(uuid.UUID(memory_id))]
        assert scored[memory_id] == pytest.approx(float(query @ vector / np.linalg.norm(vector)), abs=1e-5)
    await store.close()


@pytest.mark.unit
async def test_texts_embedded_for_indexing_are_not_cached_but_a_duplicate_checks_are_reused() -> None:
    embedder = SlowEmbedder()
    indexer = Indexer(embedder, None, None)  # type: ignore[arg-type]  # only the embedder is used here
    checked = await indexer.embed(["checked before its write"])  # a write's duplicate check
    indexed = await indexer.embed(["checked before its write", "an archived message"], keep=False)
    assert embedder.embedded == ["checked before its write", "an archived message"]  # the check's vector reused
    assert np.array_equal(indexed[0], checked[0])

    # An import's messages are not kept: memory stays flat however many there are.
    await indexer.embed(["an archived message"])
    assert embedder.embedded.count("an archived message") == 2

    # A search for a text being indexed right now waits for that embedding instead of making its own.
    writing = asyncio.create_task(indexer.embed(["being indexed"], keep=False))
    await asyncio.sleep(0.05)
    searched = await indexer.embed(["being indexed"])
    assert np.array_equal(searched, await writing)
    assert embedder.embedded.count("being indexed") == 1
