"""`memvault-vault archive search`: keyword search straight over the canonical store in Postgres, for an
operator when the search index is broken or suspect. No indexer, no embeddings, no caller: archived
messages (of head revisions, or of any revision) and memories (every status) whose own text matches
(the GIN index of keyword search finds the candidates; its documents also hold the item before and
the date, which alone do not make a hit), ranked by `ts_rank_cd`, best first."""

from __future__ import annotations

import asyncpg

from memvault_core.errors import InvalidArgument
from memvault_vault.archive.records import CanonicalHit

MAX_QUERY_CHARS = 500
MAX_HITS = 200
SNIPPET_CHARS = 160
_HEADLINE = "MaxWords=20, MinWords=8, MaxFragments=1, StartSel=«, StopSel=»"

_SEARCH = f"""
WITH q AS (SELECT websearch_to_tsquery('english', $1) AS q),
messages AS (
    SELECT m.id, m.conversation_id, m.vault_id, m.role, ts_rank_cd(m.search, q.q) AS rank
    FROM q, archive_message m JOIN archive_conversation c ON c.id = m.conversation_id
    WHERE m.search @@ q.q AND to_tsvector('english', m.text) @@ q.q AND ($2::uuid IS NULL OR m.vault_id = $2)
      AND ($4 OR EXISTS (SELECT 1 FROM archive_revision_message rm WHERE rm.message_id = m.id
                         AND rm.conversation_id = c.id AND rm.revision = c.head_revision))
    ORDER BY rank DESC, m.id LIMIT $3
),
memories AS (
    SELECT mm.id, mm.vault_id, mm.status, mm.version, ts_rank_cd(mm.search, q.q) AS rank
    FROM q, memory mm WHERE mm.search @@ q.q AND to_tsvector('english', mm.content) @@ q.q
      AND ($2::uuid IS NULL OR mm.vault_id = $2)
    ORDER BY rank DESC, mm.id LIMIT $3
)
SELECT * FROM (
    SELECT 'message' AS kind, v.name AS vault, x.conversation_id::text AS id,
           coalesce((SELECT c.head_revision FROM archive_conversation c JOIN archive_revision_message rm
                     ON rm.conversation_id = c.id AND rm.revision = c.head_revision
                     WHERE c.id = x.conversation_id AND rm.message_id = x.id),
                    (SELECT max(rm.revision) FROM archive_revision_message rm WHERE rm.message_id = x.id), 0)
               AS revision,
           x.id::text AS message_id, x.role, x.rank,
           ts_headline('english', left(m.text, 20000), q.q, '{_HEADLINE}') AS snippet
    FROM q, messages x JOIN archive_message m ON m.id = x.id JOIN vault v ON v.id = x.vault_id
    UNION ALL
    SELECT 'memory', v.name, x.id::text, x.version::integer, '', x.status, x.rank,
           ts_headline('english', left(mm.content, 20000), q.q, '{_HEADLINE}')
    FROM q, memories x JOIN memory mm ON mm.id = x.id JOIN vault v ON v.id = x.vault_id
) hits ORDER BY rank DESC, kind, id, message_id LIMIT $3
"""  # noqa: S608 (constants only)


def validate(query: str, limit: int) -> str:
    text = " ".join(query.split())
    if not text:
        raise InvalidArgument("QUERY is empty: give the words to look for", field="query")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"QUERY holds at most {MAX_QUERY_CHARS} characters", field="query")
    if not 1 <= limit <= MAX_HITS:
        raise InvalidArgument(f"--limit must be 1 to {MAX_HITS}", field="limit")
    return text


async def search(
    pool: asyncpg.Pool, query: str, *, vault_id: str | None, limit: int, all_revisions: bool = False
) -> list[CanonicalHit]:
    """The best `limit` hits among archived messages and memories (of one vault, or every vault).

    The query is read like a web search box (`websearch_to_tsquery`): every word must match, "quoted
    phrases" in order, `or` between alternatives, `-word` excludes."""
    text = validate(query, limit)
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        words = await conn.fetchval("SELECT numnode(websearch_to_tsquery('english', $1))", text)
        if not words:
            raise InvalidArgument(
                f"QUERY {text[:60]!r} has no words to search for (only common words or punctuation)", field="query"
            )
        rows = await conn.fetch(_SEARCH, text, vault_id, limit, all_revisions)
    return [
        CanonicalHit(
            kind=r["kind"],
            vault=r["vault"],
            id=r["id"],
            revision=int(r["revision"]),
            message_id=r["message_id"],
            role=r["role"],
            snippet=_snippet(r["snippet"]),
            rank=float(r["rank"]),
        )
        for r in rows
    ]


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1] + "…"
