"""Deleting a vault against a real Postgres: a 7-day grace period during which the vault is read-only
(every write refused with when and how to cancel, reads still work), cancelling, and the retention
runner deleting it once the grace period is over, driven by the clock it is given (no sleeps)."""

from __future__ import annotations

import hashlib
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
import pytest
import pytest_asyncio
from chatgpt_export import dump, linear
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.events.v1 import archive_events_pb2 as apb_events
from memvault.events.v1 import memory_events_pb2 as mpb_events
from memvault.vault.v1 import accounts_pb2 as acpb
from memvault.vault.v1 import accounts_pb2_grpc, archive_pb2_grpc, backup_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import archive_pb2 as arpb
from memvault.vault.v1 import backup_pb2 as bpb
from memvault.vault.v1 import memory_pb2 as mpb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.database import Database
from memvault_vault.retention.store import RetentionStore
from memvault_vault.rpc.accounts import AccountServicer
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.rpc.backup import BackupServicer
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.services import VaultServices
from memvault_vault.sources.store import SourceStore

pytestmark = pytest.mark.integration


@dataclass
class Stubs:
    vaults: vault_pb2_grpc.VaultServiceStub
    archive: archive_pb2_grpc.ArchiveServiceStub
    accounts: accounts_pb2_grpc.AccountServiceStub
    backups: backup_pb2_grpc.BackupServiceStub


@pytest_asyncio.fixture(scope="module")
async def stubs(database: Database) -> AsyncIterator[Stubs]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    services = VaultServices.build(database)
    signer = IdentitySigner(SECRET)
    vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(services, signer), server)
    archive_pb2_grpc.add_ArchiveServiceServicer_to_server(ArchiveServicer(services.archive, signer), server)
    accounts_pb2_grpc.add_AccountServiceServicer_to_server(
        AccountServicer(services.accounts, services.audit, signer), server
    )
    backup_pb2_grpc.add_BackupServiceServicer_to_server(BackupServicer(services.backup, signer), server)
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield Stubs(
        vault_pb2_grpc.VaultServiceStub(channel),
        archive_pb2_grpc.ArchiveServiceStub(channel),
        accounts_pb2_grpc.AccountServiceStub(channel),
        backup_pb2_grpc.BackupServiceStub(channel),
    )
    await channel.close()
    await server.stop(None)


@pytest_asyncio.fixture
async def owner(database: Database, stubs: Stubs) -> Caller:
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    return Caller(stubs.vaults, IdentitySigner(SECRET), subject, vault)


async def remember(caller: Caller, text: str) -> vpb.RememberResponse:
    reply: vpb.RememberResponse = await caller.stub.Remember(
        vpb.RememberRequest(vault=caller.vault, memory=mpb.MemoryDraft(content=text)), metadata=caller.metadata()
    )
    return reply


async def converse(stubs: Stubs, caller: Caller, text: str) -> arpb.CreateConversationResponse:
    reply: arpb.CreateConversationResponse = await stubs.archive.CreateConversation(
        arpb.CreateConversationRequest(
            vault=caller.vault, title="t", messages=[arpb.MessageDraft(role="user", text=text)]
        ),
        metadata=caller.metadata(),
    )
    return reply


async def schedule(stubs: Stubs, caller: Caller, confirm: str | None = None) -> acpb.ScheduleVaultDeletionResponse:
    reply: acpb.ScheduleVaultDeletionResponse = await stubs.accounts.ScheduleVaultDeletion(
        acpb.ScheduleVaultDeletionRequest(vault=caller.vault, confirm=caller.vault if confirm is None else confirm),
        metadata=caller.metadata(),
    )
    return reply


async def listed(caller: Caller) -> vpb.VaultInfo:
    reply = await caller.stub.ListVaults(vpb.ListVaultsRequest(), metadata=caller.metadata())
    info: vpb.VaultInfo = next(v for v in reply.vaults if v.name == caller.vault)
    return info


async def test_a_vault_pending_deletion_is_read_only_until_the_owner_cancels(
    database: Database, stubs: Stubs, owner: Caller
) -> None:
    kept = await remember(owner, "The deploy target is the blue cluster")
    await converse(stubs, owner, "my cat is called Miso")

    with pytest.raises(grpc.aio.AioRpcError) as wrong:
        await schedule(stubs, owner, confirm="not-the-name")
    assert wrong.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "confirm must repeat" in str(
        wrong.value.details()
    )
    assert not (await listed(owner)).HasField("delete_after")
    agent = owner.metadata(client="mcp:agent")
    with pytest.raises(grpc.aio.AioRpcError) as by_agent:
        await stubs.accounts.ScheduleVaultDeletion(
            acpb.ScheduleVaultDeletionRequest(vault=owner.vault, confirm=owner.vault), metadata=agent
        )
    assert by_agent.value.code() == grpc.StatusCode.PERMISSION_DENIED

    before = datetime.now(UTC)
    first = await schedule(stubs, owner)
    due = first.delete_after.ToDatetime(tzinfo=UTC)
    assert first.scheduled and timedelta(days=7) - timedelta(minutes=1) < due - before < timedelta(days=7, minutes=1)
    again = await schedule(stubs, owner)
    assert not again.scheduled and again.delete_after == first.delete_after  # asking again keeps the date
    assert (await listed(owner)).delete_after == first.delete_after

    # every write is refused, by every client, with the date and how to cancel
    day = due.strftime("%Y-%m-%d %H:%M UTC")
    for metadata in (owner.metadata(), agent):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await owner.stub.Remember(
                vpb.RememberRequest(vault=owner.vault, memory=mpb.MemoryDraft(content="a new fact")), metadata=metadata
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert rpc_error_kind(refused.value) == "permission_denied"
        message = str(refused.value.details())
        assert "pending deletion" in message and day in message and "cancel" in message
    with pytest.raises(grpc.aio.AioRpcError) as archived:
        await converse(stubs, owner, "and my dog is Rex")
    assert "pending deletion" in str(archived.value.details())
    with pytest.raises(grpc.aio.AioRpcError) as forgotten:
        await owner.stub.Forget(
            vpb.ForgetRequest(vault=owner.vault, memory_id=kept.result.memory_id), metadata=owner.metadata()
        )
    assert "pending deletion" in str(forgotten.value.details())

    # reads still work: recall, listing, the archive, a backup and the archive export
    recalled = await owner.stub.Recall(
        vpb.RecallRequest(vault=owner.vault, query="deploy target", limit=5), metadata=owner.metadata()
    )
    assert [h.memory.id for h in recalled.hits] == [kept.result.memory_id]
    conversations = await stubs.archive.ListConversations(
        arpb.ListConversationsRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert len(conversations.conversations) == 1
    for archive_only in (False, True):
        request = bpb.BackupRequest(vault=owner.vault, omit_embeddings=True, archive_only=archive_only)
        data = b"".join([c.data async for c in stubs.backups.Backup(request, metadata=owner.metadata())])
        assert b'"kind":"manifest"' in data

    cancelled = await stubs.accounts.CancelVaultDeletion(
        acpb.CancelVaultDeletionRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert cancelled.cancelled
    assert not (await listed(owner)).HasField("delete_after")
    await remember(owner, "writable again")
    none_left = await stubs.accounts.CancelVaultDeletion(
        acpb.CancelVaultDeletionRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert not none_left.cancelled
    actions = [
        r["action"]
        for r in await database.pool.fetch(
            "SELECT l.action FROM audit_log l JOIN vault v ON v.id = l.vault_id WHERE v.name = $1 ORDER BY l.id",
            owner.vault,
        )
    ]
    assert actions.count("vault.deletion_scheduled") == 1 and actions.count("vault.deletion_cancelled") == 1


async def test_only_an_owner_schedules_or_cancels_a_deletion(database: Database, stubs: Stubs, owner: Caller) -> None:
    vault = await AccountStore(database).vault_of(owner.subject, owner.vault)
    assert vault is not None
    editor = f"editor-{uuid.uuid4().hex[:8]}"
    await AccountStore(database).set_membership(vault, editor, "editor", "test")
    as_editor = Caller(stubs.vaults, IdentitySigner(SECRET), editor, owner.vault)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await schedule(stubs, as_editor)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "only an owner" in str(refused.value.details())
    await schedule(stubs, owner)
    with pytest.raises(grpc.aio.AioRpcError) as cancel:
        await stubs.accounts.CancelVaultDeletion(
            acpb.CancelVaultDeletionRequest(vault=owner.vault), metadata=as_editor.metadata()
        )
    assert cancel.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as write:
        await remember(as_editor, "an editor's write")
    assert "pending deletion" in str(write.value.details())


async def test_the_retention_runner_deletes_the_vault_once_the_grace_period_is_over(
    database: Database, stubs: Stubs, owner: Caller
) -> None:
    memory = (await remember(owner, "The staging database is on port 5433")).result.memory_id
    conversation = (await converse(stubs, owner, "remember the fridge")).receipt.conversation_id
    suffix = uuid.uuid4().hex[:10]
    neighbour = Caller(stubs.vaults, IdentitySigner(SECRET), f"user-{suffix}", f"vault-{suffix}")
    assert await AccountStore(database).ensure_owner(neighbour.subject, neighbour.vault)
    await remember(neighbour, "A neighbour's memory stays")
    owner_account = await database.pool.fetchval("SELECT id FROM account WHERE subject = $1", owner.subject)
    vault_id = str(await database.pool.fetchval("SELECT id FROM vault WHERE name = $1", owner.vault))
    due = (await schedule(stubs, owner)).delete_after.ToDatetime(tzinfo=UTC)
    store = RetentionStore(database)

    assert owner.vault not in await store.delete_due_vaults(due - timedelta(days=1))
    assert owner.vault not in await store.delete_due_vaults(due - timedelta(seconds=1))
    assert owner.vault in await store.delete_due_vaults(due + timedelta(minutes=1), dry_run=True)
    assert await database.pool.fetchval("SELECT count(*) FROM memory WHERE vault_id = $1", vault_id) == 1

    deleted = await store.delete_due_vaults(due + timedelta(minutes=1))
    assert owner.vault in deleted and neighbour.vault not in deleted
    assert await database.pool.fetchval("SELECT count(*) FROM vault WHERE id = $1", vault_id) == 0
    for table in ("memory", "archive_conversation", "archive_message", "membership", "vault_settings"):
        left = await database.pool.fetchval(f"SELECT count(*) FROM {table} WHERE vault_id = $1", vault_id)  # noqa: S608
        assert left == 0, table
    assert (
        await database.pool.fetchval(
            "SELECT count(*) FROM memory m JOIN vault v ON v.id = m.vault_id WHERE v.name = $1", neighbour.vault
        )
        == 1
    )
    # the index is told to drop the vault's points, through the outbox like every change
    forgotten, dropped = set(), set()
    for row in await database.pool.fetch(
        "SELECT subject, payload FROM outbox WHERE created_at > now() - interval '1 hour'"
    ):
        if row["subject"].endswith("memory.forgotten"):
            event = mpb_events.MemoryForgotten.FromString(row["payload"])
            if event.vault_id == vault_id:
                forgotten.add(event.memory_id)
        elif row["subject"].endswith("conversation.deleted"):
            gone = apb_events.ConversationDeleted.FromString(row["payload"])
            if gone.vault_id == vault_id:
                dropped.add(gone.conversation_id)
    assert forgotten == {memory} and dropped == {conversation}
    entry = await database.pool.fetchrow(
        "SELECT vault_id, actor, details FROM audit_log WHERE account_id = $1 AND action = 'vault.deleted'"
        " AND target = $2",
        owner_account,
        owner.vault,
    )
    assert entry is not None and entry["vault_id"] is None and entry["actor"] == "memvault:retention"
    with pytest.raises(grpc.aio.AioRpcError) as gone_vault:
        await remember(owner, "too late")
    assert gone_vault.value.code() == grpc.StatusCode.NOT_FOUND
    assert owner.vault not in await store.delete_due_vaults(due + timedelta(days=30))  # nothing twice


async def test_a_cancelled_deletion_is_never_carried_out(database: Database, stubs: Stubs, owner: Caller) -> None:
    due = (await schedule(stubs, owner)).delete_after.ToDatetime(tzinfo=UTC)
    await stubs.accounts.CancelVaultDeletion(
        acpb.CancelVaultDeletionRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert owner.vault not in await RetentionStore(database).delete_due_vaults(due + timedelta(days=1))
    await remember(owner, "still here")


async def test_an_import_started_before_the_mark_waits_until_the_deletion_is_cancelled(
    database: Database, stubs: Stubs, owner: Caller
) -> None:
    data = dump([linear("c1", "the spare key is under the mat"), linear("c2", "the gate code is 1234")])
    vault = await AccountStore(database).vault_of(owner.subject, owner.vault)
    assert vault is not None
    store = ArchiveStore(database)
    started = await store.start_import(
        vault, "user:me", "chatgpt", "conversations.json", len(data), hashlib.sha256(data).hexdigest()
    )
    await store.upload_part(vault, started.id, 0, data)
    await store.finish_import(vault, "user:me", started.id)
    await schedule(stubs, owner)
    archive = VaultServices.build(database).archive
    assert not await archive.process_checkpoint(started.id)  # read-only: the job waits
    count = "SELECT count(*) FROM archive_conversation c JOIN vault v ON v.id = c.vault_id WHERE v.name = $1"
    assert await database.pool.fetchval(count, owner.vault) == 0
    await stubs.accounts.CancelVaultDeletion(
        acpb.CancelVaultDeletionRequest(vault=owner.vault), metadata=owner.metadata()
    )
    while await archive.process_checkpoint(started.id):
        pass
    assert await database.pool.fetchval(count, owner.vault) == 2


async def test_tracked_sources_of_a_vault_pending_deletion_wait(
    database: Database, stubs: Stubs, owner: Caller
) -> None:
    memory = (await remember(owner, "The build uses Python 3.12")).result.memory_id
    vault = await AccountStore(database).vault_of(owner.subject, owner.vault)
    assert vault is not None
    await database.pool.execute(
        "INSERT INTO tracked_source (vault_id, memory_id, kind, location, selector, mode, interval_seconds,"
        " baseline_hash, baseline_value, tracked_by, actor, next_check_at)"
        " VALUES ($1, $2, 'json_file', 'project/versions.json', '/python', 'auto', 3600, 'h1', '\"3.12\"',"
        " 'user:me', 'user:me', now() - interval '1 minute')",
        vault.id,
        memory,
    )
    sources = SourceStore(database)
    assert len(await sources.due(vault.id, 10)) == 1
    await schedule(stubs, owner)
    assert await sources.due(vault.id, 10) == []  # an auto-mode source would change a memory: it waits
    await stubs.accounts.CancelVaultDeletion(
        acpb.CancelVaultDeletionRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert len(await sources.due(vault.id, 10)) == 1
