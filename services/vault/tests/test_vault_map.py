"""The vault map through its gRPC call: groups by the most specific tag, the stored links (replaces,
similar, depends on, copies' provenance, tracked sources), the same bytes for the same data whatever
order it was written in, bounds, isolation, and viewers (who may read the map but not change tags)."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
import pytest_asyncio
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

T0 = datetime(2026, 6, 1, tzinfo=UTC)


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


async def new_owner(database: Database, stub: archive_pb2_grpc.ArchiveServiceStub) -> Caller:
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    return Caller(stub, IdentitySigner(SECRET), subject, vault)  # type: ignore[arg-type]


def ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def vault_data() -> dict[str, list[dict[str, Any]]]:
    """Memories and conversations with fixed ids and times: 'home' is the largest tag, 'cat' a smaller
    one inside it, 'work' another; one memory replaces an older one, two are similar, one depends on
    another and one tracks a file; one conversation is a copy from another vault."""
    m = ids(8)
    c = ids(3)
    memories = [
        {"id": m[0], "content": "the cat is called Miso", "tags": ["home", "cat"], "status": "active"},
        {"id": m[1], "content": "the cat eats at seven", "tags": ["cat", "home"], "status": "active",
         "similar_to": [m[0]]},
        {"id": m[2], "content": "the house is blue", "tags": ["home"], "status": "active", "depends_on": [m[3]]},
        {"id": m[3], "content": "we live in Bandung", "tags": ["home"], "status": "active"},
        {"id": m[4], "content": "standup at ten", "tags": ["work"], "status": "active", "supersedes": m[5]},
        {"id": m[5], "content": "standup at nine", "tags": ["work"], "status": "superseded"},
        {"id": m[6], "content": "no tag at all", "tags": [], "status": "active"},
        {"id": m[7], "content": "a rare tag", "tags": ["rare"], "status": "active"},
    ]  # fmt: skip
    for n, row in enumerate(memories):
        row["created_at"] = T0 + timedelta(minutes=n)
    conversations = [
        {"id": c[0], "title": "Vet visit", "tags": ["cat"], "derived_from": None},
        {"id": c[1], "title": None, "tags": ["work", "home"], "derived_from": None},
        {"id": c[2], "title": "Copied plans", "tags": [],
         "derived_from": {"vault": "elsewhere", "vault_id": str(uuid.uuid4()), "conversation_id": str(uuid.uuid4()),
                          "revision": 2}},
    ]  # fmt: skip
    for n, row in enumerate(conversations):
        row["updated_at"] = T0 + timedelta(hours=1, minutes=n)
    return {"memories": memories, "conversations": conversations, "source": [{"memory_id": m[3]}]}


async def write(database: Database, vault_id: str, data: dict[str, list[dict[str, Any]]], reverse: bool) -> None:
    memories = list(reversed(data["memories"])) if reverse else data["memories"]
    conversations = list(reversed(data["conversations"])) if reverse else data["conversations"]
    async with database.pool.acquire() as conn, conn.transaction():
        for row in memories:
            await conn.execute(
                "INSERT INTO memory (id, vault_id, content, content_hash, type, tags, trust, status, similar_to,"
                " depends_on, created_at, updated_at) VALUES ($1, $2, $3, md5($3), 'fact', $4, 'stated', $5, $6, $7,"
                " $8, $8)",
                row["id"], vault_id, row["content"], row["tags"], row["status"],
                row.get("similar_to", []), row.get("depends_on", []), row["created_at"],
            )  # fmt: skip
        for row in memories:
            if row.get("supersedes"):
                await conn.execute("UPDATE memory SET supersedes = $2 WHERE id = $1", row["id"], row["supersedes"])
        for row in conversations:
            await conn.execute(
                "INSERT INTO archive_conversation (id, vault_id, title, head_revision, tags, derived_from, created_at,"
                " updated_at) VALUES ($1, $2, $3, 1, $4, $5::jsonb, $6, $6)",
                row["id"], vault_id, row["title"], row["tags"],
                json.dumps(row["derived_from"]) if row["derived_from"] else None, row["updated_at"],
            )  # fmt: skip
        for row in data["source"]:
            await conn.execute(
                "INSERT INTO tracked_source (vault_id, memory_id, kind, location, mode, interval_seconds,"
                " baseline_hash, tracked_by, actor, next_check_at) VALUES ($1, $2, 'text_file', '/tmp/notes.txt',"
                " 'review', 3600, 'x', 'owner', 'owner', now())",
                vault_id, row["memory_id"],
            )  # fmt: skip


async def clear(database: Database, vault_id: str) -> None:
    await database.pool.execute("DELETE FROM tracked_source WHERE vault_id = $1", vault_id)
    await database.pool.execute("DELETE FROM memory WHERE vault_id = $1", vault_id)
    await database.pool.execute("DELETE FROM archive_conversation WHERE vault_id = $1", vault_id)


async def vault_id_of(database: Database, caller: Caller) -> str:
    vault = await AccountStore(database).vault_of(caller.subject, caller.vault)
    assert vault is not None
    return vault.id


async def get_map(caller: Caller, **fields: Any) -> pb.GetVaultMapResponse:
    stub: archive_pb2_grpc.ArchiveServiceStub = caller.stub  # type: ignore[assignment]
    return await stub.GetVaultMap(  # type: ignore[no-any-return]
        pb.GetVaultMapRequest(vault=caller.vault, **fields), metadata=caller.metadata()
    )


async def test_the_map_groups_by_the_most_specific_tag_with_the_stored_links(
    database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub
) -> None:
    owner = await new_owner(database, archive_stub)
    data = vault_data()
    await write(database, await vault_id_of(database, owner), data, reverse=False)
    m = [row["id"] for row in data["memories"]]
    c = [row["id"] for row in data["conversations"]]
    found = await get_map(owner, max_tags=3)
    # home: 4 memories + 1 conversation; cat: 2 + 1; work: 1 + 1 (the superseded one is not counted); rare: 1.
    # Of them, their own (no smaller drawn tag): home keeps 2 memories, the cat ones go to cat.
    assert [(g.tag, g.memories, g.conversations, g.own_memories, g.own_conversations) for g in found.groups] == [
        ("home", 4, 1, 2, 0),
        ("cat", 2, 1, 2, 1),
        ("work", 1, 1, 1, 1),
        ("", 2, 1, 2, 1),
    ]
    assert (found.memories, found.conversations, found.other_tags) == (7, 3, 1)
    placed = [(i.group, i.kind, i.id) for i in found.items]
    # The cat memories sit under 'cat' (smaller than 'home'); the work-and-home conversation under 'work'.
    assert placed == [
        ("home", "memory", m[3]),
        ("home", "memory", m[2]),
        ("cat", "memory", m[1]),
        ("cat", "memory", m[0]),
        ("cat", "conversation", c[0]),
        ("work", "memory", m[4]),
        ("work", "conversation", c[1]),
        ("", "memory", m[7]),
        ("", "memory", m[6]),
        ("", "conversation", c[2]),
    ]
    by_id = {i.id: i for i in found.items}
    assert by_id[m[3]].sources == 1 and by_id[m[2]].sources == 0
    assert by_id[c[2]].derived_from.vault == "elsewhere" and by_id[c[2]].derived_from.revision == 2
    assert not by_id[c[0]].HasField("derived_from")
    assert by_id[c[1]].label == "" and by_id[m[0]].label == "the cat is called Miso"
    links = [(k.from_id, k.kind, k.to_id, k.to_label, k.to_drawn) for k in found.links]
    assert sorted(links) == sorted(
        [
            (m[1], "similar", m[0], "the cat is called Miso", True),
            (m[2], "depends_on", m[3], "we live in Bandung", True),
            (m[4], "replaces", m[5], "standup at nine", False),
        ]
    )
    # One item per group and tag: the newest of each.
    small = await get_map(owner, max_tags=3, items_per_tag=1)
    assert [(i.group, i.id) for i in small.items] == [
        ("home", m[3]),
        ("cat", m[1]),
        ("cat", c[0]),
        ("work", m[4]),
        ("work", c[1]),
        ("", m[7]),
        ("", c[2]),
    ]


async def test_the_same_data_gives_the_same_bytes_whatever_the_order_it_was_written_in(
    database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub
) -> None:
    owner = await new_owner(database, archive_stub)
    vault_id = await vault_id_of(database, owner)
    data = vault_data()
    await write(database, vault_id, data, reverse=False)
    first = (await get_map(owner)).SerializeToString(deterministic=True)
    assert (await get_map(owner)).SerializeToString(deterministic=True) == first
    await clear(database, vault_id)
    await write(database, vault_id, data, reverse=True)
    # Rows rewritten in place move on disk; the map does not.
    await database.pool.execute("UPDATE memory SET pinned = pinned WHERE vault_id = $1", vault_id)
    await database.pool.execute("UPDATE archive_conversation SET head_revision = 1 WHERE vault_id = $1", vault_id)
    assert (await get_map(owner)).SerializeToString(deterministic=True) == first


async def test_each_vault_sees_only_its_own_map(
    database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub
) -> None:
    owner, other = await new_owner(database, archive_stub), await new_owner(database, archive_stub)
    await write(database, await vault_id_of(database, owner), vault_data(), reverse=False)
    empty = await get_map(other)
    assert (list(empty.groups), list(empty.items), empty.memories) == ([], [], 0)
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await get_map(Caller(owner.stub, owner.signer, other.subject, owner.vault))
    assert rpc_error_kind(foreign.value) == "not_found"
    for fields in ({"max_tags": 31}, {"items_per_tag": 21}, {"max_tags": -1}):
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await get_map(owner, **fields)
        assert rpc_error_kind(bad.value) == "invalid_argument"


async def test_a_viewer_reads_the_map_but_cannot_change_tags(
    database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub
) -> None:
    owner, viewer = await new_owner(database, archive_stub), await new_owner(database, archive_stub)
    vault_id = await vault_id_of(database, owner)
    await write(database, vault_id, vault_data(), reverse=False)
    await database.pool.execute(
        "INSERT INTO membership (vault_id, account_id, role) SELECT $1, id, 'viewer' FROM account WHERE subject = $2",
        vault_id,
        viewer.subject,
    )
    as_viewer = Caller(owner.stub, owner.signer, viewer.subject, owner.vault)
    assert (await get_map(as_viewer)).SerializeToString(deterministic=True) == (await get_map(owner)).SerializeToString(
        deterministic=True
    )
    cid = str(
        await database.pool.fetchval(
            "SELECT id FROM archive_conversation WHERE vault_id = $1 AND title = 'Vet visit'", vault_id
        )
    )
    stub: archive_pb2_grpc.ArchiveServiceStub = owner.stub  # type: ignore[assignment]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.SetTags(
            pb.SetTagsRequest(vault=owner.vault, conversation_id=cid, tags=["mine"], expected_tags_version=1),
            metadata=as_viewer.metadata(),
        )
    assert rpc_error_kind(refused.value) == "permission_denied"
    tags = await database.pool.fetchval("SELECT tags FROM archive_conversation WHERE id = $1", cid)
    assert list(tags) == ["cat"]
    changed = await stub.SetTags(
        pb.SetTagsRequest(vault=owner.vault, conversation_id=cid, tags=["Cat", "vet", "cat"], expected_tags_version=1),
        metadata=owner.metadata(),
    )
    assert (list(changed.tags), changed.tags_version) == (["cat", "vet"], 2)


async def tag_counts(
    database: Database, vault_id: str
) -> tuple[dict[tuple[str, ...], int], dict[tuple[str, ...], int]]:
    """The counts the triggers keep (without the zeros) and the same counted from the memories."""
    kept = await database.pool.fetch(
        "SELECT tags, active FROM memory_tag_stats WHERE vault_id = $1 AND active <> 0", vault_id
    )
    counted = await database.pool.fetch(
        "SELECT tags, count(*) AS n FROM memory WHERE vault_id = $1 AND status = 'active' GROUP BY tags", vault_id
    )
    return {tuple(r["tags"]): r["active"] for r in kept}, {tuple(r["tags"]): r["n"] for r in counted}


async def test_the_tag_counts_follow_every_write_and_the_newest_items_of_an_old_tag_are_found(
    database: Database, archive_stub: archive_pb2_grpc.ArchiveServiceStub
) -> None:
    owner = await new_owner(database, archive_stub)
    vault_id = await vault_id_of(database, owner)
    data = vault_data()
    await write(database, vault_id, data, reverse=False)
    m = [row["id"] for row in data["memories"]]
    kept, counted = await tag_counts(database, vault_id)
    assert kept == counted and kept[("home", "cat")] == 1 and ("work",) in kept
    # Many rows in one statement, a proposal approved, an active one superseded, tags changed on an
    # active and on a superseded memory, several statements in one transaction, deletions.
    await database.pool.execute(
        "INSERT INTO memory (vault_id, content, content_hash, type, tags, trust, status, created_at)"
        " SELECT $1, 'old ' || n, md5('old ' || n), 'fact', ARRAY['old', 'home'], 'stated',"
        "        CASE WHEN n % 4 = 0 THEN 'proposed' ELSE 'active' END, $2::timestamptz - make_interval(days => n)"
        " FROM generate_series(1, 40) n",
        vault_id,
        T0,
    )
    await database.pool.execute(
        "UPDATE memory SET status = 'active' WHERE vault_id = $1 AND content = 'old 4'", vault_id
    )
    async with database.pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE memory SET status = 'superseded' WHERE id = $1", m[2])
        await conn.execute("UPDATE memory SET tags = ARRAY['work', 'home'] WHERE id = $1", m[3])
        await conn.execute("UPDATE memory SET tags = ARRAY['gone'] WHERE id = $1", m[5])
        await conn.execute("UPDATE memory SET pinned = true WHERE vault_id = $1", vault_id)
    await database.pool.execute("DELETE FROM memory WHERE vault_id = $1 AND content IN ('old 1', 'old 8')", vault_id)
    kept, counted = await tag_counts(database, vault_id)
    assert kept == counted
    assert (kept[("old", "home")], kept[("work", "home")], kept.get(("home",))) == (40 - 10 + 1 - 1, 1, None)
    assert ("gone",) not in kept  # tags changed on a memory that is not active
    # 'old' (30 memories, all older than every other memory) is the most specific of the largest tags: the
    # map finds its newest ones.
    found = await get_map(owner, max_tags=3, items_per_tag=2)
    assert [(g.tag, g.memories, g.own_memories) for g in found.groups][:2] == [("home", 33, 1), ("old", 30, 30)]
    newest = await database.pool.fetch(
        "SELECT id::text FROM memory WHERE vault_id = $1 AND status = 'active' AND 'old' = ANY (tags)"
        " ORDER BY created_at DESC, id DESC LIMIT 2",
        vault_id,
    )
    assert [i.id for i in found.items if i.group == "old"] == [r["id"] for r in newest]
    # A vault's deletion takes its memories and their counts with it.
    await database.pool.execute("DELETE FROM vault WHERE id = $1", vault_id)
    assert await database.pool.fetchval("SELECT count(*) FROM memory_tag_stats WHERE vault_id = $1", vault_id) == 0
