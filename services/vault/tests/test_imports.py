"""Imports against a real Postgres: text splitting, an outcome per item, and undo back to the exact prior state."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from lifecycle_helpers import FakeIndex, agent, bulk, fake_index, fake_index_and_stub, owner, remember, set_mode
from vault_helpers import Caller

from memvault.events.v1 import memory_events_pb2 as events_pb
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.identity import Identity
from memvault_vault.database import Database
from memvault_vault.domain.memory import Draft
from memvault_vault.outbox import events
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration
__all__ = ["fake_index", "fake_index_and_stub", "owner"]  # fixtures used here


async def vault_state(database: Database, caller: Caller) -> dict[str, Any]:
    """Every memory row and history row of the vault, exactly, plus exclusions."""
    vault_id = await database.pool.fetchval("SELECT id FROM vault WHERE name = $1", caller.vault)
    memories = await database.pool.fetch(
        "SELECT (to_jsonb(m) - 'search')::text AS row FROM memory m WHERE vault_id = $1 ORDER BY id", vault_id
    )
    history = await database.pool.fetch(
        "SELECT memory_id::text, version, change, snapshot::text, actor, coalesce(cause::text, '') AS cause"
        " FROM memory_history WHERE vault_id = $1 ORDER BY id",
        vault_id,
    )
    exclusions = await database.pool.fetch("SELECT content_hash FROM exclusion WHERE vault_id = $1", vault_id)
    return {
        "memories": [json.loads(r["row"]) for r in memories],
        "history": [dict(r) for r in history],
        "exclusions": sorted(r["content_hash"] for r in exclusions),
    }


async def test_markdown_import_reports_every_item(owner: Caller) -> None:
    await remember(owner, "Prefers dark mode.")
    text = """# From ChatGPT
- Prefers dark mode.
- Uses k3s on three NUCs.
- The AWS key is AKIAQWERTYUIOPASDFGH

Backups run nightly.
---
Uses k3s on three NUCs.
"""
    response = await owner.stub.BulkRemember(
        vpb.BulkRememberRequest(
            vault=owner.vault, text=text, source="ChatGPT export", text_type=pb.MEMORY_TYPE_PREFERENCE
        ),
        metadata=agent(owner),
    )
    assert [r.outcome for r in response.results] == [
        vpb.WRITE_OUTCOME_DUPLICATE,
        vpb.WRITE_OUTCOME_STORED,
        vpb.WRITE_OUTCOME_SECRET,
        vpb.WRITE_OUTCOME_STORED,
        vpb.WRITE_OUTCOME_DUPLICATE,
    ]
    assert [r.index for r in response.results] == [0, 1, 2, 3, 4]
    assert response.results[4].memory_id == response.results[1].memory_id
    batches = await owner.stub.ListImportBatches(vpb.ListImportBatchesRequest(vault=owner.vault), metadata=agent(owner))
    assert batches.batches[0].id == response.batch_id
    assert dict(batches.batches[0].outcomes) == {"duplicate": 2, "stored": 2, "secret": 1}
    assert batches.batches[0].source == "ChatGPT export"
    listed = await owner.stub.ListMemories(vpb.ListMemoriesRequest(vault=owner.vault), metadata=agent(owner))
    imported = [m for m in listed.memories if m.batch_id == response.batch_id]
    assert {m.type for m in imported} == {pb.MEMORY_TYPE_PREFERENCE}
    assert {m.source for m in imported} == {"ChatGPT export (via TestAgent)"}


async def test_items_or_text_not_both_and_text_limits(owner: Caller) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await owner.stub.BulkRemember(
            vpb.BulkRememberRequest(vault=owner.vault, text="- a", items=[pb.MemoryDraft(content="b")]),
            metadata=agent(owner),
        )
    assert "either items or text" in (error.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await owner.stub.BulkRemember(vpb.BulkRememberRequest(vault=owner.vault, text="# only"), metadata=agent(owner))
    assert "text holds no memories" in (error.value.details() or "")


async def test_undo_restores_exactly_the_state_before_the_import(
    owner: Caller, fake_index: FakeIndex, database: Database
) -> None:
    await set_mode(owner, "auto")
    speed = await remember(owner, "The internet connection is 1 Gbps.")
    budget = await remember(owner, "The campaign budget is $50,000.")
    plan = await remember(owner, "Paid search gets 40% of the budget.", depends_on=[budget.result.memory_id])
    await set_mode(owner, "review")
    before = await vault_state(database, owner)

    fake_index.set("The internet connection is 1 Gbps.", "The internet connection is 2 Gbps.", 0.96)
    imported = await bulk(
        owner, "The internet connection is 2 Gbps.", "The campaign budget is $35,000.", "Sam lives in Lisbon."
    )
    new_speed, new_budget, _ = imported.results
    assert new_speed.outcome == vpb.WRITE_OUTCOME_SIMILAR
    # The owner approves the import's items, replacing the memories they update.
    await owner.stub.ApproveMemory(
        vpb.ApproveMemoryRequest(vault=owner.vault, memory_id=new_speed.memory_id, replace_similar=True),
        metadata=owner.metadata(),
    )
    await owner.stub.ApproveMemory(
        vpb.ApproveMemoryRequest(vault=owner.vault, memory_id=new_budget.memory_id, replace_ids=[]),
        metadata=owner.metadata(),
    )
    superseded = await owner.stub.SupersedeMemory(
        vpb.SupersedeMemoryRequest(
            vault=owner.vault,
            memory_id=budget.result.memory_id,
            replacement=pb.MemoryDraft(content="The campaign budget is now $35k."),
        ),
        metadata=owner.metadata(),
    )
    assert superseded.applied and list(superseded.flagged_dependents) == [plan.result.memory_id]
    # A later memory that links to the import.
    fake_index.set("Sam lives in Lisbon.", "Sam lives in Porto.", 0.9)
    later = await remember(owner, "Sam lives in Porto.")
    assert later.result.outcome == vpb.WRITE_OUTCOME_SIMILAR

    undone = await owner.stub.UndoImportBatch(
        vpb.UndoImportBatchRequest(vault=owner.vault, batch_id=imported.batch_id), metadata=owner.metadata()
    )
    assert undone.removed == 3
    assert undone.restored == 1  # the 1 Gbps memory, superseded only because of the import
    assert list(undone.kept_changes) == [later.result.memory_id]  # written after the import; its link is dropped
    after = await vault_state(database, owner)
    speed_row = next(m for m in after["memories"] if m["id"] == speed.result.memory_id)
    assert speed_row == next(m for m in before["memories"] if m["id"] == speed.result.memory_id)
    assert speed_row["status"] == "active"
    # Everything from before the import is as it was, except what happened since for other reasons:
    # the budget was superseded by the owner directly, and the later memory exists.
    untouched = [
        m for m in before["memories"] if m["id"] != budget.result.memory_id and m["id"] != plan.result.memory_id
    ]
    assert all(m in after["memories"] for m in untouched)
    assert not any(m.get("batch_id") == imported.batch_id for m in after["memories"])
    later_row = next(m for m in after["memories"] if m["id"] == later.result.memory_id)
    assert later_row["similar_to"] == []

    with pytest.raises(grpc.aio.AioRpcError) as error:
        await owner.stub.UndoImportBatch(
            vpb.UndoImportBatchRequest(vault=owner.vault, batch_id=imported.batch_id), metadata=owner.metadata()
        )
    assert "already undone" in (error.value.details() or "")


async def test_undo_of_an_untouched_import_is_exact(owner: Caller, fake_index: FakeIndex, database: Database) -> None:
    await set_mode(owner, "auto")
    old = await remember(owner, "The router runs OpenWrt 23.05.")
    before = await vault_state(database, owner)
    fake_index.set("The router runs OpenWrt 23.05.", "The router runs OpenWrt 24.10.", 0.97)
    imported = await bulk(
        owner, "The router runs OpenWrt 24.10.", "The printer is a Brother.", "token: ghp_" + "x1Y2z3" * 6
    )
    assert [r.outcome for r in imported.results] == [
        vpb.WRITE_OUTCOME_SIMILAR,
        vpb.WRITE_OUTCOME_STORED,
        vpb.WRITE_OUTCOME_SECRET,
    ]
    assert list(imported.results[0].similar_to) == [old.result.memory_id]
    await owner.stub.UndoImportBatch(
        vpb.UndoImportBatchRequest(vault=owner.vault, batch_id=imported.batch_id), metadata=owner.metadata()
    )
    assert await vault_state(database, owner) == before


async def test_imports_in_flight_together_see_each_other(owner: Caller, fake_index: FakeIndex) -> None:
    """Two imports into one vault sent at once: the second is checked against what the first wrote
    (it waits its turn, having had its texts embedded meanwhile), so a near-duplicate across them is
    found (a near-duplicate at cosine 0.97), not stored twice as new."""
    await set_mode(owner, "auto")
    first, second = "The boiler was serviced in March 2025.", "The boiler got its service in March 2025."
    fake_index.set(first, second, 0.97)
    calls, ahead = fake_index.similar_calls, fake_index.embed_ahead_calls
    fake_index.calls.clear()
    fake_index.delay = 0.3
    try:
        one, two = await asyncio.gather(bulk(owner, first), bulk(owner, second))
    finally:
        fake_index.delay = 0.0
    results = sorted([one.results[0], two.results[0]], key=lambda r: r.outcome)
    assert [r.outcome for r in results] == [vpb.WRITE_OUTCOME_STORED, vpb.WRITE_OUTCOME_DUPLICATE]
    assert results[1].memory_id == results[0].memory_id
    assert fake_index.similar_calls - calls == 2  # each import's check
    assert fake_index.embed_ahead_calls - ahead == 1  # and the waiting one's embedding ahead
    # ...sent once the first one's texts are embedded, not beside them (which would delay the first)
    assert fake_index.calls[:3] == ["similar", "similar done", "ahead"]


async def test_an_import_embedded_ahead_lets_the_next_one_embed_while_it_is_checked(
    owner: Caller, fake_index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client keeping two imports in flight sends a third when the first returns. The second, embedded
    ahead while the first was written, lets the third embed once that embedding is done, while its own
    duplicate check runs (the model would otherwise idle while the index is searched and rows written)."""
    await set_mode(owner, "auto")
    fake_index.calls.clear()
    fake_index.delay, fake_index.search_delay = 0.3, 0.3

    async def after(first: asyncio.Future[vpb.BulkRememberResponse], text: str) -> vpb.BulkRememberResponse:
        await first
        return await bulk(owner, text)

    checking = asyncio.Event()
    similar = fake_index.similar

    async def watched(*args: Any, **kwargs: Any) -> Any:
        checking.set()
        return await similar(*args, **kwargs)

    monkeypatch.setattr(fake_index, "similar", watched)
    try:
        first = asyncio.ensure_future(bulk(owner, "The NAS has four 8 TB disks."))
        await asyncio.wait_for(checking.wait(), 10)  # the first holds the turn (requests may overtake each other)
        second = asyncio.ensure_future(bulk(owner, "The NAS runs TrueNAS Scale."))
        answers = await asyncio.gather(first, second, after(first, "The NAS backs up to a USB disk nightly."))
    finally:
        fake_index.delay, fake_index.search_delay = 0.0, 0.0
    assert [a.results[0].outcome for a in answers] == [vpb.WRITE_OUTCOME_STORED] * 3
    calls = fake_index.calls
    assert calls.count("ahead") == 2 and calls.count("similar") == 3  # the first had nothing to wait for
    third_ahead = [n for n, c in enumerate(calls) if c == "ahead"][1]
    second_done = [n for n, c in enumerate(calls) if c == "similar done"][1]
    assert third_ahead < second_done, calls


async def test_imports_waiting_for_the_turn_embed_ahead_one_after_another(owner: Caller, fake_index: FakeIndex) -> None:
    """A client with four imports in flight: the three waiting for the turn embed their texts ahead one at a
    time, in the order they get the turn (side by side, each would take as long as all of them together, and
    the next to be written would wait for all)."""
    await set_mode(owner, "auto")
    fake_index.calls.clear()
    fake_index.texts.clear()
    fake_index.delay = 0.2
    texts = [
        "The NAS has four 8 TB disks.",
        "The NAS runs TrueNAS Scale.",
        "The NAS is in the cellar.",
        "The NAS has ECC RAM.",
    ]
    try:
        answers = await asyncio.gather(*(bulk(owner, text) for text in texts))
    finally:
        fake_index.delay = 0.0
    assert [a.results[0].outcome for a in answers] == [vpb.WRITE_OUTCOME_STORED] * 4
    aheads = [c for c in fake_index.calls if c.startswith("ahead")]
    assert aheads == ["ahead", "ahead done"] * 3, fake_index.calls
    turns = [text for call, text in fake_index.texts if call == "similar"]
    assert [text for call, text in fake_index.texts if call == "ahead"] == turns[1:]


def bulk_in_process(owner: Caller, database: Database, fake_index: FakeIndex) -> Callable[[str], Awaitable[Any]]:
    """`bulk_remember` of one text, called in this process: a gRPC client going away does not cancel the
    vault's handler, a task cancelled here does."""
    services = VaultServices.build(database, fake_index, index_catch_up_seconds=0)  # type: ignore[arg-type]
    me = Identity(subject=owner.subject, scopes=frozenset({"read", "write"}), client="TestAgent")

    async def bulk_here(text: str) -> Any:
        return await services.imports.bulk_remember(me, owner.vault, [Draft(content=text)], "a test")

    return bulk_here


async def until_called(fake_index: FakeIndex, call: str) -> None:
    while call not in fake_index.calls:  # noqa: ASYNC110 - the fake index has no event to wait on
        await asyncio.sleep(0.01)


async def test_an_import_whose_caller_goes_away_while_it_waits_embeds_nothing_ahead(
    owner: Caller, fake_index: FakeIndex, database: Database
) -> None:
    """Its texts would be embedded for nobody, and the imports after it would wait for that. (Called in
    this process: a gRPC client going away does not cancel the vault's handler.)"""
    await set_mode(owner, "auto")
    bulk_here = bulk_in_process(owner, database, fake_index)
    fake_index.calls.clear()
    fake_index.delay = 0.5
    try:
        first = asyncio.ensure_future(bulk_here("The UPS lasts twenty minutes."))
        await until_called(fake_index, "similar")
        gone = asyncio.ensure_future(bulk_here("The UPS beeps when the power fails."))
        await asyncio.sleep(0.1)  # it waits for the turn, its texts to be embedded once the first's are
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        _, summary = await first
        await asyncio.sleep(0.2)
    finally:
        fake_index.delay = 0.0
    assert summary.results[0].outcome.value == "stored"
    assert "ahead" not in fake_index.calls, fake_index.calls


async def test_an_import_whose_caller_goes_away_does_not_let_the_next_embed_beside_the_one_before_it(
    owner: Caller, fake_index: FakeIndex, database: Database
) -> None:
    """Three imports wait for the turn: the first of them embeds ahead, the second's caller goes away, and the
    third still waits for the first's embedding before it sends its own (side by side, the first would be
    written only once both were embedded)."""
    await set_mode(owner, "auto")
    bulk_here = bulk_in_process(owner, database, fake_index)
    fake_index.calls.clear()
    fake_index.texts.clear()
    fake_index.delay = 0.8
    try:
        holder = asyncio.ensure_future(bulk_here("The router is in the hallway."))
        await until_called(fake_index, "similar")
        # Each reaches the turn (after its own database round trip) well before the next starts, and all
        # three before the holder's texts are embedded, however loaded the machine.
        first = asyncio.ensure_future(bulk_here("The router runs OpenWrt."))
        await asyncio.sleep(0.15)
        gone = asyncio.ensure_future(bulk_here("The router reboots on Sundays."))
        await asyncio.sleep(0.15)
        last = asyncio.ensure_future(bulk_here("The router has four ports."))
        await until_called(fake_index, "ahead")
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        answers = await asyncio.gather(holder, first, last)
    finally:
        fake_index.delay = 0.0
    assert [summary.results[0].outcome.value for _, summary in answers] == ["stored"] * 3
    aheads = [c for c in fake_index.calls if c.startswith("ahead")]
    assert aheads == ["ahead", "ahead done", "ahead", "ahead done"], fake_index.calls
    assert [text for call, text in fake_index.texts if call == "ahead"] == [
        "The router runs OpenWrt.",
        "The router has four ports.",
    ]


async def test_an_import_goes_on_when_embedding_its_texts_ahead_fails(
    owner: Caller, fake_index: FakeIndex, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Embedding ahead is an optimisation nobody awaits: an unexpected error in it is logged (its kind,
    no text) and the duplicate check embeds the texts itself."""
    await set_mode(owner, "auto")

    async def broken(vault_id: str, texts: Any) -> None:
        raise RuntimeError("the channel was closed")

    monkeypatch.setattr(fake_index, "embed_ahead", broken)
    fake_index.delay = 0.3
    caplog.set_level(logging.WARNING, logger="memvault_vault.memories.writes")
    try:
        one, two = await asyncio.gather(
            bulk(owner, "The garage door opener is a Chamberlain."), bulk(owner, "The garage has two bikes.")
        )
    finally:
        fake_index.delay = 0.0
    assert [r.outcome for r in (*one.results, *two.results)] == [vpb.WRITE_OUTCOME_STORED] * 2
    (record,) = [r for r in caplog.records if "embedding ahead failed" in r.getMessage()]
    assert record.__dict__["error"] == "RuntimeError" and "garage" not in caplog.text


async def test_undo_needs_a_reviewer_and_a_real_batch(owner: Caller) -> None:
    imported = await bulk(owner, "One memory to import.")
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await owner.stub.UndoImportBatch(
            vpb.UndoImportBatchRequest(vault=owner.vault, batch_id=imported.batch_id), metadata=agent(owner)
        )
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    for batch_id, needle in (("nope", "is not an import id"), ("3f2b8c4e-9a1d-4e5f-8b7c-2d1e0f9a8b7c", "no import")):
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await owner.stub.UndoImportBatch(
                vpb.UndoImportBatchRequest(vault=owner.vault, batch_id=batch_id), metadata=owner.metadata()
            )
        assert needle in (error.value.details() or "")


async def test_an_import_sends_its_new_memories_to_the_indexer_in_one_event(owner: Caller, database: Database) -> None:
    vault_id = await database.pool.fetchval("SELECT id::text FROM vault WHERE name = $1", owner.vault)
    response = await bulk(owner, *[f"The rack's switch port {n} is labelled patch-{n}." for n in range(40)])
    stored = [r.memory_id for r in response.results if r.outcome == vpb.WRITE_OUTCOME_STORED]
    assert len(stored) == 40
    rows = await database.pool.fetch("SELECT subject, payload FROM outbox WHERE subject LIKE '%created'")
    events = [
        e for e in (events_pb.MemoriesCreated.FromString(r["payload"]) for r in rows if "memories" in r["subject"])
    ]
    mine = [e for e in events if e.vault_id == vault_id]
    assert len(mine) == 1 and [m.memory_id for m in mine[0].memories] == stored
    assert not [r for r in rows if r["subject"].endswith(".memory.created") and vault_id.encode() in r["payload"]]
    one = await bulk(owner, "The rack has one spare shelf.")
    newest = await database.pool.fetchrow("SELECT subject, payload FROM outbox ORDER BY created_at DESC, id LIMIT 1")
    assert newest["subject"] == "events.v1.memory.created"  # one memory: its own event
    assert events_pb.MemoryCreated.FromString(newest["payload"]).memory_id == one.results[0].memory_id


def test_many_new_memories_go_in_events_of_at_most_max_per_event() -> None:
    size = events.MAX_PER_EVENT
    memories = [(str(uuid.uuid4()), f"hash-{n}") for n in range(2 * size + 1)]
    sent = events.memories_created("vault-1", memories)
    assert [e.subject for e in sent] == ["events.v1.memories.created"] * 3
    decoded = [events_pb.MemoriesCreated.FromString(e.payload) for e in sent]
    assert [len(d.memories) for d in decoded] == [size, size, 1]
    assert [(m.memory_id, m.content_hash) for d in decoded for m in d.memories] == memories
    assert [d.event_id for d in decoded] == [e.id for e in sent] and len({e.id for e in sent}) == 3
    (single,) = events.memories_created("vault-1", memories[:1])
    assert single.subject == "events.v1.memory.created"
    assert events_pb.MemoryCreated.FromString(single.payload).memory_id == memories[0][0]
    assert events.memories_created("vault-1", []) == []
