"""The only module that speaks SQL. Every query is filtered by vault id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from memvault_vault import events
from memvault_vault.domain import guide
from memvault_vault.domain.memory import (
    Draft,
    Memory,
    MemoryType,
    Outcome,
    Status,
    Trust,
    WriteResult,
    review_after,
)

MIGRATIONS = Path(__file__).parent / "migrations"


def apply_migrations(dsn: str) -> list[str]:
    """Apply pending numbered migrations under an advisory lock; return the ids applied."""
    from yoyo import get_backend, read_migrations

    backend = get_backend(
        dsn.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://", 1)
    )
    migrations = read_migrations(str(MIGRATIONS))
    with backend.lock():
        pending = backend.to_apply(migrations)
        backend.apply_migrations(pending)
    return [migration.id for migration in pending]


@dataclass(frozen=True)
class VaultAccess:
    """A vault as one account may use it."""

    id: str
    name: str
    role: str
    approval_mode: str

    @property
    def writable(self) -> bool:
        return self.role in ("owner", "editor")


@dataclass(frozen=True)
class Candidate:
    content: str
    content_hash: str
    draft: Draft
    status: Status
    trust: Trust


_VAULTS_OF = """
    SELECT v.id::text AS id, v.name, m.role, coalesce(s.approval_mode, 'review') AS approval_mode
    FROM vault v
    JOIN membership m ON m.vault_id = v.id
    JOIN account a ON a.id = m.account_id
    LEFT JOIN vault_settings s ON s.vault_id = v.id
    WHERE a.subject = $1
"""

_KEYWORD = """
    WITH q AS (
        SELECT to_tsquery('simple', string_agg(quote_literal(lexeme), ' | ')) AS query
        FROM unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme
    )
    SELECT m.*, ts_rank(m.search, q.query) AS rank
    FROM memory m, q
    WHERE m.vault_id = $1
      AND m.search @@ q.query
      AND m.status = ANY($3::text[])
      AND ($4::text[] IS NULL OR m.type = ANY($4::text[]))
      AND m.tags @> $5::text[]
      AND (m.expires_at IS NULL OR m.expires_at > now())
    ORDER BY rank DESC, m.created_at DESC, m.id
    LIMIT $6 OFFSET $7
"""


def _memory(row: asyncpg.Record, vault: str) -> Memory:
    def ids(values: Sequence[Any] | None) -> tuple[str, ...]:
        return tuple(str(value) for value in values or ())

    def optional_id(value: Any) -> str | None:
        return None if value is None else str(value)

    return Memory(
        id=str(row["id"]),
        vault=vault,
        content=row["content"],
        content_hash=row["content_hash"],
        type=MemoryType(row["type"]),
        status=Status(row["status"]),
        trust=Trust(row["trust"]),
        key=row["key"],
        scope=row["scope"],
        tags=tuple(row["tags"]),
        source=row["source"],
        client=row["client"],
        confidence=row["confidence"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        review_after=row["review_after"],
        expires_at=row["expires_at"],
        depends_on=ids(row["depends_on"]),
        supersedes=optional_id(row["supersedes"]),
        superseded_by=optional_id(row["superseded_by"]),
        similar_to=ids(row["similar_to"]),
        batch_id=optional_id(row["batch_id"]),
        version=row["version"],
        pinned=row["pinned"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class Store:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Store:
        pool = await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size)
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        await self._pool.fetchval("SELECT 1")

    # --- accounts and vaults -------------------------------------------------------------------

    async def vaults_of(self, subject: str) -> list[VaultAccess]:
        rows = await self._pool.fetch(_VAULTS_OF + " ORDER BY v.name", subject)
        return [VaultAccess(**dict(row)) for row in rows]

    async def vault_of(self, subject: str, name: str) -> VaultAccess | None:
        row = await self._pool.fetchrow(_VAULTS_OF + " AND v.name = $2", subject, name)
        return None if row is None else VaultAccess(**dict(row))

    async def ensure_owner(self, subject: str, vault_name: str) -> bool:
        """Create the account, the vault with its settings and guide, and the owner membership.

        Returns False (and changes nothing) when the vault already belongs to another account.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            account_id = await conn.fetchval(
                "INSERT INTO account (subject) VALUES ($1) ON CONFLICT (subject) DO UPDATE SET subject = EXCLUDED.subject"
                " RETURNING id",
                subject,
            )
            vault_id = await conn.fetchval(
                "INSERT INTO vault (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id", vault_name
            )
            if vault_id is None:
                owner = await conn.fetchval(
                    "SELECT m.account_id FROM membership m JOIN vault v ON v.id = m.vault_id"
                    " WHERE v.name = $1 AND m.role = 'owner' AND m.account_id = $2",
                    vault_name,
                    account_id,
                )
                return owner is not None
            await conn.execute(
                "INSERT INTO membership (vault_id, account_id, role) VALUES ($1, $2, 'owner')",
                vault_id,
                account_id,
            )
            await conn.execute("INSERT INTO vault_settings (vault_id) VALUES ($1)", vault_id)
            text = guide.default_text()
            await conn.execute(
                "INSERT INTO operating_guide (vault_id, text, default_revision, updated_by) VALUES ($1, $2, $3, 'system')",
                vault_id,
                text,
                guide.default_revision(),
            )
            await conn.execute(
                "INSERT INTO operating_guide_history (vault_id, version, text, updated_by) VALUES ($1, 1, $2, 'system')",
                vault_id,
                text,
            )
            await self._audit(conn, vault_id, f"user:{subject}", "vault.create", vault_name, {})
            return True

    async def guide(self, vault: VaultAccess) -> guide.Guide:
        row = await self._pool.fetchrow("SELECT text, version FROM operating_guide WHERE vault_id = $1", vault.id)
        if row is None:
            return guide.Guide(vault.name, guide.default_text(), 0)
        return guide.Guide(vault.name, row["text"], row["version"])

    # --- writes --------------------------------------------------------------------------------

    async def write(
        self,
        vault: VaultAccess,
        candidates: Sequence[Candidate],
        *,
        actor: str,
        client: str,
        batch_source: str | None = None,
    ) -> tuple[str | None, list[WriteResult]]:
        """Store candidates in one transaction, skipping exact duplicates and forgotten text.

        With `batch_source` set, the write is one import batch and its id is returned.
        """
        hashes = [c.content_hash for c in candidates]
        now = datetime.now(UTC)
        async with self._pool.acquire() as conn, conn.transaction():
            excluded = {
                row["content_hash"]
                for row in await conn.fetch(
                    "SELECT content_hash FROM exclusion WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
                    vault.id,
                    hashes,
                )
            }
            batch_id = None
            if batch_source is not None:
                batch_id = await conn.fetchval(
                    "INSERT INTO import_batch (vault_id, source, actor, item_count, stored_count)"
                    " VALUES ($1, $2, $3, $4, 0) RETURNING id::text",
                    vault.id,
                    batch_source,
                    actor,
                    len(candidates),
                )
            first_of: dict[str, int] = {}
            to_insert: list[int] = []
            for index, candidate in enumerate(candidates):
                if candidate.content_hash in excluded or candidate.content_hash in first_of:
                    continue
                first_of[candidate.content_hash] = index
                to_insert.append(index)
            inserted: dict[str, str] = {}
            if to_insert:
                rows = await conn.fetch(
                    """
                    INSERT INTO memory (vault_id, content, content_hash, type, key, scope, tags, source, client,
                                        trust, confidence, status, valid_from, review_after, batch_id)
                    SELECT $1, r.content, r.content_hash, r.type, r.key, r.scope,
                           ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.source, $2, r.trust, r.confidence,
                           r.status, coalesce(r.valid_from, now()), r.review_after, $3::uuid
                    FROM jsonb_to_recordset($4::jsonb) AS r(content text, content_hash text, type text, key text,
                         scope text, tags jsonb, source text, trust text, confidence real, status text,
                         valid_from timestamptz, review_after timestamptz)
                    ON CONFLICT (vault_id, content_hash) DO NOTHING
                    RETURNING id::text, content_hash
                    """,
                    vault.id,
                    client,
                    batch_id,
                    json.dumps([_row_of(candidates[i], now) for i in to_insert], default=str),
                )
                inserted = {row["content_hash"]: row["id"] for row in rows}
            existing: dict[str, tuple[str, str]] = {}
            missing = [h for h in first_of if h not in inserted]
            if missing:
                for row in await conn.fetch(
                    "SELECT id::text, content_hash, status FROM memory"
                    " WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
                    vault.id,
                    missing,
                ):
                    existing[row["content_hash"]] = (row["id"], row["status"])
            if inserted:
                ids = list(inserted.values())
                await conn.execute(
                    "INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor)"
                    " SELECT id, vault_id, version, 'created', to_jsonb(m) - 'search', $2"
                    " FROM memory m WHERE id = ANY($1::uuid[])",
                    ids,
                    actor,
                )
                await self._enqueue(
                    conn, [events.memory_created(memory_id, vault.id, h) for h, memory_id in inserted.items()]
                )
            results: list[WriteResult] = []
            for index, candidate in enumerate(candidates):
                h = candidate.content_hash
                if h in excluded:
                    results.append(
                        WriteResult(
                            Outcome.EXCLUDED,
                            "",
                            candidate.status,
                            "this text was forgotten earlier and will not be stored again",
                            index,
                        )
                    )
                elif h in inserted and first_of[h] == index:
                    results.append(WriteResult(Outcome.STORED, inserted[h], candidate.status, "", index))
                else:
                    memory_id, status = (
                        (inserted[h], candidate.status.value) if h in inserted else existing.get(h, ("", "active"))
                    )
                    results.append(
                        WriteResult(
                            Outcome.DUPLICATE,
                            memory_id,
                            Status(status),
                            "the same text (ignoring case and whitespace) is already stored",
                            index,
                        )
                    )
            stored = sum(1 for r in results if r.outcome is Outcome.STORED)
            if batch_id is not None:
                await conn.execute("UPDATE import_batch SET stored_count = $2 WHERE id = $1", batch_id, stored)
            counts = {o.value: sum(1 for r in results if r.outcome is o) for o in Outcome}
            target = batch_id or (results[0].memory_id if results else "")
            action = "memory.bulk_remember" if batch_id else "memory.remember"
            await self._audit(conn, vault.id, actor, action, target, counts)
        return batch_id, results

    async def forget(self, vault: VaultAccess, memory_id: str, actor: str) -> bool:
        """Delete a memory and its history, and exclude its text from being stored again."""
        async with self._pool.acquire() as conn, conn.transaction():
            content_hash = await conn.fetchval(
                "DELETE FROM memory WHERE vault_id = $1 AND id = $2::uuid RETURNING content_hash",
                vault.id,
                memory_id,
            )
            if content_hash is None:
                return False
            await conn.execute("DELETE FROM memory_history WHERE vault_id = $1 AND memory_id = $2", vault.id, memory_id)
            await conn.execute(
                "INSERT INTO exclusion (vault_id, content_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                vault.id,
                content_hash,
            )
            await self._enqueue(conn, [events.memory_forgotten(memory_id, vault.id)])
            await self._audit(conn, vault.id, actor, "memory.forget", memory_id, {})
            return True

    async def _enqueue(self, conn: asyncpg.Connection, outbox: Sequence[events.OutboxEvent]) -> None:
        """Write events in the caller's transaction and wake the relay when it commits."""
        await conn.executemany(
            "INSERT INTO outbox (id, subject, payload, headers) VALUES ($1, $2, $3, $4::jsonb)",
            [(e.id, e.subject, e.payload, json.dumps(e.headers)) for e in outbox],
        )
        await conn.execute("SELECT pg_notify('memvault_outbox', '')")

    async def _audit(
        self,
        conn: asyncpg.Connection,
        vault_id: str | None,
        actor: str,
        action: str,
        target: str,
        details: dict[str, Any],
    ) -> None:
        await conn.execute(
            "INSERT INTO audit_log (vault_id, actor, action, target, details) VALUES ($1, $2, $3, $4, $5::jsonb)",
            vault_id,
            actor,
            action,
            target,
            json.dumps(details),
        )

    # --- reads ---------------------------------------------------------------------------------

    async def keyword_search(
        self,
        vault: VaultAccess,
        query: str,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
        limit: int,
        offset: int,
    ) -> list[tuple[Memory, float]]:
        rows = await self._pool.fetch(
            _KEYWORD,
            vault.id,
            query,
            [s.value for s in statuses],
            [t.value for t in types] or None,
            list(tags),
            limit,
            offset,
        )
        return [(_memory(row, vault.name), float(row["rank"])) for row in rows]

    async def has_search_terms(self, query: str) -> bool:
        """False when every word of the query is a stopword (such as 'what' or 'the')."""
        count = await self._pool.fetchval("SELECT length(to_tsvector('english', $1))", query)
        return bool(count)

    async def list_memories(
        self,
        vault: VaultAccess,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
        limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[Memory]:
        rows = await self._pool.fetch(
            """
            SELECT * FROM memory m
            WHERE m.vault_id = $1
              AND ($2::text[] IS NULL OR m.status = ANY($2::text[]))
              AND ($3::text[] IS NULL OR m.type = ANY($3::text[]))
              AND m.tags @> $4::text[]
              AND ($5::timestamptz IS NULL OR (m.created_at, m.id) < ($5, $6::uuid))
            ORDER BY m.created_at DESC, m.id DESC
            LIMIT $7
            """,
            vault.id,
            [s.value for s in statuses] or None,
            [t.value for t in types] or None,
            list(tags),
            after[0] if after else None,
            after[1] if after else None,
            limit,
        )
        return [_memory(row, vault.name) for row in rows]

    # --- hybrid recall and the index feed ---------------------------------------------------------

    async def memories_by_ids(
        self,
        vault: VaultAccess,
        ids: Sequence[str],
        query: str,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
    ) -> list[tuple[Memory, float]]:
        """These memories of the vault that pass the filters, each with its keyword rank (0 when no word matches)."""
        rows = await self._pool.fetch(
            """
            WITH q AS (
                SELECT to_tsquery('simple', string_agg(quote_literal(lexeme), ' | ')) AS query
                FROM unnest(tsvector_to_array(to_tsvector('english', $3))) AS lexeme
            )
            SELECT m.*, coalesce(ts_rank(m.search, q.query), 0) AS rank
            FROM memory m, q
            WHERE m.vault_id = $1
              AND m.id = ANY($2::uuid[])
              AND m.status = ANY($4::text[])
              AND ($5::text[] IS NULL OR m.type = ANY($5::text[]))
              AND m.tags @> $6::text[]
              AND (m.expires_at IS NULL OR m.expires_at > now())
            """,
            vault.id,
            list(ids),
            query,
            [s.value for s in statuses],
            [t.value for t in types] or None,
            list(tags),
        )
        return [(_memory(row, vault.name), float(row["rank"])) for row in rows]

    async def unindexed_recent(self, vault: VaultAccess, limit: int) -> list[tuple[str, str]]:
        """(id, text) of the newest memories whose current text the index does not hold yet."""
        rows = await self._pool.fetch(
            """
            SELECT m.id::text, m.content FROM memory m
            LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed' AND s.content_hash = m.content_hash
            WHERE m.vault_id = $1 AND s.memory_id IS NULL AND m.status IN ('proposed', 'active')
              -- Only recent writes: older unindexed memories are failures, which keyword search covers.
              AND m.created_at > now() - interval '15 minutes'
            ORDER BY m.created_at DESC
            LIMIT $2
            """,
            vault.id,
            limit,
        )
        return [(row["id"], row["content"]) for row in rows]

    async def documents(self, ids: Sequence[str]) -> list[asyncpg.Record]:
        return list(
            await self._pool.fetch(
                "SELECT m.id::text AS memory_id, m.vault_id::text, m.content, m.content_hash, m.created_at,"
                " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
                " FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed'"
                " WHERE m.id = ANY($1::uuid[])",
                list(ids),
            )
        )

    async def documents_after(self, after_id: str | None, limit: int) -> list[asyncpg.Record]:
        return list(
            await self._pool.fetch(
                "SELECT m.id::text AS memory_id, m.vault_id::text, m.content, m.content_hash, m.created_at,"
                " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
                " FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed'"
                " WHERE $1::uuid IS NULL OR m.id > $1::uuid ORDER BY m.id LIMIT $2",
                after_id,
                limit,
            )
        )

    async def report_indexed(self, reports: Sequence[tuple[str, str, str, str, str]]) -> None:
        """Record (memory id, content hash, model, state, error) for memories that still exist."""
        await self._pool.executemany(
            """
            INSERT INTO index_state (memory_id, vault_id, content_hash, model, state, attempts, last_error)
            SELECT m.id, m.vault_id, $2, $3, $4, CASE WHEN $4 = 'failed' THEN 1 ELSE 0 END, nullif($5, '')
            FROM memory m WHERE m.id = $1::uuid
            ON CONFLICT (memory_id) DO UPDATE SET
                content_hash = EXCLUDED.content_hash, model = EXCLUDED.model, state = EXCLUDED.state,
                attempts = CASE WHEN EXCLUDED.state = 'failed' THEN index_state.attempts + 1 ELSE 0 END,
                last_error = EXCLUDED.last_error, updated_at = now()
            """,
            list(reports),
        )

    async def stats(self, vault: VaultAccess) -> dict[str, Any]:
        by_status = {
            row["status"]: row["count"]
            for row in await self._pool.fetch(
                "SELECT status, count(*) FROM memory WHERE vault_id = $1 GROUP BY status", vault.id
            )
        }
        index = await self._pool.fetchrow(
            """
            SELECT count(*) FILTER (WHERE s.state = 'indexed' AND s.content_hash = m.content_hash) AS indexed,
                   count(*) FILTER (WHERE s.state = 'failed') AS failed,
                   count(*) FILTER (WHERE s.memory_id IS NULL OR s.content_hash <> m.content_hash) AS pending
            FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id
            WHERE m.vault_id = $1
            """,
            vault.id,
        )
        failures = await self._pool.fetch(
            "SELECT memory_id::text, coalesce(last_error, '') AS error, attempts FROM index_state"
            " WHERE vault_id = $1 AND state = 'failed' ORDER BY updated_at DESC LIMIT 10",
            vault.id,
        )
        outbox = await self._pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")
        return {
            "memories": by_status,
            "indexed": index["indexed"],
            "index_failed": index["failed"],
            "index_pending": index["pending"],
            "recent_failures": [dict(row) for row in failures],
            "outbox_pending": outbox,
        }

    # --- accounts, memberships and audit for the gateway (AccountService) ------------------------
    # Written for rpc/accounts.py; every method acts for one subject and checks its role itself.

    async def ensure_account(self, subject: str, display_name: str) -> bool:
        """Create the account for `subject` if missing (and update its display name); True when created."""
        row = await self._pool.fetchrow(
            "INSERT INTO account (subject, display_name) VALUES ($1, $2)"
            " ON CONFLICT (subject) DO UPDATE SET display_name ="
            "   CASE WHEN EXCLUDED.display_name = '' THEN account.display_name ELSE EXCLUDED.display_name END"
            " RETURNING (xmax = 0) AS created",
            subject,
            display_name,
        )
        return bool(row["created"])

    async def members(self, vault: VaultAccess) -> list[AccountMember]:
        rows = await self._pool.fetch(
            "SELECT a.subject, a.display_name, m.role, m.created_at FROM membership m"
            " JOIN account a ON a.id = m.account_id WHERE m.vault_id = $1 ORDER BY m.created_at, a.subject",
            vault.id,
        )
        return [AccountMember(r["subject"], r["display_name"], r["role"], r["created_at"]) for r in rows]

    async def set_membership(self, vault: VaultAccess, subject: str, role: str, actor: str) -> AccountMember | None:
        """Give `subject` `role` in the vault; None (and nothing changed) if that would leave it without an owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT id FROM vault WHERE id = $1 FOR UPDATE", vault.id)
            account_id = await conn.fetchval(
                "INSERT INTO account (subject) VALUES ($1) ON CONFLICT (subject) DO UPDATE SET subject = EXCLUDED.subject"
                " RETURNING id",
                subject,
            )
            if role != "owner" and not await self._other_owner_exists(conn, vault.id, account_id):
                return None
            row = await conn.fetchrow(
                "INSERT INTO membership (vault_id, account_id, role) VALUES ($1, $2, $3)"
                " ON CONFLICT (vault_id, account_id) DO UPDATE SET role = EXCLUDED.role"
                " RETURNING created_at",
                vault.id,
                account_id,
                role,
            )
            display_name = await conn.fetchval("SELECT display_name FROM account WHERE id = $1", account_id)
            await self._audit(conn, vault.id, actor, "membership.set", subject, {"role": role})
            return AccountMember(subject, display_name, role, row["created_at"])

    async def remove_membership(self, vault: VaultAccess, subject: str, actor: str) -> bool | None:
        """Take `subject`'s role away: True if removed, False if it had none, None if it is the last owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT id FROM vault WHERE id = $1 FOR UPDATE", vault.id)
            account_id = await conn.fetchval("SELECT id FROM account WHERE subject = $1", subject)
            if account_id is None:
                return False
            if not await self._other_owner_exists(conn, vault.id, account_id):
                return None
            removed = await conn.fetchval(
                "DELETE FROM membership WHERE vault_id = $1 AND account_id = $2 RETURNING role", vault.id, account_id
            )
            if removed is None:
                return False
            await self._audit(conn, vault.id, actor, "membership.remove", subject, {"role": removed})
            return True

    async def _other_owner_exists(self, conn: asyncpg.Connection, vault_id: str, account_id: Any) -> bool:
        count = await conn.fetchval(
            "SELECT count(*) FROM membership WHERE vault_id = $1 AND role = 'owner' AND account_id <> $2",
            vault_id,
            account_id,
        )
        return bool(count)

    async def append_account_audit(
        self, subject: str, vault: VaultAccess | None, actor: str, action: str, target: str, details: dict[str, Any]
    ) -> None:
        """An audit entry about `subject`'s account (and, if given, one of its vaults)."""
        async with self._pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO audit_log (vault_id, account_id, actor, action, target, details)"
                " SELECT $1, a.id, $3, $4, $5, $6::jsonb FROM account a WHERE a.subject = $2",
                vault.id if vault else None,
                subject,
                actor,
                action,
                target,
                json.dumps(details),
            )

    async def account_audit(self, subject: str, limit: int, before_id: int) -> list[AuditRecord]:
        """Entries about `subject`'s account or about vaults it owns, newest first."""
        rows = await self._pool.fetch(
            """
            WITH me AS (SELECT id FROM account WHERE subject = $1),
                 owned AS (SELECT m.vault_id FROM membership m, me WHERE m.account_id = me.id AND m.role = 'owner')
            SELECT l.id, coalesce(v.name, '') AS vault, l.actor, l.action, l.target, l.details::text AS details, l.at
            FROM audit_log l LEFT JOIN vault v ON v.id = l.vault_id
            WHERE (l.account_id = (SELECT id FROM me) OR l.vault_id IN (SELECT vault_id FROM owned))
              AND ($3::bigint = 0 OR l.id < $3)
            ORDER BY l.id DESC
            LIMIT $2
            """,
            subject,
            limit,
            before_id,
        )
        return [
            AuditRecord(r["id"], r["vault"], r["actor"], r["action"], r["target"], r["details"], r["at"]) for r in rows
        ]


def _row_of(candidate: Candidate, now: datetime) -> dict[str, Any]:
    draft = candidate.draft
    start = draft.valid_from or now
    return {
        "content": candidate.content,
        "content_hash": candidate.content_hash,
        "type": draft.type.value,
        "key": draft.key,
        "scope": draft.scope,
        "tags": list(draft.tags),
        "source": draft.source,
        "trust": candidate.trust.value,
        "confidence": draft.confidence,
        "status": candidate.status.value,
        "valid_from": draft.valid_from.isoformat() if draft.valid_from else None,
        "review_after": (ra.isoformat() if (ra := review_after(draft.type, start)) else None),
    }


# --- accounts, memberships and audit for the gateway (AccountService) ---------------------------


@dataclass(frozen=True)
class AccountMember:
    """One account's role in a vault."""

    subject: str
    display_name: str
    role: str
    since: datetime


@dataclass(frozen=True)
class AuditRecord:
    id: int
    vault: str
    actor: str
    action: str
    target: str
    details_json: str
    at: datetime
