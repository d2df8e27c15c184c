"""VaultService against a real Postgres: what an agent would notice."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from vault_helpers import Caller, rpc_error_kind

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits
from memvault_vault.database import Database, lock_vault

pytestmark = pytest.mark.integration


def draft(content: str, **fields: object) -> pb.MemoryDraft:
    return pb.MemoryDraft(content=content, **fields)  # type: ignore[arg-type]


async def remember(caller: Caller, content: str, **fields: object) -> vpb.RememberResponse:
    request = vpb.RememberRequest(vault=caller.vault, memory=draft(content, **fields))
    return await caller.stub.Remember(request, metadata=caller.metadata())


async def recall(caller: Caller, query: str, **fields: object) -> vpb.RecallResponse:
    request = vpb.RecallRequest(vault=caller.vault, query=query, **fields)  # type: ignore[arg-type]
    return await caller.stub.Recall(request, metadata=caller.metadata())


async def count_memories(database: Database, vault: str) -> int:
    return int(
        await database.pool.fetchval(
            "SELECT count(*) FROM memory m JOIN vault v ON v.id = m.vault_id WHERE v.name = $1", vault
        )
    )


async def test_remember_then_recall_ranks_the_match_first(caller: Caller) -> None:
    stored = await remember(caller, "The homelab NAS is a Synology DS920+ with four drives.", tags=["homelab"])
    await remember(caller, "Prefers dark roast coffee in the morning.")
    await remember(caller, "The homelab router runs OpenWrt.")
    assert stored.result.outcome == vpb.WRITE_OUTCOME_STORED
    assert stored.result.status == pb.MEMORY_STATUS_PROPOSED  # new vaults review agent writes

    found = await recall(caller, "Which NAS does the homelab use?")
    assert found.mode == "keyword-only"
    assert found.hits[0].memory.id == stored.result.memory_id
    assert found.hits[0].memory.tags == ["homelab"]
    assert "coffee" not in " ".join(h.memory.content for h in found.hits)


async def test_stopwords_alone_find_nothing_and_say_why(caller: Caller) -> None:
    await remember(caller, "What is at the top is the best.")
    found = await recall(caller, "what is the")
    assert not found.hits
    assert any("common words" in w for w in found.warnings)


async def test_exact_duplicates_ignore_case_and_whitespace(caller: Caller, database: Database) -> None:
    first = await remember(caller, "Deploys go to the k3s cluster.")
    again = await remember(caller, "  deploys GO to the   k3s cluster. ")
    assert again.result.outcome == vpb.WRITE_OUTCOME_DUPLICATE
    assert again.result.memory_id == first.result.memory_id
    assert await count_memories(database, caller.vault) == 1


async def test_bulk_skips_duplicates_within_and_across_calls(caller: Caller, database: Database) -> None:
    await remember(caller, "Uses Tailscale for remote access.")
    request = vpb.BulkRememberRequest(
        vault=caller.vault,
        source="chatgpt export",
        items=[
            draft("Uses tailscale for remote access."),
            draft("Backups run nightly at 02:00."),
            draft("backups run nightly at 02:00."),
            draft("The printer is a Brother HL-L2350DW."),
        ],
    )
    response = await caller.stub.BulkRemember(request, metadata=caller.metadata())
    outcomes = [r.outcome for r in response.results]
    assert outcomes == [
        vpb.WRITE_OUTCOME_DUPLICATE,
        vpb.WRITE_OUTCOME_STORED,
        vpb.WRITE_OUTCOME_DUPLICATE,
        vpb.WRITE_OUTCOME_STORED,
    ]
    assert response.results[2].memory_id == response.results[1].memory_id
    assert response.batch_id
    assert await count_memories(database, caller.vault) == 3
    listed = await caller.stub.ListMemories(vpb.ListMemoriesRequest(vault=caller.vault), metadata=caller.metadata())
    imported = [m for m in listed.memories if m.batch_id == response.batch_id]
    assert {m.source for m in imported} == {"chatgpt export"}
    assert {m.trust for m in imported} == {pb.TRUST_IMPORTED}


async def test_every_change_to_memories_waits_for_the_vault_write_lock(caller: Caller, database: Database) -> None:
    # The count triggers (tag combinations, lexemes) lock one counter row per key; a transaction that changes
    # memories in several statements, under the vault's write lock, may meet them in any order. A change that
    # skipped the lock could hold a memory row and wait for a counter row the locked writer holds while the
    # writer waits for that memory row: a deadlock. So every change takes the lock first.
    ids = [(await remember(caller, f"Change {n}: the backup disk is in rack {n}.")).result.memory_id for n in range(4)]
    vault_id = await database.pool.fetchval("SELECT id::text FROM vault WHERE name = $1", caller.vault)
    m = caller.metadata()
    changes = {
        "forget": lambda: caller.stub.Forget(vpb.ForgetRequest(vault=caller.vault, memory_id=ids[0]), metadata=m),
        "invalidate": lambda: caller.stub.InvalidateMemory(
            vpb.InvalidateMemoryRequest(vault=caller.vault, memory_id=ids[1], reason="moved", expected_version=1),
            metadata=m,
        ),
        "propose an invalidation": lambda: caller.stub.InvalidateMemory(
            vpb.InvalidateMemoryRequest(vault=caller.vault, memory_id=ids[2], expected_version=1), metadata=m
        ),
        "mark reviewed": lambda: caller.stub.MarkReviewed(
            vpb.MarkReviewedRequest(vault=caller.vault, memory_id=ids[3], expected_version=1), metadata=m
        ),
    }
    for name, change in changes.items():
        async with database.pool.acquire() as holder, holder.transaction():
            await lock_vault(holder, vault_id)
            pending = asyncio.ensure_future(change())
            await asyncio.sleep(0.4)
            assert not pending.done(), f"{name} did not wait for the vault's write lock"
        await asyncio.wait_for(pending, 10)


async def test_forget_removes_and_excludes_the_text(caller: Caller, database: Database) -> None:
    stored = await remember(caller, "The old VPN password hint is the cat's name.")
    forgotten = await caller.stub.Forget(
        vpb.ForgetRequest(vault=caller.vault, memory_id=stored.result.memory_id), metadata=caller.metadata()
    )
    assert forgotten.memory_id == stored.result.memory_id
    assert not (await recall(caller, "VPN password hint")).hits
    again = await remember(caller, "the old VPN password hint is the cat's name.")
    assert again.result.outcome == vpb.WRITE_OUTCOME_EXCLUDED
    bulk = await caller.stub.BulkRemember(
        vpb.BulkRememberRequest(vault=caller.vault, items=[draft("The old VPN password hint is the cat's name.")]),
        metadata=caller.metadata(),
    )
    assert bulk.results[0].outcome == vpb.WRITE_OUTCOME_EXCLUDED
    assert await count_memories(database, caller.vault) == 0
    history = await database.pool.fetchval(
        "SELECT count(*) FROM memory_history WHERE memory_id = $1::uuid", stored.result.memory_id
    )
    assert history == 0
    actions = [
        r["action"]
        for r in await database.pool.fetch(
            "SELECT a.action FROM audit_log a JOIN vault v ON v.id = a.vault_id WHERE v.name = $1 ORDER BY a.id",
            caller.vault,
        )
    ]
    assert actions == [
        "vault.create",
        "memory.remember",
        "memory.forget",
        "memory.remember",
        "memory.bulk_remember",
    ]


async def test_every_write_leaves_history_and_an_event(caller: Caller, database: Database) -> None:
    stored = await remember(caller, "Prefers British spelling in documents.", type=pb.MEMORY_TYPE_PREFERENCE)
    row = await database.pool.fetchrow(
        "SELECT change, snapshot->>'type' AS type FROM memory_history WHERE memory_id = $1::uuid",
        stored.result.memory_id,
    )
    assert row is not None and row["change"] == "created" and row["type"] == "preference"
    subjects = await database.pool.fetch(
        "SELECT subject, payload FROM outbox WHERE published_at IS NULL AND payload IS NOT NULL ORDER BY created_at"
    )
    assert any(r["subject"] == "events.v1.memory.created" for r in subjects)
    assert all(b"British" not in bytes(r["payload"]) for r in subjects)


@pytest.mark.parametrize(
    ("request_", "kind", "needle"),
    [
        (vpb.RememberRequest(memory=pb.MemoryDraft(content="")), "invalid_argument", "content is empty"),
        (
            vpb.RememberRequest(memory=pb.MemoryDraft(content="x" * (limits.MAX_CONTENT_CHARS + 1))),
            "limit_exceeded",
            "max_content_chars",
        ),
        (  # below what Postgres' real can hold: was an internal error
            vpb.RememberRequest(memory=pb.MemoryDraft(content="hello", confidence=1e-300)),
            "invalid_argument",
            "confidence must be between 0.001 and 1",
        ),
        (
            vpb.RememberRequest(vault="nope-does-not-exist", memory=pb.MemoryDraft(content="hello")),
            "not_found",
            "no vault named 'nope-does-not-exist'",
        ),
    ],
)
async def test_bad_writes_are_refused_and_nothing_is_written(
    caller: Caller, database: Database, request_: vpb.RememberRequest, kind: str, needle: str
) -> None:
    if not request_.vault:
        request_.vault = caller.vault
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.Remember(request_, metadata=caller.metadata())
    assert rpc_error_kind(error.value) == kind
    assert needle in (error.value.details() or "")
    assert await count_memories(database, caller.vault) == 0


async def test_a_bad_item_is_reported_and_an_oversized_bulk_writes_nothing(caller: Caller, database: Database) -> None:
    request = vpb.BulkRememberRequest(vault=caller.vault, items=[draft("fine"), draft("  ")])
    response = await caller.stub.BulkRemember(request, metadata=caller.metadata())
    assert [r.outcome for r in response.results] == [vpb.WRITE_OUTCOME_STORED, vpb.WRITE_OUTCOME_INVALID]
    assert "items[1].content is empty" in response.results[1].message
    await caller.stub.Forget(
        vpb.ForgetRequest(vault=caller.vault, memory_id=response.results[0].memory_id), metadata=caller.metadata()
    )
    await database.pool.execute("DELETE FROM import_batch WHERE id = $1::uuid", response.batch_id)
    too_many = vpb.BulkRememberRequest(
        vault=caller.vault, items=[draft(f"memory {i}") for i in range(limits.MAX_BULK_ITEMS + 1)]
    )
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.BulkRemember(too_many, metadata=caller.metadata())
    assert error.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert "max_bulk_items" in (error.value.details() or "")
    assert await count_memories(database, caller.vault) == 0
    assert (
        await database.pool.fetchval(
            "SELECT count(*) FROM import_batch b JOIN vault v ON v.id = b.vault_id WHERE v.name = $1",
            caller.vault,
        )
        == 0
    )


async def test_malformed_memory_id(caller: Caller) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.Forget(vpb.ForgetRequest(vault=caller.vault, memory_id="12"), metadata=caller.metadata())
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a memory id" in (error.value.details() or "")


async def test_calls_without_a_valid_identity_are_refused(caller: Caller) -> None:
    request = vpb.RecallRequest(vault=caller.vault, query="anything")
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.Recall(request)
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    forged = caller.metadata()[0][1][:-4] + "AAAA"
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.Recall(request, metadata=(("x-memvault-identity", forged),))
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_one_account_cannot_see_or_touch_another_accounts_vault(caller: Caller, database: Database) -> None:
    stored = await remember(caller, "The garage code is kept in the password manager.")
    intruder = Caller(caller.stub, caller.signer, "someone-else", caller.vault)
    for call in (
        intruder.stub.Recall(vpb.RecallRequest(vault=caller.vault, query="garage"), metadata=intruder.metadata()),
        intruder.stub.Remember(
            vpb.RememberRequest(vault=caller.vault, memory=draft("planted")), metadata=intruder.metadata()
        ),
        intruder.stub.Forget(
            vpb.ForgetRequest(vault=caller.vault, memory_id=stored.result.memory_id),
            metadata=intruder.metadata(),
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await call
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert await count_memories(database, caller.vault) == 1


async def test_scopes_are_enforced(caller: Caller) -> None:
    read_only = caller.metadata(scopes=frozenset({"read"}))
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.Remember(vpb.RememberRequest(vault=caller.vault, memory=draft("x")), metadata=read_only)
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'write' scope" in (error.value.details() or "")
    await caller.stub.Recall(vpb.RecallRequest(vault=caller.vault, query="x"), metadata=read_only)
    other_vault_only = caller.metadata(vaults=("some-other-vault",))
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.Recall(vpb.RecallRequest(vault=caller.vault, query="x"), metadata=other_vault_only)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


async def test_recall_pages_with_cursors_and_filters(caller: Caller) -> None:
    for i in range(7):
        await remember(caller, f"Server number {i} runs Debian.", tags=["servers"] if i % 2 else [])
    first = await recall(caller, "server debian", limit=3)
    assert len(first.hits) == 3 and first.next_cursor
    second = await recall(caller, "server debian", limit=3, cursor=first.next_cursor)
    third = await recall(caller, "server debian", limit=3, cursor=second.next_cursor)
    ids = [h.memory.id for page in (first, second, third) for h in page.hits]
    assert len(ids) == len(set(ids)) == 7
    assert not third.next_cursor
    tagged = await recall(caller, "server debian", tags=["servers"])
    assert len(tagged.hits) == 3
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await recall(caller, "other query", cursor=first.next_cursor)
    assert "different query" in (error.value.details() or "")


async def test_list_memories_pages_newest_first(caller: Caller) -> None:
    for i in range(5):
        await remember(caller, f"Note {i} about the garden.")
    seen: list[str] = []
    cursor = ""
    while True:
        page = await caller.stub.ListMemories(
            vpb.ListMemoriesRequest(vault=caller.vault, limit=2, cursor=cursor), metadata=caller.metadata()
        )
        seen += [m.content for m in page.memories]
        cursor = page.next_cursor
        if not cursor:
            break
    assert seen == [f"Note {i} about the garden." for i in reversed(range(5))]


async def test_guide_and_capabilities(caller: Caller) -> None:
    guide = await caller.stub.GetOperatingGuide(
        vpb.GetOperatingGuideRequest(vault=caller.vault), metadata=caller.metadata()
    )
    assert "What never to save" in guide.text and guide.version == 1
    caps = await caller.stub.GetCapabilities(vpb.GetCapabilitiesRequest(), metadata=caller.metadata())
    assert caps.limits.max_bulk_items == limits.MAX_BULK_ITEMS
    assert "decision" in caps.memory_types


async def test_a_nul_character_is_refused_naming_its_field_and_nothing_is_written(
    caller: Caller, database: Database
) -> None:
    calls = {
        "memory.content": caller.stub.Remember(
            vpb.RememberRequest(vault=caller.vault, memory=draft("the code is 12\x0034")), metadata=caller.metadata()
        ),
        "memory.tags[1]": caller.stub.Remember(
            vpb.RememberRequest(vault=caller.vault, memory=draft("fine", tags=["ok", "b\x00d"])),
            metadata=caller.metadata(),
        ),
        "query": caller.stub.Recall(
            vpb.RecallRequest(vault=caller.vault, query="code\x00"), metadata=caller.metadata()
        ),
        "items[1].content": caller.stub.BulkRemember(
            vpb.BulkRememberRequest(vault=caller.vault, items=[draft("fine"), draft("not\x00fine")]),
            metadata=caller.metadata(),
        ),
    }
    for field, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await call
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert f"{field} contains a NUL character" in (error.value.details() or ""), field
        assert dict(error.value.trailing_metadata() or ())["memvault-error-field"] == field
    assert await count_memories(database, caller.vault) == 0


async def test_a_call_over_the_size_limit_is_a_limit_error_naming_it(caller: Caller) -> None:
    from memvault_core.errors import LimitExceeded
    from memvault_core.grpc import error_from_rpc

    huge = [draft("🦉" * 4000) for _ in range(limits.MAX_BULK_ITEMS)]  # within each item's limit, not in sum
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await caller.stub.BulkRemember(
            vpb.BulkRememberRequest(vault=caller.vault, items=huge), metadata=caller.metadata()
        )
    mapped = error_from_rpc(error.value)
    assert isinstance(mapped, LimitExceeded)
    assert "larger than 4 MiB" in mapped.message and "the request or its answer" in mapped.message
