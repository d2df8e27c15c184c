"""Archive search pages on a real Postgres: the pages after the first read a snapshot of its ranking
(writes and deletes between pages), snapshots expire and are cleaned up, and the full-text side ranks
a bounded share of a common word's messages."""

from __future__ import annotations

import uuid

import pytest
import test_archive_reads
from test_archive_reads import CURSOR_KEY, create, refused, stub, vault_id
from vault_helpers import Caller

from memvault.vault.v1 import archive_pb2 as pb
from memvault_vault.database import Database

pytestmark = pytest.mark.integration

# The fixtures of the archive's read tests: a vault server on a free port, and a new owner per test.
archive_stub = test_archive_reads.archive_stub
owner = test_archive_reads.owner


async def test_search_pages_read_a_snapshot_so_writes_between_pages_never_shift_them(
    owner: Caller, database: Database
) -> None:
    await create(owner, [f"the lighthouse keeper logged storm number {n} " + "x" * 200 for n in range(20)])
    page = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="lighthouse storm", limit=20, max_bytes=4096),
        metadata=owner.metadata(),
    )
    assert 0 < len(page.hits) < 20 and page.next_cursor
    first = [h.message_id for h in page.hits]

    # Written between pages, and better matches than any of the first ones: a search run again would
    # rank them first and push the rest down (repeating hits); the snapshot does not see them.
    await create(owner, ["lighthouse storm lighthouse storm"] * 5, title="Newer")
    ids = list(first)
    cursor = page.next_cursor
    while cursor:
        more = await stub(owner).SearchMessages(
            pb.SearchMessagesRequest(vault=owner.vault, cursor=cursor, limit=20, max_bytes=4096),
            metadata=owner.metadata(),
        )
        assert all(h.title != "Newer" for h in more.hits) and more.mode == page.mode
        ids += [h.message_id for h in more.hits]
        cursor = more.next_cursor
    assert len(ids) == len(set(ids)) == 20

    # A new search sees the new messages first.
    fresh = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="lighthouse storm", limit=5), metadata=owner.metadata()
    )
    assert {h.title for h in fresh.hits} == {"Newer"}

    # The cursor names a snapshot kept for the caller and vault; once it expires, a clear error.
    rows = await database.pool.fetch(
        "SELECT id, caller, query FROM archive_search_snapshot WHERE vault_id = $1 ORDER BY created_at",
        uuid.UUID(await vault_id(database, owner)),
    )
    # (the first search's, and the new search's: more hits follow its 5)
    assert [r["query"] for r in rows] == ["lighthouse storm"] * 2 and owner.subject not in rows[0]["caller"]
    await database.pool.execute(
        "UPDATE archive_search_snapshot SET expires_at = now() - interval '1 second' WHERE id = $1", rows[0]["id"]
    )
    kind, text = await refused(
        stub(owner).SearchMessages,
        pb.SearchMessagesRequest(vault=owner.vault, cursor=page.next_cursor),
        owner.metadata(),
    )
    assert kind == "invalid_argument" and "expired" in text and "repeat the search" in text
    # ...and it is deleted as the next snapshot is written.
    again = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="lighthouse storm", limit=20, max_bytes=4096),
        metadata=owner.metadata(),
    )
    assert again.next_cursor
    assert not await database.pool.fetchval("SELECT count(*) FROM archive_search_snapshot WHERE id = $1", rows[0]["id"])

    # Another client of the same account may not continue it.
    kind, text = await refused(
        stub(owner).SearchMessages,
        pb.SearchMessagesRequest(vault=owner.vault, cursor=again.next_cursor),
        owner.metadata(client="another-agent"),
    )
    assert kind == "invalid_argument" and "another caller" in text


async def test_a_conversation_deleted_between_pages_drops_its_hits_and_nothing_else(owner: Caller) -> None:
    kept = await create(owner, [f"harbour ferry timetable {n} " + "y" * 300 for n in range(8)], title="Kept")
    gone = await create(owner, [f"harbour ferry timetable {n} " + "z" * 300 for n in range(8)], title="Gone")
    page = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="harbour ferry timetable", limit=16, max_bytes=4096),
        metadata=owner.metadata(),
    )
    assert page.next_cursor and len(page.hits) < 16
    seen = [h.message_id for h in page.hits]
    from_gone = sum(1 for h in page.hits if h.conversation_id == gone.conversation_id)
    await stub(owner).DeleteConversation(
        pb.DeleteConversationRequest(
            vault=owner.vault, conversation_id=gone.conversation_id, confirm=gone.conversation_id
        ),
        metadata=owner.metadata(),
    )
    cursor = page.next_cursor
    while cursor:
        more = await stub(owner).SearchMessages(
            pb.SearchMessagesRequest(vault=owner.vault, cursor=cursor, max_bytes=4096, limit=16),
            metadata=owner.metadata(),
        )
        assert all(h.conversation_id == kept.conversation_id for h in more.hits)
        seen += [h.message_id for h in more.hits]
        cursor = more.next_cursor
    assert len(seen) == len(set(seen)) == 8 + from_gone


async def test_a_common_word_ranks_a_bounded_sample_and_a_rarer_word_every_match(
    owner: Caller, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault_core.identity import Identity
    from memvault_vault.archive import keyword_sql, reading_store
    from memvault_vault.services import VaultServices

    common, rare = f"zq{uuid.uuid4().hex[:8]}", f"zr{uuid.uuid4().hex[:8]}"
    await create(owner, [f"{common} note {n}" for n in range(60)])
    await create(owner, [f"{common} and {rare} together", f"only {rare} here"], title="Rare")
    monkeypatch.setattr(keyword_sql, "FULL_RANK_BUDGET", 20)
    monkeypatch.setattr(keyword_sql, "COMMON_WORD_SAMPLE", 5)
    store = reading_store.ArchiveReadStore(database)
    vault = await VaultServices.build(database, cursor_secret=CURSOR_KEY).accounts.access(
        Identity(subject=owner.subject, scopes=frozenset({"read"})), owner.vault
    )

    # Only the common word: a sample of its messages is ranked, not all 62.
    found = await store.keyword_candidates(vault, common, [], [], 50)
    assert 0 < len(found) <= 5
    # With a rarer word: every message holding it is ranked (first), and the common word's sample beside
    # them.
    found = await store.keyword_candidates(vault, f"{common} {rare}", [], [], 50)
    texts = dict(
        await database.pool.fetch(
            "SELECT id::text, text FROM archive_message WHERE id = ANY($1::uuid[])", [i for i, _, _ in found]
        )
    )
    # (BM25 as recall ranks: the rare word decides; "only ... here" holds it twice, with its context)
    assert {texts[i] for i, _, _ in found[:2]} == {f"{common} and {rare} together", f"only {rare} here"}
    assert len(found) <= 7

    # Within the budget (the counts summed), every match is ranked, as recall ranks.
    monkeypatch.setattr(keyword_sql, "FULL_RANK_BUDGET", 10_000)
    # (62: "only ... here" holds the word through the message before it)
    assert len(await reading_store.ArchiveReadStore(database).keyword_candidates(vault, common, [], [], 100)) == 62


async def test_the_keyword_limit_is_filled_by_head_messages_with_the_tags_however_the_others_rank(
    owner: Caller, database: Database
) -> None:
    from memvault_core.identity import Identity
    from memvault_vault.archive import reading_store
    from memvault_vault.services import VaultServices

    word = f"zh{uuid.uuid4().hex[:8]}"
    kept = await create(owner, [f"{word} kept {n}" for n in range(4)], tags=["keep"])
    # Better matches (the word twice) in a conversation without the tag...
    await create(owner, [f"{word} {word} elsewhere {n}" for n in range(6)], tags=["other"])
    # ...and in an earlier revision of a tagged conversation, no longer on its head.
    replaced = await create(owner, [f"{word} {word} {word} old {n}" for n in range(6)], tags=["keep"])
    await stub(owner).ReplaceTranscript(
        pb.ReplaceTranscriptRequest(
            vault=owner.vault,
            conversation_id=replaced.conversation_id,
            base_revision=1,
            messages=[pb.MessageDraft(role="user", text=f"{word} now")],
        ),
        metadata=owner.metadata(),
    )
    store = reading_store.ArchiveReadStore(database)
    vault = await VaultServices.build(database, cursor_secret=CURSOR_KEY).accounts.access(
        Identity(subject=owner.subject, scopes=frozenset({"read"})), owner.vault
    )

    async def texts(tags_all: list[str], limit: int) -> list[str]:
        found = await store.keyword_candidates(vault, word, tags_all, [], limit)
        rows = dict(
            await database.pool.fetch(
                "SELECT id::text, text FROM archive_message WHERE id = ANY($1::uuid[])", [i for i, _, _ in found]
            )
        )
        return [rows[i] for i, _, _ in found]

    # The ranking is checked against heads and tags after it, best first, until the limit is full.
    assert await texts(["keep"], 3) and len(await texts(["keep"], 3)) == 3
    assert all(" old " not in t and "elsewhere" not in t for t in await texts(["keep"], 10))
    assert len(await texts(["keep"], 10)) == 5  # four kept and the replacement
    assert sorted(await texts([], 6)) == sorted(f"{word} {word} elsewhere {n}" for n in range(6))
    assert len(await texts([], 50)) == 11 and kept.conversation_id


async def test_a_dense_word_is_sampled_by_reading_in_order_and_finds_what_the_index_finds(
    owner: Caller, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault_core.identity import Identity
    from memvault_vault.archive import keyword_sql, reading_store
    from memvault_vault.services import VaultServices

    word = f"zd{uuid.uuid4().hex[:8]}"
    await create(owner, [f"{word} note {n}" + " filler" * n for n in range(30)])
    await create(owner, ["nothing in common"] * 5)
    store = reading_store.ArchiveReadStore(database)
    vault = await VaultServices.build(database, cursor_secret=CURSOR_KEY).accounts.access(
        Identity(subject=owner.subject, scopes=frozenset({"read"})), owner.vault
    )
    # Past the full-rank budget, with a sample larger than the matches: both ways find all 30.
    monkeypatch.setattr(keyword_sql, "FULL_RANK_BUDGET", 1)
    monkeypatch.setattr(keyword_sql, "COMMON_WORD_SAMPLE", 1000)
    found = {}
    for name, share in (("index", 1e9), ("in order", 0.0)):
        monkeypatch.setattr(keyword_sql, "DENSE_SHARE", share)
        found[name] = await store.keyword_candidates(vault, word, [], [], 100)
    assert len(found["index"]) == 30 and found["index"] == found["in order"]
    # A sample smaller than the matches: each way ranks that many of them.
    monkeypatch.setattr(keyword_sql, "COMMON_WORD_SAMPLE", 7)
    for share in (1e9, 0.0):
        monkeypatch.setattr(keyword_sql, "DENSE_SHARE", share)
        assert len(await store.keyword_candidates(vault, word, [], [], 100)) == 7


async def test_the_vaults_connections_read_ahead_and_fall_back_where_the_server_cannot(
    vault_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault_vault import database as database_module

    # A search's bitmap heap scans ask for IO_CONCURRENCY pages ahead (docs/benchmarks.md, archive-search).
    database = await Database.connect(vault_dsn, 1, 2)
    try:
        setting = await database.pool.fetchval("SHOW effective_io_concurrency")
        assert setting == str(database_module.IO_CONCURRENCY) != "1"
        assert await database.pool.fetchval("SHOW synchronize_seqscans") == "off"
    finally:
        await database.close()
    # A value the server refuses (as a server without posix_fadvise refuses any but 0): the vault still
    # connects, with the server's own setting.
    monkeypatch.setattr(database_module, "IO_CONCURRENCY", 100_000)
    database = await Database.connect(vault_dsn, 1, 2)
    try:
        default = await database.pool.fetchval(
            "SELECT boot_val FROM pg_settings WHERE name = 'effective_io_concurrency'"
        )
        assert await database.pool.fetchval("SHOW effective_io_concurrency") == default
    finally:
        await database.close()


async def test_a_message_two_sampled_words_both_hold_is_a_candidate_once(
    owner: Caller, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault_core.identity import Identity
    from memvault_vault.archive import keyword_sql, reading_store
    from memvault_vault.services import VaultServices

    first, second = f"zs{uuid.uuid4().hex[:8]}", f"zt{uuid.uuid4().hex[:8]}"
    await create(owner, [f"{first} {second} both {n}" for n in range(10)])
    await create(owner, [f"{first} alone {n}" for n in range(3)])
    store = reading_store.ArchiveReadStore(database)
    vault = await VaultServices.build(database, cursor_secret=CURSOR_KEY).accounts.access(
        Identity(subject=owner.subject, scopes=frozenset({"read"})), owner.vault
    )
    # Past the full-rank budget, each word is a sampled clause of its own, and ten messages hold both.
    monkeypatch.setattr(keyword_sql, "FULL_RANK_BUDGET", 1)
    monkeypatch.setattr(keyword_sql, "COMMON_WORD_SAMPLE", 1000)
    for share in (1e9, 0.0):  # sampled through the index, and by reading in order
        monkeypatch.setattr(keyword_sql, "DENSE_SHARE", share)
        found = await store.keyword_candidates(vault, f"{first} {second}", [], [], 100)
        ids = [message_id for message_id, _, _ in found]
        assert len(ids) == len(set(ids)) == 13
        ranks = [rank for _, rank, _ in found]
        assert ranks == sorted(ranks, reverse=True) and ranks[0] > ranks[-1]
