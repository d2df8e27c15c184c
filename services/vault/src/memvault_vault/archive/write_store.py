"""The SQL of the archive's keyed, in-place, batch and cross-vault writes, and of emptying a vault's
archive. Like `store.py`, a revision is written once and never changed, only the head moves, and
every query is filtered by the vault id."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from memvault_core.errors import Conflict, NotFound
from memvault_vault.archive.records import MessageRecord, Receipt
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.audit.store import append_audit
from memvault_vault.database import VaultAccess
from memvault_vault.domain.archive import MessageInput, revision_hash

_ROWS = (
    "SELECT rm.position, rm.active, m.id::text AS id, m.node_id, m.parent_node_id, m.role, m.content_type,"
    " m.text, m.content::text AS content, m.metadata::text AS metadata, m.created_at, m.content_hash,"
    " m.message_key FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
    " WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3"
)


@dataclass(frozen=True)
class Kept:
    """A message the new revision carries over from the head unchanged."""

    message_id: str
    node_id: str
    parent_node_id: str | None
    content_hash: str
    active: bool


Entry = Kept | MessageInput
Plan = Callable[[list[asyncpg.Record]], tuple[list[Entry] | None, dict[str, int], list[int]]]
"""Given the head's rows in order: the new revision's entries (None: nothing changes), the counts of
what changed, and the positions of the changed messages in the new revision."""


@dataclass(frozen=True)
class BatchWrite:
    conversation_id: str
    kind: str
    base_revision: int
    messages: Sequence[MessageInput]


class ArchiveWriteStore:
    def __init__(self, store: ArchiveStore) -> None:
        self._pool: asyncpg.Pool = store._pool  # the archive's one pool
        self._store = store

    async def index_states(
        self, vault: VaultAccess, revisions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(pending, failed) messages of each (conversation, revision) in the vector index: a message with
        text and no index row is pending (the indexer writes the row when it has the point or gives up)."""
        rows = await self._pool.fetch(
            "SELECT rm.conversation_id::text AS conversation_id, rm.revision,"
            " count(*) FILTER (WHERE s.state IS NULL) AS pending, count(*) FILTER (WHERE s.state = 'failed') AS failed"
            " FROM unnest($2::uuid[], $3::int[]) AS w(conversation_id, revision)"
            " JOIN archive_revision_message rm ON rm.conversation_id = w.conversation_id AND rm.revision = w.revision"
            " JOIN archive_message m ON m.id = rm.message_id"
            " LEFT JOIN archive_message_index s ON s.message_id = m.id"
            " WHERE rm.vault_id = $1 AND m.text <> '' GROUP BY 1, 2",
            vault.id,
            [c for c, _ in revisions],
            [r for _, r in revisions],
        )
        return {(r["conversation_id"], r["revision"]): (r["pending"], r["failed"]) for r in rows}

    async def _head(self, conn: asyncpg.Connection, vault: VaultAccess, conversation_id: str, base: int) -> int:
        head = await conn.fetchval(
            "SELECT head_revision FROM archive_conversation WHERE id = $1 AND vault_id = $2 FOR UPDATE",
            conversation_id,
            vault.id,
        )
        if head is None:
            raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
        if head != base:
            raise Conflict(
                f"base_revision {base} is stale: the head of {conversation_id} is revision {head}. Nothing was "
                "written; read the conversation again and retry on the head",
                field="base_revision",
            )
        return int(head)

    async def _batch_replay(
        self, conn: asyncpg.Connection, vault: VaultAccess, key: str, request: str
    ) -> list[Receipt] | None:
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 13))", vault.id, key)
        row = await conn.fetchrow(
            "SELECT request_hash, receipt FROM archive_idempotency WHERE vault_id = $1 AND key = $2", vault.id, key
        )
        if row is None:
            return None
        if row["request_hash"] != request:
            raise Conflict(
                f"idempotency_key {key!r} was already used for a different write; use a new key for new content",
                field="idempotency_key",
            )
        stored = json.loads(row["receipt"])
        return [Receipt(**r, replayed=True) for r in stored.get("receipts", [stored])]

    async def _batch_remember(
        self, conn: asyncpg.Connection, vault: VaultAccess, key: str, request: str, receipts: list[Receipt]
    ) -> None:
        await conn.execute(
            "INSERT INTO archive_idempotency (vault_id, key, request_hash, receipt) VALUES ($1, $2, $3, $4::jsonb)",
            vault.id,
            key,
            request,
            json.dumps({"receipts": [r.as_json() for r in receipts]}),
        )

    async def _commit(
        self,
        conn: asyncpg.Connection,
        vault: VaultAccess,
        actor: str,
        conversation_id: str,
        head: int,
        kind: str,
        entries: Sequence[Entry],
    ) -> Receipt:
        number = 1 + int(
            await conn.fetchval(
                "SELECT max(number) FROM archive_revision WHERE conversation_id = $1 AND vault_id = $2",
                conversation_id,
                vault.id,
            )
        )
        new = [e for e in entries if isinstance(e, MessageInput)]
        fresh = iter(await self._store._message_ids(conn, vault, conversation_id, new))
        ids = [e.message_id if isinstance(e, Kept) else next(fresh) for e in entries]
        content_sha256 = revision_hash([(e.node_id, e.parent_node_id, e.content_hash, e.active) for e in entries])
        await conn.execute(
            "INSERT INTO archive_revision (vault_id, conversation_id, number, parent, kind, message_count,"
            " content_sha256, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            vault.id,
            conversation_id,
            number,
            head,
            kind,
            len(entries),
            content_sha256,
            actor,
        )
        await conn.execute(
            "INSERT INTO archive_revision_message (vault_id, conversation_id, revision, position, message_id, active)"
            " SELECT $1, $2, $3, p - 1, m, a FROM unnest($4::uuid[], $5::bool[]) WITH ORDINALITY AS t (m, a, p)",
            vault.id,
            conversation_id,
            number,
            ids,
            [e.active for e in entries],
        )
        await conn.execute(
            "UPDATE archive_conversation SET head_revision = $3, updated_at = now() WHERE id = $1 AND vault_id = $2",
            conversation_id,
            vault.id,
            number,
        )
        await append_audit(
            conn,
            vault.id,
            actor,
            f"archive.{kind}",
            conversation_id,
            {"revision": number, "messages": len(entries), "new_messages": len(new)},
        )
        return Receipt(conversation_id, number, content_sha256, len(entries))

    async def rewrite(
        self,
        vault: VaultAccess,
        actor: str,
        conversation_id: str,
        base_revision: int,
        kind: str,
        plan: Plan,
        idempotency: tuple[str, str] | None,
        *,
        keys: Sequence[str] = (),
        nodes: Sequence[str] = (),
    ) -> tuple[Receipt, list[int]]:
        """A new revision built from the head's rows by `plan` (keyed upserts, in-place edits), in one
        transaction; when the plan changes nothing, the head's receipt and no revision. Rows carry
        their text and metadata only when their key is in `keys` or their node in `nodes`."""
        async with self._pool.acquire() as conn, conn.transaction():
            if idempotency is not None:
                replay = await self._batch_replay(conn, vault, *idempotency)
                if replay is not None:
                    return replay[0], []
            head = await self._head(conn, vault, conversation_id, base_revision)
            # Text and metadata only of the messages the write names; the others are carried by id.
            rows = await conn.fetch(
                "SELECT rm.position, rm.active, m.id::text AS id, m.node_id, m.parent_node_id, m.role,"
                " m.content_type, m.content_hash, m.message_key, m.created_at,"
                " CASE WHEN m.message_key = ANY($4::text[]) OR m.node_id = ANY($5::text[]) THEN m.text END AS text,"
                " CASE WHEN m.message_key = ANY($4::text[]) OR m.node_id = ANY($5::text[]) THEN m.metadata::text"
                " END AS metadata FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
                " WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3 ORDER BY rm.position",
                conversation_id,
                vault.id,
                head,
                list(keys),
                list(nodes),
            )
            entries, changes, positions = plan(rows)
            if entries is None:
                current = await conn.fetchrow(
                    "SELECT message_count, content_sha256 FROM archive_revision"
                    " WHERE conversation_id = $1 AND vault_id = $2 AND number = $3",
                    conversation_id,
                    vault.id,
                    head,
                )
                receipt = Receipt(
                    conversation_id, head, current["content_sha256"], current["message_count"], changes=changes
                )
            else:
                written = await self._commit(conn, vault, actor, conversation_id, head, kind, entries)
                receipt = Receipt(
                    written.conversation_id,
                    written.revision,
                    written.content_sha256,
                    written.message_count,
                    changes=changes,
                )
            if idempotency is not None:
                await self._batch_remember(conn, vault, *idempotency, [receipt])
            return receipt, positions

    async def commit(
        self, vault: VaultAccess, actor: str, writes: Sequence[BatchWrite], idempotency: tuple[str, str] | None
    ) -> list[Receipt]:
        """Several conversations' appends and replaces in one transaction: a stale base revision on any
        of them refuses them all. Conversations are locked in id order, so two batches never deadlock."""
        async with self._pool.acquire() as conn, conn.transaction():
            if idempotency is not None:
                replay = await self._batch_replay(conn, vault, *idempotency)
                if replay is not None:
                    return replay
            for write in sorted(writes, key=lambda w: w.conversation_id):
                await self._head(conn, vault, write.conversation_id, write.base_revision)
            receipts = [
                await self._store.write_in(
                    conn,
                    vault,
                    actor,
                    kind=write.kind,
                    conversation_id=write.conversation_id,
                    base_revision=write.base_revision,
                    messages=write.messages,
                )
                for write in writes
            ]
            if idempotency is not None:
                await self._batch_remember(conn, vault, *idempotency, receipts)
            return receipts

    async def copy(
        self,
        source: VaultAccess,
        target: VaultAccess,
        actor: str,
        conversation_ids: Sequence[str],
        idempotency: tuple[str, str] | None,
    ) -> list[Receipt]:
        """Each conversation's head revision, copied whole into `target` as revision 1 of a new
        conversation (same nodes, content, metadata, keys and times, so the same content hash), with
        `derived_from` naming the source revision. One transaction for all of them."""
        async with self._pool.acquire() as conn, conn.transaction():
            if idempotency is not None:
                replay = await self._batch_replay(conn, target, *idempotency)
                if replay is not None:
                    return replay
            receipts: list[Receipt] = []
            for conversation_id in conversation_ids:
                original = await conn.fetchrow(
                    "SELECT c.title, c.tags, c.source, c.source_created_at, c.source_updated_at, c.head_revision,"
                    " r.content_sha256, r.message_count FROM archive_conversation c JOIN archive_revision r"
                    " ON r.conversation_id = c.id AND r.number = c.head_revision WHERE c.id = $1 AND c.vault_id = $2",
                    conversation_id,
                    source.id,
                )
                if original is None:
                    raise NotFound(
                        f"no conversation {conversation_id} in vault '{source.name}'; nothing was copied",
                        field="conversation_ids",
                    )
                derived = {
                    "vault": source.name,
                    "conversation_id": conversation_id,
                    "revision": original["head_revision"],
                }
                copy_id = str(
                    await conn.fetchval(
                        "INSERT INTO archive_conversation (vault_id, title, source, head_revision, tags, created_by,"
                        " source_created_at, source_updated_at, derived_from)"
                        " VALUES ($1, $2, $3, 1, $4, $5, $6, $7, $8::jsonb) RETURNING id",
                        target.id,
                        original["title"],
                        original["source"],
                        original["tags"],
                        actor,
                        original["source_created_at"],
                        original["source_updated_at"],
                        json.dumps({**derived, "vault_id": source.id}),
                    )
                )
                held = await conn.fetch(
                    "SELECT message_id::text AS id, active FROM archive_revision_message"
                    " WHERE conversation_id = $1 AND vault_id = $2 AND revision = $3 ORDER BY position",
                    conversation_id,
                    source.id,
                    original["head_revision"],
                )
                old_ids = [r["id"] for r in held]
                new_ids = [str(uuid.uuid4()) for _ in held]
                await conn.execute(
                    "INSERT INTO archive_message (id, vault_id, conversation_id, node_id, parent_node_id, role,"
                    " content_type, text, content, metadata, created_at, content_hash, message_key, context)"
                    " SELECT n.new_id, $1, $2, m.node_id, m.parent_node_id, m.role, m.content_type, m.text,"
                    # The context comes along: the join need not insert a parent before its children.
                    " m.content, m.metadata, m.created_at, m.content_hash, m.message_key, m.context"
                    " FROM unnest($3::uuid[], $4::uuid[]) AS n (old_id, new_id)"
                    " JOIN archive_message m ON m.id = n.old_id AND m.vault_id = $5",
                    target.id,
                    copy_id,
                    old_ids,
                    new_ids,
                    source.id,
                )
                await conn.execute(
                    "INSERT INTO archive_revision (vault_id, conversation_id, number, parent, kind, message_count,"
                    " content_sha256, created_by) VALUES ($1, $2, 1, NULL, 'copy', $3, $4, $5)",
                    target.id,
                    copy_id,
                    original["message_count"],
                    original["content_sha256"],
                    actor,
                )
                await conn.execute(
                    "INSERT INTO archive_revision_message (vault_id, conversation_id, revision, position,"
                    " message_id, active) SELECT $1, $2, 1, p - 1, m, a"
                    " FROM unnest($3::uuid[], $4::bool[]) WITH ORDINALITY AS t (m, a, p)",
                    target.id,
                    copy_id,
                    new_ids,
                    [r["active"] for r in held],
                )
                await append_audit(conn, target.id, actor, "archive.copy", copy_id, {**derived, "messages": len(held)})
                receipts.append(
                    Receipt(copy_id, 1, original["content_sha256"], original["message_count"], derived_from=derived)
                )
            if idempotency is not None:
                await self._batch_remember(conn, target, *idempotency, receipts)
            return receipts

    async def empty_step(self, vault: VaultAccess, actor: str, conversations: int, imports: int) -> dict[str, Any]:
        """One bounded step of emptying a vault's archive, in its own transaction: up to `conversations`
        conversations, then (once none is left) up to `imports` uploads with their bytes, then the
        idempotency keys. Call again until `done`; a step interrupted leaves nothing half-deleted."""
        async with self._pool.acquire() as conn, conn.transaction():
            gone_conversations = len(
                await conn.fetch(
                    "WITH doomed AS (SELECT id FROM archive_conversation WHERE vault_id = $1 ORDER BY id LIMIT $2"
                    " FOR UPDATE) DELETE FROM archive_conversation c USING doomed WHERE c.id = doomed.id"
                    " AND c.vault_id = $1 RETURNING 1",
                    vault.id,
                    conversations,
                )
            )
            gone_imports = 0
            left = await conn.fetchval("SELECT count(*) FROM archive_conversation WHERE vault_id = $1", vault.id)
            if not left:
                gone_imports = len(
                    await conn.fetch(
                        "WITH doomed AS (SELECT id FROM archive_import WHERE vault_id = $1 ORDER BY id LIMIT $2"
                        " FOR UPDATE) DELETE FROM archive_import i USING doomed WHERE i.id = doomed.id"
                        " AND i.vault_id = $1 RETURNING 1",
                        vault.id,
                        imports,
                    )
                )
            imports_left = await conn.fetchval("SELECT count(*) FROM archive_import WHERE vault_id = $1", vault.id)
            done = not left and not imports_left
            if done:
                await conn.execute("DELETE FROM archive_idempotency WHERE vault_id = $1", vault.id)
            await append_audit(
                conn,
                vault.id,
                actor,
                "archive.empty",
                vault.name,
                {"conversations": gone_conversations, "imports": gone_imports, "done": done},
            )
            return {
                "deleted_conversations": gone_conversations,
                "deleted_imports": gone_imports,
                "remaining_conversations": int(left),
                "remaining_imports": int(imports_left),
                "done": done,
            }

    async def readback(
        self, vault: VaultAccess, conversation_id: str, revision: int, positions: Sequence[int]
    ) -> list[tuple[int, int]]:
        """(position, text bytes) of these positions of a committed revision, in order."""
        rows = await self._pool.fetch(
            "SELECT rm.position, octet_length(m.text) AS size FROM archive_revision_message rm"
            " JOIN archive_message m ON m.id = rm.message_id WHERE rm.conversation_id = $1 AND rm.vault_id = $2"
            " AND rm.revision = $3 AND rm.position = ANY($4::int[]) ORDER BY rm.position",
            conversation_id,
            vault.id,
            revision,
            list(positions),
        )
        return [(r["position"], r["size"]) for r in rows]

    async def timeline(
        self, vault: VaultAccess, conversation_id: str, revision: int, tail: int
    ) -> list[tuple[int, str, int]]:
        """(position, message id, text bytes) of a revision's active timeline, or of its last `tail`
        messages, in order; no text is loaded (a context pack sizes before it reads)."""
        rows = await self._pool.fetch(
            # The tail is picked on the revision's own index before any message row is touched.
            "SELECT t.position, t.message_id::text AS id, octet_length(m.text) AS size FROM (SELECT position,"
            " message_id FROM archive_revision_message WHERE conversation_id = $1 AND vault_id = $2"
            " AND revision = $3 AND active ORDER BY position DESC LIMIT $4) AS t"
            " JOIN archive_message m ON m.id = t.message_id AND m.vault_id = $2 ORDER BY t.position",
            conversation_id,
            vault.id,
            revision,
            tail if tail > 0 else None,
        )
        return [(r["position"], r["id"], r["size"]) for r in rows]

    async def messages_at(
        self, vault: VaultAccess, conversation_id: str, revision: int, positions: Sequence[int]
    ) -> list[MessageRecord]:
        rows = await self._pool.fetch(
            _ROWS + " AND rm.position = ANY($4::int[]) ORDER BY rm.position",
            conversation_id,
            vault.id,
            revision,
            list(positions),
        )
        return [message_record(r) for r in rows]


def message_record(row: asyncpg.Record) -> MessageRecord:
    return MessageRecord(
        row["id"],
        row["node_id"],
        row["parent_node_id"],
        row["role"],
        row["content_type"],
        row["text"],
        row["content"],
        row["created_at"],
        row["active"],
        row["position"],
        row["message_key"],
    )
