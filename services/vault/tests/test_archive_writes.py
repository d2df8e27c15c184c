"""The archive's keyed, in-place, batch and cross-vault writes, emptying, receipts with readback,
oversized requests, capabilities and context packs, through the vault's gRPC API on real Postgres."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc, vault_pb2, vault_pb2_grpc
from memvault_core import limits
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.domain import archive_writes, capabilities, context_pack
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(scope="module")
async def channel(database: Database) -> AsyncIterator[grpc.aio.Channel]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    services = VaultServices.build(database)
    archive_pb2_grpc.add_ArchiveServiceServicer_to_server(
        ArchiveServicer(services.archive, IdentitySigner(SECRET)), server
    )
    vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(services, IdentitySigner(SECRET)), server)
    await server.start()
    opened = client_channel(f"127.0.0.1:{port}")
    yield opened
    await opened.close()
    await server.stop(None)


@pytest_asyncio.fixture
async def owner(database: Database, channel: grpc.aio.Channel) -> Caller:
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    assert await AccountStore(database).ensure_owner(subject, f"{vault}-copy")
    return Caller(archive_pb2_grpc.ArchiveServiceStub(channel), IdentitySigner(SECRET), subject, vault)  # type: ignore[arg-type]


def stub(caller: Caller) -> archive_pb2_grpc.ArchiveServiceStub:
    return caller.stub  # type: ignore[return-value]


async def create(caller: Caller, *texts: str, title: str = "t") -> pb.WriteReceipt:
    drafts = [pb.MessageDraft(role="user" if i % 2 == 0 else "assistant", text=t) for i, t in enumerate(texts)]
    response = await stub(caller).CreateConversation(
        pb.CreateConversationRequest(vault=caller.vault, title=title, messages=drafts), metadata=caller.metadata()
    )
    return response.receipt


async def read(caller: Caller, conversation_id: str, vault: str = "", **fields: object) -> pb.GetConversationResponse:
    return await stub(caller).GetConversation(  # type: ignore[no-any-return]
        pb.GetConversationRequest(vault=vault or caller.vault, conversation_id=conversation_id, limit=200, **fields),  # type: ignore[arg-type]
        metadata=caller.metadata(),
    )


async def upsert(
    caller: Caller, conversation_id: str, base: int, *items: tuple[str, str, str], **fields: object
) -> pb.UpsertMessagesResponse:
    return await stub(caller).UpsertMessages(  # type: ignore[no-any-return]
        pb.UpsertMessagesRequest(
            vault=caller.vault,
            conversation_id=conversation_id,
            base_revision=base,
            messages=[pb.KeyedMessage(key=k, role=r, text=t) for k, r, t in items],
            **fields,  # type: ignore[arg-type]
        ),
        metadata=caller.metadata(),
    )


async def refused(call: object) -> tuple[str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return rpc_error_kind(caught.value), caught.value.details() or ""


async def test_upsert_by_key_updates_in_place_appends_new_keys_and_skips_unchanged(owner: Caller) -> None:
    first = await create(owner, "hello")
    conversation = first.conversation_id
    added = await upsert(
        owner, conversation, 1, ("scene.current", "user", "the tavern"), ("arc/owner", "user", "Mira"), verify=True
    )
    assert (added.receipt.revision, dict(added.receipt.changes), added.no_change) == (
        2,
        {"added": 2, "updated": 0, "unchanged": 0},
        False,
    )
    assert [m.key for m in added.receipt.readback] == ["scene.current", "arc/owner"]
    assert added.receipt.durable and added.receipt.verified.head_revision == 2
    # A known key gets new text at the same place, with the same node; an unchanged one is skipped.
    updated = await upsert(
        owner, conversation, 2, ("scene.current", "user", "the harbour"), ("arc/owner", "user", "Mira")
    )
    assert (updated.receipt.revision, dict(updated.receipt.changes)) == (3, {"added": 0, "updated": 1, "unchanged": 1})
    before, after = await read(owner, conversation, revision=2), await read(owner, conversation)
    assert [m.text for m in after.messages] == ["hello", "the harbour", "Mira"]
    assert [m.node_id for m in after.messages] == [m.node_id for m in before.messages]
    assert [m.key for m in after.messages] == ["", "scene.current", "arc/owner"]
    assert [m.text for m in before.messages][1] == "the tavern"  # the earlier revision never changes
    same = await upsert(owner, conversation, 3, ("scene.current", "user", "the harbour"))
    assert same.no_change and same.receipt.revision == 3 and dict(same.receipt.changes)["unchanged"] == 1
    # A role that does not match the key's message, a stale base, a bad key: refused, nothing written.
    assert (await refused(upsert(owner, conversation, 3, ("arc/owner", "assistant", "x"))))[0] == "invalid_argument"
    kind, detail = await refused(upsert(owner, conversation, 2, ("new.key", "user", "x")))
    assert kind == "conflict" and "head" in detail
    assert (await refused(upsert(owner, conversation, 3, ("Bad Key", "user", "x"))))[0] == "invalid_argument"
    assert (await read(owner, conversation)).revision == 3


async def test_edit_in_place_keeps_node_and_place_and_replays_by_key(owner: Caller) -> None:
    first = await create(owner, "my dog is Rex", "noted")
    page = await read(owner, first.conversation_id)
    node = page.messages[0].node_id
    request = pb.EditMessagesRequest(
        vault=owner.vault,
        conversation_id=first.conversation_id,
        base_revision=1,
        edits=[pb.MessageEdit(node_id=node, text="my dog is Rocco")],
        idempotency_key="edit-1",
        verify=True,
    )
    edited = await stub(owner).EditMessages(request, metadata=owner.metadata())
    assert edited.receipt.revision == 2 and not edited.no_change
    assert [m.text for m in edited.receipt.readback] == ["my dog is Rocco"]
    again = await stub(owner).EditMessages(request, metadata=owner.metadata())
    assert again.receipt.replayed and again.receipt.revision == 2
    request.edits[0].text = "my dog is Bruno"
    assert (await refused(stub(owner).EditMessages(request, metadata=owner.metadata())))[0] == "conflict"
    after = await read(owner, first.conversation_id)
    assert (after.messages[0].node_id, after.messages[0].text) == (node, "my dog is Rocco")
    assert after.messages[0].parent_node_id == page.messages[0].parent_node_id
    unknown = pb.EditMessagesRequest(
        vault=owner.vault,
        conversation_id=first.conversation_id,
        base_revision=2,
        edits=[pb.MessageEdit(node_id="nope", text="x")],
    )
    assert (await refused(stub(owner).EditMessages(unknown, metadata=owner.metadata())))[0] == "not_found"


async def test_commit_batch_is_all_or_nothing(owner: Caller) -> None:
    a, b = await create(owner, "a1"), await create(owner, "b1")

    def batch(base_b: int, key: str = "") -> pb.CommitBatchRequest:
        return pb.CommitBatchRequest(
            vault=owner.vault,
            writes=[
                pb.BatchWrite(
                    conversation_id=a.conversation_id,
                    kind="append",
                    base_revision=1,
                    messages=[pb.MessageDraft(role="user", text="a2")],
                ),
                pb.BatchWrite(
                    conversation_id=b.conversation_id,
                    kind="replace",
                    base_revision=base_b,
                    messages=[pb.MessageDraft(role="user", text="b-new")],
                ),
            ],
            idempotency_key=key,
            verify=True,
        )

    kind, detail = await refused(stub(owner).CommitBatch(batch(7), metadata=owner.metadata()))
    assert kind == "conflict" and b.conversation_id in detail
    assert (await read(owner, a.conversation_id)).revision == 1  # the good write was not applied either
    done = await stub(owner).CommitBatch(batch(1, "batch-1"), metadata=owner.metadata())
    assert [(r.conversation_id, r.revision) for r in done.receipts] == [(a.conversation_id, 2), (b.conversation_id, 2)]
    assert [m.text for m in done.receipts[0].readback] == ["a2"]
    assert [m.text for m in (await read(owner, b.conversation_id)).messages] == ["b-new"]
    replay = await stub(owner).CommitBatch(batch(1, "batch-1"), metadata=owner.metadata())
    assert all(r.replayed for r in replay.receipts) and [r.revision for r in replay.receipts] == [2, 2]


async def test_copy_to_another_vault_is_lossless_with_provenance_and_idempotent(
    owner: Caller, database: Database
) -> None:
    first = await create(owner, "keep this exactly", "and this", title="Source")
    await upsert(owner, first.conversation_id, 1, ("k.one", "user", "keyed"))
    target = f"{owner.vault}-copy"
    request = pb.CopyConversationsRequest(
        vault=owner.vault, target_vault=target, conversation_ids=[first.conversation_id], idempotency_key="copy-1"
    )
    copied = (await stub(owner).CopyConversations(request, metadata=owner.metadata())).receipts[0]
    source = await read(owner, first.conversation_id)
    assert copied.content_sha256 == source.conversation.content_sha256 and copied.revision == 1
    assert (copied.derived_from.vault, copied.derived_from.conversation_id, copied.derived_from.revision) == (
        owner.vault,
        first.conversation_id,
        2,
    )
    copy = await read(owner, copied.conversation_id, vault=target)
    assert [(m.node_id, m.parent_node_id, m.text, m.key, m.role) for m in copy.messages] == [
        (m.node_id, m.parent_node_id, m.text, m.key, m.role) for m in source.messages
    ]
    assert (
        copy.conversation.title == "Source" and copy.conversation.derived_from.conversation_id == first.conversation_id
    )
    again = (await stub(owner).CopyConversations(request, metadata=owner.metadata())).receipts[0]
    assert again.replayed and again.conversation_id == copied.conversation_id
    del request.conversation_ids[:]
    request.conversation_ids.append((await create(owner, "other")).conversation_id)
    assert (await refused(stub(owner).CopyConversations(request, metadata=owner.metadata())))[0] == "conflict"
    # Without an idempotency key, or into a vault the caller cannot reach: refused.
    request.idempotency_key = ""
    assert (await refused(stub(owner).CopyConversations(request, metadata=owner.metadata())))[0] == "invalid_argument"
    stranger = f"user-{uuid.uuid4().hex[:10]}"
    assert await AccountStore(database).ensure_owner(stranger, f"s-{stranger}")
    request.idempotency_key, request.target_vault = "copy-2", f"s-{stranger}"
    assert (await refused(stub(owner).CopyConversations(request, metadata=owner.metadata())))[0] == "not_found"


async def test_empty_archive_goes_in_bounded_resumable_steps(owner: Caller, database: Database) -> None:
    vault_id = await database.pool.fetchval(
        "SELECT vault_id FROM membership m JOIN account a ON a.id = m.account_id WHERE a.subject = $1 AND m.vault_name = $2",
        owner.subject,
        owner.vault,
    )
    for _ in range(3):
        await create(owner, "x")
    wrong = pb.EmptyArchiveRequest(vault=owner.vault, confirm="yes")
    assert (await refused(stub(owner).EmptyArchive(wrong, metadata=owner.metadata())))[0] == "invalid_argument"
    step = await stub(owner).EmptyArchive(
        pb.EmptyArchiveRequest(vault=owner.vault, confirm=owner.vault), metadata=owner.metadata()
    )
    assert (step.deleted_conversations, step.remaining_conversations, step.done) == (3, 0, True)
    assert await database.pool.fetchval("SELECT count(*) FROM archive_message WHERE vault_id = $1", vault_id) == 0
    again = await stub(owner).EmptyArchive(
        pb.EmptyArchiveRequest(vault=owner.vault, confirm=owner.vault), metadata=owner.metadata()
    )
    assert (again.deleted_conversations, again.done) == (0, True)


async def test_oversized_write_is_refused_before_anything_is_written(owner: Caller) -> None:
    first = await create(owner, "start")
    text = "y" * 90_000
    items = [(f"k{i}", "user", text) for i in range(20)]
    kind, detail = await refused(upsert(owner, first.conversation_id, 1, *items))
    assert kind == "limit_exceeded" and detail.startswith("REQUEST_TOO_LARGE")
    suggested = int(detail.split("suggested_max_items=")[1].split(":")[0])
    assert 1 <= suggested < 20 and suggested * 90_000 < archive_writes.MAX_WRITE_REQUEST_BYTES
    assert (await read(owner, first.conversation_id)).revision == 1
    fits = await upsert(owner, first.conversation_id, 1, *items[:suggested])
    assert fits.receipt.revision == 2


async def test_receipt_readback_stays_under_the_ceiling_and_names_the_rest(owner: Caller) -> None:
    first = await create(owner, "start")
    items = [(f"big.{i}", "user", f"{i} " + "z" * 9_000) for i in range(8)]
    done = await upsert(owner, first.conversation_id, 1, *items, verify=True)
    receipt = done.receipt
    assert receipt.ByteSize() < archive_writes.MAX_RECEIPT_BYTES
    assert 1 <= len(receipt.readback) < 8
    (omitted,) = receipt.omitted
    assert omitted.count == 8 - len(receipt.readback) and omitted.revision == 2
    assert omitted.after_position == receipt.readback[-1].position


async def test_capabilities_report_the_enforced_constants(owner: Caller, channel: grpc.aio.Channel) -> None:
    caps = await vault_pb2_grpc.VaultServiceStub(channel).GetCapabilities(
        vault_pb2.GetCapabilitiesRequest(), metadata=owner.metadata()
    )
    assert caps.capabilities_version == capabilities.CAPABILITIES_VERSION
    assert caps.more_limits["max_write_request_bytes"] == archive_writes.MAX_WRITE_REQUEST_BYTES
    assert caps.more_limits["max_receipt_bytes"] == 48 * 1024
    assert caps.more_limits["max_pack_bytes"] == context_pack.MAX_PACK_BYTES
    assert caps.more_limits["max_batch_conversations"] == 20 and caps.more_limits["max_read_budget_bytes"] == 48 * 1024
    # Every upper-case int constant of the archive's rule modules is reported, as the number it is.
    table = {(module.__name__, constant): name for name, (module, constant) in capabilities.REPORTED.items()}
    for module in capabilities.LIMIT_MODULES:
        for constant, value in vars(module).items():
            if constant.isupper() and type(value) is int:
                name = table.get((module.__name__, constant))
                assert name is not None, f"{module.__name__}.{constant} is not in the capabilities answer"
                assert caps.more_limits[name] == value, name
    # And every memory limit: in the Limits message or, where it has no field, in more_limits.
    reported = {field.name: value for field, value in caps.limits.ListFields()} | dict(caps.more_limits)
    for constant, value in vars(limits).items():
        if constant.isupper() and type(value) is int:
            assert reported.get(constant.lower()) == value, constant
    assert caps.features["atomic_multi_conversation_commit"] and caps.features["message_keys"]


async def test_context_pack_is_deterministic_pinned_and_fitted(owner: Caller) -> None:
    notes = await create(owner, "the boiler service is due in March", "noted", title="House")
    other = await create(owner, "the boiler code is 7781 for the heating panel", title="Codes")
    await create(owner, "the boiler was installed in 2019 " + "with details " * 200, title="History")

    def pack(**fields: object) -> pb.BuildContextPackRequest:
        return pb.BuildContextPackRequest(
            vault=owner.vault,
            conversations=[pb.PackConversation(conversation_id=notes.conversation_id)],
            searches=[pb.PackSearch(query="boiler", limit=5)],
            **fields,  # type: ignore[arg-type]
        )

    built = await stub(owner).BuildContextPack(pack(), metadata=owner.metadata())
    assert built.fits and built.pack_id.startswith("pack_")
    authorities = [m.authority for m in built.messages]
    assert authorities[:2] == ["required", "required"] and set(authorities[2:]) == {"retrieved"}
    assert [m.text for m in built.messages[:2]] == ["the boiler service is due in March", "noted"]
    # The required message the search also found is there once, under its higher authority.
    ids = [m.message_id for m in built.messages]
    assert len(ids) == len(set(ids)) and built.duplicates >= 1
    assert other.conversation_id in {m.conversation_id for m in built.messages[2:]}
    assert all(m.conversation_id and m.revision and m.message_id for m in built.messages)
    scores = [m.score for m in built.messages[2:]]
    assert scores == sorted(scores, reverse=True)
    assert (await stub(owner).BuildContextPack(pack(), metadata=owner.metadata())).pack_id == built.pack_id
    # A new head changes nothing for a pack pinned at revision 1, and changes the id of one at the head.
    await stub(owner).AppendMessages(
        pb.AppendMessagesRequest(
            vault=owner.vault,
            conversation_id=notes.conversation_id,
            base_revision=1,
            messages=[pb.MessageDraft(role="user", text="later")],
        ),
        metadata=owner.metadata(),
    )
    moved = await stub(owner).BuildContextPack(pack(), metadata=owner.metadata())
    assert moved.pack_id != built.pack_id and [p.revision for p in moved.pins] == [2]
    pinned = pack()
    pinned.conversations[0].revision = 1
    old = await stub(owner).BuildContextPack(pinned, metadata=owner.metadata())
    assert [p.revision for p in old.pins] == [1] and "later" not in [m.text for m in old.messages]
    assert [m.text for m in old.messages if m.authority == "required"] == [m.text for m in built.messages[:2]]
    assert (await stub(owner).BuildContextPack(pinned, metadata=owner.metadata())).pack_id == old.pack_id
    # Tight budgets: the required part still fits, retrieved ones are left out.
    tight = await stub(owner).BuildContextPack(pack(max_bytes=context_pack.MIN_PACK_BYTES), metadata=owner.metadata())
    assert tight.fits and tight.bytes <= context_pack.MIN_PACK_BYTES and tight.left_out >= 1
    assert [m.authority for m in tight.messages][:2] == ["required", "required"]


async def test_context_pack_reports_minimum_budgets_when_required_part_does_not_fit(owner: Caller) -> None:
    big = await create(owner, *[f"{i} " + "w" * 3_000 for i in range(6)], title="Big")
    request = pb.BuildContextPackRequest(
        vault=owner.vault, conversations=[pb.PackConversation(conversation_id=big.conversation_id)], max_bytes=12_000
    )
    short = await stub(owner).BuildContextPack(request, metadata=owner.metadata())
    assert not short.fits and not short.messages
    assert short.min_max_bytes > 12_000 and short.min_max_tokens > 4_500
    assert short.shortfall[0].messages == 6 and short.ByteSize() < 2048
    request.conversations[0].tail = 2
    tail = await stub(owner).BuildContextPack(request, metadata=owner.metadata())
    assert tail.fits and [m.position for m in tail.messages] == [4, 5]
    request.max_bytes = 100
    assert (await refused(stub(owner).BuildContextPack(request, metadata=owner.metadata())))[0] == "limit_exceeded"
