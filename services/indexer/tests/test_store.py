"""The vector store contract, run against every real backend (never a mock).

Backends: Qdrant Edge in a temporary directory, qdrant-client's local mode on disk, and
`qdrant-client`: the server path (`QdrantServerStore.connect`) on the session's Qdrant server
(`MEMVAULT_TEST_QDRANT_URL`, else a container where a Docker engine answers; see the `qdrant_url`
fixture), or where there is none the same store class in qdrant-client's local mode, in memory.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from memvault_core.errors import InvalidArgument, Unavailable
from memvault_indexer import sparse_copy
from memvault_indexer.edge_store import SEARCH_BATCH
from memvault_indexer.store import (
    EdgeVectorStore,
    IndexedMemory,
    QdrantServerStore,
    SearchFilters,
    StoredPoint,
    VectorStore,
    VectorStoreSettings,
    collection_name,
    open_store,
)

DIM = 8
MODEL = "test-model"

StoreFactory = Callable[[Path, str | None], VectorStore]


def qdrant_client_store(tmp: Path, qdrant_url: str | None) -> VectorStore:
    if qdrant_url is None:
        return QdrantServerStore.local(":memory:", model=MODEL, dimension=DIM)
    # A collection of its own on a server other test runs may share.
    return QdrantServerStore.connect(qdrant_url, model=f"{MODEL}-{uuid.uuid4().hex[:8]}", dimension=DIM)


BACKENDS: dict[str, StoreFactory] = {
    "edge": lambda tmp, _: EdgeVectorStore(tmp / "edge", model=MODEL, dimension=DIM),
    "qdrant-client": qdrant_client_store,
    "qdrant-local-path": lambda tmp, _: QdrantServerStore.local(tmp / "qdrant", model=MODEL, dimension=DIM),
}


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path, qdrant_url: str | None) -> AsyncIterator[VectorStore]:
    backend = BACKENDS[request.param](tmp_path, qdrant_url)
    await backend.ensure_collection()
    yield backend
    await backend.drop_collection()
    await backend.close()


def unit(*values: float) -> NDArray[np.float32]:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def memory(vault: str, vector: NDArray[np.float32], *, content_hash: str = "h", **extra: str) -> IndexedMemory:
    return IndexedMemory(memory_id=uuid.uuid4(), vault_id=vault, vector=vector, content_hash=content_hash, **extra)


async def scan_all(store: VectorStore, vault_id: str | None = None, page_size: int = 1000) -> list[StoredPoint]:
    return [point async for point in store.scan(vault_id, page_size=page_size)]


@pytest.mark.unit
def test_collection_name_carries_model_and_dimension() -> None:
    assert collection_name("all-MiniLM-L6-v2", 384) == "memvault_all-minilm-l6-v2_384"
    assert collection_name("sentence-transformers/all-mpnet-base-v2", 768) == "memvault_all-mpnet-base-v2_768"
    assert collection_name("nomic-embed-text:latest", 768) == "memvault_nomic-embed-text-latest_768"
    with pytest.raises(InvalidArgument):
        collection_name("model", 0)


@pytest.mark.integration
async def test_search_ranks_by_cosine_within_one_vault(store: VectorStore) -> None:
    near = memory("v1", unit(1, 0.1))
    middle = memory("v1", unit(1, 1))
    far = memory("v1", unit(0, 1))
    other_vault = memory("v2", unit(1, 0))
    await store.upsert([near, middle, far, other_vault])

    hits = await store.search(unit(1, 0), "v1", limit=10)

    assert [h.memory_id for h in hits] == [str(near.memory_id), str(middle.memory_id), str(far.memory_id)]
    assert hits[0].score == pytest.approx(float(unit(1, 0.1) @ unit(1, 0)), abs=1e-4)
    assert hits[2].score == pytest.approx(0.0, abs=1e-4)
    memory_id, score = hits[1]  # hits unpack as (memory_id, score)
    assert memory_id == str(middle.memory_id)
    assert score == pytest.approx(2**-0.5, abs=1e-4)
    assert [h.memory_id for h in await store.search(unit(1, 0), "v2", limit=10)] == [str(other_vault.memory_id)]
    assert await store.search(unit(1, 0), "nobody", limit=10) == []


@pytest.mark.integration
async def test_search_many_answers_each_vector_as_search_does(store: VectorStore) -> None:
    memories = [memory("v1", unit(1, x / 10)) for x in range(12)] + [memory("v2", unit(1, 0))]
    await store.upsert(memories)
    queries = [unit(1, 0), unit(0, 1), unit(1, 1, 1)]
    # More queries than the Edge store sends into the shard in one call, answered in order.
    many = [unit(1, x / 40, (x % 7) / 7) for x in range(2 * SEARCH_BATCH + 3)]

    batched = await store.search_many(queries, "v1", limit=5)

    assert batched == [await store.search(query, "v1", limit=5) for query in queries]
    assert await store.search_many(many, "v1", limit=3) == [await store.search(q, "v1", limit=3) for q in many]
    assert all(len(hits) == 5 for hits in batched)
    assert str(memories[-1].memory_id) not in {hit.memory_id for hits in batched for hit in hits}
    assert await store.search_many([], "v1", limit=5) == []
    assert await store.search_many(queries, "v1", limit=0) == [[], [], []]


@pytest.mark.integration
async def test_the_edge_store_searches_at_most_search_batch_queries_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qdrant Edge holds the GIL while it searches: one call for an import's 500 texts would stall the
    model embedding the next import in another thread, so `search_many` sends them in calls of at most
    SEARCH_BATCH (the real shard answers; the request type is only watched)."""
    import qdrant_edge

    sizes: list[int] = []
    real = qdrant_edge.QueryBatchRequest

    def watched(requests: list[object]) -> object:
        sizes.append(len(requests))
        return real(requests)

    store = EdgeVectorStore(tmp_path / "edge", model=MODEL, dimension=DIM)
    await store.ensure_collection()
    try:
        await store.upsert([memory("v1", unit(1, x / 10)) for x in range(5)])
        monkeypatch.setattr(qdrant_edge, "QueryBatchRequest", watched)

        hits = await store.search_many([unit(1, x / 50) for x in range(2 * SEARCH_BATCH + 3)], "v1", limit=2)
    finally:
        await store.close()

    assert sizes == [SEARCH_BATCH, SEARCH_BATCH, 3]
    assert len(hits) == 2 * SEARCH_BATCH + 3 and all(len(h) == 2 for h in hits)


@pytest.mark.integration
async def test_upsert_is_idempotent_and_replaces_the_point(store: VectorStore) -> None:
    first = memory("v1", unit(1, 0), content_hash="old")
    await store.upsert([first])
    await store.upsert([first])
    replaced = IndexedMemory(
        memory_id=str(first.memory_id).upper(), vault_id="v1", vector=unit(0, 1), content_hash="new"
    )
    await store.upsert([replaced])

    assert await store.count("v1") == 1
    [point] = await scan_all(store, "v1")
    assert point == StoredPoint(str(first.memory_id), "v1", "new", MODEL)
    [hit] = await store.search(unit(0, 1), "v1", limit=5)
    assert hit.score == pytest.approx(1.0, abs=1e-4)


@pytest.mark.integration
async def test_filters_by_status_type_and_ids(store: VectorStore) -> None:
    active_fact = memory("v1", unit(1, 0), status="active", type="fact")
    proposed_fact = memory("v1", unit(1, 0.2), status="proposed", type="fact")
    active_pref = memory("v1", unit(1, 0.4), status="active", type="preference")
    await store.upsert([active_fact, proposed_fact, active_pref])

    async def ids(filters: SearchFilters) -> set[str]:
        return {h.memory_id for h in await store.search(unit(1, 0), "v1", 10, filters)}

    assert await ids(SearchFilters(statuses=["active"])) == {str(active_fact.memory_id), str(active_pref.memory_id)}
    assert await ids(SearchFilters(types=["fact"])) == {str(active_fact.memory_id), str(proposed_fact.memory_id)}
    assert await ids(SearchFilters(statuses=["active"], types=["fact"])) == {str(active_fact.memory_id)}
    assert await ids(SearchFilters(statuses=["rejected"])) == set()
    assert await ids(SearchFilters(memory_ids=[active_pref.memory_id])) == {str(active_pref.memory_id)}
    assert await ids(SearchFilters(exclude_ids=[str(active_fact.memory_id)])) == {
        str(proposed_fact.memory_id),
        str(active_pref.memory_id),
    }


@pytest.mark.integration
async def test_scoring_named_candidates_gives_their_exact_cosine(store: VectorStore) -> None:
    # Recall asks for the cosine of keyword-only candidates that are far down the dense list.
    crowd = [memory("v1", unit(1, 0.01 * i)) for i in range(30)]
    outsider = memory("v1", unit(0, 1))
    await store.upsert([*crowd, outsider])

    top = await store.search(unit(1, 0), "v1", limit=5)
    assert str(outsider.memory_id) not in {h.memory_id for h in top}
    [scored] = await store.search(unit(1, 0), "v1", limit=5, filters=SearchFilters(memory_ids=[outsider.memory_id]))
    assert scored.memory_id == str(outsider.memory_id)
    assert scored.score == pytest.approx(0.0, abs=1e-4)


@pytest.mark.integration
async def test_delete_and_delete_vault(store: VectorStore) -> None:
    keep, gone = memory("v1", unit(1, 0)), memory("v1", unit(0, 1))
    others = [memory("v2", unit(1, 1)) for _ in range(3)]
    await store.upsert([keep, gone, *others])
    assert (await store.count(), await store.count("v1"), await store.count("v2")) == (5, 2, 3)

    await store.delete([gone.memory_id, uuid.uuid4()])  # unknown ids are ignored
    assert [h.memory_id for h in await store.search(unit(0, 1), "v1", 10)] == [str(keep.memory_id)]

    await store.delete_vault("v2")
    assert (await store.count(), await store.count("v2")) == (1, 0)


@pytest.mark.integration
async def test_scan_lists_every_point_across_pages(store: VectorStore) -> None:
    memories = [memory(f"v{i % 3}", unit(1, i / 10), content_hash=f"hash-{i}") for i in range(25)]
    await store.upsert(memories)

    points = await scan_all(store, page_size=7)
    assert sorted((p.memory_id, p.vault_id, p.content_hash, p.model) for p in points) == sorted(
        (str(m.memory_id), m.vault_id, m.content_hash, MODEL) for m in memories
    )
    assert {p.memory_id for p in await scan_all(store, "v1", page_size=4)} == {
        str(m.memory_id) for m in memories if m.vault_id == "v1"
    }


@pytest.mark.integration
async def test_vectors_come_back_as_stored_and_unknown_ids_are_left_out(store: VectorStore) -> None:
    memories = [memory("v1", unit(1, i / 10), content_hash=f"hash-{i}") for i in range(3)]
    await store.upsert(memories)
    missing = uuid.uuid4()
    points = await store.vectors([m.memory_id for m in memories] + [missing])
    by_id = {p.memory_id: p for p in points}
    assert set(by_id) == {str(m.memory_id) for m in memories}
    for m in memories:
        point = by_id[str(m.memory_id)]
        assert (point.vault_id, point.content_hash, point.model) == ("v1", m.content_hash, MODEL)
        assert np.allclose(point.vector, np.asarray(m.vector), atol=1e-6)
    assert await store.vectors([]) == []


@pytest.mark.integration
async def test_drop_collection_loses_every_point_and_ensure_recreates_it(store: VectorStore) -> None:
    await store.upsert([memory("v1", unit(1, 0))])
    await store.drop_collection()
    await store.ensure_collection()
    assert await store.count() == 0
    await store.upsert([memory("v1", unit(1, 0))])
    assert await store.count("v1") == 1


@pytest.mark.integration
async def test_rejects_wrong_dimension_and_non_uuid_ids(store: VectorStore) -> None:
    with pytest.raises(InvalidArgument, match="dimensions"):
        await store.upsert([IndexedMemory(uuid.uuid4(), "v1", [1.0, 0.0], "h")])
    with pytest.raises(InvalidArgument, match="UUID"):
        await store.upsert([IndexedMemory("memory-1", "v1", unit(1, 0), "h")])
    with pytest.raises(InvalidArgument, match="dimensions"):
        await store.search([1.0] * (DIM + 1), "v1", 5)
    assert await store.count() == 0


@pytest.mark.integration
async def test_edge_store_survives_a_restart(tmp_path: Path) -> None:
    settings = VectorStoreSettings(data_dir=tmp_path / "qdrant")
    first = open_store(settings, model=MODEL, dimension=DIM)
    assert isinstance(first, EdgeVectorStore)
    await first.ensure_collection()
    saved = memory("v1", unit(1, 0), content_hash="abc")
    await first.upsert([saved, memory("v1", unit(0, 1))])
    await first.close()
    assert (tmp_path / "qdrant" / "memvault_test-model_8").is_dir()

    second = open_store(settings, model=MODEL, dimension=DIM)
    await second.ensure_collection()
    assert await second.count("v1") == 2
    assert (await second.search(unit(1, 0), "v1", 1))[0].memory_id == str(saved.memory_id)
    assert isinstance(second, EdgeVectorStore)
    await second.optimize()
    assert (await second.search(unit(1, 0), "v1", 1))[0].memory_id == str(saved.memory_id)
    await second.close()


@pytest.mark.integration
async def test_models_get_separate_collections(tmp_path: Path) -> None:
    small = EdgeVectorStore(tmp_path, model="model-a", dimension=DIM)
    large = EdgeVectorStore(tmp_path, model="model-b", dimension=DIM * 2)
    for backend in (small, large):
        await backend.ensure_collection()
    await small.upsert([memory("v1", unit(1, 0))])
    assert (await small.count(), await large.count()) == (1, 0)
    assert {small.path.name, large.path.name} == {"memvault_model-a_8", "memvault_model-b_16"}
    assert small.path.parent == large.path.parent == tmp_path
    for backend in (small, large):
        await backend.close()


@pytest.mark.integration
async def test_concurrent_writes_and_searches(store: VectorStore) -> None:
    batches = [[memory("v1", unit(1, (b * 10 + i) / 100)) for i in range(10)] for b in range(8)]
    results = await asyncio.gather(
        *(store.upsert(batch) for batch in batches), *(store.search(unit(1, 0), "v1", 5) for _ in range(8))
    )
    assert all(len(r) <= 5 for r in results[8:] if r is not None)
    assert await store.count("v1") == 80


@pytest.mark.integration
async def test_the_duplicate_check_searches_the_edge_store_narrower_than_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`search_many` (every write's duplicate check) keeps `duplicate_hnsw_ef` candidates, a search `hnsw_ef`,
    each at least the result count, as the settings say (the real shard answers; the parameters are only
    watched)."""
    import qdrant_edge

    asked: list[int] = []
    real = qdrant_edge.SearchParams

    def watched(*, hnsw_ef: int) -> object:
        asked.append(hnsw_ef)
        return real(hnsw_ef=hnsw_ef)

    store = open_store(
        VectorStoreSettings(data_dir=tmp_path, hnsw_ef=100, duplicate_hnsw_ef=40), model=MODEL, dimension=DIM
    )
    await store.ensure_collection()
    try:
        await store.upsert([memory("v1", unit(1, x / 10)) for x in range(5)])
        monkeypatch.setattr(qdrant_edge, "SearchParams", watched)
        assert len(await store.search(unit(1, 0.1), "v1", limit=3)) == 3
        assert [len(h) for h in await store.search_many([unit(1, 0.1), unit(1, 0.2)], "v1", limit=2)] == [2, 2]
        await store.search_many([unit(1, 0.1)], "v1", limit=50)
    finally:
        await store.close()
    assert asked == [100, 40, 40, 50]


@pytest.mark.unit
def test_settings_choose_the_backend(tmp_path: Path) -> None:
    assert isinstance(open_store(VectorStoreSettings(data_dir=tmp_path), model=MODEL, dimension=DIM), EdgeVectorStore)
    local = open_store(VectorStoreSettings(url=":memory:"), model=MODEL, dimension=DIM)
    assert isinstance(local, QdrantServerStore)
    assert local.collection == "memvault_test-model_8"


@pytest.mark.integration
async def test_edge_optimize_keeps_the_event_loop_running(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path, model="bench", dimension=384)
    await store.ensure_collection()
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((8000, 384)).astype(np.float32)
    memories = [IndexedMemory(uuid.uuid4(), "v1", vectors[i], "h") for i in range(len(vectors))]
    for start in range(0, len(memories), 1000):
        await store.upsert(memories[start : start + 1000])

    ticks = 0
    during: list[str] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    async def search_meanwhile(done: asyncio.Event) -> None:
        while not done.is_set():
            try:
                hits = await store.search(vectors[0], "v1", 1)
                during.append("answered" if hits and hits[0].memory_id == str(memories[0].memory_id) else "wrong")
            except Unavailable:
                during.append("unavailable")  # only while the shard is closed to be swapped
            await asyncio.sleep(0.02)

    async def optimize(done: asyncio.Event) -> bool:
        try:
            return await store.optimize()
        finally:
            done.set()

    task = asyncio.create_task(ticker())
    done = asyncio.Event()
    optimized, _ = await asyncio.gather(optimize(done), search_meanwhile(done))
    task.cancel()

    assert optimized is True
    assert ticks > 5  # the loop ran while a child process built the index
    assert "wrong" not in during
    assert "unavailable" not in during  # searches went on from the original, waiting out the swaps
    assert await store.count("v1") == 8000
    assert (await store.search(vectors[7], "v1", 1))[0].memory_id == str(memories[7].memory_id)
    await store.close()


@pytest.mark.integration
async def test_edge_writes_during_an_optimize_are_kept(tmp_path: Path) -> None:
    """Writes go on while a child process builds the index in a copy, and the copy that takes the
    original's place holds them: nothing written meanwhile is lost or comes back."""
    store = EdgeVectorStore(tmp_path, model="bench", dimension=384)
    await store.ensure_collection()
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((9000, 384)).astype(np.float32)
    memories = [IndexedMemory(uuid.uuid4(), "v1", vectors[i], "h") for i in range(len(vectors))]
    for start in range(0, 8000, 1000):  # enough for an HNSW index to be built
        await store.upsert(memories[start : start + 1000])
    written: list[int] = []

    async def write_meanwhile(done: asyncio.Event) -> None:
        for start in range(8000, 9000, 100):
            await store.upsert(memories[start : start + 100])
            written.append(start)
            if done.is_set():
                return
            await asyncio.sleep(0.01)

    async def optimize(done: asyncio.Event) -> bool:
        try:
            return await store.optimize()
        finally:
            done.set()

    done = asyncio.Event()
    gone = [m.memory_id for m in memories[:50]]
    optimized, _, _ = await asyncio.gather(optimize(done), write_meanwhile(done), store.delete(gone))
    assert optimized is True
    assert len(written) > 1  # the writes did not wait for the build
    expected = 8000 + 100 * len(written) - len(gone)
    assert await store.count("v1") == expected
    last = memories[written[-1]]
    assert (await store.search(vectors[written[-1]], "v1", 1))[0].memory_id == str(last.memory_id)
    assert (await store.search(vectors[0], "v1", 1))[0].memory_id != str(memories[0].memory_id)
    assert sorted(p.name for p in os.scandir(tmp_path)) == [store.path.name]  # no copy left behind
    await store.close()

    reopened = EdgeVectorStore(tmp_path, model="bench", dimension=384)
    await reopened.ensure_collection()
    assert await reopened.count("v1") == expected
    await reopened.close()


@pytest.mark.integration
async def test_a_corrupted_edge_store_says_it_is_safe_to_move_away_and_rebuild(tmp_path: Path) -> None:
    settings = VectorStoreSettings(data_dir=tmp_path / "qdrant")
    first = open_store(settings, model=MODEL, dimension=DIM)
    await first.ensure_collection()
    await first.upsert([memory("v1", unit(1, 0))])
    await first.close()
    directory = tmp_path / "qdrant" / "memvault_test-model_8"
    (directory / "edge_config.json").write_text("{")

    with pytest.raises(Unavailable) as failure:
        await open_store(settings, model=MODEL, dimension=DIM).ensure_collection()
    message = failure.value.message
    assert f"cannot open the vector store at {directory}" in message
    assert "only vectors derived from Postgres" in message and "safe to move it away" in message
    assert "start the indexer again: it rebuilds an empty store from the vault" in message
    assert (directory / "edge_config.json").read_text() == "{"  # nothing of the user's is deleted


@pytest.mark.integration
async def test_edge_optimize_copies_the_shard_without_closing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index build copies the open shard (flushed, writes held back) instead of closing it and loading it
    again, which mapped every page of its files into the indexer's memory; the copy holds every point."""
    store = EdgeVectorStore(tmp_path, model="bench", dimension=384)
    await store.ensure_collection()
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((2000, 384)).astype(np.float32)
    memories = [IndexedMemory(uuid.uuid4(), "v1", vectors[i], "h") for i in range(len(vectors))]
    for start in range(0, len(memories), 500):
        await store.upsert(memories[start : start + 500])
    opened = store._shard
    open_while_copied: list[bool] = []
    copy_tree = sparse_copy.copy_tree

    def copy(source: Path, target: Path) -> None:
        open_while_copied.append(store._shard is opened and opened is not None)
        copy_tree(source, target)

    monkeypatch.setattr(sparse_copy, "copy_tree", copy)
    await store.optimize()

    assert open_while_copied == [True]
    assert await store.count("v1") == 2000  # the copy that took the shard's place has every point
    assert (await store.search(vectors[1999], "v1", 1))[0].memory_id == str(memories[1999].memory_id)
    await store.close()
