"""Which memories recall scores from their text: those whose current text the index does not hold yet."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from vault_helpers import filled_vault

from memvault_vault.database import Database
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore

pytestmark = pytest.mark.integration


async def test_a_memory_is_pending_until_its_current_text_is_reported_indexed(database: Database) -> None:
    vault = await filled_vault(database, [("router in the attic", 3)])
    pending = await IndexFeedStore(database).unindexed_recent(vault, 10)
    assert sorted(text for _, text in pending) == [f"router in the attic item{n}" for n in (1, 2, 3)]
    first, hashes = (
        pending[0][0],
        dict(await database.pool.fetch("SELECT id::text, index_hash FROM memory WHERE vault_id = $1", vault.id)),
    )

    await IndexFeedStore(database).report_indexed(
        [IndexReport(first, "some older text's hash", "minilm", "indexed", "")]
    )
    assert first in {
        i for i, _ in await IndexFeedStore(database).unindexed_recent(vault, 10)
    }  # not the text it has now
    await IndexFeedStore(database).report_indexed(
        [IndexReport(first, hashes[first], "minilm", "failed", "embedder crashed")]
    )
    assert first in {i for i, _ in await IndexFeedStore(database).unindexed_recent(vault, 10)}
    await IndexFeedStore(database).report_indexed([IndexReport(first, hashes[first], "minilm", "indexed", "")])
    assert first not in {i for i, _ in await IndexFeedStore(database).unindexed_recent(vault, 10)}

    await database.pool.execute("UPDATE memory SET content = 'switch in the attic' WHERE id = $1::uuid", first)
    assert (first, "switch in the attic") in await IndexFeedStore(database).unindexed_recent(
        vault, 10
    )  # changed text: pending again
    await database.pool.execute("UPDATE memory SET status = 'superseded' WHERE id = $1::uuid", first)
    assert first not in {
        i for i, _ in await IndexFeedStore(database).unindexed_recent(vault, 10)
    }  # only what recall can return


async def test_a_report_for_a_memory_being_deleted_skips_it_instead_of_failing(
    database: Database, vault_dsn: str
) -> None:
    vault = await filled_vault(database, [("router in the attic", 2)])
    (gone, gone_hash), (kept, kept_hash) = await database.pool.fetch(
        "SELECT id::text, index_hash FROM memory WHERE vault_id = $1 ORDER BY id", vault.id
    )
    deleting = await asyncpg.connect(vault_dsn)
    try:
        transaction = deleting.transaction()
        await transaction.start()
        await deleting.execute("DELETE FROM memory WHERE id = $1::uuid", gone)  # a forget, not yet committed
        # Waiting for the delete would end in a foreign-key error (or a deadlock with it): skipped at once.
        await asyncio.wait_for(
            IndexFeedStore(database).report_indexed(
                [
                    IndexReport(gone, gone_hash, "minilm", "indexed", ""),
                    IndexReport(kept, kept_hash, "minilm", "indexed", ""),
                ]
            ),
            timeout=5,
        )
        await transaction.commit()
    finally:
        await deleting.close()
    states = dict(
        await database.pool.fetch("SELECT memory_id::text, state FROM index_state WHERE vault_id = $1", vault.id)
    )
    assert states == {kept: "indexed"}
    assert {i for i, _ in await IndexFeedStore(database).unindexed_recent(vault, 10)} == set()


async def test_one_report_records_every_memory_in_it_and_a_memory_reported_twice_keeps_its_last_state(
    database: Database,
) -> None:
    vault = await filled_vault(database, [("printer on the landing", 4)])
    rows = await database.pool.fetch(
        "SELECT id::text, index_hash FROM memory WHERE vault_id = $1 ORDER BY content", vault.id
    )
    (a, a_hash), (b, b_hash), (c, _), (d, d_hash) = [(row["id"], row["index_hash"]) for row in rows]
    await IndexFeedStore(database).report_indexed(
        [
            IndexReport(a, a_hash, "minilm", "indexed", ""),
            IndexReport(b, b_hash, "minilm", "failed", "embedder crashed"),
            IndexReport(c, "some older text's hash", "minilm", "indexed", ""),
            IndexReport(d, d_hash, "minilm", "failed", "embedder crashed"),
            IndexReport(d, d_hash, "minilm", "indexed", ""),  # retried in the same batch
        ]
    )
    states = {
        row["memory_id"]: (row["state"], row["content_hash"], row["last_error"])
        for row in await database.pool.fetch(
            "SELECT memory_id::text, state, content_hash, last_error FROM index_state WHERE vault_id = $1", vault.id
        )
    }
    assert states == {
        a: ("indexed", a_hash, None),
        b: ("failed", b_hash, "embedder crashed"),
        c: ("indexed", "some older text's hash", None),
        d: ("indexed", d_hash, None),
    }
    pending = {i for i, _ in await IndexFeedStore(database).unindexed_recent(vault, 10)}
    assert pending == {b, c}  # b failed, c's current text is not the one indexed

    await IndexFeedStore(database).report_indexed([IndexReport(b, b_hash, "minilm", "failed", "again")])
    assert await database.pool.fetchval("SELECT attempts FROM index_state WHERE memory_id = $1::uuid", b) == 2
    await IndexFeedStore(database).report_indexed([])
