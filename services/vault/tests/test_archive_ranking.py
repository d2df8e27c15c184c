"""Archive search sees an archived message as recall sees a memory of a sequence import (issue 16's
`archive` eval track: the same text, found through conversations): the same index text and keyword
document (its date, its text, the message before it), the same keyword rank (each query lexeme's idf
from the vault's own counts, kept exact by triggers), and a keyword rank for the messages only the
vector side found. On a real Postgres, through the real importer."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from memvault_core.identity import SCOPES, Identity
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.reading_store import ArchiveReadStore
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.memory import RECALLABLE_BY_DEFAULT, Draft
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.recall.store import RecallStore
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
CHAIN = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's cool, Caroline! What happened that was so awesome?",
    "Caroline: The transgender stories were so inspiring! I was so happy and thankful for all the support.",
    "Melanie: That's really cool. You've got guts. What made you decide to go?",
    "Caroline: I'm keen on counseling and want to help people going through the same thing.",
    "Melanie: Painting is my way to relax after the kids go to bed, I painted a lake sunrise last year.",
]


async def new_vault(database: Database) -> tuple[VaultServices, Identity, VaultAccess]:
    suffix = uuid.uuid4().hex[:10]
    subject, name = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, name)
    services = VaultServices.build(database)
    me = Identity(subject=subject, scopes=frozenset(SCOPES))
    return services, me, await services.accounts.access(me, name, write=True)


def chatgpt_export(texts: list[str]) -> bytes:
    """One ChatGPT conversation whose messages form one chain, listed children first (an export's mapping
    need not be in order)."""
    nodes = [f"node-{i}" for i in range(len(texts))]
    mapping = {
        node: {
            "id": node,
            "parent": nodes[i - 1] if i else None,
            "children": nodes[i + 1 : i + 2],
            "message": {
                "id": node,
                "author": {"role": "user" if i % 2 == 0 else "assistant"},
                "create_time": MAY_8.timestamp(),
                "content": {"content_type": "text", "parts": [texts[i]]},
            },
        }
        for i, node in reversed(list(enumerate(nodes)))
    }
    conversation = {"title": "support group", "create_time": MAY_8.timestamp(), "current_node": nodes[-1]}
    return json.dumps([{**conversation, "mapping": mapping}]).encode()


async def imported(database: Database, texts: list[str]) -> tuple[VaultServices, Identity, VaultAccess, list[str]]:
    """A vault holding `texts` twice: as a conversation imported from a ChatGPT export, and as memories of
    one sequence import with the same date (the eval's turn track); the message ids in chain order."""
    services, me, vault = await new_vault(database)
    record = await services.archive.start_import(
        me, vault.name, fmt="chatgpt", filename="conversations.json", size=0, sha256="", data=chatgpt_export(texts)
    )
    while await services.archive.process_checkpoint(record.id):
        pass
    done = await services.archive.get_import(me, vault.name, record.id)
    assert (done.state, done.failed) == ("done", 0)
    rows = await database.pool.fetch(
        "SELECT id::text, node_id FROM archive_message WHERE vault_id = $1 AND text <> ''", vault.id
    )
    by_node = {r["node_id"]: r["id"] for r in rows}
    _, summary = await services.imports.bulk_remember(
        me, vault.name, [Draft(content=t, valid_from=MAY_8) for t in texts], "eval", sequence=True
    )
    assert summary
    return services, me, vault, [by_node[f"node-{i}"] for i in range(len(texts))]


async def memory_ids(database: Database, vault: VaultAccess, texts: list[str]) -> list[str]:
    rows = await database.pool.fetch("SELECT id::text, content FROM memory WHERE vault_id = $1", vault.id)
    by_text = {r["content"]: r["id"] for r in rows}
    return [by_text[t] for t in texts]


async def test_an_imported_message_is_indexed_with_its_date_and_the_message_before_it(database: Database) -> None:
    _, _, vault, messages = await imported(database, CHAIN)
    memories = await memory_ids(database, vault, CHAIN)
    feed = IndexFeedStore(database)
    embedded = {d.memory_id: d.content for d in await feed.message_documents(messages)}
    assert embedded[messages[0]] == f"8 May 2023 {CHAIN[0]}"
    assert embedded[messages[3]] == f"8 May 2023 {CHAIN[3]} {CHAIN[2]}"
    # Exactly what the indexer embeds, and the keyword document, of the same turn written as a memory.
    as_memories = {d.memory_id: d.content for d in await feed.documents(memories)}
    assert [embedded[m] for m in messages] == [as_memories[m] for m in memories]
    searches = await database.pool.fetch(
        "SELECT (SELECT search::text FROM archive_message WHERE id = x.message_id) AS message,"
        " (SELECT search::text FROM memory WHERE id = x.memory_id) AS memory"
        " FROM unnest($1::uuid[], $2::uuid[]) AS x (message_id, memory_id)",
        messages,
        memories,
    )
    assert all(r["message"] == r["memory"] and "'lgbtq':" in searches[1]["message"] for r in searches)


async def test_a_copied_conversation_keeps_each_message_context(database: Database) -> None:
    services, me, vault, messages = await imported(database, CHAIN)
    suffix = uuid.uuid4().hex[:8]
    assert await AccountStore(database).ensure_owner(me.subject, f"copy-{suffix}")
    conversation = await database.pool.fetchval(
        "SELECT conversation_id::text FROM archive_message WHERE id = $1", messages[0]
    )
    await services.archive.writes.copy(me, vault.name, f"copy-{suffix}", [conversation], idempotency_key=suffix)
    contexts = await database.pool.fetch(
        "SELECT m.text, m.context, v.vault_name AS name FROM archive_message m JOIN membership v ON v.vault_id = m.vault_id"
        " WHERE m.text = ANY($1::text[])",
        CHAIN,
    )
    copied = {r["text"]: r["context"] for r in contexts if r["name"] == f"copy-{suffix}"}
    assert copied == {text: CHAIN[i - 1] if i else "" for i, text in enumerate(CHAIN)}


async def _lexeme_counts_are_exact(database: Database, vault: VaultAccess) -> None:
    drift = await database.pool.fetchval(
        """
        WITH truth AS (SELECT lexeme, count(*)::int AS ndoc
                       FROM archive_message, unnest(tsvector_to_array(search)) AS lexeme
                       WHERE vault_id = $1 GROUP BY lexeme)
        SELECT count(*) FROM truth
        FULL JOIN (SELECT lexeme, ndoc FROM archive_lexeme_stats WHERE vault_id = $1 AND ndoc <> 0) s USING (lexeme)
        WHERE truth.ndoc IS DISTINCT FROM s.ndoc
        """,
        vault.id,
    )
    assert drift == 0
    counted, held = await database.pool.fetchrow(
        "SELECT coalesce((SELECT ndoc FROM archive_text_stats WHERE vault_id = $1), 0),"
        " (SELECT count(*) FROM archive_message WHERE vault_id = $1)::int",
        vault.id,
    )
    assert counted == held


async def test_lexeme_counts_follow_every_write_and_delete(database: Database) -> None:
    services, me, vault, _ = await imported(database, CHAIN)
    await _lexeme_counts_are_exact(database, vault)
    receipt = await services.archive.create(
        me, vault.name, title="ferry", tags=[], drafts=[("user", "the ferry leaves at noon", "text", None)]
    )
    await services.archive.revise(
        me,
        vault.name,
        receipt.conversation_id,
        kind="replace",
        base_revision=receipt.revision,
        drafts=[("user", "the ferry was cancelled", "text", None), ("assistant", "take the bus", "text", None)],
    )
    await _lexeme_counts_are_exact(database, vault)
    assert (
        await database.pool.fetchval(
            "SELECT ndoc FROM archive_lexeme_stats WHERE vault_id = $1 AND lexeme = 'ferri'", vault.id
        )
        == 3
    )  # noon's message (its revision is kept), the cancellation, and the reply's context
    await services.archive.delete(me, vault.name, receipt.conversation_id, receipt.conversation_id)
    await _lexeme_counts_are_exact(database, vault)
    assert not await database.pool.fetchval(
        "SELECT ndoc FROM archive_lexeme_stats WHERE vault_id = $1 AND lexeme = 'ferri'", vault.id
    )


async def test_keyword_ranks_are_recalls_and_weigh_rare_words(database: Database) -> None:
    # Many messages share a common word; one holds a rare one.
    texts = [*CHAIN, *(f"Melanie: support, support and more support from friends, day {n}." for n in range(12))]
    _, _, vault, messages = await imported(database, texts)
    memories = await memory_ids(database, vault, texts)
    store, recall = ArchiveReadStore(database), RecallStore(database)
    for query in ("What support did Caroline find about counseling?", "When did Melanie paint a sunrise?"):
        archive = await store.keyword_candidates(vault, query, [], [], 50)
        memory = await recall.keyword_search(
            vault, query, statuses=RECALLABLE_BY_DEFAULT, types=(), tags=(), limit=50, offset=0
        )
        # The same turns with the same ranks (equal ranks may come in another order: ids break ties).
        assert {messages.index(i): round(rank, 9) for i, rank, _ in archive} == {
            memories.index(f.id): round(f.keyword_rank, 9) for f in memory
        }
        assert [round(rank, 9) for _, rank, _ in archive] == sorted((round(r, 9) for _, r, _ in archive), reverse=True)
    # "counseling" is in one message, "support" in fourteen: the rare word decides.
    best = await store.keyword_candidates(vault, "support counseling", [], [], 1)
    assert [i for i, _, _ in best] == [messages[4]]

    # A message the keyword list left out still gets its rank when the vector side brings it.
    # (the message after the one that says it holds the word as context, at a lower weight)
    hits = await store.hits(vault, "counseling", [messages[4], messages[5], messages[1]], [], [])
    assert hits[messages[4]][2] > hits[messages[5]][2] > 0 and hits[messages[1]][2] == 0
