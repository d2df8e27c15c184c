"""The vault map's data (the dashboard draws it): the largest tags, a few items in each, and the links
stored between memories, the tracked sources of memories and the provenance of copied conversations.

Bounded by the vault's combinations of tags, not its items: the memories' counts per combination are
kept by triggers (`memory_tag_stats`), each combination's newest memories come from its own index
entries (`memory_active_tags`), each drawn group's newest conversations through the tags index, and
links are read only for the items drawn. Every order ends in an id, so the same data gives the same
map, byte for byte, whatever order it was written in.

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


# How many active memories (conversations) carry each combination of tags. Every count of the map
# follows from these rows, far fewer than the items in a real vault: the memories' are kept by
# triggers (migration 0033), the conversations' counted here (a vault holds far fewer of them).
_MEMORY_COMBINATIONS = """
SELECT tags, active AS n FROM memory_tag_stats WHERE vault_id = $1 AND active > 0
"""
_CONVERSATION_COMBINATIONS = """
SELECT tags, count(*) AS n FROM archive_conversation WHERE vault_id = $1 GROUP BY tags
"""

# Group n (1-based) holds the items whose last drawn tag is tag n; group 0 the items with no drawn
# tag. Each combination of tags belongs to one group, so the newest few of each combination (an
# index-only scan of memory_active_tags, newest first) hold the newest few of each group; only the
# winners' rows are read. Ties by id.
_MEMORIES = """
WITH combination AS (
    SELECT s.tags, coalesce(
        (SELECT max(g.n) FROM unnest($2::text[]) WITH ORDINALITY AS g (tag, n) WHERE g.tag = ANY (s.tags)), 0
    ) AS n
    FROM memory_tag_stats AS s WHERE s.vault_id = $1 AND s.active > 0
), newest AS (
    SELECT c.n, m.id, row_number() OVER (PARTITION BY c.n ORDER BY m.created_at DESC, m.id DESC) AS place
    FROM combination AS c CROSS JOIN LATERAL (
        SELECT id, created_at FROM memory
        WHERE vault_id = $1 AND status = 'active' AND tags = c.tags
        ORDER BY created_at DESC, id DESC LIMIT $3
    ) AS m
)
SELECT w.n, m.id::text AS id, left(m.content, $4) AS label, m.tags, m.created_at AS at
FROM newest AS w JOIN memory AS m ON m.id = w.id
WHERE w.place <= $3
"""

_CONVERSATIONS = """
SELECT g.n, c.id::text AS id, c.title AS label, c.tags, c.derived_from::text AS derived_from, c.updated_at AS at
FROM unnest($2::text[]) WITH ORDINALITY AS g (tag, n)
CROSS JOIN LATERAL (
    SELECT id, title, tags, derived_from, updated_at FROM archive_conversation
    WHERE vault_id = $1 AND tags @> ARRAY[g.tag] AND NOT tags && $2[(g.n + 1)::int:]
    ORDER BY updated_at DESC, id DESC LIMIT $3
) AS c
WHERE g.n = ANY($4::bigint[])
UNION ALL
(SELECT 0, id::text, title, tags, derived_from::text, updated_at FROM archive_conversation
 WHERE $5 AND vault_id = $1 AND NOT tags && $2::text[]
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
            memory_combinations = await conn.fetch(_MEMORY_COMBINATIONS, vault.id)
            conversation_combinations = await conn.fetch(_CONVERSATION_COMBINATIONS, vault.id)
            counts = count_groups(
                [(list(r["tags"]), int(r["n"])) for r in memory_combinations],
                [(list(r["tags"]), int(r["n"])) for r in conversation_combinations],
                max_tags,
            )
            tags = [g.tag for g in counts.groups if g.tag]
            # Only the groups with something of their own are read (a group with none would scan them all).
            conversation_groups = [n for n, g in enumerate(counts.groups, 1) if g.tag and g.own_conversations]
            conversations_other = (
                counts.groups[-1].own_conversations if counts.groups and not counts.groups[-1].tag else 0
            )
            memory_rows = await conn.fetch(_MEMORIES, vault.id, tags, per_tag, LABEL_CHARS)
            conversation_rows = await conn.fetch(
                _CONVERSATIONS, vault.id, tags, per_tag, conversation_groups, conversations_other > 0
            )
            drawn = [str(r["id"]) for r in memory_rows]
            link_rows = await conn.fetch(_LINKS, vault.id, drawn, LABEL_CHARS) if drawn else []
            source_rows = await conn.fetch(_SOURCES, vault.id, drawn) if drawn else []
        return assemble(counts, memory_rows, conversation_rows, link_rows, source_rows)


def count_groups(
    memory_combinations: list[tuple[list[str], int]],
    conversation_combinations: list[tuple[list[str], int]],
    max_tags: int,
) -> VaultMap:
    """The groups from the combinations of tags: the `max_tags` largest tags (memories and conversations
    together; ties by name), each item counted in the group of the last of them it carries, the rest in
    the group "" (listed only when it holds something)."""
    per_tag: dict[str, list[int]] = {}
    for kind, combinations in enumerate((memory_combinations, conversation_combinations)):
        for tags, n in combinations:
            for tag in set(tags):
                per_tag.setdefault(tag, [0, 0])[kind] += n
    ranked = sorted(per_tag, key=lambda tag: (-sum(per_tag[tag]), tag))
    drawn = ranked[:max_tags]
    rank = {tag: n for n, tag in enumerate(drawn)}
    own: dict[str, list[int]] = {tag: [0, 0] for tag in [*drawn, ""]}
    for kind, combinations in enumerate((memory_combinations, conversation_combinations)):
        for tags, n in combinations:
            group = max((rank[tag] for tag in tags if tag in rank), default=-1)
            own[drawn[group] if group >= 0 else ""][kind] += n
    groups = [MapGroup(tag, per_tag[tag][0], per_tag[tag][1], own[tag][0], own[tag][1]) for tag in drawn]
    if own[""] != [0, 0]:
        groups.append(MapGroup("", own[""][0], own[""][1], own[""][0], own[""][1]))
    return VaultMap(
        groups=groups,
        memories=sum(n for _, n in memory_combinations),
        conversations=sum(n for _, n in conversation_combinations),
        other_tags=len(ranked) - len(drawn),
    )


def assemble(
    counts: VaultMap,
    memory_rows: list[Any],
    conversation_rows: list[Any],
    link_rows: list[Any],
    source_rows: list[Any],
) -> VaultMap:
    """The rows in the map's fixed order (whatever order Postgres handed them over in)."""
    tags = [g.tag for g in counts.groups if g.tag]
    result = VaultMap(
        groups=counts.groups,
        memories=counts.memories,
        conversations=counts.conversations,
        other_tags=counts.other_tags,
    )
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
