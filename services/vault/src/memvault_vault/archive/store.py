"""The archive's SQL. Revisions are written once and never changed; the head is the only thing that
moves. Every query is filtered by the vault id."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from memvault_core.errors import Conflict, InvalidArgument, LimitExceeded, MemvaultError, NotFound
from memvault_vault.archive import chatgpt, claude
from memvault_vault.archive.chatgpt import ExportError, ParsedConversation, conversation_ref
from memvault_vault.archive.records import (
    ConversationRecord,
    ImportRecord,
    MessageRecord,
    Receipt,
    RevisionRecord,
)
from memvault_vault.archive.retry_store import first_retry, retry_checkpoint, stored_sha256
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.archive import MessageInput, revision_hash
from memvault_vault.outbox.events import conversation_deleted, message_archived
from memvault_vault.outbox.store import enqueue

_SUMMARY = """
    SELECT c.id::text AS id, c.title, c.tags, c.tags_version, c.head_revision, c.source,
           coalesce(c.external_id, '') AS external_id, c.created_at, c.updated_at,
           r.message_count, r.content_sha256, c.derived_from::text AS derived_from
    FROM archive_conversation c
    JOIN archive_revision r ON r.conversation_id = c.id AND r.number = c.head_revision
"""


def _summary(row: asyncpg.Record) -> ConversationRecord:
    return ConversationRecord(
        id=row["id"],
        title=row["title"],
        tags=list(row["tags"]),
        tags_version=row["tags_version"],
        head_revision=row["head_revision"],
        message_count=row["message_count"],
        content_sha256=row["content_sha256"],
        source=row["source"],
        external_id=row["external_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        derived_from=json.loads(row["derived_from"]) if row["derived_from"] else None,
    )


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _import(row: asyncpg.Record, failures: list[tuple[str, str]] | None = None, retrying: int = 0) -> ImportRecord:
    return ImportRecord(
        id=str(row["id"]),
        state=row["state"],
        filename=row["filename"],
        size=row["size"],
        sha256=row["sha256"],
        total=row["total"],
        next_index=row["next_index"],
        imported=row["imported"],
        updated=row["updated"],
        duplicates=row["duplicates"],
        failed=row["failed"],
        parts=row["parts"],
        received=row["received"],
        duplicate_of=str(row["duplicate_of"]) if row["duplicate_of"] else None,
        error=row["error"],
        failures=failures or [],
        format=row["format"],
        created_at=row["created_at"],
        retrying=retrying,
    )


PARSERS: dict[str, Callable[[Any, int], ParsedConversation]] = {
    "chatgpt": chatgpt.parse_conversation,
    "claude": claude.parse_conversation,
}
"""The reader of each import format; a conversation's `source` is its format."""


class Conversations(Protocol):
    """An upload's conversations, read as a stream (archive/stream.py)."""

    async def count(self) -> int: ...

    async def take(self, start: int, count: int) -> list[tuple[int, Any]]: ...


class ArchiveStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    # --- writes ------------------------------------------------------------------------------------

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

    # --- reads -------------------------------------------------------------------------------------

    async def conversation(self, vault: VaultAccess, conversation_id: str) -> ConversationRecord:
        row = await self._pool.fetchrow(_SUMMARY + " WHERE c.id = $1 AND c.vault_id = $2", conversation_id, vault.id)
        if row is None:
            raise NotFound(f"no conversation {conversation_id} in vault '{vault.name}'", field="conversation_id")
        return _summary(row)

    async def conversations(
        self, vault: VaultAccess, tags_all: list[str], tags_any: list[str], limit: int, offset: int
    ) -> list[ConversationRecord]:
        rows = await self._pool.fetch(
            _SUMMARY + " WHERE c.vault_id = $1 AND c.tags @> $2::text[]"
            " AND (cardinality($3::text[]) = 0 OR c.tags && $3::text[])"
            " ORDER BY c.updated_at DESC, c.id DESC LIMIT $4 OFFSET $5",
            vault.id,
            tags_all,
            tags_any,
            limit,
            offset,
        )
        return [_summary(r) for r in rows]

    async def revisions(
        self, vault: VaultAccess, conversation_id: str, limit: int, before: int
    ) -> list[RevisionRecord]:
        head = (await self.conversation(vault, conversation_id)).head_revision
        rows = await self._pool.fetch(
            "SELECT number, parent, kind, message_count, content_sha256, created_at, created_by FROM archive_revision"
            " WHERE conversation_id = $1 AND vault_id = $2 AND ($3 = 0 OR number < $3) ORDER BY number DESC LIMIT $4",
            conversation_id,
            vault.id,
            before,
            limit,
        )
        return [
            RevisionRecord(
                r["number"],
                r["parent"],
                r["kind"],
                r["message_count"],
                r["content_sha256"],
                r["created_at"],
                r["created_by"],
                r["number"] == head,
            )
            for r in rows
        ]

    async def has_revision(self, vault: VaultAccess, conversation_id: str, revision: int) -> bool:
        return bool(
            await self._pool.fetchval(
                "SELECT 1 FROM archive_revision WHERE conversation_id = $1 AND vault_id = $2 AND number = $3",
                conversation_id,
                vault.id,
                revision,
            )
        )

    async def messages(
        self, vault: VaultAccess, conversation_id: str, revision: int, *, active_only: bool, after: int, limit: int
    ) -> list[MessageRecord]:
        rows = await self._pool.fetch(
            "SELECT m.id::text AS id, m.node_id, m.parent_node_id, m.role, m.content_type, m.text, m.content::text"
            " AS content, m.created_at, rm.active, rm.position, m.message_key"
            " FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
            " WHERE rm.conversation_id = $1 AND rm.vault_id = $2 AND rm.revision = $3 AND rm.position > $4"
            " AND (NOT $5 OR rm.active) ORDER BY rm.position LIMIT $6",
            conversation_id,
            vault.id,
            revision,
            after,
            active_only,
            limit,
        )
        return [
            MessageRecord(
                r["id"],
                r["node_id"],
                r["parent_node_id"],
                r["role"],
                r["content_type"],
                r["text"],
                r["content"],
                r["created_at"],
                r["active"],
                r["position"],
                r["message_key"],
            )
            for r in rows
        ]

    # --- imports -----------------------------------------------------------------------------------

    async def start_import(
        self, vault: VaultAccess, actor: str, fmt: str, filename: str, size: int, sha256: str
    ) -> ImportRecord:
        row = await self._pool.fetchrow(
            "INSERT INTO archive_import (vault_id, format, filename, size, sha256, state, created_by)"
            " VALUES ($1, $2, $3, $4, $5, 'uploading', $6) RETURNING *",
            vault.id,
            fmt,
            filename,
            size,
            sha256,
            actor,
        )
        return _import(row)

    async def upload_part(self, vault: VaultAccess, import_id: str, part: int, data: bytes) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT state, parts, received, size FROM archive_import WHERE id = $1 AND vault_id = $2 FOR UPDATE",
                import_id,
                vault.id,
            )
            if row is None:
                raise NotFound(f"no import {import_id} in vault '{vault.name}'", field="import_id")
            if row["state"] != "uploading":
                raise Conflict(f"import {import_id} is {row['state']}, not uploading", field="import_id")
            if part < row["parts"]:
                stored = await conn.fetchval(
                    "SELECT data FROM archive_import_chunk WHERE import_id = $1 AND vault_id = $2 AND part = $3",
                    import_id,
                    vault.id,
                    part,
                )
                if bytes(stored) != data:
                    raise Conflict(f"part {part} was already uploaded with different bytes", field="part")
                return int(row["received"])
            if part != row["parts"]:
                raise InvalidArgument(f"parts go in order: the next one is {row['parts']}, not {part}", field="part")
            received = row["received"] + len(data)
            if received > row["size"]:
                raise LimitExceeded(
                    f"the upload is larger than the {row['size']} bytes it was started with", field="data"
                )
            await conn.execute(
                "INSERT INTO archive_import_chunk (import_id, vault_id, part, data) VALUES ($1, $2, $3, $4)",
                import_id,
                vault.id,
                part,
                data,
            )
            await conn.execute(
                "UPDATE archive_import SET parts = parts + 1, received = $3, updated_at = now()"
                " WHERE id = $1 AND vault_id = $2",
                import_id,
                vault.id,
                received,
            )
            return int(received)

    async def raw_bytes(self, vault_id: str, import_id: str) -> bytes:
        """The upload reassembled from its parts, byte for byte."""
        async with self._pool.acquire() as conn, conn.transaction():
            parts = [
                bytes(r["data"])
                async for r in conn.cursor(
                    "SELECT data FROM archive_import_chunk WHERE import_id = $1 AND vault_id = $2 ORDER BY part",
                    import_id,
                    vault_id,
                )
            ]
        return b"".join(parts)

    async def raw_part(self, vault_id: str, import_id: str, part: int) -> bytes | None:
        """One stored part of an upload, or None past the last."""
        data = await self._pool.fetchval(
            "SELECT data FROM archive_import_chunk WHERE import_id = $1 AND vault_id = $2 AND part = $3",
            import_id,
            vault_id,
            part,
        )
        return None if data is None else bytes(data)

    async def raw_sha256(self, vault_id: str, import_id: str) -> str:
        async with self._pool.acquire() as conn, conn.transaction():
            return await stored_sha256(conn, vault_id, import_id)

    async def finish_import(self, vault: VaultAccess, actor: str, import_id: str) -> ImportRecord:
        record = await self.get_import(vault, import_id)
        if record.state != "uploading":
            return record
        if record.received != record.size:
            raise InvalidArgument(
                f"the upload holds {record.received} of {record.size} bytes; send the remaining parts first",
                field="import_id",
            )
        actual = await self.raw_sha256(vault.id, import_id)
        if actual != record.sha256:
            await self._pool.execute(
                "UPDATE archive_import SET state = 'failed', error = $3, updated_at = now()"
                " WHERE id = $1 AND vault_id = $2",
                import_id,
                vault.id,
                f"sha256 of the received bytes is {actual}, not the {record.sha256} announced",
            )
            raise InvalidArgument(
                f"the received bytes have sha256 {actual}, not {record.sha256}: the upload was damaged;"
                " upload the file again",
                field="sha256",
            )
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1 || '/import', 13))", vault.id)
            earlier = await conn.fetchval(
                "SELECT id FROM archive_import WHERE vault_id = $1 AND sha256 = $2 AND id <> $3"
                " AND state IN ('queued', 'running', 'done') ORDER BY created_at LIMIT 1",
                vault.id,
                actual,
                import_id,
            )
            if earlier is not None:
                # The first upload already keeps these bytes; this one keeps only its record.
                await conn.execute(
                    "DELETE FROM archive_import_chunk WHERE import_id = $1 AND vault_id = $2", import_id, vault.id
                )
                await conn.execute(
                    "UPDATE archive_import SET state = 'duplicate', duplicate_of = $3, updated_at = now()"
                    " WHERE id = $1 AND vault_id = $2",
                    import_id,
                    vault.id,
                    earlier,
                )
            else:
                await conn.execute(
                    "UPDATE archive_import SET state = 'queued', updated_at = now() WHERE id = $1 AND vault_id = $2",
                    import_id,
                    vault.id,
                )
            await append_audit(
                conn,
                vault.id,
                actor,
                "archive.import",
                import_id,
                {"bytes": record.size, "duplicate": earlier is not None},
            )
            await conn.execute("SELECT pg_notify('memvault_archive_import', $1)", import_id)
        return await self.get_import(vault, import_id)

    async def get_import(self, vault: VaultAccess, import_id: str) -> ImportRecord:
        row = await self._pool.fetchrow(
            "SELECT * FROM archive_import WHERE id = $1 AND vault_id = $2", import_id, vault.id
        )
        if row is None:
            raise NotFound(f"no import {import_id} in vault '{vault.name}'", field="import_id")
        failures = await self._pool.fetch(
            "SELECT conversation_ref, error, count(*) FILTER (WHERE retry) OVER () AS retrying"
            " FROM archive_import_failure WHERE import_id = $1 AND vault_id = $2"
            " ORDER BY position NULLS LAST, conversation_ref LIMIT 100",
            import_id,
            vault.id,
        )
        retrying = int(failures[0]["retrying"]) if failures else 0
        return _import(row, [(r["conversation_ref"], r["error"]) for r in failures], retrying)

    async def list_imports(self, vault: VaultAccess, limit: int) -> list[ImportRecord]:
        rows = await self._pool.fetch(
            "SELECT * FROM archive_import WHERE vault_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
            vault.id,
            limit,
        )
        return [_import(row) for row in rows]

    async def next_import(self, only: str | None = None) -> tuple[str, str, str] | None:
        """(import id, vault id, vault name) of the oldest import waiting for work (or of `only`); an import
        into a vault pending deletion waits (read-only: it goes on if the deletion is cancelled)."""
        row = await self._pool.fetchrow(
            "SELECT i.id::text AS id, i.vault_id::text AS vault_id, v.name FROM archive_import i"
            " JOIN vault v ON v.id = i.vault_id WHERE i.state IN ('queued', 'running') AND v.delete_after IS NULL"
            " AND ($1::uuid IS NULL OR i.id = $1) ORDER BY i.created_at LIMIT 1",
            only,
        )
        return None if row is None else (row["id"], row["vault_id"], row["name"])

    async def checkpoint(
        self,
        import_id: str,
        vault: VaultAccess,
        source: Conversations,
        size: int,
    ) -> bool:
        """Process the next `size` conversations of an import in one transaction; False when none waits.

        The counters and the position move in the same transaction as the conversations, so a crash
        repeats at most this checkpoint and never counts a conversation twice."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT * FROM archive_import WHERE id = $1 AND vault_id = $2 AND state IN ('queued', 'running')"
                " FOR UPDATE SKIP LOCKED",
                import_id,
                vault.id,
            )
            if row is None:
                return False
            if row["retry_next"] is not None:
                return await retry_checkpoint(self, conn, row, vault, source, size)
            start = row["next_index"]
            try:
                total = row["total"] or await source.count()
                raws = await source.take(start, size)
            except ExportError as error:
                await conn.execute(
                    "UPDATE archive_import SET state = 'failed', error = $3, updated_at = now()"
                    " WHERE id = $1 AND vault_id = $2",
                    import_id,
                    vault.id,
                    str(error)[:500],
                )
                return True
            counts = {k: row[k] for k in ("imported", "updated", "duplicates", "failed")}
            stop = start + len(raws)
            for index, raw in raws:
                ref = conversation_ref(raw, index)
                try:
                    async with conn.transaction():
                        outcome = await self.import_one(conn, vault, row["created_by"], row["format"], raw, index)
                    counts[outcome] += 1
                except (ValueError, MemvaultError, asyncpg.PostgresError) as error:
                    counts["failed"] += 1
                    await conn.execute(
                        "INSERT INTO archive_import_failure (import_id, vault_id, conversation_ref, error, position)"
                        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                        import_id,
                        vault.id,
                        ref,
                        (str(error) or type(error).__name__)[:500],
                        index,
                    )
            finished = len(raws) < size or stop >= total
            # A retry asked for failed conversations again: once the file is through, a pass takes them.
            retry_from = await first_retry(conn, import_id) if finished else None
            await conn.execute(
                "UPDATE archive_import SET total = $3, next_index = $4, imported = $5, updated = $6,"
                " duplicates = $7, failed = $8, state = $9, retry_next = $10, updated_at = now()"
                " WHERE id = $1 AND vault_id = $2",
                import_id,
                vault.id,
                max(total, stop),
                stop,
                counts["imported"],
                counts["updated"],
                counts["duplicates"],
                counts["failed"],
                "done" if finished and retry_from is None else "running",
                retry_from,
            )
            return True

    async def import_one(
        self, conn: asyncpg.Connection, vault: VaultAccess, actor: str, fmt: str, raw: Any, index: int
    ) -> str:
        parsed = PARSERS[fmt](raw, index)
        existing = await conn.fetchrow(
            "SELECT c.id::text AS id, c.title, r.content_sha256 FROM archive_conversation c"
            " JOIN archive_revision r ON r.conversation_id = c.id AND r.number = c.head_revision"
            " WHERE c.vault_id = $1 AND c.source = $3 AND c.external_id = $2",
            vault.id,
            parsed.external_id,
            fmt,
        )
        content = revision_hash([(m.node_id, m.parent_node_id, m.content_hash, m.active) for m in parsed.messages])
        if existing is not None and existing["content_sha256"] == content:
            if existing["title"] == parsed.title:
                return "duplicates"
            # A renamed conversation: the transcript (and so the revision) is unchanged.
            await conn.execute(
                "UPDATE archive_conversation SET title = $3, updated_at = now() WHERE id = $1 AND vault_id = $2",
                existing["id"],
                vault.id,
                parsed.title,
            )
            return "updated"
        await self.write_in(
            conn,
            vault,
            actor,
            kind="import",
            conversation_id=existing["id"] if existing else None,
            base_revision=0,
            messages=parsed.messages,
            title=parsed.title,
            source=fmt,
            external_id=parsed.external_id,
            source_times=(parsed.created_at, parsed.updated_at),
        )
        return "updated" if existing is not None else "imported"
