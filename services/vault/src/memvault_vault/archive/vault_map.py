"""The vault map's data (the dashboard draws it): the largest tags, a few items in each, and the links
stored between memories, the tracked sources of memories and the provenance of copied conversations.

Bounded whatever the vault's size: the tags are counted once, then each drawn group reads its newest
items through the listing indexes (`memory_listing`, `archive_conversation_vault`), and links are read
only for the items drawn. Every order ends in an id, so the same data gives the same map, byte for
byte, whatever order it was written in.

An item is drawn in the group of the smallest drawn tag it carries (the most specific; of two tags
of one size, the later by name); items with
none of the drawn tags go in the last group, `""`. Only active memories are drawn; a replaced memory
appears as the target of its replacement's `replaces` link. No link from a memory to the
conversation it came from is stored, so the map draws none.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from memvault_core.errors import InvalidArgument
from memvault_vault.archive.records import MapGroup, MapItem, MapLink, VaultMap
from memvault_vault.database import VaultAccess

DEFAULT_TAGS, MAX_TAGS = 12, 30
DEFAULT_PER_TAG, MAX_PER_TAG = 6, 20
LABEL_CHARS = 120
LINKS_PER_ITEM = 8


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(at: datetime) -> int:
    """A time as whole microseconds (exact, unlike a float)."""
    return (at - _EPOCH) // timedelta(microseconds=1)


def _inverse(text: str) -> str:
    """A key that sorts hex ids descending when sorted ascending."""
    return text.translate(_FLIP)


_FLIP = str.maketrans("0123456789abcdef-", "fedcba9876543210-")


def bounds(max_tags: int, per_tag: int) -> tuple[int, int]:
    """The request's sizes (0: the default), or a clear refusal naming the field."""
    if not 0 <= max_tags <= MAX_TAGS:
        raise InvalidArgument(f"max_tags must be between 1 and {MAX_TAGS} (0 for {DEFAULT_TAGS})", field="max_tags")
    if not 0 <= per_tag <= MAX_PER_TAG:
        raise InvalidArgument(
            f"items_per_tag must be between 1 and {MAX_PER_TAG} (0 for {DEFAULT_PER_TAG})", field="items_per_tag"
        )
    return max_tags or DEFAULT_TAGS, per_tag or DEFAULT_PER_TAG


_TAGS = """
WITH m AS (SELECT t, count(*) AS n FROM memory, unnest(tags) AS t
           WHERE vault_id = $1 AND status = 'active' GROUP BY t),
     c AS (SELECT t, count(*) AS n FROM archive_conversation, unnest(tags) AS t WHERE vault_id = $1 GROUP BY t)
SELECT coalesce(m.t, c.t) AS tag, coalesce(m.n, 0) AS memories, coalesce(c.n, 0) AS conversations,
       count(*) OVER () AS tags
FROM m FULL JOIN c ON m.t = c.t
ORDER BY coalesce(m.n, 0) + coalesce(c.n, 0) DESC, coalesce(m.t, c.t) COLLATE "C"
LIMIT $2
"""

_TOTALS = """
SELECT m.memories, m.memories_other, c.conversations, c.conversations_other
FROM (SELECT count(*) AS memories, count(*) FILTER (WHERE NOT tags && $2::text[]) AS memories_other
      FROM memory WHERE vault_id = $1 AND status = 'active') AS m,
     (SELECT count(*) AS conversations, count(*) FILTER (WHERE NOT tags && $2::text[]) AS conversations_other
      FROM archive_conversation WHERE vault_id = $1) AS c
"""

# Group n (1-based) holds the items with tag n and none of the smaller drawn tags after it; group 0 the
# items with no drawn tag. Newest first through the listing index, ties by id.
_MEMORIES = """
SELECT g.n, m.id::text AS id, left(m.content, $4) AS label, m.tags, m.created_at AS at
FROM unnest($2::text[]) WITH ORDINALITY AS g (tag, n)
CROSS JOIN LATERAL (
    SELECT id, content, tags, created_at FROM memory
    WHERE vault_id = $1 AND status = 'active' AND tags @> ARRAY[g.tag] AND NOT tags && $2[(g.n + 1)::int:]
    ORDER BY created_at DESC, id DESC LIMIT $3
) AS m
UNION ALL
(SELECT 0, id::text, left(content, $4), tags, created_at FROM memory
 WHERE vault_id = $1 AND status = 'active' AND NOT tags && $2::text[]
 ORDER BY created_at DESC, id DESC LIMIT $3)
"""

_CONVERSATIONS = """
SELECT g.n, c.id::text AS id, c.title AS label, c.tags, c.derived_from::text AS derived_from, c.updated_at AS at
FROM unnest($2::text[]) WITH ORDINALITY AS g (tag, n)
CROSS JOIN LATERAL (
    SELECT id, title, tags, derived_from, updated_at FROM archive_conversation
    WHERE vault_id = $1 AND tags @> ARRAY[g.tag] AND NOT tags && $2[(g.n + 1)::int:]
    ORDER BY updated_at DESC, id DESC LIMIT $3
) AS c
UNION ALL
(SELECT 0, id::text, title, tags, derived_from::text, updated_at FROM archive_conversation
 WHERE vault_id = $1 AND NOT tags && $2::text[]
 ORDER BY updated_at DESC, id DESC LIMIT $3)
"""

_LINKS = """
SELECT l.from_id::text AS from_id, l.kind, l.to_id::text AS to_id, left(t.content, $3) AS to_label
FROM (
    SELECT id AS from_id, 'replaces' AS kind, supersedes AS to_id FROM memory
    WHERE vault_id = $1 AND id = ANY($2::uuid[]) AND supersedes IS NOT NULL
    UNION
    SELECT id, 'similar', s FROM memory, unnest(similar_to) AS s WHERE vault_id = $1 AND id = ANY($2::uuid[])
    UNION
    SELECT id, 'depends_on', d FROM memory, unnest(depends_on) AS d WHERE vault_id = $1 AND id = ANY($2::uuid[])
) AS l
JOIN memory AS t ON t.id = l.to_id AND t.vault_id = $1
WHERE l.from_id <> l.to_id
"""

_SOURCES = """
SELECT memory_id::text AS id, count(*) AS n FROM tracked_source
WHERE vault_id = $1 AND memory_id = ANY($2::uuid[]) GROUP BY memory_id
"""


class VaultMapStore:
    """The map's reads, in one snapshot (a repeatable-read, read-only transaction)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def read(self, vault: VaultAccess, max_tags: int, per_tag: int) -> VaultMap:
        async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            tag_rows = await conn.fetch(_TAGS, vault.id, max_tags)
            tags = [str(r["tag"]) for r in tag_rows]
            totals = await conn.fetchrow(_TOTALS, vault.id, tags)
            memory_rows = await conn.fetch(_MEMORIES, vault.id, tags, per_tag, LABEL_CHARS)
            conversation_rows = await conn.fetch(_CONVERSATIONS, vault.id, tags, per_tag)
            drawn = [str(r["id"]) for r in memory_rows]
            link_rows = await conn.fetch(_LINKS, vault.id, drawn, LABEL_CHARS) if drawn else []
            source_rows = await conn.fetch(_SOURCES, vault.id, drawn) if drawn else []
        assert totals is not None
        return assemble(tag_rows, totals, memory_rows, conversation_rows, link_rows, source_rows)


def assemble(
    tag_rows: list[Any],
    totals: Any,
    memory_rows: list[Any],
    conversation_rows: list[Any],
    link_rows: list[Any],
    source_rows: list[Any],
) -> VaultMap:
    """The rows in the map's fixed order (whatever order Postgres handed them over in)."""
    tags = [str(r["tag"]) for r in tag_rows]
    result = VaultMap(
        memories=int(totals["memories"]),
        conversations=int(totals["conversations"]),
        other_tags=max(0, int(tag_rows[0]["tags"]) - len(tags)) if tag_rows else 0,
    )
    result.groups = [
        MapGroup(t, int(r["memories"]), int(r["conversations"])) for t, r in zip(tags, tag_rows, strict=True)
    ]
    if totals["memories_other"] or totals["conversations_other"]:
        result.groups.append(MapGroup("", int(totals["memories_other"]), int(totals["conversations_other"])))
    sources = {str(r["id"]): int(r["n"]) for r in source_rows}

    def group_of(n: int) -> str:
        return tags[n - 1] if n else ""

    # By group (the untagged last), memories first, newest first, then id (as the SQL picked them).
    keyed: list[tuple[int, int, int, str, MapItem]] = []
    for r in memory_rows:
        n = int(r["n"])
        item = MapItem("memory", str(r["id"]), str(r["label"]), group_of(n), list(r["tags"]), sources.get(r["id"], 0))
        keyed.append((n or len(tags) + 1, 0, -_micros(r["at"]), _inverse(item.id), item))
    for r in conversation_rows:
        n = int(r["n"])
        derived = json.loads(r["derived_from"]) if r["derived_from"] else None
        item = MapItem("conversation", str(r["id"]), r["label"] or "", group_of(n), list(r["tags"]), 0, derived)
        keyed.append((n or len(tags) + 1, 1, -_micros(r["at"]), _inverse(item.id), item))
    result.items = [entry[-1] for entry in sorted(keyed, key=lambda entry: entry[:4])]
    drawn = {i.id for i in result.items}
    links = sorted(
        {(str(r["from_id"]), str(r["kind"]), str(r["to_id"]), str(r["to_label"])) for r in link_rows},
    )
    per_item: dict[str, int] = {}
    for from_id, kind, to_id, label in links:
        per_item[from_id] = per_item.get(from_id, 0) + 1
        if per_item[from_id] <= LINKS_PER_ITEM:
            result.links.append(MapLink(kind, from_id, to_id, label, to_id in drawn))
    return result
