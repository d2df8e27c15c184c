"""Backup and restore on a running stack, with the indexer: embeddings travel in the file and are
kept when they fit, the index is rebuilt through the outbox when they do not, and the
`memvault-vault backup` / `restore` commands give the same file and result as the API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from e2e_helpers import call, eventually, mcp_session, vault_stats
from test_archive_search import archive_call
from test_archive_search import export as archive_export

from memvault.vault.v1 import accounts_pb2, accounts_pb2_grpc, backup_pb2, backup_pb2_grpc, vault_pb2, vault_pb2_grpc
from memvault.vault.v1 import archive_pb2 as apb
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.fixtures import StackStarter
from memvault_vault.backup import format as backup_format

pytestmark = pytest.mark.e2e

FACTS = [
    "Sam's partner is allergic to peanuts.",
    "The homelab NAS is a Synology DS920+ with four drives.",
    "Deployments run on a k3s cluster of three Intel NUCs.",
    "Prefers dark roast coffee in the morning.",
    "The office printer is a Brother HL-L2350DW.",
]


QUERIES = ["food allergy", "kubernetes hardware", "storage at home", "morning drink", "printer model"]


def aged(data: bytes, created_at: str) -> bytes:
    """The same backup with every memory written at `created_at`, and a manifest that fits again."""
    writer = backup_format.BackupWriter()
    lines = []
    for line in data.splitlines()[:-1]:
        record = json.loads(line)
        if record["kind"] == "memory":
            record |= {"created_at": created_at, "updated_at": created_at, "valid_from": created_at}
        lines.append(writer.line(record))
    return b"".join(lines) + writer.manifest()


def owner(stack: Any) -> tuple[tuple[str, str], ...]:
    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    return ((GRPC_METADATA_KEY, token),)


async def backup(stack: Any, vault: str, *, embeddings: bool) -> bytes:
    channel = client_channel(stack.vault_address)
    try:
        stub = backup_pb2_grpc.BackupServiceStub(channel)
        request = backup_pb2.BackupRequest(vault=vault, omit_embeddings=not embeddings)
        return b"".join([chunk.data async for chunk in stub.Backup(request, metadata=owner(stack))])
    finally:
        await channel.close()


async def restore(stack: Any, vault: str, data: bytes, *, create: bool = True) -> backup_pb2.RestoreResponse:
    channel = client_channel(stack.vault_address)

    async def requests() -> AsyncIterator[backup_pb2.RestoreRequest]:
        yield backup_pb2.RestoreRequest(options=backup_pb2.RestoreOptions(vault=vault))
        for start in range(0, len(data), 64 * 1024):
            yield backup_pb2.RestoreRequest(data=data[start : start + 64 * 1024])

    try:
        if create:
            await accounts_pb2_grpc.AccountServiceStub(channel).CreateVault(
                accounts_pb2.CreateVaultRequest(name=vault), metadata=owner(stack)
            )
        reply: backup_pb2.RestoreResponse = await backup_pb2_grpc.BackupServiceStub(channel).Restore(
            requests(), metadata=owner(stack)
        )
        return reply
    finally:
        await channel.close()


async def recall(stack: Any, vault: str, query: str) -> vault_pb2.RecallResponse:
    channel = client_channel(stack.vault_address)
    try:
        reply: vault_pb2.RecallResponse = await vault_pb2_grpc.VaultServiceStub(channel).Recall(
            vault_pb2.RecallRequest(vault=vault, query=query, limit=3), metadata=owner(stack)
        )
        return reply
    finally:
        await channel.close()


async def test_embeddings_round_trip_and_the_index_is_rebuilt_without_them(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    async with mcp_session(stack.mcp_url) as client:
        for fact in FACTS:
            await call(client, "remember", content=fact)

    async def indexed(vault: str, count: int) -> bool:
        stats = await vault_stats(stack, vault)
        return bool(stats.indexed == count and stats.index_pending == 0)

    await eventually(lambda: indexed("default", len(FACTS)))
    data = await backup(stack, "default", embeddings=True)
    records = [json.loads(line) for line in data.splitlines()]
    header, embeddings = records[0], [r for r in records if r["kind"] == "embedding"]
    memories = {r["id"] for r in records if r["kind"] == "memory"}
    assert header["embeddings"] is True and header["embedding_dimension"] == 384
    assert len(embeddings) == len(FACTS) and {e["memory_id"] for e in embeddings} == memories
    assert all(e["model"] == header["embedding_model"] and len(e["vector"]) == 384 for e in embeddings)

    # With the embeddings: the copy is searchable by meaning at once, nothing waits for the indexer.
    kept = await restore(stack, "copy", data)
    assert kept.embeddings_kept == len(FACTS) and kept.reembedding == 0
    assert await indexed("copy", len(FACTS))
    found = await recall(stack, "copy", "kubernetes hardware")
    assert found.mode == "hybrid" and found.hits[0].memory.content == FACTS[2]

    # Without them: every memory goes through the outbox to the indexer again.
    plain = await backup(stack, "default", embeddings=False)
    assert not [line for line in plain.splitlines() if b'"kind":"embedding"' in line]
    # memories written last year, so recall cannot score them from their text as it does recent writes
    plain = aged(plain, "2025-01-15T09:00:00+00:00")
    await asyncio.to_thread(stack.stop_service, "indexer")  # so the restored copy waits for it
    rebuilt = await restore(stack, "rebuilt", plain)
    assert rebuilt.embeddings_kept == 0 and rebuilt.reembedding == len(FACTS)
    assert any("keyword" in notice for notice in rebuilt.notices)
    waiting = await recall(stack, "rebuilt", "Synology NAS drives")
    assert waiting.hits[0].memory.content == FACTS[1]  # found by its words
    assert any(f"{len(FACTS)} memories are not in the search index yet" in w for w in waiting.warnings)
    await asyncio.to_thread(stack.start_services)
    await eventually(lambda: indexed("rebuilt", len(FACTS)))

    async def hybrid() -> vault_pb2.RecallResponse | None:  # once the vault has reconnected to the indexer
        answer = await recall(stack, "rebuilt", "kubernetes hardware")
        return answer if answer.mode == "hybrid" else None

    found = await eventually(hybrid)
    assert found.hits[0].memory.content == FACTS[2]
    assert not any("not in the search index" in w for w in found.warnings)

    # The commands, straight on the database: the same vault out, and back into a new one.
    environment = {
        **os.environ,
        "MEMVAULT_POSTGRES__DSN": stack.postgres_dsn,
        "MEMVAULT_VAULT__INDEXER_ADDRESS": stack.indexer_address,
        "MEMVAULT_IDENTITY__SECRET": stack.identity_secret,
    }
    path = stack.data_dir / "default.jsonl"
    command = [sys.executable, "-m", "memvault_vault", "backup", "--vault", "default", "--output", str(path)]
    done = await asyncio.to_thread(subprocess.run, command, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stderr and not (stack.data_dir / "default.jsonl.partial").exists()
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[-1])["counts"]["embedding"] == len(FACTS)
    channel = client_channel(stack.vault_address)
    await accounts_pb2_grpc.AccountServiceStub(channel).CreateVault(
        accounts_pb2.CreateVaultRequest(name="from-file"), metadata=owner(stack)
    )
    await channel.close()
    command = [sys.executable, "-m", "memvault_vault", "restore", "--vault", "from-file", "--input", str(path)]
    done = await asyncio.to_thread(subprocess.run, command, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{len(FACTS)} embeddings kept" in done.stdout
    again = await asyncio.to_thread(subprocess.run, command, env=environment, capture_output=True, text=True)
    assert again.returncode == 1 and "--replace" in again.stderr and len(again.stderr.strip().splitlines()) == 1

    # Another deployment: the same answers to the same questions, at once (the embeddings came along).
    answers = [[h.memory.content for h in (await recall(stack, "default", q)).hits] for q in QUERIES]
    await asyncio.to_thread(stack.stop)
    other = await asyncio.to_thread(fresh_stack)
    moved = await restore(other, "default", data, create=False)
    assert moved.embeddings_kept == len(FACTS)
    assert [[h.memory.content for h in (await recall(other, "default", q)).hits] for q in QUERIES] == answers


async def test_a_restored_archive_is_indexed_again_and_searched_by_meaning(fresh_stack: StackStarter) -> None:
    """Archived messages carry no embedding in a backup: the restore sends each to the indexer
    (`message.archived`), so the copy's archive search finds a message by meaning, without shared words."""
    stack = await asyncio.to_thread(fresh_stack)
    await archive_call(stack, "StartImport", apb.StartImportRequest(vault="default", data=archive_export()))

    async def indexed(vault: str) -> bool:
        stats = await archive_call(stack, "GetArchiveStats", apb.GetArchiveStatsRequest(vault=vault))
        return bool(stats.messages == 15 and stats.indexed == 15 and stats.pending == 0 and stats.failed == 0)

    await eventually(lambda: indexed("default"))
    data = await backup(stack, "default", embeddings=True)
    assert [json.loads(line)["kind"] for line in data.splitlines()].count("message") == 15

    copy = await restore(stack, "archive-copy", data)
    assert {c.kind: c.count for c in copy.counts}["conversation"] == 2
    await eventually(lambda: indexed("archive-copy"))

    async def by_meaning() -> apb.SearchMessagesResponse | None:
        found: apb.SearchMessagesResponse = await archive_call(
            stack, "SearchMessages", apb.SearchMessagesRequest(vault="archive-copy", query="feline companion's name")
        )
        return found if found.mode == "hybrid" and found.hits else None

    found = await eventually(by_meaning)
    # The cat's name is message 0 of "Pets"; the reply after it carries it in its context too, so
    # either may rank first, but the message itself is among the hits.
    assert found.hits[0].title == "Pets"
    assert ("Pets", 0) in [(hit.title, hit.position) for hit in found.hits]
