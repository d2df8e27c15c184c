"""The vault's gauges, sampled from Postgres: events not yet published, memories not yet indexed
(and how long the oldest waited), failed index jobs. Other tests share the database, so this one
compares samples before and after its own writes."""

from __future__ import annotations

import pytest
from vault_helpers import filled_vault

from memvault_vault import metrics
from memvault_vault.database import Database
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.outbox.events import memory_created
from memvault_vault.outbox.store import enqueue

pytestmark = pytest.mark.integration


def gauges() -> dict[str, float]:
    return {
        name: getattr(metrics, name)._value.get()
        for name in ("OUTBOX_DEPTH", "OUTBOX_OLDEST_SECONDS", "INDEX_PENDING", "INDEX_LAG_SECONDS", "INDEX_FAILED")
    }


async def test_samples_follow_the_outbox_the_index_lag_and_the_failures(database: Database) -> None:
    sampler = metrics.VaultMetrics(database)
    await sampler.sample()
    before = gauges()

    vault = await filled_vault(database, [("printer on the landing", 3)])
    rows = await database.pool.fetch(
        "SELECT id::text, index_hash FROM memory WHERE vault_id = $1 ORDER BY id", vault.id
    )
    await database.pool.execute(
        "UPDATE memory SET updated_at = now() - interval '1 hour' WHERE vault_id = $1", vault.id
    )
    event = memory_created(rows[0]["id"], vault.id, rows[0]["index_hash"])
    async with database.pool.acquire() as conn:
        await enqueue(conn, [event])
        await conn.execute("UPDATE outbox SET created_at = now() - interval '10 minutes' WHERE id = $1::uuid", event.id)
    await sampler.sample()
    waiting = gauges()
    assert waiting["INDEX_PENDING"] == before["INDEX_PENDING"] + 3
    assert waiting["INDEX_LAG_SECONDS"] >= 3600
    assert waiting["OUTBOX_DEPTH"] == before["OUTBOX_DEPTH"] + 1
    assert waiting["OUTBOX_OLDEST_SECONDS"] >= 600

    feed = IndexFeedStore(database)
    await feed.report_indexed([IndexReport(rows[0]["id"], rows[0]["index_hash"], "minilm", "indexed", "")])
    await feed.report_indexed([IndexReport(rows[1]["id"], rows[1]["index_hash"], "minilm", "failed", "too long")])
    await database.pool.execute("UPDATE outbox SET published_at = now() WHERE id = $1::uuid", event.id)
    await sampler.sample()
    after = gauges()
    assert after["INDEX_PENDING"] == before["INDEX_PENDING"] + 1  # one indexed, one failed: counted apart
    assert after["INDEX_FAILED"] == before["INDEX_FAILED"] + 1
    assert after["OUTBOX_DEPTH"] == before["OUTBOX_DEPTH"]
