"""The SQL of a conversation's revisions: creating a conversation and writing its next revision
(append, replace, import) with its idempotency key, moving the head back to an earlier revision,
tags, and deleting a conversation. Part of `ArchiveStore` (store.py). Revisions are written once and
never changed; the head is the only thing that moves. Every query is filtered by the vault id."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from memvault_core.errors import Conflict, NotFound
from memvault_vault.archive.records import Receipt
from memvault_vault.audit.store import append_audit
from memvault_vault.database import ARCHIVE_TABLES, Database, VaultAccess
from memvault_vault.domain.archive import MessageInput, revision_hash
from memvault_vault.outbox.events import conversation_deleted, message_archived
from memvault_vault.outbox.store import enqueue


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


class ArchiveRevisionStore:
    """Writing revisions; `ArchiveStore` is this with the imports (import_store.py) and the reads."""

    def __init__(self, database: Database) -> None:
        self._pool = database.pool
        self._statistics = database.statistics

    async def write(
        self,
        vault: VaultAccess,
        actor: str,
        *,
        kind: str,
        conversation_id: str | None,
        base_revision: int,
        messages: Sequence[MessageInput],
        title: str | None = None,
        tags: Sequence[str] = (),
        idempotency: tuple[str, str] | None = None,
    ) -> Receipt:
        """Create a conversation or write its next revision, in one transaction."""
        async with self._pool.acquire() as conn, conn.transaction():
            if idempotency is not None:
                replay = await self._replay(conn, vault, *idempotency)
                if replay is not None:
                    return replay
            receipt = await self.write_in(
                conn,
                vault,
                actor,
                kind=kind,
                conversation_id=conversation_id,
                base_revision=base_revision,
                messages=messages,
                title=title,
                tags=tags,
            )
            if idempotency is not None:
                await self._remember(conn, vault, *idempotency, receipt)
        self._statistics.wrote(*ARCHIVE_TABLES)  # a transcript can be thousands of messages
        return receipt

    async def _replay(self, conn: asyncpg.Connection, vault: VaultAccess, key: str, request: str) -> Receipt | None:
        # Two writes with one key wait for each other, so the second sees the first's receipt.
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
        return Receipt(**json.loads(row["receipt"]), replayed=True)

    async def _remember(
        self, conn: asyncpg.Connection, vault: VaultAccess, key: str, request: str, receipt: Receipt
    ) -> None:
        await conn.execute(
            "INSERT INTO archive_idempotency (vault_id, key, request_hash, receipt) VALUES ($1, $2, $3, $4::jsonb)",
            vault.id,
            key,
            request,
            json.dumps(receipt.as_json()),
        )

    async def write_in(
        self,
        conn: asyncpg.Connection,
        vault: VaultAccess,
        actor: str,
        *,
        kind: str,
        conversation_id: str | None,
        base_revision: int,
        messages: Sequence[MessageInput],
        title: str | None = None,
        tags: Sequence[str] = (),
        source: str = "api",
        external_id: str | None = None,
        source_times: tuple[datetime | None, datetime | None] = (None, None),
    ) -> Receipt:
        """The write on a connection inside the caller's transaction (imports run many in one checkpoint)."""
        carried: list[asyncpg.Record] = []
        if conversation_id is None:
            conversation_id = str(
                await conn.fetchval(
                    "INSERT INTO archive_conversation (vault_id, title, source, external_id, head_revision, tags,"
                    " created_by, source_created_at, source_updated_at)"
                    " VALUES ($1, $2, $3, $4, 1, $5, $6, $7, $8) RETURNING id",
                    vault.id,
                    title,
                    source,
                    external_id,
                    list(tags),
                    actor,
                    *source_times,
                )
            )
            number, parent = 1, None
        else:
            head = await conn.fetchval(
                "SELECT head_revision FROM archive_conversation WHERE id = $1 AND vault_id = $2 FOR UPDATE",
                conversation_id,
                vault.id,
            )
            if head is None:
                raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
            if base_revision and head != base_revision:
                raise Conflict(
                    f"base_revision {base_revision} is stale: the head is revision {head}. Nothing was written; "
                    "read the conversation again and retry on the head",
                    field="base_revision",
                )
            number = (
                int(
                    await conn.fetchval(
                        "SELECT max(number) FROM archive_revision WHERE conversation_id = $1 AND vault_id = $2",
                        conversation_id,
                        vault.id,
                    )
                )
                + 1
            )
            parent = head
            if kind == "append":
                carried = await conn.fetch(
                    "SELECT rm.message_id, rm.active, m.node_id, m.parent_node_id, m.content_hash"
                    " FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
                    " WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3 ORDER BY rm.position",
                    conversation_id,
                    vault.id,
                    head,
                )
        if kind == "append":
            last_active = next((r["node_id"] for r in reversed(carried) if r["active"]), None)
            used = {r["node_id"] for r in carried}
            chained: list[MessageInput] = []
            for message in messages:
                node_id = message.node_id
                while node_id in used:
                    node_id = uuid.uuid4().hex
                used.add(node_id)
                chained.append(
                    MessageInput(
                        node_id=node_id,
                        parent_node_id=last_active,
                        role=message.role,
                        content_type=message.content_type,
                        text=message.text,
                        content=message.content,
                        metadata=message.metadata,
                        created_at=message.created_at,
                    )
                )
                last_active = node_id
            messages = chained
        ids = await self._message_ids(conn, vault, conversation_id, messages)
        rows = [(r["node_id"], r["parent_node_id"], r["content_hash"], r["active"]) for r in carried]
        rows += [(m.node_id, m.parent_node_id, m.content_hash, m.active) for m in messages]
        content_sha256 = revision_hash(rows)
        await conn.execute(
            "INSERT INTO archive_revision (vault_id, conversation_id, number, parent, kind, message_count,"
            " content_sha256, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            vault.id,
            conversation_id,
            number,
            parent,
            kind,
            len(rows),
            content_sha256,
            actor,
        )
        await conn.execute(
            "INSERT INTO archive_revision_message (vault_id, conversation_id, revision, position, message_id, active)"
            " SELECT $1, $2, $3, p - 1, m, a FROM unnest($4::uuid[], $5::bool[]) WITH ORDINALITY AS t (m, a, p)",
            vault.id,
            conversation_id,
            number,
            [r["message_id"] for r in carried] + ids,
            [r["active"] for r in carried] + [m.active for m in messages],
        )
        await conn.execute(
            "UPDATE archive_conversation SET head_revision = $3, updated_at = now(),"
            " title = CASE WHEN $4 THEN $5 ELSE title END,"
            " source_updated_at = coalesce($6, source_updated_at) WHERE id = $1 AND vault_id = $2",
            conversation_id,
            vault.id,
            number,
            kind == "import",
            title,
            source_times[1],
        )
        await append_audit(
            conn,
            vault.id,
            actor,
            f"archive.{kind}",
            conversation_id,
            {"revision": number, "messages": len(rows), "new_messages": len(messages)},
        )
        await self.announce_new_messages(conn, vault, conversation_id, number)
        return Receipt(conversation_id, number, content_sha256, len(rows))

    @staticmethod
    async def announce_new_messages(
        conn: asyncpg.Connection, vault: VaultAccess, conversation_id: str, revision: int
    ) -> int:
        """Send the indexer, through the outbox in this transaction, every message `revision` lists that
        no other revision does (messages never change, so one written before is indexed already)."""
        rows = await conn.fetch(
            "SELECT m.id::text AS id, m.content_hash FROM archive_revision_message rm"
            " JOIN archive_message m ON m.id = rm.message_id"
            " WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3 AND NOT EXISTS"
            " (SELECT 1 FROM archive_revision_message o WHERE o.message_id = rm.message_id AND o.revision <> $3)"
            " AND m.text <> '' ORDER BY rm.position",
            conversation_id,
            vault.id,
            revision,
        )
        if rows:
            await enqueue(
                conn,
                [message_archived(r["id"], vault.id, conversation_id, revision, r["content_hash"]) for r in rows],
            )
        return len(rows)

    async def _message_ids(
        self, conn: asyncpg.Connection, vault: VaultAccess, conversation_id: str, messages: Sequence[MessageInput]
    ) -> list[str]:
        """Ids of these messages, reusing rows the conversation already holds with the same node and content."""
        existing = {
            (r["node_id"], r["content_hash"]): str(r["id"])
            for r in await conn.fetch(
                "SELECT id, node_id, content_hash FROM archive_message"
                " WHERE conversation_id = $1 AND vault_id = $2 AND node_id = ANY($3::text[])",
                conversation_id,
                vault.id,
                [m.node_id for m in messages],
            )
        }
        ids: list[str] = []
        new: list[tuple[str, MessageInput]] = []
        for message in messages:
            key = (message.node_id, message.content_hash)
            if key not in existing:
                existing[key] = str(uuid.uuid4())
                new.append((existing[key], message))
            ids.append(existing[key])
        if new:
            await conn.execute(
                "INSERT INTO archive_message (id, vault_id, conversation_id, node_id, parent_node_id, role,"
                " content_type, text, content, metadata, created_at, content_hash, message_key)"
                " SELECT i, $1, $2, n, p, r, t, x, c::jsonb, d::jsonb, a, h, k FROM unnest($3::uuid[], $4::text[],"
                " $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::timestamptz[],"
                " $12::text[], $13::text[]) AS u (i, n, p, r, t, x, c, d, a, h, k)",
                vault.id,
                conversation_id,
                [i for i, _ in new],
                [m.node_id for _, m in new],
                [m.parent_node_id for _, m in new],
                [m.role for _, m in new],
                [m.content_type for _, m in new],
                [m.text.replace("\x00", "") for _, m in new],
                [_json(m.content) for _, m in new],
                [_json(m.metadata) for _, m in new],
                [m.created_at for _, m in new],
                [m.content_hash for _, m in new],
                [m.key for _, m in new],
            )
        return ids

    async def restore(
        self,
        vault: VaultAccess,
        actor: str,
        conversation_id: str,
        revision: int,
        base_revision: int,
        idempotency: tuple[str, str] | None,
    ) -> Receipt:
        async with self._pool.acquire() as conn, conn.transaction():
            if idempotency is not None:
                replay = await self._replay(conn, vault, *idempotency)
                if replay is not None:
                    return replay
            head = await conn.fetchval(
                "SELECT head_revision FROM archive_conversation WHERE id = $1 AND vault_id = $2 FOR UPDATE",
                conversation_id,
                vault.id,
            )
            if head is None:
                raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
            if head != base_revision:
                raise Conflict(
                    f"base_revision {base_revision} is stale: the head is revision {head}. Nothing was changed",
                    field="base_revision",
                )
            target = await conn.fetchrow(
                "SELECT message_count, content_sha256 FROM archive_revision"
                " WHERE conversation_id = $1 AND vault_id = $2 AND number = $3",
                conversation_id,
                vault.id,
                revision,
            )
            if target is None:
                raise NotFound(f"conversation {conversation_id} has no revision {revision}", field="revision")
            await conn.execute(
                "UPDATE archive_conversation SET head_revision = $3, updated_at = now() WHERE id = $1 AND vault_id = $2",
                conversation_id,
                vault.id,
                revision,
            )
            await append_audit(
                conn, vault.id, actor, "archive.restore", conversation_id, {"from": head, "to": revision}
            )
            receipt = Receipt(conversation_id, revision, target["content_sha256"], target["message_count"])
            if idempotency is not None:
                await self._remember(conn, vault, *idempotency, receipt)
            return receipt

    async def set_tags(
        self, vault: VaultAccess, actor: str, conversation_id: str, tags: list[str], expected_version: int
    ) -> tuple[list[str], int]:
        async with self._pool.acquire() as conn, conn.transaction():
            current = await conn.fetchval(
                "SELECT tags_version FROM archive_conversation WHERE id = $1 AND vault_id = $2 FOR UPDATE",
                conversation_id,
                vault.id,
            )
            if current is None:
                raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
            if current != expected_version:
                raise Conflict(
                    f"the tags are at version {current}, not {expected_version}: they changed since you read them."
                    " Read them again and reapply your change",
                    field="expected_tags_version",
                )
            await conn.execute(
                "UPDATE archive_conversation SET tags = $3, tags_version = tags_version + 1, updated_at = now()"
                " WHERE id = $1 AND vault_id = $2",
                conversation_id,
                vault.id,
                tags,
            )
            await append_audit(conn, vault.id, actor, "archive.tags", conversation_id, {"tags": len(tags)})
            return tags, current + 1

    async def delete(self, vault: VaultAccess, actor: str, conversation_id: str) -> tuple[int, int]:
        async with self._pool.acquire() as conn, conn.transaction():
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM archive_revision WHERE conversation_id = $1 AND vault_id = $2) AS r,"
                " (SELECT count(*) FROM archive_message WHERE conversation_id = $1 AND vault_id = $2) AS m",
                conversation_id,
                vault.id,
            )
            deleted = await conn.fetchval(
                "DELETE FROM archive_conversation WHERE id = $1 AND vault_id = $2 RETURNING id",
                conversation_id,
                vault.id,
            )
            if deleted is None:
                raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
            await enqueue(conn, [conversation_deleted(conversation_id, vault.id)])
            await append_audit(
                conn,
                vault.id,
                actor,
                "archive.delete",
                conversation_id,
                {"revisions": counts["r"], "messages": counts["m"]},
            )
            return int(counts["r"]), int(counts["m"])
