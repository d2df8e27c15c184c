"""What a restore writes: one transaction (opened by `BackupStore.restore_session`) that stages the
file's records in a temporary table and writes them into the vault only after the whole file checked
out; any error, or the caller going away, rolls everything back."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from memvault_core.errors import Conflict, InvalidArgument
from memvault_vault.backup import later_kinds
from memvault_vault.backup.format import OWN_IDS
from memvault_vault.backup.records import VaultRef
from memvault_vault.backup.snapshot_store import FETCH
from memvault_vault.outbox import events


async def _insertable_columns(conn: asyncpg.Connection, table: str, exclude: Sequence[str]) -> list[str]:
    rows = await conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position",
        table,
    )
    return [r[0] for r in rows if r[0] not in exclude]


def _ids(expression: str) -> str:
    """SQL turning a JSON array of memory ids into the same array with restored ids."""
    return f"(SELECT coalesce(jsonb_agg(pg_temp.restored_id(x)), '[]'::jsonb) FROM jsonb_array_elements_text({expression}) x)"  # noqa: S608 (constant SQL)


# A memory's links (and a batch's id) as the restored vault knows them: the same ids, unless they are
# taken by another vault of this deployment, then new ones (`remap`).
def _memory_body(source: str, remap: bool) -> str:
    if not remap:
        return f"{source} || jsonb_build_object('vault_id', $1::uuid)"
    return (
        f"{source} || jsonb_build_object('vault_id', $1::uuid, 'id', pg_temp.restored_id({source}->>'id'),"
        f" 'supersedes', pg_temp.restored_id({source}->>'supersedes'),"
        f" 'superseded_by', pg_temp.restored_id({source}->>'superseded_by'),"
        f" 'batch_id', pg_temp.restored_id({source}->>'batch_id'),"
        " 'depends_on', " + _ids(source + "->'depends_on'") + ", 'similar_to', " + _ids(source + "->'similar_to'") + ")"
    )


def _history_snapshot(remap: bool) -> str:
    """A history entry's snapshot of the memory, with the restored vault and (when remapped) ids."""
    if not remap:
        return "p.snapshot || jsonb_build_object('vault_id', $1::uuid)"
    return (
        "p.snapshot || (SELECT jsonb_build_object('vault_id', $1::uuid, 'id', m.id, 'supersedes', m.supersedes,"  # noqa: S608
        " 'superseded_by', m.superseded_by, 'batch_id', m.batch_id, 'depends_on', m.depends_on,"
        f" 'similar_to', m.similar_to) FROM jsonb_populate_record(NULL::memory, {_memory_body('p.snapshot', True)}) m)"
    )


def _ref(remap: bool, column: str = "r.ref") -> str:
    return f"pg_temp.restored_id({column}::text)" if remap else column


class RestoreSession:
    """One restore's transaction: stage records, then apply them; leaving without `apply` writes nothing."""

    def __init__(self, conn: asyncpg.Connection, vault: VaultRef) -> None:
        self._conn = conn
        self._vault = vault
        self._remap = False

    async def holds_conversations(self) -> bool:
        return await later_kinds.holds_conversations(self._conn, self._vault.id)

    async def holds_memories(self) -> bool:
        """Whether the vault holds memories or archived conversations (what a restore would replace)."""
        return bool(
            await self._conn.fetchval("SELECT EXISTS (SELECT 1 FROM memory WHERE vault_id = $1)", self._vault.id)
        ) or await later_kinds.holds_conversations(self._conn, self._vault.id)

    async def stage(self, records: Sequence[tuple[str, uuid.UUID | None, str]]) -> None:
        """(kind, the memory or batch id it is about, line of JSON) in file order."""
        await self._conn.copy_records_to_table("restore_record", records=list(records), columns=["kind", "ref", "body"])

    async def apply(self, *, replace: bool, archive_only: bool = False) -> dict[str, int]:
        """Write the staged records into the vault (after emptying it when `replace`); counts by kind. With
        `archive_only` (an archive export) only the conversation archive is replaced and written."""
        conn, vault_id = self._conn, self._vault.id
        await conn.execute("CREATE INDEX ON restore_record (ref, kind)")
        await conn.execute("ANALYZE restore_record")
        if archive_only:
            return await self._apply_archive(replace=replace)
        gone: list[str] = []
        gone_conversations: list[str] = []
        if replace:
            gone_conversations = await self._conversations_not_in_file()
            gone = [
                r[0]
                for r in await conn.fetch(
                    "DELETE FROM memory m WHERE m.vault_id = $1 AND NOT EXISTS (SELECT 1 FROM restore_record r"
                    " WHERE r.ref = m.id AND r.kind = 'memory') RETURNING m.id::text",
                    vault_id,
                )
            ]
            await conn.execute("DELETE FROM memory WHERE vault_id = $1", vault_id)
            for table in ("memory_history", "exclusion", "operating_guide_history", "audit_log"):
                await conn.execute(f"DELETE FROM {table} WHERE vault_id = $1", vault_id)  # noqa: S608 (constant names)
            await conn.execute("DELETE FROM import_batch WHERE vault_id = $1", vault_id)
            await later_kinds.empty(conn, vault_id)
        tables = {"memory": "memory", "batch": "import_batch", **later_kinds.TABLES}
        taken = " OR ".join(
            f"EXISTS (SELECT 1 FROM restore_record r JOIN {tables[kind]} t ON t.id = r.ref WHERE r.kind = '{kind}')"  # noqa: S608 (constant names)
            for kind in OWN_IDS
        )
        remap = bool(await conn.fetchval(f"SELECT {taken}"))
        if remap:  # another vault here holds these ids (a copy of a vault of this deployment): new ids
            await conn.execute(
                "INSERT INTO restore_id (old, new) SELECT DISTINCT ref, gen_random_uuid()"
                " FROM restore_record WHERE kind = ANY($1::text[])",
                list(OWN_IDS),
            )
        self._remap = remap
        counts: dict[str, int] = {}
        # The guide's history is the file's (a new vault's first version would collide with it).
        await conn.execute("DELETE FROM operating_guide_history WHERE vault_id = $1", vault_id)
        counts["settings"] = await self._settings()
        counts["guide"] = await self._guide()
        counts["guide_version"] = _count(
            await conn.execute(
                "INSERT INTO operating_guide_history (vault_id, version, text, updated_by, updated_at)"
                " SELECT $1, p.version, p.text, p.updated_by, p.updated_at FROM restore_record r,"
                " jsonb_populate_record(NULL::operating_guide_history, r.body) p"
                " WHERE r.kind = 'guide_version' ORDER BY r.seq",
                vault_id,
            )
        )
        batch_columns = await _insertable_columns(conn, "import_batch", ())
        counts["batch"] = _count(
            await conn.execute(
                f"INSERT INTO import_batch ({', '.join(batch_columns)})"  # noqa: S608 (column names from the catalogue)
                f" SELECT {', '.join('p.' + c for c in batch_columns)} FROM restore_record r,"
                " jsonb_populate_record(NULL::import_batch, r.body || jsonb_build_object('vault_id', $1::uuid,"
                f" 'id', {_ref(remap)})) p WHERE r.kind = 'batch' ORDER BY r.seq",
                vault_id,
            )
        )
        counts["exclusion"] = _count(
            await conn.execute(
                "INSERT INTO exclusion (vault_id, content_hash, reason, created_at)"
                " SELECT $1, p.content_hash, coalesce(p.reason, 'forgotten'), p.created_at FROM restore_record r,"
                " jsonb_populate_record(NULL::exclusion, r.body) p WHERE r.kind = 'exclusion'"
                " ON CONFLICT (vault_id, content_hash) DO NOTHING",
                vault_id,
            )
        )
        memory_columns = await _insertable_columns(conn, "memory", ())
        counts["memory"] = _count(
            await conn.execute(
                f"INSERT INTO memory ({', '.join(memory_columns)})"  # noqa: S608 (column names from the catalogue)
                f" SELECT {', '.join('p.' + c for c in memory_columns)} FROM restore_record r,"
                f" jsonb_populate_record(NULL::memory, {_memory_body('r.body', remap)}) p"
                " WHERE r.kind = 'memory' ORDER BY r.seq",
                vault_id,
            )
        )
        counts["history"] = _count(
            await conn.execute(
                "INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor, changed_at, cause)"  # noqa: S608
                f" SELECT {_ref(remap)}, $1, p.version, p.change, {_history_snapshot(remap)},"
                f" p.actor, p.changed_at, {_ref(remap, 'p.cause')}"
                " FROM restore_record r, jsonb_populate_record(NULL::memory_history, r.body) p"
                " WHERE r.kind = 'history' ORDER BY r.seq",
                vault_id,
            )
        )
        counts["audit"] = _count(
            await conn.execute(
                "INSERT INTO audit_log (vault_id, actor, action, target, details, at)"
                " SELECT $1, p.actor, p.action, coalesce(p.target, ''), coalesce(p.details, '{}'), p.at"
                " FROM restore_record r, jsonb_populate_record(NULL::audit_log, r.body) p"
                " WHERE r.kind = 'audit' ORDER BY r.seq",
                vault_id,
            )
        )
        counts["embedding"] = int(await conn.fetchval("SELECT count(*) FROM restore_record WHERE kind = 'embedding'"))
        columns_of = {
            table: await _insertable_columns(conn, table, ()) for table in {table for _, table, _ in later_kinds.ROWS}
        }
        counts |= await later_kinds.apply(conn, vault_id, columns_of)
        await self._enqueue([events.memory_forgotten(i, vault_id) for i in gone])
        await self._enqueue([events.conversation_deleted(i, vault_id) for i in gone_conversations])
        async for batch in self._restored_memories():
            await self._enqueue(events.memories_created(vault_id, batch))
        async for messages in self._restored_messages():
            await self._enqueue([events.message_archived(i, vault_id, c, n, h) for i, c, n, h in messages])
        return counts

    async def _conversations_not_in_file(self) -> list[str]:
        """The vault's conversations the file does not hold: the index drops their messages' points."""
        rows = await self._conn.fetch(
            "SELECT c.id::text FROM archive_conversation c WHERE c.vault_id = $1 AND NOT EXISTS"
            " (SELECT 1 FROM restore_record r WHERE r.ref = c.id AND r.kind = 'conversation')",
            self._vault.id,
        )
        return [r[0] for r in rows]

    async def _apply_archive(self, *, replace: bool) -> dict[str, int]:
        conn, vault_id = self._conn, self._vault.id
        gone_conversations: list[str] = []
        if replace:
            gone_conversations = await self._conversations_not_in_file()
            await later_kinds.empty_archive(conn, vault_id)
        taken = " OR ".join(
            f"EXISTS (SELECT 1 FROM restore_record r JOIN {later_kinds.TABLES[kind]} t ON t.id = r.ref"  # noqa: S608
            f" WHERE r.kind = '{kind}')"
            for kind in OWN_IDS
            if kind in later_kinds.ARCHIVE_KINDS
        )
        self._remap = bool(await conn.fetchval(f"SELECT {taken}"))
        if self._remap:
            await conn.execute(
                "INSERT INTO restore_id (old, new) SELECT DISTINCT ref, gen_random_uuid()"
                " FROM restore_record WHERE kind = ANY($1::text[])",
                list(OWN_IDS),
            )
        columns_of = {
            table: await _insertable_columns(conn, table, ()) for table in {table for _, table, _ in later_kinds.ROWS}
        }
        counts = await later_kinds.apply(conn, vault_id, columns_of)
        await self._enqueue([events.conversation_deleted(i, vault_id) for i in gone_conversations])
        async for messages in self._restored_messages():
            await self._enqueue([events.message_archived(i, vault_id, c, n, h) for i, c, n, h in messages])
        return counts

    async def _settings(self) -> int:
        columns = await _insertable_columns(self._conn, "vault_settings", ("vault_id",))
        return _count(
            await self._conn.execute(
                f"UPDATE vault_settings s SET ({', '.join(columns)}) = (SELECT {', '.join('p.' + c for c in columns)}"  # noqa: S608
                " FROM restore_record r, jsonb_populate_record(NULL::vault_settings, r.body) p"
                " WHERE r.kind = 'settings' LIMIT 1)"
                " WHERE s.vault_id = $1 AND EXISTS (SELECT 1 FROM restore_record WHERE kind = 'settings')",
                self._vault.id,
            )
        )

    async def _guide(self) -> int:
        return _count(
            await self._conn.execute(
                "UPDATE operating_guide g SET (text, version, default_revision, updated_by, updated_at) ="
                " (SELECT p.text, p.version, p.default_revision, p.updated_by, p.updated_at FROM restore_record r,"
                " jsonb_populate_record(NULL::operating_guide, r.body) p WHERE r.kind = 'guide' LIMIT 1)"
                " WHERE g.vault_id = $1 AND EXISTS (SELECT 1 FROM restore_record WHERE kind = 'guide')",
                self._vault.id,
            )
        )

    async def _restored_memories(self) -> AsyncIterator[list[tuple[str, str]]]:
        batch: list[tuple[str, str]] = []
        async for row in self._conn.cursor(
            "SELECT id::text, index_hash FROM memory WHERE vault_id = $1 ORDER BY id", self._vault.id, prefetch=FETCH
        ):
            batch.append((row[0], row[1]))
            if len(batch) >= FETCH:
                yield batch
                batch = []
        if batch:
            yield batch

    async def _restored_messages(self) -> AsyncIterator[list[tuple[str, str, int, str]]]:
        """(id, conversation, first revision listing it, content hash) of each archived message with text: the
        indexer embeds them through `message.archived`, as it does for messages written by the API."""
        batch: list[tuple[str, str, int, str]] = []
        async for row in self._conn.cursor(
            "SELECT m.id::text, m.conversation_id::text, min(rm.revision), m.content_hash FROM archive_message m"
            " JOIN archive_revision_message rm ON rm.message_id = m.id"
            " WHERE m.vault_id = $1 AND m.text <> '' GROUP BY m.id ORDER BY m.id",
            self._vault.id,
            prefetch=FETCH,
        ):
            batch.append((row[0], row[1], row[2], row[3]))
            if len(batch) >= FETCH:
                yield batch
                batch = []
        if batch:
            yield batch

    async def _enqueue(self, outbox: Sequence[events.OutboxEvent]) -> None:
        if outbox:
            await self._conn.executemany(
                "INSERT INTO outbox (id, subject, payload, headers) VALUES ($1, $2, $3, $4::jsonb)",
                [(e.id, e.subject, e.payload, json.dumps(e.headers)) for e in outbox],
            )

    async def keep_embeddings(
        self,
        model: str,
        dimension: int,
        put: Callable[[list[tuple[str, str, list[float]]]], Awaitable[None]],
        *,
        batch_size: int = FETCH,
    ) -> int:
        """Hand the file's embeddings that were made by `model` from the text the memory now has to `put`, and
        record those memories as indexed; returns how many. The others are embedded again by the indexer."""
        kept = 0
        batch: list[tuple[str, str, list[float]]] = []
        query = (
            "SELECT m.id::text, m.index_hash, r.body->'vector' FROM restore_record r"
            " LEFT JOIN restore_id i ON i.old = r.ref"
            " JOIN memory m ON m.id = coalesce(i.new, r.ref) AND m.vault_id = $1"
            " WHERE r.kind = 'embedding' AND r.body->>'model' = $2 AND (r.body->>'dimension')::int = $3"
            " AND r.body->>'content_hash' = m.index_hash"
        )
        async for row in self._conn.cursor(query, self._vault.id, model, dimension, prefetch=FETCH):
            batch.append((row[0], row[1], json.loads(row[2])))
            if len(batch) >= batch_size:
                kept += await self._keep(batch, model, put)
                batch = []
        if batch:
            kept += await self._keep(batch, model, put)
        return kept

    async def _keep(
        self,
        batch: list[tuple[str, str, list[float]]],
        model: str,
        put: Callable[[list[tuple[str, str, list[float]]]], Awaitable[None]],
    ) -> int:
        await put(batch)
        await self._conn.executemany(
            "INSERT INTO index_state (memory_id, vault_id, content_hash, model, state) VALUES ($1::uuid, $2, $3, $4,"
            " 'indexed') ON CONFLICT (memory_id) DO UPDATE SET content_hash = EXCLUDED.content_hash,"
            " model = EXCLUDED.model, state = 'indexed', attempts = 0, last_error = NULL, updated_at = now()",
            [(memory_id, self._vault.id, index_hash, model) for memory_id, index_hash, _ in batch],
        )
        await self._conn.execute(
            "DELETE FROM index_pending WHERE memory_id = ANY($1::uuid[])", [memory_id for memory_id, _, _ in batch]
        )
        return len(batch)

    async def audit(self, actor: str, action: str, details: dict[str, Any]) -> None:
        await self._conn.execute(
            "INSERT INTO audit_log (vault_id, actor, action, target, details) VALUES ($1, $2, $3, $4, $5::jsonb)",
            self._vault.id,
            actor,
            action,
            self._vault.name,
            json.dumps(details),
        )


def _count(status: str) -> int:
    """Rows an INSERT or UPDATE wrote, from its command status ('INSERT 0 5', 'UPDATE 1')."""
    return int(status.rsplit(" ", 1)[-1])


def _refused(error: asyncpg.PostgresError) -> Exception:
    """A staged record the schema refuses: the file does not fit this deployment; nothing is written."""
    detail = (str(error) or type(error).__name__).splitlines()[0]
    if isinstance(error, asyncpg.UniqueViolationError):
        return Conflict(f"backup refused, nothing was restored: two records collide ({detail})", field="backup")
    return InvalidArgument(f"backup refused, nothing was restored: a record does not fit ({detail})", field="backup")
