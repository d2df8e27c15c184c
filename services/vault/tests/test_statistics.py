"""Bulk writes have the planner's statistics of the tables they grew taken again (ANALYZE), so a large
import into a new vault is not planned as if its tables were still empty (memvault_core.postgres)."""

from __future__ import annotations

import pytest
from lifecycle_helpers import bulk, fake_index, fake_index_and_stub, owner, remember
from test_backup import Deployment, _backup, _fill, _restore, here
from vault_helpers import Caller, every_table_stale

from memvault_vault.database import Database
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore

pytestmark = pytest.mark.integration
__all__ = ["fake_index", "fake_index_and_stub", "here", "owner"]  # fixtures used here


async def test_an_import_has_the_memory_tables_statistics_taken_again(owner: Caller, database: Database) -> None:
    async with every_table_stale(database) as analyzed:
        await bulk(owner, "The hall light is on the second switch.", "The loft hatch sticks in winter.")
    assert {"memory", "memory_history", "index_pending"} <= set(analyzed)


async def test_a_single_remember_leaves_them_to_autovacuum(owner: Caller, database: Database) -> None:
    async with every_table_stale(database) as analyzed:
        await remember(owner, "The porch bulb is a warm white one.")
    assert analyzed == []


async def test_the_indexers_reports_have_the_index_tables_statistics_taken_again(
    owner: Caller, database: Database
) -> None:
    stored = (await bulk(owner, "The boiler was serviced in March.")).results[0]
    async with every_table_stale(database) as analyzed:
        await IndexFeedStore(database).report_indexed(
            [IndexReport(stored.memory_id, "a hash", "minilm", "failed", "x")]
        )
    assert set(analyzed) == {"index_state", "index_pending"}


async def test_a_restore_has_the_tables_it_filled_taken_again(here: Deployment) -> None:
    source = await here.caller()
    await _fill(source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    copy = await here.caller()
    async with every_table_stale(here.database) as analyzed:
        await _restore(copy, here.backups, data)
    assert {"memory", "memory_history", "index_pending", "archive_message"} <= set(analyzed)
