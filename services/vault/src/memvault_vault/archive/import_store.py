"""The SQL of importing an export: the upload in parts, kept byte for byte, and the import job run in
checkpoints, each conversation written as a revision (revision_store.py). Part of `ArchiveStore`
(store.py). Every query is filtered by the vault id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import asyncpg

from memvault_core.errors import Conflict, InvalidArgument, LimitExceeded, MemvaultError, NotFound
from memvault_vault.archive import chatgpt, claude
from memvault_vault.archive.chatgpt import ExportError, ParsedConversation, conversation_ref
from memvault_vault.archive.records import ImportRecord
from memvault_vault.archive.retry_store import first_retry, retry_checkpoint, stored_sha256
from memvault_vault.archive.revision_store import ArchiveRevisionStore
from memvault_vault.audit.store import append_audit
from memvault_vault.database import ARCHIVE_TABLES, VaultAccess
from memvault_vault.domain.archive import revision_hash


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


class ArchiveImportStore(ArchiveRevisionStore):
    """Uploads and import jobs, over the revision writes they import through."""

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
        processed = await self._checkpoint(import_id, vault, source, size)
        if processed:
            self._statistics.wrote(*ARCHIVE_TABLES)
        return processed

    async def _checkpoint(self, import_id: str, vault: VaultAccess, source: Conversations, size: int) -> bool:
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
