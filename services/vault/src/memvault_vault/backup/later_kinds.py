"""The SQL of the kinds format version 2 added to a backup: tracked sources with their changes, and the
conversation archive (conversations, every revision and message, idempotency keys, raw imports in
slices with their outcomes). Used by store.py inside its snapshot and its restore transaction.

Every id a record carries goes through `pg_temp.restored_id`, so a restore beside the original vault
(ids taken, `restore_id` filled) gives the same new id to a conversation and to everything naming it.
"""

from __future__ import annotations

import asyncpg

SLICE_BYTES = 1024 * 1024
"""Raw bytes of an import per `import_chunk` line (base64 in the file: well under a line's limit)."""

LINES: dict[str, str] = {
    # a source's and a revision's own `kind` column travels as `source_kind` / `revision_kind`
    "source": "SELECT ((to_jsonb(s) - 'vault_id' - 'claimed_until' - 'kind')"
    " || jsonb_build_object('kind', 'source', 'source_kind', s.kind))::text"
    " FROM tracked_source s WHERE s.vault_id = $1 ORDER BY s.created_at, s.id",
    "source_change": "SELECT (jsonb_build_object('kind', 'source_change') || (to_jsonb(c) - 'vault_id'))::text"
    " FROM source_change c WHERE c.vault_id = $1 ORDER BY c.detected_at, c.id",
    "conversation": "SELECT (jsonb_build_object('kind', 'conversation') || (to_jsonb(c) - 'vault_id'))::text"
    " FROM archive_conversation c WHERE c.vault_id = $1 ORDER BY c.created_at, c.id",
    "revision": "SELECT ((to_jsonb(r) - 'vault_id' - 'kind') || jsonb_build_object('kind', 'revision',"
    " 'revision_kind', r.kind))::text"
    " FROM archive_revision r WHERE r.vault_id = $1 ORDER BY r.conversation_id, r.number",
    "message": "SELECT (jsonb_build_object('kind', 'message') || (to_jsonb(m) - 'vault_id' - 'search'))::text"
    " FROM archive_message m WHERE m.vault_id = $1 ORDER BY m.conversation_id, m.id",
    "revision_message": "SELECT (jsonb_build_object('kind', 'revision_message') || (to_jsonb(x) - 'vault_id'))::text"
    " FROM archive_revision_message x WHERE x.vault_id = $1 ORDER BY x.conversation_id, x.revision, x.position",
    "archive_key": "SELECT (jsonb_build_object('kind', 'archive_key') || (to_jsonb(k) - 'vault_id'))::text"
    " FROM archive_idempotency k WHERE k.vault_id = $1 ORDER BY k.created_at, k.key",
    "import": "SELECT (jsonb_build_object('kind', 'import') || (to_jsonb(i) - 'vault_id'))::text"
    " FROM archive_import i WHERE i.vault_id = $1 ORDER BY i.created_at, i.id",
    "import_chunk": "SELECT jsonb_build_object('kind', 'import_chunk', 'import_id', c.import_id, 'part', c.part,"  # noqa: S608 (a constant)
    f" 'offset', o, 'data', encode(substring(c.data FROM o + 1 FOR {SLICE_BYTES}), 'base64'))::text"
    f" FROM archive_import_chunk c, generate_series(0, greatest(length(c.data) - 1, 0), {SLICE_BYTES}) o"
    " WHERE c.vault_id = $1 ORDER BY c.import_id, c.part, o",
    "import_failure": "SELECT (jsonb_build_object('kind', 'import_failure') || (to_jsonb(f) - 'vault_id'))::text"
    " FROM archive_import_failure f WHERE f.vault_id = $1 ORDER BY f.import_id, f.conversation_ref",
}

ARCHIVE_KINDS = tuple(kind for kind in LINES if kind not in ("source", "source_change"))
"""The kinds of an archive export (a backup with `"scope": "archive"`): the conversation archive only."""

ARCHIVE_TABLES = ("archive_conversation", "archive_idempotency", "archive_import")

TABLES = {
    "source": "tracked_source",
    "source_change": "source_change",
    "conversation": "archive_conversation",
    "message": "archive_message",
    "import": "archive_import",
}
"""The table holding each kind whose own id a restore may have to renew (memory and batch: store.py)."""

# kind: (table, the id columns that follow a renewed id)
ROWS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("source", "tracked_source", ("id", "memory_id")),
    ("source_change", "source_change", ("id", "source_id", "memory_id", "replacement_id")),
    ("conversation", "archive_conversation", ("id",)),
    ("revision", "archive_revision", ("conversation_id",)),
    ("message", "archive_message", ("id", "conversation_id")),
    ("revision_message", "archive_revision_message", ("conversation_id", "message_id")),
    ("archive_key", "archive_idempotency", ()),
    ("import", "archive_import", ("id", "duplicate_of")),
    ("import_failure", "archive_import_failure", ("import_id",)),
)


async def empty(conn: asyncpg.Connection, vault_id: str) -> None:
    """Remove the vault's sources and archive (a restore with `replace`)."""
    for table in ("tracked_source", "source_change", "archive_conversation", "archive_idempotency", "archive_import"):
        await conn.execute(f"DELETE FROM {table} WHERE vault_id = $1", vault_id)  # noqa: S608 (constant names)


async def empty_archive(conn: asyncpg.Connection, vault_id: str) -> None:
    """Remove the vault's conversation archive only (an archive export restored with `replace`)."""
    for table in ARCHIVE_TABLES:
        await conn.execute(f"DELETE FROM {table} WHERE vault_id = $1", vault_id)  # noqa: S608 (constant names)


async def holds_conversations(conn: asyncpg.Connection, vault_id: str) -> bool:
    return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM archive_conversation WHERE vault_id = $1)", vault_id))


def _body(columns: tuple[str, ...]) -> str:
    renewed = ", ".join(f"'{c}', pg_temp.restored_id(r.body->>'{c}')" for c in columns)
    return "r.body || jsonb_build_object('vault_id', $1::uuid" + (f", {renewed})" if renewed else ")")


async def apply(conn: asyncpg.Connection, vault_id: str, columns_of: dict[str, list[str]]) -> dict[str, int]:
    """Insert the staged records of the later kinds, parents first; counts by kind.

    `columns_of` maps a table to its insertable columns (from the catalogue, so later columns come too).
    """
    counts: dict[str, int] = {}
    for kind, table, ids in ROWS:
        columns = columns_of[table]
        body = _body(ids)
        if kind == "archive_key":  # the stored receipt names the conversation
            body += (
                " || jsonb_build_object('receipt', r.body->'receipt' || jsonb_build_object('conversation_id',"
                " pg_temp.restored_id(r.body->'receipt'->>'conversation_id')))"
            )
        if kind == "source":  # a check in progress in the old deployment is not one here
            body += " || jsonb_build_object('claimed_until', NULL, 'kind', r.body->'source_kind')"
        if kind == "revision":
            body += " || jsonb_build_object('kind', r.body->'revision_kind')"
        status = await conn.execute(
            f"INSERT INTO {table} ({', '.join(columns)})"  # noqa: S608 (names from the catalogue and constants)
            f" SELECT {', '.join('p.' + c for c in columns)} FROM restore_record r,"
            f" jsonb_populate_record(NULL::{table}, {body}) p WHERE r.kind = '{kind}' ORDER BY r.seq",
            vault_id,
        )
        counts[kind] = int(status.rsplit(" ", 1)[-1])
        if kind == "import":  # the raw bytes, put together again from their slices
            await conn.execute(
                "INSERT INTO archive_import_chunk (import_id, vault_id, part, data)"
                " SELECT pg_temp.restored_id(r.body->>'import_id'), $1, (r.body->>'part')::int,"
                " string_agg(decode(r.body->>'data', 'base64'), ''::bytea ORDER BY (r.body->>'offset')::bigint)"
                " FROM restore_record r WHERE r.kind = 'import_chunk' GROUP BY 1, 3",
                vault_id,
            )
            counts["import_chunk"] = int(
                await conn.fetchval("SELECT count(*) FROM restore_record WHERE kind = 'import_chunk'")
            )
    return counts
