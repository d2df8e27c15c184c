"""The archive's reads for agents through gRPC, on a real Postgres: signed cursors, the context around
a message, several conversations within a byte budget, titles, counts, keyword-only search when there
is no indexer, and the events that send messages to the indexer."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
import pytest_asyncio
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.events.v1 import archive_events_pb2 as events_pb
from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.reading_store import ArchiveReadStore
from memvault_vault.database import Database
from memvault_vault.domain.signed_cursor import CursorSigner
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

CURSOR_KEY = b"k" * 32


@pytest_asyncio.fixture(scope="module")
async def archive_stub(database: Database) -> AsyncIterator[archive_pb2_grpc.ArchiveServiceStub]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    services = VaultServices.build(database, cursor_secret=CURSOR_KEY)
    archive_pb2_grpc.add_ArchiveServiceServicer_to_server(
        ArchiveServicer(services.archive, IdentitySigner(SECRET)), server
    )
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield archive_pb2_grpc.ArchiveServiceStub(channel)
    await channel.close()
    await server.stop(None)


async def new_owner(database: Database, stub: archive_pb2_grpc.ArchiveServiceStub) -> Caller:
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    return Caller(stub, IdentitySigner(SECRET), subject, vault)  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def owner(database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub) -> Caller:
    return await new_owner(database, archive_stub)


def stub(caller: Caller) -> Any:
    return caller.stub


async def create(caller: Caller, texts: list[str], title: str = "", **fields: Any) -> pb.WriteReceipt:
    drafts = [pb.MessageDraft(role="user" if i % 2 == 0 else "assistant", text=t) for i, t in enumerate(texts)]
    response = await stub(caller).CreateConversation(
        pb.CreateConversationRequest(vault=caller.vault, title=title, messages=drafts, **fields),
        metadata=caller.metadata(),
    )
    return response.receipt  # type: ignore[no-any-return]


async def refused(call: Any, request: Any, metadata: Any) -> tuple[str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call(request, metadata=metadata)
    return rpc_error_kind(error.value), error.value.details() or ""


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def test_cursors_are_signed_bound_to_the_caller_and_expire(owner: Caller, database: Database) -> None:
    for n in range(3):
        await create(owner, [f"note {n}"], title=f"Note {n}")
    first = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault, limit=1), metadata=owner.metadata()
    )
    assert first.next_cursor
    second = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault, limit=1, cursor=first.next_cursor), metadata=owner.metadata()
    )
    assert second.conversations[0].id != first.conversations[0].id

    payload, _, signature = first.next_cursor.partition(".")
    forged = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB") + "." + signature
    kind, text = await refused(
        stub(owner).ListConversations,
        pb.ListConversationsRequest(vault=owner.vault, limit=1, cursor=forged),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "not one this server issued" in text

    # The same account through another client, and another account, may not use it.
    kind, text = await refused(
        stub(owner).ListConversations,
        pb.ListConversationsRequest(vault=owner.vault, limit=1, cursor=first.next_cursor),
        owner.metadata(client="another-agent"),
    )
    assert kind == "invalid_argument" and "another caller" in text

    # An expired cursor: one sealed with the same key an hour and more ago.
    stale = CursorSigner(CURSOR_KEY, clock=lambda: 0.0)
    caller = CursorSigner.caller_of(owner.subject, "")
    probe = CursorSigner(CURSOR_KEY).seal("archive", caller, "x", {"offset": 1})
    assert probe.count(".") == 1
    old = stale.seal("archive", caller, _list_fingerprint(await vault_id(database, owner)), {"offset": 1})
    kind, text = await refused(
        stub(owner).ListConversations,
        pb.ListConversationsRequest(vault=owner.vault, limit=1, cursor=old),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "expired" in text

    # A search cursor is not a list cursor.
    kind, text = await refused(
        stub(owner).ReadConversations,
        pb.ReadConversationsRequest(vault=owner.vault, cursor=first.next_cursor),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "another kind of read" in text


async def vault_id(database: Database, caller: Caller) -> str:
    vault = await AccountStore(database).vault_of(caller.subject, caller.vault)
    assert vault is not None
    return vault.id


def _list_fingerprint(vault: str) -> str:
    from memvault_vault.domain import cursor

    return cursor.fingerprint("conversations", vault, [], [], 1)


async def test_the_context_around_a_message_is_read_at_a_pinned_revision(owner: Caller) -> None:
    texts = [f"turn {n}" for n in range(30)]
    receipt = await create(owner, texts, title="Long")
    body = await stub(owner).GetConversation(
        pb.GetConversationRequest(vault=owner.vault, conversation_id=receipt.conversation_id, limit=200),
        metadata=owner.metadata(),
    )
    hit = body.messages[15]

    default = await stub(owner).GetMessageContext(
        pb.GetMessageContextRequest(vault=owner.vault, message_id=hit.id), metadata=owner.metadata()
    )
    assert [m.text for m in default.messages] == [f"turn {n}" for n in range(12, 19)]
    assert (default.position, default.revision, default.conversation.title) == (15, 1, "Long")

    widest = await stub(owner).GetMessageContext(
        pb.GetMessageContextRequest(vault=owner.vault, message_id=hit.id, before=10, after=10),
        metadata=owner.metadata(),
    )
    assert [m.text for m in widest.messages] == [f"turn {n}" for n in range(5, 26)]
    edge = await stub(owner).GetMessageContext(
        pb.GetMessageContextRequest(vault=owner.vault, message_id=body.messages[1].id, before=10, after=0),
        metadata=owner.metadata(),
    )
    assert [m.text for m in edge.messages] == ["turn 0", "turn 1"]

    kind, text = await refused(
        stub(owner).GetMessageContext,
        pb.GetMessageContextRequest(vault=owner.vault, message_id=hit.id, before=11),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "before must be 0 to 10" in text

    # After a replace the head no longer holds the message; revision 1 still does.
    await stub(owner).ReplaceTranscript(
        pb.ReplaceTranscriptRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            base_revision=1,
            messages=[pb.MessageDraft(role="user", text="fresh start")],
        ),
        metadata=owner.metadata(),
    )
    kind, text = await refused(
        stub(owner).GetMessageContext,
        pb.GetMessageContextRequest(vault=owner.vault, message_id=hit.id),
        owner.metadata(),
    )
    assert kind == "not_found" and "revision 2" in text
    pinned = await stub(owner).GetMessageContext(
        pb.GetMessageContextRequest(vault=owner.vault, message_id=hit.id, revision=1, before=1, after=1),
        metadata=owner.metadata(),
    )
    assert [m.text for m in pinned.messages] == ["turn 14", "turn 15", "turn 16"]


async def test_a_batch_read_fits_the_budget_round_robin_and_keeps_revisions_pinned(owner: Caller) -> None:
    first = await create(owner, [f"alpha {n} " + "a" * 300 for n in range(12)], title="A")
    second = await create(owner, [f"beta {n} " + "b" * 300 for n in range(12)], title="B")
    huge = "z" * 6000
    third = await create(owner, ["gamma 0", huge, "gamma 2"], title="C")
    missing = str(uuid.uuid4())

    kind, text = await refused(
        stub(owner).ReadConversations,
        pb.ReadConversationsRequest(vault=owner.vault, max_bytes=1000, requests=[pb.ConversationReadRequest()]),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "at least 4096" in text

    requests = [
        pb.ConversationReadRequest(conversation_id=c)
        for c in (first.conversation_id, second.conversation_id, third.conversation_id, missing)
    ]
    page = await stub(owner).ReadConversations(
        pb.ReadConversationsRequest(vault=owner.vault, requests=requests, max_bytes=4096), metadata=owner.metadata()
    )
    assert [r.request_index for r in page.results] == [0, 1, 2, 3]
    assert page.results[3].error and "no conversation" in page.results[3].error and page.results[3].complete
    # Round-robin: one message of each conversation in turn, whole.
    texts = [m.text for r in page.results for m in r.messages]
    assert page.results[0].messages[0].text.startswith("alpha 0") and page.results[1].messages[0].text.startswith(
        "beta 0"
    )
    assert page.results[2].messages[0].text == "gamma 0"
    assert len(page.results[0].messages) - len(page.results[1].messages) in (0, 1)
    assert all(t.endswith("a" * 300) or t.endswith("b" * 300) or t.startswith("gamma") for t in texts)
    assert page.used_bytes <= 4096 and page.next_cursor

    # A write meanwhile does not change what the cursor reads: every revision stays pinned.
    await stub(owner).AppendMessages(
        pb.AppendMessagesRequest(
            vault=owner.vault,
            conversation_id=first.conversation_id,
            base_revision=1,
            messages=[pb.MessageDraft(role="user", text="written meanwhile")],
        ),
        metadata=owner.metadata(),
    )
    seen: dict[int, list[str]] = {i: [m.text for m in r.messages] for i, r in enumerate(page.results)}
    oversized: list[pb.OversizedMessage] = [o for r in page.results for o in r.oversized]
    cursor = page.next_cursor
    pages = 1
    while cursor:
        more = await stub(owner).ReadConversations(
            pb.ReadConversationsRequest(vault=owner.vault, cursor=cursor, max_bytes=4096), metadata=owner.metadata()
        )
        pages += 1
        assert more.used_bytes <= 4096
        for r in more.results:
            assert r.revision == 1  # the pin of the first call
            assert r.title == "ABC"[r.request_index] and r.has_title
            seen[r.request_index] += [m.text for m in r.messages]
            oversized += list(r.oversized)
        cursor = more.next_cursor
        assert pages < 30
    assert seen[0] == [f"alpha {n} " + "a" * 300 for n in range(12)]  # not "written meanwhile"
    assert seen[1] == [f"beta {n} " + "b" * 300 for n in range(12)]
    assert seen[2] == ["gamma 0", "gamma 2"]  # the huge one is never cut ...
    assert [(o.position, o.bytes) for o in oversized] == [(1, 6000)]  # ... but named with its size
    assert pages >= 3

    kind, text = await refused(
        stub(owner).ReadConversations,
        pb.ReadConversationsRequest(vault=owner.vault, requests=requests, cursor=page.next_cursor),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "not both" in text

    # A conversation deleted while its cursor is out: that request ends with an error, nothing half-read.
    doomed = await create(owner, [f"delta {n} " + "d" * 300 for n in range(20)], title="D")
    started = await stub(owner).ReadConversations(
        pb.ReadConversationsRequest(
            vault=owner.vault,
            requests=[pb.ConversationReadRequest(conversation_id=doomed.conversation_id)],
            max_bytes=4096,
        ),
        metadata=owner.metadata(),
    )
    await stub(owner).DeleteConversation(
        pb.DeleteConversationRequest(
            vault=owner.vault, conversation_id=doomed.conversation_id, confirm=doomed.conversation_id
        ),
        metadata=owner.metadata(),
    )
    ended = await stub(owner).ReadConversations(
        pb.ReadConversationsRequest(vault=owner.vault, cursor=started.next_cursor), metadata=owner.metadata()
    )
    (result,) = ended.results
    assert "no conversation" in result.error and result.complete and not ended.next_cursor


async def test_titles_resolve_exactly_and_counts_say_what_is_indexed(owner: Caller, database: Database) -> None:
    a = await create(owner, ["one", "two"], title="Trip to Lisbon")
    b = await create(owner, ["three"], title="Trip to Lisbon")
    await create(owner, ["four"], title="trip to lisbon")
    resolved = await stub(owner).ResolveConversations(
        pb.ResolveConversationsRequest(vault=owner.vault, titles=["Trip to Lisbon", "Nowhere"]),
        metadata=owner.metadata(),
    )
    assert [r.title for r in resolved.resolved] == ["Trip to Lisbon", "Nowhere"]
    assert {c.id for c in resolved.resolved[0].conversations} == {a.conversation_id, b.conversation_id}
    assert list(resolved.resolved[1].conversations) == []

    stats = await stub(owner).GetArchiveStats(pb.GetArchiveStatsRequest(vault=owner.vault), metadata=owner.metadata())
    assert (stats.conversations, stats.revisions, stats.messages) == (3, 3, 4)
    assert (stats.indexed, stats.pending, stats.failed) == (0, 4, 0)

    # The messages went to the outbox for the indexer, in the writes' transactions.
    rows = await database.pool.fetch(
        "SELECT payload FROM outbox WHERE subject = 'events.v1.message.archived' AND payload IS NOT NULL"
    )
    mine = {events_pb.MessageArchived.FromString(bytes(r["payload"])).conversation_id for r in rows}
    assert {a.conversation_id, b.conversation_id} <= mine

    # Another account sees none of it.
    stranger = await new_owner(database, stub(owner))
    kind, _ = await refused(
        stub(owner).GetArchiveStats, pb.GetArchiveStatsRequest(vault=owner.vault), stranger.metadata()
    )
    assert kind in ("not_found", "permission_denied")


async def test_without_an_indexer_search_is_keyword_only_budgeted_and_continues_from_its_cursor(
    owner: Caller, database: Database
) -> None:
    await create(owner, [f"the lighthouse keeper logged storm number {n} " + "x" * 200 for n in range(20)])
    await create(owner, ["nothing to see"], tags=["other"])
    page = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="lighthouse storm", limit=20, max_bytes=4096),
        metadata=owner.metadata(),
    )
    assert page.mode == "keyword-only" and page.warnings
    assert 0 < len(page.hits) < 20 and page.next_cursor and page.used_bytes <= 4096
    rest = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, cursor=page.next_cursor, limit=20), metadata=owner.metadata()
    )
    ids = [h.message_id for h in page.hits] + [h.message_id for h in rest.hits]
    assert len(ids) == len(set(ids)) == 20 and not rest.next_cursor

    kind, text = await refused(
        stub(owner).SearchMessages,
        pb.SearchMessagesRequest(vault=owner.vault, query="other words", cursor=page.next_cursor),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "another query" in text
    tagged = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="lighthouse nothing", tags_all=["other"]),
        metadata=owner.metadata(),
    )
    assert [h.snippet for h in tagged.hits] == ["nothing to see"]


async def test_deleting_a_conversation_tells_the_indexer(owner: Caller, database: Database) -> None:
    receipt = await create(owner, ["to be deleted"])
    await stub(owner).DeleteConversation(
        pb.DeleteConversationRequest(
            vault=owner.vault, conversation_id=receipt.conversation_id, confirm=receipt.conversation_id
        ),
        metadata=owner.metadata(),
    )
    rows = await database.pool.fetch("SELECT payload FROM outbox WHERE subject = 'events.v1.conversation.deleted'")
    assert receipt.conversation_id in {
        events_pb.ConversationDeleted.FromString(bytes(r["payload"])).conversation_id for r in rows
    }


class RecordingIndex:
    """Stands in for the indexer's Search: cosines it is told, and what it was asked."""

    def __init__(self) -> None:
        self.cosines: dict[str, float] = {}
        self.calls: list[dict[str, Any]] = []
        self.down = False
        self.broken = False
        self.nearest_down = False
        """Only the call for the nearest messages (limit > 0) finds the indexer unavailable."""

    async def search(self, vault_id: str, query: str, **asked: Any) -> dict[str, float]:
        from memvault_core.errors import Unavailable

        self.calls.append(asked)
        if self.down or (self.nearest_down and asked["limit"] > 0):
            raise Unavailable("the indexer did not answer (UNAVAILABLE)")
        if self.broken:
            raise RuntimeError("an unexpected indexer error")
        found = dict(self.cosines)
        found.update({message_id: 0.5 for message_id, _ in asked["pending"]})
        return found


async def test_search_is_the_union_of_both_sides_fused_on_head_revisions_only(
    owner: Caller, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault_core.identity import Identity

    receipt = await create(owner, ["the ferry leaves at noon", "a quiet morning on deck", "unrelated chatter"])
    body = await stub(owner).GetConversation(
        pb.GetConversationRequest(vault=owner.vault, conversation_id=receipt.conversation_id),
        metadata=owner.metadata(),
    )
    ferry, deck, chatter = (m.id for m in body.messages)
    index = RecordingIndex()
    reads = VaultServices.build(database, index, cursor_secret=CURSOR_KEY).archive.reads  # type: ignore[arg-type]
    me = Identity(subject=owner.subject, scopes=frozenset({"read"}))

    # Keyword hit not yet indexed: sent as text to be scored; a vector-only hit joins it.
    index.cosines = {deck: 0.6, chatter: 0.05}
    page = await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert page.mode == "hybrid" and [h.message_id for h in page.hits] == [ferry, deck]  # chatter: below 0.2
    # (deck shares "ferry" through the message before it, at a low weight)
    assert [i for i, _ in index.calls[-1]["pending"]] == [ferry, deck] and index.calls[-1]["messages"]
    assert "the ferry leaves at noon" in index.calls[-1]["pending"][0][1]
    # Two calls: the nearest messages, asked before the keyword side is known, then the keyword hits scored.
    nearest, scoring = index.calls[-2:]
    assert (nearest["limit"], nearest["score_ids"], nearest["pending"], nearest["messages"]) == (50, [], [], True)
    assert scoring["limit"] == 0

    # A message only the vector side finds is a hit of its head revision too (read beside the keyword side).
    index.cosines = {chatter: 0.7}
    page = await reads.search(me, owner.vault, "sailing", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert page.mode == "hybrid" and [(h.message_id, h.text, h.revision) for h in page.hits] == [
        (chatter, "unrelated chatter", 1)
    ]
    index.cosines = {deck: 0.6, chatter: 0.05}

    # Once indexed, it is scored by its stored vector instead.
    await database.pool.execute(
        "INSERT INTO archive_message_index (message_id, vault_id, content_hash, model, state)"
        " SELECT id, vault_id, content_hash, 'm', 'indexed' FROM archive_message WHERE id = $1",
        ferry,
    )
    await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert [i for i, _ in index.calls[-1]["pending"]] == [deck] and index.calls[-1]["score_ids"] == [ferry]

    # After a replace, the old revision's messages are not hits, whichever side finds them.
    await stub(owner).ReplaceTranscript(
        pb.ReplaceTranscriptRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            base_revision=1,
            messages=[pb.MessageDraft(role="user", text="the ferry was cancelled")],
        ),
        metadata=owner.metadata(),
    )
    page = await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert [h.text for h in page.hits] == ["the ferry was cancelled"]

    index.down = True
    page = await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert page.mode == "keyword-only" and page.warnings and len(page.hits) == 1

    # Any other error of the indexer is the search's error, and neither side is left running.
    await database.statistics.close()  # the writes above asked for a refresh, which runs beside the search
    running = asyncio.all_tasks() - {asyncio.current_task()}
    index.down, index.broken = False, True
    with pytest.raises(RuntimeError, match="unexpected indexer error"):
        await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert asyncio.all_tasks() - {asyncio.current_task()} <= running
    # ...also when the other call found the indexer unavailable (not a quiet fall back to keyword-only).
    index.nearest_down = True
    with pytest.raises(RuntimeError, match="unexpected indexer error"):
        await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    index.broken = index.nearest_down = False

    async def failing(*_: Any, **__: Any) -> Any:
        await asyncio.sleep(0.01)  # the vector side is under way meanwhile
        raise asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout")

    monkeypatch.setattr(ArchiveReadStore, "keyword_candidates", failing)
    with pytest.raises(asyncpg.exceptions.QueryCanceledError):
        await reads.search(me, owner.vault, "ferry", tags_all=[], tags_any=[], limit=10, max_bytes=0, page="")
    assert asyncio.all_tasks() - {asyncio.current_task()} <= running


async def test_another_account_reaches_none_of_it_through_its_own_vault(owner: Caller, database: Database) -> None:
    receipt = await create(owner, ["the safe code is 7781"], title="Safe")
    body = await stub(owner).GetConversation(
        pb.GetConversationRequest(vault=owner.vault, conversation_id=receipt.conversation_id),
        metadata=owner.metadata(),
    )
    message_id = body.messages[0].id
    stranger = await new_owner(database, stub(owner))
    random_id = str(uuid.uuid4())

    def neutral(text: str, *ids: str) -> str:
        for value in ids:
            text = text.replace(value, "<id>")
        return text

    hers = await refused(
        stub(owner).GetMessageContext,
        pb.GetMessageContextRequest(vault=stranger.vault, message_id=message_id),
        stranger.metadata(),
    )
    nobody = await refused(
        stub(owner).GetMessageContext,
        pb.GetMessageContextRequest(vault=stranger.vault, message_id=random_id),
        stranger.metadata(),
    )
    assert hers[0] == nobody[0] == "not_found" and neutral(hers[1], message_id) == neutral(nobody[1], random_id)

    batch = await stub(owner).ReadConversations(
        pb.ReadConversationsRequest(
            vault=stranger.vault,
            requests=[
                pb.ConversationReadRequest(conversation_id=receipt.conversation_id),
                pb.ConversationReadRequest(conversation_id=random_id),
            ],
        ),
        metadata=stranger.metadata(),
    )
    errors = [neutral(r.error, receipt.conversation_id, random_id) for r in batch.results]
    assert errors[0] == errors[1] and errors[0] and not any(r.messages for r in batch.results)
    found = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=stranger.vault, query="safe code"), metadata=stranger.metadata()
    )
    assert list(found.hits) == []
    resolved = await stub(owner).ResolveConversations(
        pb.ResolveConversationsRequest(vault=stranger.vault, titles=["Safe"]), metadata=stranger.metadata()
    )
    assert list(resolved.resolved[0].conversations) == []
    stats = await stub(owner).GetArchiveStats(
        pb.GetArchiveStatsRequest(vault=stranger.vault), metadata=stranger.metadata()
    )
    assert (stats.conversations, stats.messages) == (0, 0)
