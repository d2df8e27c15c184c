"""Retrying the archive's failed jobs (docs/archive.md#retrying-failed-jobs), in SQL.

- An import that failed (its file could not be read past a point, or its job stopped on an error)
  goes back to `queued` and resumes from its checkpoint; conversations before it were committed
  with the checkpoint and are never read again.
- The conversations an import could not read are marked for retry; once the file is through, a
  pass over it (in checkpoints of its own, `retry_next` its position) imports each again in its
  own savepoint: one that now imports leaves the failures and is counted as new, updated or
  unchanged; one that fails again keeps its row with the new reason.
- A message the indexer gave up on loses its failed row (it is pending again) and is sent to the
  indexer through the outbox, as its write did.
Every query is filtered by the vault id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import asyncpg

from memvault_core.errors import Conflict, MemvaultError, NotFound
from memvault_vault.archive.chatgpt import ExportError, conversation_ref
from memvault_vault.archive.records import MessageIndexFailure
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess
from memvault_vault.outbox.events import message_archived
from memvault_vault.outbox.store import enqueue

if TYPE_CHECKING:
    from memvault_vault.archive.import_store import ArchiveImportStore, Conversations

RETRYABLE = "only a failed import, or a done one with failed conversations, can be retried"


async def first_retry(conn: asyncpg.Connection, import_id: str) -> int | None:
    """Where the retry pass over the file starts, or None when no failed conversation is marked."""
    row = await conn.fetchrow(
        "SELECT count(*) AS n, min(position) AS first, bool_or(position IS NULL) AS unplaced"
        " FROM archive_import_failure WHERE import_id = $1 AND retry",
        import_id,
    )
    if not row["n"]:
        return None
    return 0 if row["unplaced"] else int(row["first"])


async def retry_checkpoint(
    store: ArchiveImportStore,
    conn: asyncpg.Connection,
    row: asyncpg.Record,
    vault: VaultAccess,
    source: Conversations,
    size: int,
) -> bool:
    """One checkpoint of the retry pass, in the caller's transaction (the import's row is locked)."""
    import_id = str(row["id"])
    marked = await conn.fetch(
        "SELECT conversation_ref, position FROM archive_import_failure WHERE import_id = $1 AND retry", import_id
    )
    by_position = {r["position"]: r["conversation_ref"] for r in marked if r["position"] is not None}
    by_ref = {r["conversation_ref"] for r in marked if r["position"] is None}
    start = int(row["retry_next"])
    if not by_ref:  # every one is placed: go straight to the next
        start = min((p for p in by_position if p >= start), default=-1)
    raws: list[tuple[int, Any]] = []
    if marked and start >= 0:
        try:
            raws = await source.take(start, size)
        except ExportError as error:
            await conn.execute(
                "UPDATE archive_import SET state = 'failed', error = $2, retry_next = $3, updated_at = now()"
                " WHERE id = $1 AND vault_id = $4",
                import_id,
                str(error)[:500],
                start,
                vault.id,
            )
            return True
    counts = {k: row[k] for k in ("imported", "updated", "duplicates", "failed")}
    for index, raw in raws:
        ref = by_position.get(index)
        if ref is None:
            candidate = conversation_ref(raw, index)
            ref = candidate if candidate in by_ref else None
        if ref is None:
            continue
        try:
            async with conn.transaction():
                outcome = await store.import_one(conn, vault, row["created_by"], row["format"], raw, index)
        except (ValueError, MemvaultError, asyncpg.PostgresError) as error:
            await conn.execute(
                "UPDATE archive_import_failure SET error = $3, position = $4, attempts = attempts + 1, retry = false"
                " WHERE import_id = $1 AND conversation_ref = $2",
                import_id,
                ref,
                (str(error) or type(error).__name__)[:500],
                index,
            )
            continue
        await conn.execute(
            "DELETE FROM archive_import_failure WHERE import_id = $1 AND conversation_ref = $2", import_id, ref
        )
        counts[outcome] += 1
        counts["failed"] -= 1
    left = await first_retry(conn, import_id)
    through = not raws or len(raws) < size or left is None
    if through:  # the file is through: a marked conversation not found in it stays failed
        await conn.execute("UPDATE archive_import_failure SET retry = false WHERE import_id = $1", import_id)
    await conn.execute(
        "UPDATE archive_import SET imported = $2, updated = $3, duplicates = $4, failed = $5, state = $6,"
        " retry_next = $7, updated_at = now() WHERE id = $1 AND vault_id = $8",
        import_id,
        counts["imported"],
        counts["updated"],
        counts["duplicates"],
        max(counts["failed"], 0),
        "done" if through else "running",
        None if through else start + len(raws),
        vault.id,
    )
    return True


class ArchiveRetryStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    def of(cls, database: Database) -> ArchiveRetryStore:
        return cls(database.pool)

    async def fail_import(self, import_id: str, error: str) -> None:
        """Mark a queued or running import failed (its job keeps stopping on an error), so later ones go on."""
        await self._pool.execute(
            "UPDATE archive_import SET state = 'failed', error = $2, updated_at = now()"
            " WHERE id = $1 AND state IN ('queued', 'running')",
            import_id,
            error[:500],
        )

    # --- imports -----------------------------------------------------------------------------------

    async def retry_import(self, vault: VaultAccess, actor: str, import_id: str) -> None:
        """Queue a failed import again (from its checkpoint) with its failed conversations marked."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT state, sha256, received, size, next_index, retry_next,"
                " (SELECT count(*) FROM archive_import_failure f WHERE f.import_id = i.id) AS failures"
                " FROM archive_import i WHERE id = $1 AND vault_id = $2 FOR UPDATE",
                import_id,
                vault.id,
            )
            if row is None:
                raise NotFound(f"no import {import_id} in vault '{vault.name}'", field="import_id")
            state, failures = row["state"], int(row["failures"])
            if state == "done" and not failures:
                raise Conflict(
                    f"import {import_id} is done with no failed conversations: {RETRYABLE}", field="import_id"
                )
            if state not in ("failed", "done"):
                raise Conflict(f"import {import_id} is {state}, not failed: {RETRYABLE}", field="import_id")
            if state == "failed":
                actual = await stored_sha256(conn, vault.id, import_id)
                if row["received"] != row["size"] or actual != row["sha256"]:
                    raise Conflict(
                        f"the stored bytes of import {import_id} are not the file it announced (sha256 {actual},"
                        f" not {row['sha256']}): retrying cannot help; upload the file again",
                        field="import_id",
                    )
            await conn.execute("UPDATE archive_import_failure SET retry = true WHERE import_id = $1", import_id)
            retry_next = row["retry_next"]
            if state == "done":
                retry_next = await first_retry(conn, import_id)
            await conn.execute(
                "UPDATE archive_import SET state = 'queued', error = '', retry_next = $3, updated_at = now()"
                " WHERE id = $1 AND vault_id = $2",
                import_id,
                vault.id,
                retry_next,
            )
            await append_audit(
                conn,
                vault.id,
                actor,
                "archive.import.retry",
                import_id,
                {"was": state, "from": row["next_index"], "failed_conversations": failures},
            )
            await conn.execute("SELECT pg_notify('memvault_archive_import', $1)", import_id)

    # --- message index jobs ------------------------------------------------------------------------

    async def failed_messages(self, vault: VaultAccess, limit: int) -> tuple[list[MessageIndexFailure], int]:
        rows = await self._pool.fetch(
            "SELECT s.message_id::text AS id, m.conversation_id::text AS conversation_id,"
            " coalesce(s.last_error, '') AS error, s.attempts, s.updated_at"
            " FROM archive_message_index s JOIN archive_message m ON m.id = s.message_id"
            " WHERE s.vault_id = $1 AND s.state = 'failed' ORDER BY s.updated_at DESC, s.message_id LIMIT $2",
            vault.id,
            limit,
        )
        total = await self._pool.fetchval(
            "SELECT count(*) FROM archive_message_index WHERE vault_id = $1 AND state = 'failed'", vault.id
        )
        failures = [
            MessageIndexFailure(r["id"], r["conversation_id"], r["error"], r["attempts"], r["updated_at"]) for r in rows
        ]
        return failures, int(total)

    async def retry_messages(self, vault: VaultAccess, actor: str, message_ids: Sequence[str] | None) -> int:
        """Send these failed messages of the vault (all with None) to the indexer again; how many.
        A named message that is not a failed index job of the vault refuses the whole call."""
        async with self._pool.acquire() as conn, conn.transaction():
            if message_ids is not None:
                await _check_failed(conn, vault, message_ids)
            rows = await conn.fetch(
                """
                DELETE FROM archive_message_index s USING archive_message m
                WHERE s.vault_id = $1 AND s.state = 'failed' AND m.id = s.message_id AND m.vault_id = $1
                  AND ($2::uuid[] IS NULL OR s.message_id = ANY($2::uuid[]))
                RETURNING m.id::text AS id, m.conversation_id::text AS conversation_id, m.content_hash,
                  (SELECT min(rm.revision) FROM archive_revision_message rm WHERE rm.message_id = m.id) AS revision
                """,
                vault.id,
                list(message_ids) if message_ids is not None else None,
            )
            if rows:
                await enqueue(
                    conn,
                    [
                        message_archived(
                            r["id"], vault.id, r["conversation_id"], int(r["revision"] or 1), r["content_hash"]
                        )
                        for r in rows
                    ],
                )
                await append_audit(conn, vault.id, actor, "archive.index.retry", vault.name, {"messages": len(rows)})
        return len(rows)

    # --- for the operator's command (no caller: the job's own vault) ---------------------------------

    async def job_vault(self, job_id: str) -> tuple[str, VaultAccess] | None:
        """("import" or "message", the vault holding it) of an import or an archived message's index job."""
        row = await self._pool.fetchrow(
            "SELECT 'import' AS kind, i.vault_id::text AS vault_id, v.name FROM archive_import i"
            " JOIN vault v ON v.id = i.vault_id WHERE i.id = $1"
            " UNION ALL SELECT 'message', m.vault_id::text, v.name FROM archive_message m"
            " JOIN vault v ON v.id = m.vault_id WHERE m.id = $1 LIMIT 1",
            job_id,
        )
        if row is None:
            return None
        return row["kind"], VaultAccess(row["vault_id"], row["name"], "owner", "")

    async def failed_imports(self, vault_id: str | None, limit: int) -> list[asyncpg.Record]:
        """Imports that failed or have failed conversations, newest first, with their vault's name."""
        return list(
            await self._pool.fetch(
                "SELECT i.id::text AS id, v.name AS vault, i.state, i.failed, i.error, i.filename, i.updated_at"
                " FROM archive_import i JOIN vault v ON v.id = i.vault_id"
                " WHERE (i.state = 'failed' OR (i.state = 'done' AND i.failed > 0))"
                " AND ($1::uuid IS NULL OR i.vault_id = $1) ORDER BY i.updated_at DESC LIMIT $2",
                vault_id,
                limit,
            )
        )

    async def failed_message_jobs(self, vault_id: str | None, limit: int) -> list[asyncpg.Record]:
        return list(
            await self._pool.fetch(
                "SELECT s.message_id::text AS id, v.name AS vault, m.conversation_id::text AS conversation_id,"
                " coalesce(s.last_error, '') AS error, s.attempts"
                " FROM archive_message_index s JOIN archive_message m ON m.id = s.message_id"
                " JOIN vault v ON v.id = s.vault_id"
                " WHERE s.state = 'failed' AND ($1::uuid IS NULL OR s.vault_id = $1)"
                " ORDER BY s.updated_at DESC LIMIT $2",
                vault_id,
                limit,
            )
        )


async def _check_failed(conn: asyncpg.Connection, vault: VaultAccess, message_ids: Sequence[str]) -> None:
    rows = await conn.fetch(
        "SELECT m.id::text AS id, s.state FROM archive_message m"
        " LEFT JOIN archive_message_index s ON s.message_id = m.id"
        " WHERE m.vault_id = $1 AND m.id = ANY($2::uuid[])",
        vault.id,
        list(message_ids),
    )
    states = {r["id"]: r["state"] for r in rows}
    for message_id in message_ids:
        if message_id not in states:
            raise NotFound(f"no archived message {message_id} in vault '{vault.name}'", field="message_ids")
        state = states[message_id]
        if state != "failed":
            now = "indexed" if state == "indexed" else "pending (the indexer has not reported it yet)"
            raise Conflict(
                f"the index job of message {message_id} did not fail (it is {now}): only failed index jobs can be"
                " retried; nothing was retried",
                field="message_ids",
            )


async def stored_sha256(conn: asyncpg.Connection, vault_id: str, import_id: str) -> str:
    """The sha256 of an upload's stored parts, read one part at a time (in a transaction: a cursor needs one).

    A cursor fetches 50 rows a time unless told otherwise: 50 parts of 3 MiB, the whole of a 150 MB upload
    held at once (the vault's peak memory grew with the export's size)."""
    digest = hashlib.sha256()
    async for r in conn.cursor(
        "SELECT data FROM archive_import_chunk WHERE import_id = $1 AND vault_id = $2 ORDER BY part",
        import_id,
        vault_id,
        prefetch=1,
    ):
        digest.update(r["data"])
    return digest.hexdigest()
