"""The relay and the indexer on a three-node JetStream cluster (loopback, the same nats-server binary,
streams replicated three times): the node leading the events stream is SIGKILLed during writes and
brought back, and every acknowledged memory reaches the stream once and the vector store once."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
import uuid
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from e2e_helpers import eventually, index_points, vault_stats

from memvault.events.v1 import memory_events_pb2 as events_pb
from memvault.vault.v1 import memory_pb2, vault_pb2, vault_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_core.settings import NatsSettings
from memvault_devstack.fixtures import StackStarter
from memvault_devstack.nats import EmbeddedNatsCluster
from memvault_devstack.stack import Stack

pytestmark = pytest.mark.e2e

WRITES = 90
KILL_AT, BACK_AT = 30, 60


async def _remember_all(stack: Stack, cluster: EmbeddedNatsCluster, settings: NatsSettings) -> list[str]:
    """Write WRITES memories one by one; at KILL_AT kill the node leading the stream, at BACK_AT
    start it again. The ids the vault acknowledged."""
    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    channel = client_channel(stack.vault_address)
    acknowledged: list[str] = []
    killed: int | None = None
    try:
        stub = vault_pb2_grpc.VaultServiceStub(channel)
        for i in range(WRITES):
            if i == KILL_AT:
                killed = await _stream_leader(cluster, settings)
                await asyncio.to_thread(cluster.kill, killed)
            if i == BACK_AT:
                assert killed is not None
                await asyncio.to_thread(cluster.restart, killed)
            # Distinct words, so the near-duplicate rule stores every one.
            words = " ".join(uuid.uuid4().hex[:8] for _ in range(4))
            response = await stub.Remember(
                vault_pb2.RememberRequest(
                    vault="default", memory=memory_pb2.MemoryDraft(content=f"Cluster write {i}: {words}")
                ),
                metadata=((GRPC_METADATA_KEY, token),),
            )
            acknowledged.append(response.result.memory_id)
            await asyncio.sleep(0.05)
    finally:
        await channel.close()
    return acknowledged


async def _stream_leader(cluster: EmbeddedNatsCluster, settings: NatsSettings) -> int:
    nc = await nats.connect(cluster.urls)
    try:
        info = await nc.jetstream(timeout=5.0).stream_info(settings.stream)
    finally:
        await nc.close()
    assert info.cluster is not None and info.cluster.leader is not None
    return int(info.cluster.leader.removeprefix("n"))


async def _created_events(cluster: EmbeddedNatsCluster, settings: NatsSettings) -> list[str]:
    """Memory ids of every `memory.created` message in the stream, repeats kept."""
    nc = await nats.connect(cluster.urls)
    seen: list[str] = []
    try:
        js = nc.jetstream(timeout=5.0)
        sub = await js.subscribe(f"{settings.subject_root}.events.v1.memory.created", ordered_consumer=True)
        with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
            while True:
                message = await sub.next_msg(timeout=2.0)
                seen.append(events_pb.MemoryCreated.FromString(message.data).memory_id)
    finally:
        await nc.close()
    return seen


async def _replicas_current(cluster: EmbeddedNatsCluster, settings: NatsSettings) -> bool:
    nc = await nats.connect(cluster.urls)
    try:
        info = await nc.jetstream(timeout=5.0).stream_info(settings.stream)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError):
        return False  # no stream leader answers yet (CI saw the API time out while the cluster settled)
    finally:
        await nc.close()
    assert info.config.num_replicas == settings.stream_replicas
    assert info.cluster is not None
    peers = info.cluster.replicas or []
    return len(peers) == 2 and all(peer.current and not peer.offline for peer in peers)


async def test_a_cluster_node_killed_during_writes_loses_and_repeats_nothing(
    fresh_stack: StackStarter, tmp_path: Path
) -> None:
    cluster = EmbeddedNatsCluster(tmp_path / "nats-cluster", size=3)
    await asyncio.to_thread(cluster.start)
    try:
        stack = await asyncio.to_thread(
            fresh_stack,
            services=("vault", "indexer"),
            nats_url=cluster.url,
            env={"MEMVAULT_NATS__STREAM_REPLICAS": "3"},
        )
        settings = NatsSettings(url=cluster.url, namespace=stack.nats_namespace, stream_replicas=3)
        # The relay created the stream, replicated on the three nodes.
        await eventually(lambda: _replicas_current(cluster, settings), deadline=60)

        started = time.monotonic()
        acknowledged = await _remember_all(stack, cluster, settings)
        assert len(acknowledged) == WRITES

        async def settled() -> bool:
            stats = await vault_stats(stack)
            return bool(stats.indexed == WRITES and stats.index_pending == 0 and stats.index_failed == 0)

        await eventually(settled, deadline=180)
        recovered = time.monotonic() - started
        await eventually(lambda: _replicas_current(cluster, settings), deadline=60)

        events = await _created_events(cluster, settings)
        counts = collections.Counter(events)
        lost = set(acknowledged) - set(counts)
        repeated = {memory_id: n for memory_id, n in counts.items() if n > 1}
        assert not lost, f"{len(lost)} acknowledged memories never reached the stream"
        assert not repeated, f"events published more than once: {repeated}"
        assert set(counts) == set(acknowledged)
        assert await index_points(stack) == WRITES  # one point per memory: none lost, none twice
        assert recovered < 240
    finally:
        await asyncio.to_thread(cluster.stop)
