"""Backup, restore and export through the vault's gRPC API: a real Postgres, no indexer (keyword recall).

The round trip restores into a second, freshly migrated database (another deployment) and into
another vault of the same one; each bad file is refused with nothing written; a restore cut off
half-way leaves the vault as it was.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import grpc
import jsonschema
import pytest
import pytest_asyncio
from vault_helpers import SECRET, Caller, outbox_created, rpc_error_kind

from memvault.vault.v1 import backup_pb2 as bpb
from memvault.vault.v1 import backup_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import memory_pb2 as mpb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.backup import format as backup_format
from memvault_vault.backup import service as backup_service
from memvault_vault.database import Database
from memvault_vault.domain.memory import content_hash
from memvault_vault.rpc.backup import BackupServicer
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.schema import apply_migrations
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "backup.schema.json"
QUERIES = ["coffee order", "router firmware", "deploy friday", "tailscale remote access", "python version"]


@dataclass
class Deployment:
    """A vault service (VaultService and BackupService) over one database."""

    database: Database
    vaults: vault_pb2_grpc.VaultServiceStub
    backups: backup_pb2_grpc.BackupServiceStub
    address: str

    async def caller(self) -> Caller:
        suffix = uuid.uuid4().hex[:10]
        subject, vault = f"user-{suffix}", f"vault-{suffix}"
        assert await self.ensure_owner(subject, vault)
        return Caller(self.vaults, IdentitySigner(SECRET), subject, vault)

    async def ensure_owner(self, subject: str, vault: str) -> bool:
        return await AccountStore(self.database).ensure_owner(subject, vault)

    async def fetchval(self, query: str, *args: object) -> object:
        return await self.database.pool.fetchval(query, *args)


async def _deploy(dsn: str) -> AsyncIterator[Deployment]:
    database = await Database.connect(dsn, 1, 5)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    services = VaultServices.build(database)
    signer = IdentitySigner(SECRET)
    vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(services, signer), server)
    backup_pb2_grpc.add_BackupServiceServicer_to_server(BackupServicer(services.backup, signer), server)
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield Deployment(
        database,
        vault_pb2_grpc.VaultServiceStub(channel),
        backup_pb2_grpc.BackupServiceStub(channel),
        f"127.0.0.1:{port}",
    )
    await channel.close()
    await server.stop(None)
    await database.close()


@pytest_asyncio.fixture
async def here(vault_dsn: str) -> AsyncIterator[Deployment]:
    async for deployment in _deploy(vault_dsn):
        yield deployment


@pytest_asyncio.fixture
async def elsewhere(vault_dsn: str) -> AsyncIterator[Deployment]:
    """Another deployment: a second database on the same server, migrated from scratch."""
    name = f"memvault_restore_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(vault_dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(vault_dsn)
    dsn = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        await asyncio.to_thread(apply_migrations, dsn)
        async for deployment in _deploy(dsn):
            yield deployment
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _fill(caller: Caller) -> dict[str, str]:
    """A vault with a bit of everything: statuses, links, a batch, an exclusion, guide versions, settings."""
    stub, meta = caller.stub, caller.metadata()
    await stub.UpdateSettings(vpb.UpdateSettingsRequest(vault=caller.vault, approval_mode="auto"), metadata=meta)
    ids = {}
    for name, text, kind in [
        ("coffee", "Marco orders an oat flat white every morning", mpb.MEMORY_TYPE_PREFERENCE),
        ("router", "The home router runs OpenWrt 23.05 firmware", mpb.MEMORY_TYPE_FACT),
        ("deploy", "Never deploy to production on a Friday", mpb.MEMORY_TYPE_CONSTRAINT),
        ("python", "The project targets Python 3.11", mpb.MEMORY_TYPE_DECISION),
        ("secret-ish", "The old VPN used WireGuard on port 51820", mpb.MEMORY_TYPE_FACT),
    ]:
        draft = mpb.MemoryDraft(content=text, type=kind, tags=["home", name], source="chat", key=name, scope="me")
        reply = await stub.Remember(vpb.RememberRequest(vault=caller.vault, memory=draft), metadata=meta)
        ids[name] = reply.result.memory_id
    replacement = mpb.MemoryDraft(content="The project targets Python 3.12 since March", type=mpb.MEMORY_TYPE_DECISION)
    reply = await stub.SupersedeMemory(
        vpb.SupersedeMemoryRequest(vault=caller.vault, memory_id=ids["python"], replacement=replacement), metadata=meta
    )
    ids["python-new"] = reply.result.memory_id
    await stub.Forget(vpb.ForgetRequest(vault=caller.vault, memory_id=ids.pop("secret-ish")), metadata=meta)
    batch = await stub.BulkRemember(
        vpb.BulkRememberRequest(
            vault=caller.vault,
            source="notes.md",
            items=[
                mpb.MemoryDraft(content="Remote access to the homelab goes through Tailscale"),
                mpb.MemoryDraft(content="The NAS is a Synology DS920+ in the hall cupboard"),
            ],
        ),
        metadata=meta,
    )
    ids["batch"] = batch.batch_id
    for text in ("Be brief. Check memory first.", "Be brief. Check memory first. Ask before forgetting."):
        guide = await stub.GetOperatingGuide(vpb.GetOperatingGuideRequest(vault=caller.vault), metadata=meta)
        await stub.UpdateOperatingGuide(
            vpb.UpdateOperatingGuideRequest(vault=caller.vault, text=text, expected_version=guide.version),
            metadata=meta,
        )
    return ids


async def _backup(caller: Caller, backups: backup_pb2_grpc.BackupServiceStub, **options: bool) -> bytes:
    request = bpb.BackupRequest(vault=caller.vault, **options)
    return b"".join([c.data async for c in backups.Backup(request, metadata=caller.metadata())])


async def _restore(
    caller: Caller, backups: backup_pb2_grpc.BackupServiceStub, data: bytes, *, replace: bool = False, chunk: int = 997
) -> bpb.RestoreResponse:
    async def requests() -> AsyncIterator[bpb.RestoreRequest]:
        yield bpb.RestoreRequest(options=bpb.RestoreOptions(vault=caller.vault, replace=replace))
        for start in range(0, len(data), chunk):
            yield bpb.RestoreRequest(data=data[start : start + chunk])

    response: bpb.RestoreResponse = await backups.Restore(requests(), metadata=caller.metadata())
    return response


async def _answers(caller: Caller) -> list[list[tuple[str, str, str]]]:
    answers = []
    for query in QUERIES:
        reply = await caller.stub.Recall(
            vpb.RecallRequest(vault=caller.vault, query=query, limit=5), metadata=caller.metadata()
        )
        answers.append([(h.memory.id, h.memory.content, mpb.MemoryStatus.Name(h.memory.status)) for h in reply.hits])
    return answers


async def _state(caller: Caller) -> dict[str, Any]:
    """What a person would compare: recall answers, every memory, guide history, audit log, settings."""
    stub, meta = caller.stub, caller.metadata()
    listing = await stub.ListMemories(
        vpb.ListMemoriesRequest(
            vault=caller.vault,
            statuses=[mpb.MEMORY_STATUS_ACTIVE, mpb.MEMORY_STATUS_SUPERSEDED, mpb.MEMORY_STATUS_PROPOSED],
            limit=100,
        ),
        metadata=meta,
    )
    versions = await stub.ListGuideVersions(
        vpb.ListGuideVersionsRequest(vault=caller.vault, limit=50, include_text=True), metadata=meta
    )
    audit = await stub.ListVaultAudit(vpb.ListVaultAuditRequest(vault=caller.vault, limit=100), metadata=meta)
    settings = await stub.GetSettings(vpb.GetSettingsRequest(vault=caller.vault), metadata=meta)
    memories = sorted(
        (m.id, m.content, m.status, m.key, tuple(m.tags), m.superseded_by, m.supersedes, m.batch_id, m.version)
        for m in listing.memories
    )
    return {
        "answers": await _answers(caller),
        "memories": memories,
        "guide": [(v.version, v.text, v.updated_by) for v in versions.versions],
        "audit": [
            (e.action, e.actor, e.target, e.at.ToJsonString())
            for e in audit.entries
            if e.action not in ("vault.backup", "vault.restore", "vault.create")
        ],
        "settings": str(settings.settings),
    }


def _records(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in data.decode().splitlines()]


async def test_backup_holds_every_kind_and_a_manifest_that_checks(here: Deployment) -> None:
    caller = await here.caller()
    ids = await _fill(caller)
    data = await _backup(caller, here.backups, omit_embeddings=True)
    records = _records(data)
    assert records[0]["kind"] == "header" and records[0]["format"] == "memvault-backup"
    assert records[0]["version"] == backup_format.VERSION
    manifest = records[-1]
    assert manifest["kind"] == "manifest"
    kinds = [r["kind"] for r in records[1:-1]]
    assert manifest["counts"] == {k: kinds.count(k) for k in backup_format.KINDS}
    body = data[: data.rindex(b"\n", 0, len(data) - 1) + 1]
    import hashlib

    assert manifest["sha256"] == hashlib.sha256(body).hexdigest()
    memories = {r["id"]: r for r in records if r["kind"] == "memory"}
    assert memories[ids["python"]]["status"] == "superseded"
    assert memories[ids["python"]]["superseded_by"] == ids["python-new"]
    assert memories[ids["coffee"]]["key"] == "coffee" and memories[ids["coffee"]]["tags"] == ["home", "coffee"]
    assert any(r.get("batch_id") == ids["batch"] for r in memories.values())
    assert manifest["counts"]["exclusion"] == 1 and manifest["counts"]["guide_version"] == 3
    assert manifest["counts"]["history"] >= 8 and manifest["counts"]["audit"] >= 8
    assert manifest["counts"]["embedding"] == 0  # asked for none
    reader = backup_format.BackupReader()
    assert [r.kind for r in reader.feed(data)] == kinds
    reader.finish()
    # every line matches the documented schema
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for record in records:
        errors = [e.message for e in validator.iter_errors(record)]
        assert not errors, (record["kind"], errors[:3])


def read_whole(data: bytes) -> None:
    reader = backup_format.BackupReader()
    list(reader.feed(data))
    reader.finish()


@pytest.mark.unit
def test_a_reader_fed_a_byte_at_a_time_reads_the_same_and_checks_the_manifest() -> None:
    writer = backup_format.BackupWriter()
    memory = {
        "kind": "memory",
        "id": str(uuid.uuid4()),
        "content": "Tea, no sugar",
        "content_hash": content_hash("Tea, no sugar"),
        "type": "preference",
        "trust": "stated",
        "status": "active",
        "version": 1,
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
    }
    data = (
        writer.line(backup_format.header("home", "2026-01-02T00:00:00+00:00", embeddings=False))
        + writer.line(memory)
        + writer.line({"kind": "audit", "actor": "user:me", "action": "memory.remember", "at": "2026-01-01T00:00:00Z"})
        + writer.manifest()
    )
    reader = backup_format.BackupReader()
    kinds = [record.kind for i in range(len(data)) for record in reader.feed(data[i : i + 1])]
    reader.finish()
    assert kinds == ["memory", "audit"] and reader.header is not None and reader.header["vault"] == "home"
    for bad, reason in [
        (data.replace(b"Tea, no sugar", b"Tea, no honey"), "does not match its text"),
        (data.replace(b'"version":2,"vault"', b'"version":9,"vault"'), "newer than this memvault reads"),
        (data.replace(b"memory.remember", b"memory.forget"), "sha256 does not match"),
        (data[:-1], "truncated"),
        (data + b'{"kind":"audit"}\n', "after the manifest"),
    ]:
        with pytest.raises(backup_format.BackupRefused, match=reason):
            read_whole(bad)


async def test_round_trip_into_another_deployment_gives_the_same_answers(
    here: Deployment, elsewhere: Deployment
) -> None:
    source = await here.caller()
    await _fill(source)
    before = await _state(source)
    assert all(before["answers"]), "every fixed query finds something"
    data = await _backup(source, here.backups, omit_embeddings=True)

    target = Caller(elsewhere.vaults, source.signer, source.subject, source.vault)
    assert await elsewhere.ensure_owner(source.subject, source.vault)
    report = await _restore(target, elsewhere.backups, data)
    counts = {c.kind: c.count for c in report.counts}
    assert counts["memory"] == 7 and counts["exclusion"] == 1 and counts["guide_version"] == 3
    assert report.reembedding == 7 and any("keyword" in n for n in report.notices)
    assert await _state(target) == before

    # the forgotten text stays forgotten in the restored vault
    forgotten = mpb.MemoryDraft(content="The old VPN used WireGuard on port 51820")
    reply = await target.stub.Remember(
        vpb.RememberRequest(vault=target.vault, memory=forgotten), metadata=target.metadata()
    )
    assert reply.result.outcome == vpb.WRITE_OUTCOME_EXCLUDED
    # every restored memory waits for the indexer through the outbox
    assert len(await outbox_created(elsewhere.database.pool)) >= 7


async def test_restore_into_another_vault_of_the_same_deployment_gets_new_ids(here: Deployment) -> None:
    source = await here.caller()
    ids = await _fill(source)
    before = await _state(source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    copy = await here.caller()
    await _restore(copy, here.backups, data)
    after = await _state(copy)
    assert [[text for _, text, _ in hits] for hits in after["answers"]] == [
        [text for _, text, _ in hits] for hits in before["answers"]
    ]
    new = {m[1]: m for m in after["memories"]}
    assert not {m[0] for m in new.values()} & set(ids.values())
    # links point inside the copy
    old_python = new["The project targets Python 3.11"]
    assert old_python[5] == new["The project targets Python 3.12 since March"][0]
    assert after["guide"] == before["guide"]
    assert await _state(source) == before  # the original is untouched


def _tamper(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data
    return data.replace(old, new, 1)


def _replaced(lines: list[bytes], at: int, **fields: object) -> list[bytes]:
    """The file's lines but the manifest, with fields of line `at` changed."""
    record = json.loads(lines[at]) | fields
    return [*lines[:at], json.dumps(record).encode() + b"\n", *lines[at + 1 : -1]]


def _with_manifest(data: bytes, lines: list[bytes]) -> bytes:
    """Lines rewritten, with a manifest that matches them (a careful forger)."""
    writer = backup_format.BackupWriter()
    body = b"".join(writer.raw(line.decode().rstrip("\n"), json.loads(line)["kind"]) for line in lines)
    return body + writer.manifest()


async def test_bad_files_are_refused_with_nothing_written(here: Deployment) -> None:
    source = await here.caller()
    await _fill(source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    lines = data.splitlines(keepends=True)
    header = json.loads(lines[0])
    newer = json.dumps({**header, "version": backup_format.VERSION + 1}).encode() + b"\n"
    memory_at = next(i for i, line in enumerate(lines) if b'"kind": "memory"' in line)
    edited = json.loads(lines[memory_at])
    edited["content"] = "Marco orders a double espresso every morning"
    bad_files = {
        "truncated": (data[: len(data) // 2], "truncated"),
        "without manifest": (b"".join(lines[:-1]), "truncated"),
        "corrupt": (_tamper(data, b'"kind": "memory"', b'"kind": "memory'), "corrupt"),
        "tampered": (_tamper(data, b'"source": "chat"', b'"source": "mail"'), "changed after it was written"),
        "edited text": (_tamper(data, b"oat flat white", b"oat latte, no"), "does not match its text"),
        "recounted": (
            lines[0] + b"".join(lines[1:-1]) + lines[-1].replace(b'"memory":7', b'"memory":8'),
            "manifest counts 8 memory",
        ),
        "newer format": (_with_manifest(data, [newer, *lines[1:-1]]), "newer than this memvault reads"),
        "edited text, hash kept": (
            _with_manifest(data, [*lines[:memory_at], json.dumps(edited).encode() + b"\n", *lines[memory_at + 1 : -1]]),
            "does not match its text",
        ),
        "a link to a memory not in the file": (
            _with_manifest(data, _replaced(lines, memory_at, superseded_by=str(uuid.uuid4()))),
            "does not fit",
        ),
        "a memory type that does not exist": (
            _with_manifest(data, _replaced(lines, memory_at, type="rumour")),
            "does not fit",
        ),
        "not a backup": (b'{"hello": "world"}\n', "not a memvault backup"),
        "empty": (b"", "empty"),
    }
    target = await here.caller()
    empty = await _state(target)
    audit_rows = await here.fetchval(
        "SELECT count(*) FROM audit_log a JOIN vault v ON v.id = a.vault_id WHERE v.name = $1", target.vault
    )
    for name, (bad, reason) in bad_files.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _restore(target, here.backups, bad)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert reason in (caught.value.details() or ""), (name, caught.value.details())
        assert "nothing was restored" in (caught.value.details() or ""), name
        assert await _state(target) == empty, name
    assert audit_rows == await here.fetchval(
        "SELECT count(*) FROM audit_log a JOIN vault v ON v.id = a.vault_id WHERE v.name = $1", target.vault
    )
    # the same file, whole, restores
    await _restore(target, here.backups, data)


async def test_a_vault_holding_memories_is_replaced_only_when_asked(here: Deployment) -> None:
    source = await here.caller()
    await _fill(source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    target = await here.caller()
    draft = mpb.MemoryDraft(content="Only the target vault knows this")
    await target.stub.Remember(vpb.RememberRequest(vault=target.vault, memory=draft), metadata=target.metadata())
    kept = await _state(target)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _restore(target, here.backups, data)
    assert rpc_error_kind(caught.value) == "conflict" and "replace" in (caught.value.details() or "")
    assert await _state(target) == kept
    await _restore(target, here.backups, data, replace=True)
    after = await _state(target)
    assert "Only the target vault knows this" not in str(after["memories"])
    assert len(after["memories"]) == 7


async def test_a_restore_cut_off_half_way_leaves_the_vault_as_it_was(
    here: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backup_service, "STAGE_RECORDS", 5)  # so part of the file is in Postgres when it stops
    source = await here.caller()
    await _fill(source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    target = await here.caller()
    draft = mpb.MemoryDraft(content="Written before the interrupted restore")
    await target.stub.Remember(vpb.RememberRequest(vault=target.vault, memory=draft), metadata=target.metadata())
    before = await _state(target)
    sent = asyncio.Event()

    async def half() -> AsyncIterator[bpb.RestoreRequest]:
        yield bpb.RestoreRequest(options=bpb.RestoreOptions(vault=target.vault, replace=True))
        yield bpb.RestoreRequest(data=data[: len(data) * 3 // 4])
        sent.set()
        await asyncio.sleep(3600)  # the client dies here, never sending the rest

    # a client of its own, that goes away mid-upload as a killed process would
    channel = grpc.aio.insecure_channel(here.address)
    call = backup_pb2_grpc.BackupServiceStub(channel).Restore(half(), metadata=target.metadata())
    await sent.wait()
    await asyncio.sleep(0.5)  # let the vault stage what it got
    call.cancel()
    await channel.close()
    assert await _state(target) == before
    # nothing is left locked: a whole restore goes through
    await asyncio.wait_for(_restore(target, here.backups, data, replace=True), 30)
    assert len((await _state(target))["memories"]) == 7


async def test_backup_and_restore_are_for_owners_with_the_admin_scope(here: Deployment) -> None:
    caller = await here.caller()
    await _fill(caller)
    request = bpb.BackupRequest(vault=caller.vault, omit_embeddings=True)
    agent = caller.metadata(scopes=frozenset({"read", "write"}))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        [c async for c in here.backups.Backup(request, metadata=agent)]
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    stranger = await here.caller()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        [c async for c in here.backups.Backup(request, metadata=stranger.metadata())]
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_export_groups_active_memories_by_type(here: Deployment) -> None:
    caller = await here.caller()
    await _fill(caller)
    request = bpb.ExportRequest(vault=caller.vault, format=bpb.EXPORT_FORMAT_MARKDOWN)
    markdown = b"".join([c.data async for c in here.backups.Export(request, metadata=caller.metadata())]).decode()
    assert "## Facts" in markdown and "## Constraints" in markdown
    assert "The project targets Python 3.12 since March" in markdown
    assert "Python 3.11" not in markdown  # superseded: not active
    assert "key: `coffee`, scope: `me`" in markdown and "tags: `home`, `coffee`" in markdown
    request = bpb.ExportRequest(vault=caller.vault, format=bpb.EXPORT_FORMAT_JSON)
    exported = json.loads(b"".join([c.data async for c in here.backups.Export(request, metadata=caller.metadata())]))
    assert exported["vault"] == caller.vault
    facts = [m["content"] for m in exported["types"]["fact"]]
    assert "The home router runs OpenWrt 23.05 firmware" in facts
    assert list(exported["types"]) == ["fact", "preference", "decision", "constraint"]
    assert exported["types"]["preference"][0]["tags"] == ["home", "coffee"]
    assert content_hash("The home router runs OpenWrt 23.05 firmware") not in json.dumps(exported)  # not a backup


async def test_the_backup_command_keeps_the_newest_n_and_restore_refuses_a_cut_file(
    here: Deployment, vault_dsn: str, tmp_path: Path
) -> None:
    caller = await here.caller()
    await _fill(caller)
    folder = tmp_path / caller.vault
    folder.mkdir()
    for old in ("20240101T000000Z", "20250101T000000Z", "20250601T000000Z"):
        (folder / f"memvault-{caller.vault}-{old}.jsonl").write_text("an older backup\n")
    environment = {**os.environ, "MEMVAULT_POSTGRES__DSN": vault_dsn}
    command = [sys.executable, "-m", "memvault_vault", "backup", "--no-embeddings"]
    done = await asyncio.to_thread(
        subprocess.run,
        [*command, "--vault", caller.vault, "--dir", str(tmp_path), "--keep", "2"],
        env=environment,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    kept = sorted(p.name for p in folder.iterdir())
    assert len(kept) == 2 and kept[0] == f"memvault-{caller.vault}-20250601T000000Z.jsonl"
    newest = folder / kept[1]
    assert json.loads(newest.read_bytes().splitlines()[-1])["counts"]["memory"] == 7

    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(newest.read_bytes()[:-100])
    target = await here.caller()
    restore = [sys.executable, "-m", "memvault_vault", "restore", "--vault", target.vault, "--input", str(cut)]
    done = await asyncio.to_thread(subprocess.run, restore, env=environment, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("memvault-vault restore: backup refused")
    assert len((await _state(target))["memories"]) == 0


async def test_a_restore_command_killed_half_way_leaves_the_vault_as_it_was(here: Deployment, vault_dsn: str) -> None:
    source = await here.caller()
    await _fill(source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    target = await here.caller()
    draft = mpb.MemoryDraft(content="Written before the killed restore")
    await target.stub.Remember(vpb.RememberRequest(vault=target.vault, memory=draft), metadata=target.metadata())
    before = await _state(target)
    command = [sys.executable, "-m", "memvault_vault", "restore", "--vault", target.vault, "--input", "-", "--replace"]
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MEMVAULT_POSTGRES__DSN": vault_dsn},
    )
    assert process.stdin is not None
    process.stdin.write(data[: len(data) // 2])
    await process.stdin.drain()

    async def restoring() -> bool:  # its transaction is open: the vault locked, the staging table made
        sessions = await here.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'idle in transaction' AND query LIKE '%restore%'"
        )
        return bool(sessions)

    deadline = asyncio.get_running_loop().time() + 30
    while not await restoring():
        assert asyncio.get_running_loop().time() < deadline, "the restore never started"
        await asyncio.sleep(0.1)
    process.kill()  # SIGKILL: no cleanup of its own; Postgres drops the connection and rolls back
    await process.wait()
    assert await _state(target) == before
    await asyncio.wait_for(_restore(target, here.backups, data, replace=True), 30)
    assert len((await _state(target))["memories"]) == 7


@pytest.mark.unit
def test_vectors_move_in_calls_that_fit_a_grpc_message() -> None:
    assert backup_service.vectors_per_call(384) == 500
    large = backup_service.vectors_per_call(3072)  # text-embedding-3-large
    assert 1 <= large < 500 and large * 3072 * 4 <= backup_service.VECTOR_BYTES_PER_CALL
