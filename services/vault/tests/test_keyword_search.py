"""Full-text search in a large vault: which memories get ranked when the query's words are common."""

from __future__ import annotations

import pytest
from vault_helpers import filled_vault

from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.memory import RECALLABLE_BY_DEFAULT
from memvault_vault.recall.keyword_sql import KEYWORD_RANK_BUDGET, RARE_LEXEME_DOCS
from memvault_vault.recall.store import RecallStore

pytestmark = pytest.mark.integration


async def search(database: Database, vault: VaultAccess, query: str) -> list[str]:
    found = await RecallStore(database).keyword_search(
        vault, query, statuses=RECALLABLE_BY_DEFAULT, types=(), tags=(), limit=500, offset=0
    )
    page = await RecallStore(database).recall_page(vault, [f.id for f in found])
    return [page[f.id].memory.content for f in found]


async def test_a_large_vault_ranks_memories_with_two_query_words_or_a_rare_one(database: Database) -> None:
    # Four words, each in 1,420 of 15,000 memories (within the tenth of the vault a word may match),
    # together 5,680 rows: more than the budget, so one common word alone no longer qualifies.
    common = [("harbor", 1400), ("lantern", 1400), ("meadow", 1400), ("orchard", 1400)]
    assert sum(count + 20 for _, count in common) > KEYWORD_RANK_BUDGET
    vault = await filled_vault(
        database,
        [
            *common,
            ("tide-pool", 1400),  # one word, three lexemes (tide-pool, tide, pool) always together
            ("tide-pool orchard", 10),
            ("filler", 15000 - 5600 - 40 - 3 - 1410),
            ("harbor lantern", 20),
            ("meadow orchard", 20),
            ("quokka", 3),  # rare: one such word is enough
        ],
    )
    found = await search(database, vault, "harbor lantern meadow orchard quokka")
    assert len(found) == 43
    assert {text.rsplit(" ", 1)[0] for text in found} == {"harbor lantern", "meadow orchard", "quokka"}
    assert RARE_LEXEME_DOCS >= 3

    hyphenated = await search(database, vault, "tide-pool orchard")
    assert sorted(hyphenated) == sorted(f"tide-pool orchard item{n}" for n in range(1, 11))  # not every tide pool

    single = await search(database, vault, "harbor")  # one word: every memory holding it is ranked
    assert len(single) == 500  # the limit; 1,420 match


async def test_a_small_vault_ranks_every_memory_with_a_query_word(database: Database) -> None:
    vault = await filled_vault(database, [("harbor", 30), ("lantern", 30), ("filler", 500), ("harbor lantern", 2)])
    found = await search(database, vault, "harbor lantern")
    assert len(found) == 62
    assert all(text.startswith("harbor lantern") for text in found[:2])  # both words rank first


async def test_written_memories_go_straight_into_the_search_indexes(database: Database) -> None:
    # A GIN index's pending list is read in full by every search; the vault keeps none (migration
    # 0012), so nothing is left for gin_clean_pending_list to move after a bulk write.
    await filled_vault(database, [("harbor lantern", 2000)])
    for index in ("memory_search", "memory_depends_on", "memory_similar_to"):
        assert await database.pool.fetchval("SELECT gin_clean_pending_list($1::regclass)", index) == 0, index
