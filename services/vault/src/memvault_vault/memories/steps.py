"""The steps of a memory write that run inside a caller's transaction, on its connection: inserting
memories (with their history, events and audit entry), snapshotting history, locking one memory,
finding key conflicts, retiring superseded memories and flagging their dependents. `MemoryStore`
(store.py) runs them in its own transactions; other concepts (review, imports) in theirs. Every query
is filtered by vault id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from memvault_core.errors import NotFound
from memvault_vault.audit.store import append_audit
from memvault_vault.database import VaultAccess
from memvault_vault.domain.memory import Memory, Status
from memvault_vault.memories.records import (
    BatchRecord,
    Candidate,
    Existing,
    WriteReport,
    memory_from_row,
    row_of,
)
from memvault_vault.outbox import events
from memvault_vault.outbox.store import enqueue


async def insert(
    conn: asyncpg.Connection,
    vault: VaultAccess,
    candidates: Sequence[Candidate],
    *,
    actor: str,
    client: str,
    batch: BatchRecord | None,
    audit: tuple[str, dict[str, Any]],
) -> WriteReport:
    hashes = [c.content_hash for c in candidates]
    raced: dict[str, Existing] = {}
    if candidates:
        taken = {
            row["content_hash"]: Existing(row["id"], Status(row["status"]))
            for row in await conn.fetch(
                "SELECT id::text, content_hash, status FROM memory"
                " WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
                vault.id,
                hashes,
            )
        }
        excluded = {
            row["content_hash"]
            for row in await conn.fetch(
                "SELECT content_hash FROM exclusion WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
                vault.id,
                hashes,
            )
        }
        for candidate in candidates:
            if candidate.content_hash in excluded:
                raced[candidate.id] = Existing("", Status.REJECTED)
            elif candidate.content_hash in taken:
                raced[candidate.id] = taken[candidate.content_hash]
    to_insert = [c for c in candidates if c.id not in raced]
    batch_id = None
    if batch is not None:
        outcomes = dict(batch.outcomes)
        for candidate in candidates:
            if candidate.id in raced:
                outcomes[candidate.outcome] = outcomes.get(candidate.outcome, 0) - 1
                late = "excluded" if not raced[candidate.id].id else "duplicate"
                outcomes[late] = outcomes.get(late, 0) + 1
        batch_id = await conn.fetchval(
            "INSERT INTO import_batch (vault_id, source, actor, item_count, stored_count, outcomes)"
            " VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING id::text",
            vault.id,
            batch.source,
            actor,
            batch.item_count,
            len(to_insert),
            json.dumps({k: v for k, v in outcomes.items() if v}),
        )
    now = datetime.now(UTC)
    if to_insert:
        inserted = await conn.fetch(
            """
            INSERT INTO memory (id, vault_id, content, content_hash, type, key, scope, tags, source, client,
                                trust, confidence, status, valid_from, valid_to, review_after, expires_at,
                                depends_on, similar_to, supersedes, batch_id, context, metadata)
            SELECT r.id, $1, r.content, r.content_hash, r.type, r.key, r.scope,
                   ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.source, $2, r.trust, r.confidence,
                   r.status, coalesce(r.valid_from, now()), r.valid_to, r.review_after, r.expires_at,
                   ARRAY(SELECT jsonb_array_elements_text(r.depends_on))::uuid[],
                   ARRAY(SELECT jsonb_array_elements_text(r.similar_to))::uuid[], r.supersedes, $3::uuid,
                   r.context, coalesce(r.metadata, '{}'::jsonb)
            FROM jsonb_to_recordset($4::jsonb) AS r(id uuid, content text, content_hash text, type text,
                 key text, scope text, tags jsonb, source text, trust text, confidence real, status text,
                 valid_from timestamptz, valid_to timestamptz, review_after timestamptz,
                 expires_at timestamptz, depends_on jsonb, similar_to jsonb, supersedes uuid, context text,
                 metadata jsonb)
            RETURNING id::text
            """,
            vault.id,
            client,
            batch_id,
            json.dumps([row_of(c, now) for c in to_insert], default=str),
        )
        ids = [row["id"] for row in inserted]
        await write_history(conn, ids, "created", actor)
        await enqueue(conn, events.memories_created(vault.id, [(c.id, c.content_hash) for c in to_insert]))
    conflicts = await same_key_active(conn, vault, [c.id for c in to_insert])
    action, details = audit
    await append_audit(conn, vault.id, actor, action, batch_id or (to_insert[0].id if to_insert else ""), details)
    return WriteReport(batch_id, {c.id for c in to_insert}, raced, conflicts)


async def same_key_active(
    conn: asyncpg.Connection, vault: VaultAccess, ids: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """For each of these memories that has a key: the other active memories with its key and scope."""
    if not ids:
        return {}
    rows = await conn.fetch(
        """
        SELECT n.id::text AS id, array_agg(o.id::text ORDER BY o.created_at) AS others
        FROM memory n
        JOIN memory o ON o.vault_id = n.vault_id AND o.key = n.key AND o.scope IS NOT DISTINCT FROM n.scope
                     AND o.id <> n.id AND o.status = 'active'
        WHERE n.vault_id = $1 AND n.id = ANY($2::uuid[]) AND n.key IS NOT NULL
        GROUP BY n.id
        """,
        vault.id,
        list(ids),
    )
    return {row["id"]: tuple(row["others"]) for row in rows}


async def write_history(
    conn: asyncpg.Connection, ids: Sequence[str], change: str, actor: str, cause: str | None = None
) -> None:
    """Snapshot these memories as they are now, as one more version of each."""
    if ids:
        await conn.execute(
            "INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor, cause)"
            " SELECT id, vault_id, version, $2, to_jsonb(m) - 'search', $3, $4::uuid"
            " FROM memory m WHERE id = ANY($1::uuid[])",
            list(ids),
            change,
            actor,
            cause,
        )


async def locked(conn: asyncpg.Connection, vault: VaultAccess, memory_id: str) -> Memory:
    row = await conn.fetchrow(
        "SELECT * FROM memory WHERE vault_id = $1 AND id = $2::uuid FOR UPDATE", vault.id, memory_id
    )
    if row is None:
        raise NotFound(
            f"no memory {memory_id} in vault '{vault.name}'; find ids with recall or list_memories",
            field="memory_id",
        )
    return memory_from_row(row, vault.name)


async def retire(conn: asyncpg.Connection, vault: VaultAccess, ids: Sequence[str], *, by: str, actor: str) -> list[str]:
    """Mark these memories superseded by `by` (their validity ends now); return their flagged dependents."""
    if not ids:
        return []
    await conn.execute(
        "UPDATE memory SET status = 'superseded', superseded_by = $3::uuid, valid_to = coalesce(valid_to, now()),"
        " version = version + 1, updated_at = now()"
        " WHERE vault_id = $1 AND id = ANY($2::uuid[])",
        vault.id,
        list(ids),
        by,
    )
    await write_history(conn, ids, "superseded", actor, cause=by)
    flagged: list[str] = []
    for memory_id in ids:
        flagged += await flag_dependents(
            conn, vault, memory_id, f"depends on {memory_id}, which was superseded by {by}", actor, cause=by
        )
    return flagged


async def flag_dependents(
    conn: asyncpg.Connection, vault: VaultAccess, memory_id: str, reason: str, actor: str, cause: str
) -> list[str]:
    rows = await conn.fetch(
        "UPDATE memory SET flagged_reason = $3, flagged_at = now(), version = version + 1, updated_at = now()"
        " WHERE vault_id = $1 AND depends_on @> ARRAY[$2::uuid] AND status IN ('active', 'proposed')"
        " RETURNING id::text",
        vault.id,
        memory_id,
        reason,
    )
    ids = [row["id"] for row in rows]
    await write_history(conn, ids, "flagged", actor, cause=cause)
    return ids
