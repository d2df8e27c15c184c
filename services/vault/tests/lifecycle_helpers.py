"""A VaultService with a stand-in indexer whose similarities each test sets, for the lifecycle rules.

The real indexer is exercised end to end (tests/e2e); here the cosine of each pair of texts is
whatever the test says, so the duplicate and conflict rules can be checked exactly.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from vault_helpers import SECRET, Caller

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.errors import Unavailable
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.domain.memory import normalize
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.services import VaultServices


class FakeIndex:
    """Cosine 0 for every pair of texts unless a test set it; `down` makes every call fail."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.cosines: dict[frozenset[str], float] = {}
        self.down = False
        self.similar_calls = 0
        self.embed_ahead_calls = 0
        self.calls: list[str] = []
        self.texts: list[tuple[str, str]] = []
        """("ahead" or "similar", the first text) as each embed-ahead or Similar call starts, in order."""
        """"similar" or "ahead" as each call starts and "similar done" or "ahead done" as it ends, in order."""
        self.delay = 0.0
        """Seconds each Similar call takes (as embedding does), so that calls can overlap."""
        self.search_delay = 0.0
        """Seconds a Similar call takes beyond `delay` (as searching the index does)."""

    def set(self, a: str, b: str, cosine: float) -> None:
        self.cosines[frozenset((normalize(a), normalize(b)))] = cosine

    def cosine(self, a: str, b: str) -> float:
        if normalize(a) == normalize(b):
            return 1.0
        return self.cosines.get(frozenset((normalize(a), normalize(b))), 0.0)

    async def search(self, vault_id: str, query: str, **_: Any) -> dict[str, float]:
        if self.down:
            raise Unavailable("the fake indexer is down")
        return {}

    async def searchable(self) -> tuple[str, str]:
        if self.down:
            raise Unavailable("the fake indexer is down")
        return "fake-model", ""

    async def embed_ahead(self, vault_id: str, texts: Sequence[str]) -> None:
        if self.down:
            raise Unavailable("the fake indexer is down")
        self.embed_ahead_calls += 1
        self.calls.append("ahead")
        self.texts.append(("ahead", texts[0]))
        await asyncio.sleep(self.delay)
        self.calls.append("ahead done")

    async def similar(
        self,
        vault_id: str,
        texts: Sequence[str],
        *,
        limit: int,
        min_cosine: float,
        pending: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[dict[str, float], dict[int, float]]]:
        if self.down:
            raise Unavailable("the fake indexer is down")
        self.similar_calls += 1
        self.calls.append("similar")
        self.texts.append(("similar", texts[0]))
        await asyncio.sleep(self.delay + self.search_delay)
        self.calls.append("similar done")
        rows = await self.database.pool.fetch("SELECT id::text, content FROM memory WHERE vault_id = $1", vault_id)
        results = []
        for position, text in enumerate(texts):
            memories = {r["id"]: c for r in rows if (c := self.cosine(text, r["content"])) >= min_cosine}
            best = dict(sorted(memories.items(), key=lambda item: -item[1])[:limit])
            earlier = {i: c for i in range(position) if (c := self.cosine(text, texts[i])) >= min_cosine}
            results.append((best, earlier))
        return results


@pytest_asyncio.fixture(scope="session")
async def fake_index_and_stub(database: Database) -> AsyncIterator[tuple[FakeIndex, vault_pb2_grpc.VaultServiceStub]]:
    index = FakeIndex(database)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    # Nothing indexes here, so imports must not wait for the index to catch up.
    service = VaultServices.build(database, index, index_catch_up_seconds=0)  # type: ignore[arg-type]
    vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(service, IdentitySigner(SECRET)), server)
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield index, vault_pb2_grpc.VaultServiceStub(channel)
    await channel.close()
    await server.stop(None)


@pytest_asyncio.fixture
async def owner(database: Database, fake_index_and_stub: tuple[FakeIndex, vault_pb2_grpc.VaultServiceStub]) -> Caller:
    """A fresh vault (review mode) on the service with the stand-in indexer; cosines reset."""
    index, stub = fake_index_and_stub
    index.cosines.clear()
    index.down = False
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    return Caller(stub, IdentitySigner(SECRET), subject, vault)


@pytest.fixture
def fake_index(fake_index_and_stub: tuple[FakeIndex, vault_pb2_grpc.VaultServiceStub]) -> FakeIndex:
    return fake_index_and_stub[0]


def agent(caller: Caller) -> tuple[tuple[str, str], ...]:
    """Metadata for an agent connected through OAuth (read and write, a client name)."""
    return caller.metadata(client="TestAgent", scopes=frozenset({"read", "write"}))


async def remember(caller: Caller, content: str, *, propose: bool = False, **fields: Any) -> vpb.RememberResponse:
    request = vpb.RememberRequest(vault=caller.vault, memory=pb.MemoryDraft(content=content, **fields), propose=propose)
    response: vpb.RememberResponse = await caller.stub.Remember(request, metadata=agent(caller))
    return response


async def bulk(caller: Caller, *contents: str, **fields: Any) -> vpb.BulkRememberResponse:
    request = vpb.BulkRememberRequest(vault=caller.vault, items=[pb.MemoryDraft(content=c) for c in contents], **fields)
    response: vpb.BulkRememberResponse = await caller.stub.BulkRemember(request, metadata=agent(caller))
    return response


async def set_mode(caller: Caller, mode: str) -> None:
    await caller.stub.UpdateSettings(
        vpb.UpdateSettingsRequest(vault=caller.vault, approval_mode=mode),
        metadata=caller.metadata(),
    )


async def get(caller: Caller, memory_id: str) -> pb.Memory:
    response = await caller.stub.ExplainMemory(
        vpb.ExplainMemoryRequest(vault=caller.vault, memory_id=memory_id), metadata=caller.metadata()
    )
    memory: pb.Memory = response.memory
    return memory
