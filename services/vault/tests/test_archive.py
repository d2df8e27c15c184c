"""The conversation archive through its gRPC API: revisions, receipts, tags, idempotency, isolation,
and ChatGPT exports imported as a job in checkpoints."""

from __future__ import annotations

import hashlib
import json
import socket
import tracemalloc
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio
from chatgpt_export import branched, dump, linear, zipped
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.service import ArchiveService
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.archive import IMPORT_CHECKPOINT_CONVERSATIONS, MAX_IMPORT_PART_BYTES
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(scope="module")
async def archive_stub(database: Database) -> AsyncIterator[archive_pb2_grpc.ArchiveServiceStub]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    archive_pb2_grpc.add_ArchiveServiceServicer_to_server(
        ArchiveServicer(VaultServices.build(database).archive, IdentitySigner(SECRET)), server
    )
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield archive_pb2_grpc.ArchiveServiceStub(channel)
    await channel.close()
    await server.stop(None)


@pytest_asyncio.fixture
async def owner(database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub) -> Caller:
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    return Caller(archive_stub, IdentitySigner(SECRET), subject, vault)  # type: ignore[arg-type]


def stub(caller: Caller) -> archive_pb2_grpc.ArchiveServiceStub:
    return caller.stub  # type: ignore[return-value]


def messages(*pairs: tuple[str, str]) -> list[pb.MessageDraft]:
    return [pb.MessageDraft(role=role, text=text) for role, text in pairs]


async def create(caller: Caller, *pairs: tuple[str, str], **fields: object) -> pb.WriteReceipt:
    response = await stub(caller).CreateConversation(
        pb.CreateConversationRequest(vault=caller.vault, messages=messages(*pairs), **fields),  # type: ignore[arg-type]
        metadata=caller.metadata(),
    )
    return response.receipt


async def read(caller: Caller, conversation_id: str, **fields: object) -> pb.GetConversationResponse:
    return await stub(caller).GetConversation(  # type: ignore[no-any-return]
        pb.GetConversationRequest(vault=caller.vault, conversation_id=conversation_id, **fields),  # type: ignore[arg-type]
        metadata=caller.metadata(),
    )


async def test_create_append_replace_restore_keeps_every_revision(owner: Caller) -> None:
    first = await create(owner, ("user", "my cat is called Miso"), ("assistant", "noted"), title="Pets", verify=True)
    assert (first.revision, first.durable, first.message_count) == (1, True, 2)
    assert first.indexing and len(first.content_sha256) == 64
    assert first.verified.head_revision == 1 and first.verified.title == "Pets"

    appended = await stub(owner).AppendMessages(
        pb.AppendMessagesRequest(
            vault=owner.vault,
            conversation_id=first.conversation_id,
            base_revision=1,
            messages=messages(("user", "and my dog is Rex")),
        ),
        metadata=owner.metadata(),
    )
    assert (appended.receipt.revision, appended.receipt.message_count) == (2, 3)
    body = await read(owner, first.conversation_id)
    assert [m.text for m in body.messages] == ["my cat is called Miso", "noted", "and my dog is Rex"]
    assert body.messages[2].parent_node_id == body.messages[1].node_id

    # A stale base revision refuses the whole write.
    with pytest.raises(grpc.aio.AioRpcError) as stale:
        await stub(owner).AppendMessages(
            pb.AppendMessagesRequest(
                vault=owner.vault,
                conversation_id=first.conversation_id,
                base_revision=1,
                messages=messages(("user", "lost"), ("user", "also lost")),
            ),
            metadata=owner.metadata(),
        )
    assert rpc_error_kind(stale.value) == "conflict" and "head is revision 2" in (stale.value.details() or "")

    replaced = await stub(owner).ReplaceTranscript(
        pb.ReplaceTranscriptRequest(
            vault=owner.vault,
            conversation_id=first.conversation_id,
            base_revision=2,
            messages=messages(("user", "start over")),
        ),
        metadata=owner.metadata(),
    )
    assert replaced.receipt.revision == 3
    assert [m.text for m in (await read(owner, first.conversation_id)).messages] == ["start over"]

    restored = await stub(owner).RestoreRevision(
        pb.RestoreRevisionRequest(
            vault=owner.vault, conversation_id=first.conversation_id, revision=1, base_revision=3, verify=True
        ),
        metadata=owner.metadata(),
    )
    assert restored.receipt.revision == 1 and restored.receipt.content_sha256 == first.content_sha256
    assert restored.receipt.verified.head_revision == 1
    revisions = await stub(owner).ListRevisions(
        pb.ListRevisionsRequest(vault=owner.vault, conversation_id=first.conversation_id), metadata=owner.metadata()
    )
    assert [(r.number, r.kind, r.head) for r in revisions.revisions] == [
        (3, "replace", False),
        (2, "append", False),
        (1, "create", True),
    ]
    assert [m.text for m in (await read(owner, first.conversation_id)).messages] == ["my cat is called Miso", "noted"]
    # Revision 2 is still there, unchanged, when pinned.
    pinned = await read(owner, first.conversation_id, revision=2)
    assert pinned.revision == 2 and len(pinned.messages) == 3

    after_restore = await stub(owner).AppendMessages(
        pb.AppendMessagesRequest(
            vault=owner.vault, conversation_id=first.conversation_id, base_revision=1, messages=messages(("user", "x"))
        ),
        metadata=owner.metadata(),
    )
    assert after_restore.receipt.revision == 4
    listed = await stub(owner).ListRevisions(
        pb.ListRevisionsRequest(vault=owner.vault, conversation_id=first.conversation_id, limit=2),
        metadata=owner.metadata(),
    )
    assert [r.number for r in listed.revisions] == [4, 3] and listed.revisions[0].parent == 1
    rest = await stub(owner).ListRevisions(
        pb.ListRevisionsRequest(
            vault=owner.vault, conversation_id=first.conversation_id, limit=2, cursor=listed.next_cursor
        ),
        metadata=owner.metadata(),
    )
    assert [r.number for r in rest.revisions] == [2, 1]


async def test_receipts_say_what_the_vector_index_has_of_the_revision(owner: Caller, database: Database) -> None:
    first = await create(owner, ("user", "the boat is moored at pier 4"), ("assistant", "noted"))
    assert (first.indexing, first.indexing_pending) == ("pending", 2)
    feed = IndexFeedStore(database)

    def report(message_id: str, state: str) -> IndexReport:
        return IndexReport(message_id, "hash", "test-model", state, "boom" if state == "failed" else "", kind="message")

    async def append_again() -> pb.WriteReceipt:
        # The same idempotency key and content: the first result, its indexing state as of now.
        request = pb.AppendMessagesRequest(
            vault=owner.vault,
            conversation_id=first.conversation_id,
            base_revision=1,
            messages=messages(("user", "and the key is in the galley")),
            idempotency_key="append-once",
        )
        return (await stub(owner).AppendMessages(request, metadata=owner.metadata())).receipt  # type: ignore[no-any-return]

    [boat, noted] = (await read(owner, first.conversation_id)).messages
    await feed.report_messages([report(boat.id, "indexed")])
    appended = await append_again()
    assert (appended.revision, appended.indexing, appended.indexing_pending) == (2, "pending", 2)
    key = (await read(owner, first.conversation_id)).messages[2]
    await feed.report_messages([report(noted.id, "indexed"), report(key.id, "failed")])
    assert ((again := await append_again()).replayed, again.indexing, again.indexing_pending) == (True, "failed", 0)
    await feed.report_messages([report(key.id, "indexed")])
    assert ((again := await append_again()).indexing, again.indexing_pending) == ("indexed", 0)


async def test_base_revision_is_required_and_drafts_are_checked_before_writing(owner: Caller) -> None:
    receipt = await create(owner, ("user", "hello"))
    for request in (
        pb.AppendMessagesRequest(
            vault=owner.vault, conversation_id=receipt.conversation_id, messages=messages(("user", "x"))
        ),
        pb.AppendMessagesRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            base_revision=1,
            messages=messages(("robot", "x")),
        ),
        pb.AppendMessagesRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            base_revision=1,
            messages=messages(("user", "x" * 100_001)),
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await stub(owner).AppendMessages(request, metadata=owner.metadata())
        assert rpc_error_kind(error.value) in ("invalid_argument", "limit_exceeded")
    revisions = await stub(owner).ListRevisions(
        pb.ListRevisionsRequest(vault=owner.vault, conversation_id=receipt.conversation_id), metadata=owner.metadata()
    )
    assert [r.number for r in revisions.revisions] == [1]


async def test_idempotency_key_replays_the_first_result_and_refuses_other_content(owner: Caller) -> None:
    first = await create(owner, ("user", "once only"), idempotency_key="import-1")
    again = await create(owner, ("user", "once only"), idempotency_key="import-1")
    assert again.replayed and not first.replayed
    assert (again.conversation_id, again.revision, again.content_sha256) == (
        first.conversation_id,
        first.revision,
        first.content_sha256,
    )
    listed = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert len(listed.conversations) == 1
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await create(owner, ("user", "different words"), idempotency_key="import-1")
    assert rpc_error_kind(error.value) == "conflict"


async def test_tags_are_tidied_and_guarded_by_their_version(owner: Caller) -> None:
    receipt = await create(owner, ("user", "tag me"), tags=["Work", "work ", "Plans"])
    listed = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert list(listed.conversations[0].tags) == ["work", "plans"]
    changed = await stub(owner).SetTags(
        pb.SetTagsRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            tags=["Travel", "TRAVEL", "work"],
            expected_tags_version=1,
        ),
        metadata=owner.metadata(),
    )
    assert (list(changed.tags), changed.tags_version) == (["travel", "work"], 2)
    with pytest.raises(grpc.aio.AioRpcError) as stale:
        await stub(owner).SetTags(
            pb.SetTagsRequest(
                vault=owner.vault, conversation_id=receipt.conversation_id, tags=["x"], expected_tags_version=1
            ),
            metadata=owner.metadata(),
        )
    assert rpc_error_kind(stale.value) == "conflict"
    with pytest.raises(grpc.aio.AioRpcError) as many:
        await stub(owner).SetTags(
            pb.SetTagsRequest(
                vault=owner.vault,
                conversation_id=receipt.conversation_id,
                tags=[f"t{i}" for i in range(21)],
                expected_tags_version=2,
            ),
            metadata=owner.metadata(),
        )
    assert rpc_error_kind(many.value) == "limit_exceeded"
    await create(owner, ("user", "untagged"))
    both = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault, tags_all=["travel", "work"]), metadata=owner.metadata()
    )
    assert [c.id for c in both.conversations] == [receipt.conversation_id]
    anyof = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault, tags_any=["nothing", "travel"]), metadata=owner.metadata()
    )
    assert [c.id for c in anyof.conversations] == [receipt.conversation_id]


async def test_delete_needs_the_exact_id_as_confirmation(owner: Caller) -> None:
    receipt = await create(owner, ("user", "delete me"))
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await stub(owner).DeleteConversation(
            pb.DeleteConversationRequest(vault=owner.vault, conversation_id=receipt.conversation_id, confirm="yes"),
            metadata=owner.metadata(),
        )
    assert rpc_error_kind(error.value) == "invalid_argument"
    assert (await read(owner, receipt.conversation_id)).messages
    deleted = await stub(owner).DeleteConversation(
        pb.DeleteConversationRequest(
            vault=owner.vault, conversation_id=receipt.conversation_id, confirm=receipt.conversation_id
        ),
        metadata=owner.metadata(),
    )
    assert (deleted.revisions_deleted, deleted.messages_deleted) == (1, 1)
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await read(owner, receipt.conversation_id)
    assert rpc_error_kind(gone.value) == "not_found"


async def test_another_account_sees_nothing(owner: Caller, database: Database) -> None:
    receipt = await create(owner, ("user", "the vault code is marigold"))
    suffix = uuid.uuid4().hex[:10]
    assert await AccountStore(database).ensure_owner(f"user-{suffix}", f"vault-{suffix}")
    other = Caller(owner.stub, owner.signer, f"user-{suffix}", f"vault-{suffix}")
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await read(other, receipt.conversation_id)
    assert rpc_error_kind(error.value) == "not_found"
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await stub(other).AppendMessages(
            pb.AppendMessagesRequest(
                vault=other.vault,
                conversation_id=receipt.conversation_id,
                base_revision=1,
                messages=messages(("user", "x")),
            ),
            metadata=other.metadata(),
        )
    assert rpc_error_kind(foreign.value) == "not_found"
    hits = await stub(other).SearchMessages(
        pb.SearchMessagesRequest(vault=other.vault, query="marigold"), metadata=other.metadata()
    )
    assert not hits.hits
    with pytest.raises(grpc.aio.AioRpcError) as not_theirs:
        await stub(other).ListConversations(pb.ListConversationsRequest(vault=owner.vault), metadata=other.metadata())
    assert rpc_error_kind(not_theirs.value) == "not_found"


async def test_search_finds_messages_of_the_head_revision(owner: Caller) -> None:
    receipt = await create(owner, ("user", "the boiler was serviced in March by Hendrik"), ("assistant", "ok"))
    hits = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="boiler serviced"), metadata=owner.metadata()
    )
    # The reply after it matches too, through the message before it, at a low weight.
    assert [(h.conversation_id, h.revision, h.role) for h in hits.hits] == [
        (receipt.conversation_id, 1, "user"),
        (receipt.conversation_id, 1, "assistant"),
    ]
    assert "Hendrik" in hits.hits[0].snippet and hits.hits[0].score > hits.hits[1].score > 0
    await stub(owner).ReplaceTranscript(
        pb.ReplaceTranscriptRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            base_revision=1,
            messages=messages(("user", "nothing")),
        ),
        metadata=owner.metadata(),
    )
    after = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="boiler"), metadata=owner.metadata()
    )
    assert not after.hits


# --- ChatGPT imports ---------------------------------------------------------------------------------


async def run_import(database: Database, import_id: str) -> None:
    service = ArchiveService(ArchiveStore(database), VaultServices.build(database).accounts)
    while await service.process_checkpoint(import_id):
        pass


async def status(caller: Caller, import_id: str) -> pb.ImportStatus:
    response = await stub(caller).GetImport(
        pb.GetImportRequest(vault=caller.vault, import_id=import_id), metadata=caller.metadata()
    )
    return getattr(response, "import")


async def upload(caller: Caller, data: bytes, name: str = "conversations.json") -> pb.ImportStatus:
    response = await stub(caller).StartImport(
        pb.StartImportRequest(vault=caller.vault, format="chatgpt", filename=name, data=data),
        metadata=caller.metadata(),
    )
    return getattr(response, "import")


async def test_chatgpt_export_keeps_every_branch_and_content_type(owner: Caller, database: Database) -> None:
    data = dump(
        [
            branched("conv-1", None, "the wifi password is on the fridge"),
            {"id": "broken", "mapping": "nope"},
            linear("conv-2", "hello there"),
        ]
    )
    started = await upload(owner, data)
    assert started.state == "queued" and started.sha256 == hashlib.sha256(data).hexdigest()
    await run_import(database, started.id)
    done = await status(owner, started.id)
    assert (done.state, done.total, done.done, done.remaining, done.imported, done.failed) == ("done", 3, 3, 0, 2, 1)
    assert [(f.conversation_id, bool(f.error)) for f in done.failures] == [("broken", True)]

    # The raw bytes are kept unchanged.
    raw = await ArchiveStore(database).raw_bytes(
        str(await database.pool.fetchval("SELECT vault_id FROM archive_import WHERE id = $1", started.id)), started.id
    )
    assert raw == data

    listed = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault), metadata=owner.metadata()
    )
    by_external = {c.external_id: c for c in listed.conversations}
    conversation = by_external["conv-1"]
    assert not conversation.has_title and conversation.source == "chatgpt"
    graph = await read(owner, conversation.id, view=pb.CONVERSATION_VIEW_GRAPH)
    assert {m.node_id for m in graph.messages} == {"root", "sys", "u1", "a1", "a2", "c1", "x1", "m1", "q1", "z1"}
    active = await read(owner, conversation.id)
    assert [m.node_id for m in active.messages] == ["root", "sys", "u1", "a2", "c1", "x1", "m1", "q1", "z1"]
    kinds = {m.node_id: (m.role, m.content_type, m.text) for m in graph.messages}
    assert kinds["a1"] == ("assistant", "text", "first answer, later regenerated")
    assert kinds["c1"] == ("assistant", "code", "print(42)")
    assert kinds["x1"] == ("tool", "execution_output", "42")
    assert kinds["m1"][1] == "multimodal_text" and "file-service://file-abc" in kinds["m1"][2]
    assert kinds["q1"][1] == "tether_quote" and "quoted words" in kinds["q1"][2]
    assert kinds["z1"][1] == "brand_new_kind" and "deep thought" in kinds["z1"][2]
    assert '"thoughts"' in next(m.content_json for m in graph.messages if m.node_id == "z1")
    # The conversation's own fields (the export's moderation_results among them) are stored on its root.
    stored = await database.pool.fetchval(
        "SELECT metadata::text FROM archive_message WHERE conversation_id = $1 AND node_id = 'root'",
        conversation.id,
    )
    assert json.loads(stored)["conversation"]["moderation_results"] == []
    hits = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="wifi password"), metadata=owner.metadata()
    )
    # The fact's message first; the replies after it match through it, at a low weight.
    assert {h.conversation_id for h in hits.hits} == {conversation.id} and hits.hits[0].role == "user"

    # The same bytes again are a duplicate, not processed again.
    again = await upload(owner, data)
    assert again.state == "duplicate" and again.duplicate_of == started.id

    # A changed export adds a revision only where a conversation changed.
    changed = dump(
        [
            branched("conv-1", "Now titled", "the wifi password is on the fridge"),
            linear("conv-2", "hello again"),
            linear("conv-3", "new"),
            linear("conv-1b", "x") | {"conversation_id": "conv-1b"},
        ]
    )
    second = await upload(owner, zipped(changed), "export.zip")
    await run_import(database, second.id)
    final = await status(owner, second.id)
    assert (final.state, final.imported, final.updated, final.duplicates, final.failed) == ("done", 2, 2, 0, 0)
    refreshed = await read(owner, conversation.id)
    assert refreshed.conversation.title == "Now titled" and refreshed.revision == 1
    reworded = await read(owner, by_external["conv-2"].id)
    assert reworded.revision == 2 and reworded.messages[0].text == "hello again"
    third = await upload(owner, dump([linear("conv-3", "new")]))
    await run_import(database, third.id)
    assert (await status(owner, third.id)).duplicates == 1


async def test_import_resumes_after_a_restart_and_uploads_in_parts(owner: Caller, database: Database) -> None:
    count = IMPORT_CHECKPOINT_CONVERSATIONS + 5
    data = dump([linear(f"c-{i}", f"fact number {i}") for i in range(count)])
    started = await stub(owner).StartImport(
        pb.StartImportRequest(
            vault=owner.vault, filename="big.json", size=len(data), sha256=hashlib.sha256(data).hexdigest()
        ),
        metadata=owner.metadata(),
    )
    import_id = getattr(started, "import").id
    half = len(data) // 2
    for part, piece in enumerate((data[:half], data[half:])):
        await stub(owner).UploadImportPart(
            pb.UploadImportPartRequest(vault=owner.vault, import_id=import_id, part=part, data=piece),
            metadata=owner.metadata(),
        )
    finished = await stub(owner).FinishImport(
        pb.FinishImportRequest(vault=owner.vault, import_id=import_id), metadata=owner.metadata()
    )
    assert getattr(finished, "import").state == "queued"

    first = ArchiveService(ArchiveStore(database), VaultServices.build(database).accounts)
    assert await first.process_checkpoint(import_id)
    midway = await status(owner, import_id)
    assert (midway.state, midway.done, midway.remaining) == ("running", IMPORT_CHECKPOINT_CONVERSATIONS, 5)
    # A new process (nothing cached) carries on where the checkpoint stopped.
    await run_import(database, import_id)
    done = await status(owner, import_id)
    assert (done.state, done.done, done.imported, done.duplicates) == ("done", count, count, 0)
    total = await database.pool.fetchval(
        "SELECT count(*) FROM archive_conversation c JOIN vault v ON v.id = c.vault_id WHERE v.name = $1", owner.vault
    )
    assert total == count


async def test_finishing_a_large_upload_holds_one_part_at_a_time(owner: Caller, database: Database) -> None:
    """The sha256 check that finishes an upload reads its stored parts one at a time: finishing a 27 MB upload
    (9 parts) allocates about 3 parts' worth at its peak (asyncpg's read buffer, the row, the bytes), not the
    file: 29 MB when a cursor fetched its default 50 rows at a time."""
    store = ArchiveStore(database)
    vault_id = str(await database.pool.fetchval("SELECT id FROM vault WHERE name = $1", owner.vault))
    vault = VaultAccess(vault_id, owner.vault, "owner", "auto")
    data = dump([linear(f"c{i}", f"conversation {i} {'x' * 8000}") for i in range(3000)])
    parts = range(0, len(data), MAX_IMPORT_PART_BYTES)
    assert len(parts) >= 8
    started = await store.start_import(
        vault, "user:me", "chatgpt", "big.json", len(data), hashlib.sha256(data).hexdigest()
    )
    for part, start in enumerate(parts):
        await store.upload_part(vault, started.id, part, data[start : start + MAX_IMPORT_PART_BYTES])
    del data
    tracemalloc.start()
    try:
        finished = await store.finish_import(vault, "user:me", started.id)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert finished.state == "queued"  # the sha256 matched
    print(f"finishing a {len(parts)}-part upload: peak {peak} bytes allocated")
    assert peak < 5 * MAX_IMPORT_PART_BYTES, f"{peak} bytes allocated at the peak for {len(parts)} parts"


async def test_damaged_or_invalid_uploads_are_refused_clearly(owner: Caller, database: Database) -> None:
    data = dump([linear("c", "x")])
    started = await stub(owner).StartImport(
        pb.StartImportRequest(vault=owner.vault, size=len(data), sha256="0" * 64), metadata=owner.metadata()
    )
    import_id = getattr(started, "import").id
    with pytest.raises(grpc.aio.AioRpcError) as early:
        await stub(owner).FinishImport(
            pb.FinishImportRequest(vault=owner.vault, import_id=import_id), metadata=owner.metadata()
        )
    assert "remaining parts" in (early.value.details() or "")
    await stub(owner).UploadImportPart(
        pb.UploadImportPartRequest(vault=owner.vault, import_id=import_id, part=0, data=data), metadata=owner.metadata()
    )
    with pytest.raises(grpc.aio.AioRpcError) as damaged:
        await stub(owner).FinishImport(
            pb.FinishImportRequest(vault=owner.vault, import_id=import_id), metadata=owner.metadata()
        )
    assert rpc_error_kind(damaged.value) == "invalid_argument" and "sha256" in (damaged.value.details() or "")
    assert (await status(owner, import_id)).state == "failed"

    not_json = await upload(owner, b"this is not json")
    await run_import(database, not_json.id)
    failed = await status(owner, not_json.id)
    assert failed.state == "failed" and "not valid JSON" in failed.error
