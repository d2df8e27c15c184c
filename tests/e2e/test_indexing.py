"""The indexer as a process: catching up, surviving crashes and outages, rebuilding from Postgres."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from typing import Any

import pytest
from e2e_helpers import call, eventually, index_info, index_points, mcp_session, service_identity, vault_stats

from memvault_devstack.fixtures import StackStarter
from tests.bench import corpus

pytestmark = pytest.mark.e2e

FACTS = [
    "Sam's partner is allergic to peanuts.",
    "The homelab NAS is a Synology DS920+ with four drives.",
    "Deployments run on a k3s cluster of three Intel NUCs.",
    "Prefers dark roast coffee in the morning.",
    "The office printer is a Brother HL-L2350DW.",
]


def fully_indexed(expected: int):  # type: ignore[no-untyped-def]
    async def check(stack):  # type: ignore[no-untyped-def]
        stats = await vault_stats(stack)
        return stats.indexed == expected and stats.index_pending == 0 and stats.index_failed == 0

    return check


async def test_recall_is_hybrid_and_finds_meaning_without_shared_words(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    async with mcp_session(stack.mcp_url) as client:
        for fact in FACTS:
            await call(client, "remember", content=fact)
        # Found at once, before or after the indexer gets to it: recent writes are scored from their text.
        found = await call(client, "recall", query="food allergy")
        assert found["mode"] == "hybrid"
        assert found["results"][0]["content"] == FACTS[0]
        await eventually(lambda: fully_indexed(len(FACTS))(stack))
        found = await call(client, "recall", query="kubernetes hardware")
        assert found["results"][0]["content"] == FACTS[2]


async def test_without_the_indexer_writes_succeed_and_recall_says_keyword_only(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    await asyncio.to_thread(stack.stop_service, "indexer")
    async with mcp_session(stack.mcp_url) as client:
        for fact in FACTS:
            assert (await call(client, "remember", content=fact))["outcome"] == "stored"
        found = await call(client, "recall", query="Which NAS is in the homelab?")
        assert found["mode"] == "keyword-only"
        assert any("semantic search is unavailable" in w for w in found["warnings"])
        assert found["results"][0]["content"] == FACTS[1]
        assert (await vault_stats(stack)).index_pending == len(FACTS)

        await asyncio.to_thread(stack.start_services)  # the indexer catches up from the stream
        await eventually(lambda: fully_indexed(len(FACTS))(stack))
        # The vault notices the indexer is back within seconds (gRPC reconnect backoff is capped).
        hybrid = await eventually(lambda: _mode_is(client, "food allergy", "hybrid"), deadline=15)
        assert hybrid


async def _mode_is(client, query, mode):  # type: ignore[no-untyped-def]
    return (await call(client, "recall", query=query))["mode"] == mode


async def test_indexer_killed_mid_import_indexes_every_memory_exactly_once(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    total, batch = 5_000, 500
    items = [{"content": text} for text in corpus.memories(total, seed=5)]
    async with mcp_session(stack.mcp_url) as client:
        for offset in range(0, total, batch):
            if offset == 2 * batch:
                await asyncio.to_thread(stack.stop_service, "indexer", kill=True)  # a crash, mid-import
            result = await call(client, "bulk_remember", items=items[offset : offset + batch])
            # Alike items are linked as similar, but every one is stored.
            assert sum(result["summary"].get(kind, 0) for kind in ("stored", "similar")) == batch
    await asyncio.to_thread(stack.start_services)
    await eventually(lambda: fully_indexed(total)(stack), deadline=300)
    assert await index_points(stack) == total  # one point per memory: none lost, none twice


async def test_deleted_collection_is_rebuilt_by_reindex_with_identical_recall(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    queries = ["food allergy", "storage server", "kubernetes hardware", "morning drink", "printer model"]
    async with mcp_session(stack.mcp_url) as client:
        await call(client, "bulk_remember", items=[{"content": fact} for fact in FACTS])
        await eventually(lambda: fully_indexed(len(FACTS))(stack))
        before = [await call(client, "recall", query=q) for q in queries]

        await asyncio.to_thread(stack.stop_service, "indexer")
        shutil.rmtree(stack.data_dir / "qdrant")  # the whole collection, gone
        await asyncio.to_thread(stack.start_services)
        # The indexer starts rebuilding an empty store by itself (next test); reindex drops whatever
        # it has by now and builds the whole collection again.
        env = stack.env_for("indexer")
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "memvault_indexer", "reindex", "--address", stack.indexer_address],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert f"rebuild finished: {len(FACTS)} of {len(FACTS)} memories, 0 failed" in done.stdout
        assert await index_points(stack) == len(FACTS)
        # The start-up rebuild may still be finishing (it refuses searches until it has).
        await eventually(lambda: _searchable_with(stack, len(FACTS)), deadline=60)
        after = [await call(client, "recall", query=q) for q in queries]
    assert [[r["id"] for r in page["results"]] for page in after] == [
        [r["id"] for r in page["results"]] for page in before
    ]
    assert [[r["score"] for r in page["results"]] for page in after] == [
        [r["score"] for r in page["results"]] for page in before
    ]


async def test_reconcile_finds_and_repairs_drift(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    async with mcp_session(stack.mcp_url) as client:
        await call(client, "bulk_remember", items=[{"content": fact} for fact in FACTS])
        await eventually(lambda: fully_indexed(len(FACTS))(stack))
    # As the chart's CronJob runs it: in a pod of its own, told where the indexer is by MEMVAULT_INDEXER__ADDRESS.
    env = {**stack.env_for("indexer"), "MEMVAULT_INDEXER__ADDRESS": stack.indexer_address}
    env["MEMVAULT_INDEXER__LISTEN"] = "127.0.0.1:1"  # its own listen address is not where the indexer runs
    command = [sys.executable, "-m", "memvault_indexer", "reconcile"]
    clean = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, check=True)
    assert "missing 0, stale 0, orphans 0" in clean.stdout
    # Drift: two points lost while the indexer was down.
    await asyncio.to_thread(stack.stop_service, "indexer")
    lost = await _delete_points(stack, 2)
    await asyncio.to_thread(stack.start_services)
    found = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, check=True)
    assert "missing 2, stale 0, orphans 0" in found.stdout
    fixed = await asyncio.to_thread(
        subprocess.run, [*command, "--repair"], env=env, capture_output=True, text=True, check=True
    )
    assert "repaired 2" in fixed.stdout
    assert await index_points(stack) == len(FACTS)
    assert lost


async def _delete_points(stack: Any, count: int) -> list[str]:
    """Delete `count` points from the stopped indexer's embedded store, as a damaged store would lose them."""
    from memvault_indexer.embedder import BUNDLED_DIMENSION, BUNDLED_MODEL_NAME
    from memvault_indexer.store import EdgeVectorStore

    store = EdgeVectorStore(stack.data_dir / "qdrant", model=BUNDLED_MODEL_NAME, dimension=BUNDLED_DIMENSION)
    await store.ensure_collection()
    try:
        doomed = [point.memory_id async for point in store.scan()][:count]
        await store.delete(doomed)
        return doomed
    finally:
        await store.close()


async def test_a_lost_vector_store_is_rebuilt_from_the_vault_when_the_indexer_starts(
    fresh_stack: StackStarter,
) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    async with mcp_session(stack.mcp_url) as client:
        await call(client, "bulk_remember", items=[{"content": fact} for fact in FACTS])
        await eventually(lambda: fully_indexed(len(FACTS))(stack))
        await asyncio.to_thread(stack.stop_service, "indexer")
        shutil.rmtree(stack.data_dir / "qdrant")
        await asyncio.to_thread(stack.start_services)
        # Every point back and the rebuild over: the points are all written a moment before the indexer
        # stops refusing searches (CI once recalled in between and got keyword-only, so nothing).
        await eventually(lambda: _searchable_with(stack, len(FACTS)), deadline=60)
        # Found by meaning alone again: no word of the query is in the memory.
        found = await call(client, "recall", query="food intolerance of my significant other", limit=3)
        assert "peanuts" in found["results"][0]["content"] and found["mode"] == "hybrid"
    assert "rebuilt it from the vault" in stack.log_path("indexer").read_text()


async def _searchable_with(stack: Any, count: int) -> bool:
    """The indexer holds `count` points and answers searches (no rebuild filling it)."""
    info = await index_info(stack)
    return int(info.points) == count and info.searchable


async def test_similarity_call_scores_memories_and_earlier_texts(fresh_stack: StackStarter) -> None:
    import asyncpg

    from memvault.index.v1 import index_pb2, index_pb2_grpc
    from memvault_core.grpc import client_channel

    stack = await asyncio.to_thread(fresh_stack)
    async with mcp_session(stack.mcp_url) as client:
        await call(client, "bulk_remember", items=[{"content": fact} for fact in FACTS])
        await eventually(lambda: fully_indexed(len(FACTS))(stack))
        listed = await call(client, "list_memories", limit=10)
    nas_id = next(m["id"] for m in listed["memories"] if "Synology" in m["content"])
    connection = await asyncpg.connect(stack.postgres_dsn)
    vault_uuid = await connection.fetchval("SELECT id::text FROM vault WHERE name = 'default'")
    await connection.close()
    channel = client_channel(stack.indexer_address)
    try:
        response = await index_pb2_grpc.IndexServiceStub(channel).Similar(
            index_pb2.SimilarRequest(
                vault_id=vault_uuid,
                texts=[
                    "The homelab NAS is a Synology DS920+ with 4 drives.",
                    "Completely unrelated: the cat sleeps on the radiator.",
                    "Our NAS in the homelab is a Synology DS920+ with four drives.",
                ],
                limit=3,
                min_cosine=0.8,
            ),
            metadata=service_identity(stack, "vault"),
        )
        # Embedding ahead (an import waiting for its turn): one empty result per text, nothing searched.
        ahead = await index_pb2_grpc.IndexServiceStub(channel).Similar(
            index_pb2.SimilarRequest(
                vault_id=vault_uuid,
                texts=["The homelab NAS is a Synology DS920+ with 4 drives.", "A text embedded ahead."],
                limit=3,
                min_cosine=0.0,
                embed_only=True,
            ),
            metadata=service_identity(stack, "vault"),
        )
    finally:
        await channel.close()
    assert len(ahead.results) == 2
    assert not any(r.memories or r.earlier for r in ahead.results)
    first, unrelated, reworded = response.results
    assert first.memories[0].memory_id == nas_id
    assert first.memories[0].cosine >= 0.9
    assert not unrelated.memories
    assert reworded.memories[0].memory_id == nas_id
    assert [e.index for e in reworded.earlier] == [0]
    assert reworded.earlier[0].cosine >= 0.8


async def test_indexer_and_its_feed_answer_only_the_service_meant_to_call_them(fresh_stack: StackStarter) -> None:
    import uuid

    import grpc

    from memvault.index.v1 import index_pb2, index_pb2_grpc
    from memvault_core.errors import Unavailable
    from memvault_core.grpc import client_channel
    from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
    from memvault_vault.index_client import IndexClient

    stack = await asyncio.to_thread(fresh_stack)
    user = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    other_key = IdentitySigner("another key, not this installation's one")
    search = index_pb2.SearchRequest(vault_id=str(uuid.uuid4()), query="which NAS is in the homelab?", limit=5)
    channel = client_channel(stack.indexer_address)
    try:
        stub = index_pb2_grpc.IndexServiceStub(channel)
        vault, gateway = service_identity(stack, "vault"), service_identity(stack, "gateway")
        refused = {
            "no identity": lambda: stub.Search(search),
            "a user's identity": lambda: stub.Search(search, metadata=((GRPC_METADATA_KEY, user),)),
            "another key": lambda: stub.Search(
                search, metadata=((GRPC_METADATA_KEY, other_key.sign_service("vault")),)
            ),
            "the gateway": lambda: stub.Search(search, metadata=gateway),
            "the vault rebuilding": lambda: stub.Reindex(index_pb2.ReindexRequest(), metadata=vault),
            "the vault repairing": lambda: stub.Reconcile(index_pb2.ReconcileRequest(repair=True), metadata=vault),
        }
        for who, attempt in refused.items():
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await attempt()
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED, who
        answered = await stub.Search(search, metadata=vault)
        assert answered.model
    finally:
        await channel.close()
    # The vault's feed of memory text answers the indexer only.
    from memvault.vault.v1 import index_feed_pb2, index_feed_pb2_grpc

    channel = client_channel(stack.vault_address)
    try:
        feed = index_feed_pb2_grpc.IndexFeedServiceStub(channel)
        documents = index_feed_pb2.GetDocumentsRequest(memory_ids=[str(uuid.uuid4())])
        for metadata in ((), ((GRPC_METADATA_KEY, user),), service_identity(stack, "vault")):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await feed.GetDocuments(documents, metadata=metadata)
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert not (await feed.GetDocuments(documents, metadata=service_identity(stack, "indexer"))).documents
    finally:
        await channel.close()
    # A vault holding another key is told what to fix (recall then answers keyword-only).
    client = IndexClient(stack.indexer_address, 5.0, other_key)
    try:
        with pytest.raises(Unavailable, match="same MEMVAULT_IDENTITY__SECRET"):
            await client.search(search.vault_id, search.query, limit=5, score_ids=(), pending=())
    finally:
        await client.close()
