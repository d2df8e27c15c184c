"""The only module that speaks SQL. Every query is filtered by vault id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from memvault_core.errors import Conflict, InvalidArgument, NotFound
from memvault_vault import events
from memvault_vault.domain import guide
from memvault_vault.domain.fusion import Found
from memvault_vault.domain.memory import (
    Draft,
    Memory,
    MemoryType,
    Status,
    Trust,
    check_version,
    require_status,
    review_date,
)
from memvault_vault.retention import ACTOR, RETENTION_LOCK_KEY, Purged

MIGRATIONS = Path(__file__).parent / "migrations"


class NewerDatabaseError(Exception):
    """The database holds migrations this code does not know: a newer memvault migrated it."""

    def __init__(self, unknown: Sequence[str]) -> None:
        super().__init__(
            f"this database was migrated by a newer memvault: {', '.join(unknown)}; "
            "run that version or restore a backup"
        )


def migration_ids() -> set[str]:
    from yoyo import read_migrations

    return {migration.id for migration in read_migrations(str(MIGRATIONS))}


def migration_backend(dsn: str) -> Any:
    """yoyo's backend for the vault's database (yoyo wants the psycopg 3 driver named in the URL)."""
    from yoyo import get_backend

    return get_backend(
        dsn.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://", 1)
    )


def apply_migrations(dsn: str) -> list[str]:
    """Apply pending numbered migrations under an advisory lock; return the ids applied.

    Raises NewerDatabaseError, applying nothing, when the database has migrations this code lacks:
    its schema may need columns this code never fills."""
    from yoyo import read_migrations

    backend = migration_backend(dsn)
    migrations = read_migrations(str(MIGRATIONS))
    with backend.lock():
        pending = backend.to_apply(migrations)
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - {migration.id for migration in migrations})
        if unknown:
            raise NewerDatabaseError(unknown)
        backend.apply_migrations(pending)
    return [migration.id for migration in pending]


class UnknownMigrationError(Exception):
    """A migration id this code does not have."""

    def __init__(self, migration_id: str, known: Sequence[str]) -> None:
        super().__init__(f"no migration {migration_id!r} in this memvault; its migrations: {', '.join(known)}")


def rollback_migrations(dsn: str, to: str) -> list[str]:
    """Roll back, newest first and under the migration lock, every applied migration that comes after
    `to` in the order `migrate` applies them; return the ids rolled back.

    For going back to an older release, which refuses the newer schema: the rollback files are in
    this (newer) code. Raises NewerDatabaseError when the database has migrations even this code
    lacks, UnknownMigrationError when `to` is not one of its migrations."""
    from yoyo import read_migrations
    from yoyo.migrations import MigrationList, topological_sort

    backend = migration_backend(dsn)
    migrations = read_migrations(str(MIGRATIONS))
    order = [migration.id for migration in topological_sort(migrations)]
    if to not in order:
        raise UnknownMigrationError(to, order)
    later = set(order[order.index(to) + 1 :])
    with backend.lock():
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - set(order))
        if unknown:
            raise NewerDatabaseError(unknown)
        chosen = MigrationList([m for m in backend.to_rollback(migrations) if m.id in later])
        backend.rollback_migrations(chosen)
    return [migration.id for migration in chosen]


class OlderDatabaseError(Exception):
    """The database lacks migrations this code needs: `memvault-vault migrate` has not run since the upgrade."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(
            f"this database lacks migrations this memvault needs: {', '.join(missing)}; "
            "run `memvault-vault migrate` first"
        )


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
    """A memory about to be inserted; its id is chosen beforehand so later items of an import can link to it."""

    id: str
    content: str
    content_hash: str
    draft: Draft
    status: Status
    trust: Trust
    outcome: str = "stored"
    similar_to: tuple[str, ...] = ()
    supersedes: str | None = None


@dataclass(frozen=True)
class Existing:
    """A memory that already holds some text (id empty: the text is excluded)."""

    id: str
    status: Status


@dataclass(frozen=True)
class BatchRecord:
    source: str
    item_count: int
    outcomes: dict[str, int]


@dataclass(frozen=True)
class WriteReport:
    batch_id: str | None
    inserted: set[str]
    raced: dict[str, Existing]
    """Candidate id -> the memory that took its text between the caller's check and the write."""
    conflicts: dict[str, tuple[str, ...]]
    """Candidate id -> other active memories with the same key and scope."""


_VAULTS_OF = """
    SELECT v.id::text AS id, v.name, m.role, coalesce(s.approval_mode, 'review') AS approval_mode
    FROM vault v
    JOIN membership m ON m.vault_id = v.id
    JOIN account a ON a.id = m.account_id
    LEFT JOIN vault_settings s ON s.vault_id = v.id
    WHERE a.subject = $1
"""

# The query's lexemes with BM25's idf from the vault's own counts (vault_lexeme_stats, kept exact
# by triggers), ranked by every lexeme: sum of idf × ts_rank. See docs/research-fusion.md.
# MATERIALIZED keeps Postgres from re-running the term list per row.
_TERMS = """
    terms AS MATERIALIZED (
        SELECT q.lexeme, quote_literal(q.lexeme) AS literal, quote_literal(q.lexeme)::tsquery AS query,
               coalesce(s.ndoc, 0) AS df, total.n AS total,
               ln(1 + (greatest(total.n, coalesce(s.ndoc, 0)) - coalesce(s.ndoc, 0) + 0.5)
                      / (coalesce(s.ndoc, 0) + 0.5)) AS idf
        FROM (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme) AS q
        CROSS JOIN (SELECT coalesce(max(ndoc), 0) AS n FROM vault_text_stats WHERE vault_id = $1) AS total
        LEFT JOIN vault_lexeme_stats AS s ON s.vault_id = $1 AND s.lexeme = q.lexeme
    )
"""
_RANK = "coalesce((SELECT sum(terms.idf * ts_rank(m.search, terms.query)) FROM terms), 0)"

KEYWORD_RANK_BUDGET = 5000
"""Above this many (estimated) rows, full-text search ranks only memories with two query lexemes or a rare one."""
RARE_LEXEME_DOCS = 100
"""A lexeme in at most this many memories of the vault is rare: one is enough to be ranked."""

# The columns `_memory` reads: recall fetches them only for the memories it returns, never the
# search vector or the index hash.
_COLUMNS = """
    m.id, m.content, m.content_hash, m.type, m.status, m.trust, m.key, m.scope, m.tags, m.source, m.client,
    m.confidence, m.valid_from, m.valid_to, m.review_after, m.expires_at, m.depends_on, m.supersedes,
    m.superseded_by, m.similar_to, m.batch_id, m.version, m.pinned, m.created_at, m.updated_at,
    m.status_reason, m.flagged_reason, m.flagged_at, m.reviewed_at
"""

# Recall's filters, shared by both of its searches: $3 statuses, $4 types (NULL: any), $5 tags (all
# of them), $6 include expired, $7 as of (NULL: now). As of a past moment, a memory counts only if it
# was written by then, valid then, and never rejected; it is expired if it had expired by then.
_RECALL_FILTERS = """
          AND m.status = ANY($3::text[])
          AND ($4::text[] IS NULL OR m.type = ANY($4::text[]))
          AND m.tags @> $5::text[]
          AND ($6::bool OR m.expires_at IS NULL OR m.expires_at > coalesce($7::timestamptz, now()))
          AND ($7::timestamptz IS NULL OR (
              m.status <> 'rejected' AND m.created_at <= $7
              AND (m.valid_from IS NULL OR m.valid_from <= $7)
              AND (m.valid_to IS NULL OR m.valid_to > $7)))
"""

# Which memories are ranked. Lexemes in more than a tenth of the vault (and more than 100
# memories) are left out of the match, unless the query has nothing rarer, so a query of common
# words still finds something. When the lexemes left would still match more than
# KEYWORD_RANK_BUDGET memories (their document counts summed), only memories holding lexemes of two
# different query words, or one rare lexeme, are ranked: ranking reads every matched row, and in a
# large vault of similar memories that is tens of thousands of rows for a three-word query. (The
# lexemes of one word, like 'backup-drive' -> backup-dr, backup, drive, always come together, so a
# pair of them would narrow nothing.)
_KEYWORD = f"""
    WITH {_TERMS},
    cut AS (
        SELECT terms.lexeme, literal, df, words.n AS word FROM terms
        LEFT JOIN (
            SELECT DISTINCT w.n, l.lexeme
            FROM regexp_split_to_table($2, '[[:space:]]+') WITH ORDINALITY AS w (word, n),
                 unnest(tsvector_to_array(to_tsvector('english', w.word))) AS l (lexeme)
        ) AS words ON words.lexeme = terms.lexeme
        WHERE df > 0 AND (df <= greatest(0.1 * total, 100) OR df = (SELECT min(df) FROM terms WHERE df > 0))
    ),
    matching AS MATERIALIZED (
        SELECT (CASE
            WHEN (SELECT coalesce(sum(df), 0) FROM (SELECT DISTINCT lexeme, df FROM cut) AS c) <= {KEYWORD_RANK_BUDGET}
              OR (SELECT count(DISTINCT word) FROM cut) < 2
                THEN (SELECT coalesce(string_agg(DISTINCT literal, ' | '), '') FROM cut)
            ELSE (SELECT string_agg(DISTINCT clause, ' | ') FROM (
                SELECT '(' || a.literal || ' & ' || b.literal || ')' AS clause
                FROM cut a JOIN cut b ON a.lexeme < b.lexeme AND a.word <> b.word
                UNION ALL
                SELECT literal FROM cut WHERE df <= {RARE_LEXEME_DOCS}
            ) AS clauses)
        END)::tsquery AS query
    ),
    ranked AS (
        SELECT m.id, m.status, m.created_at, {_RANK} AS rank
        FROM memory m, matching
        WHERE m.vault_id = $1
          AND m.search @@ matching.query
          {_RECALL_FILTERS}
        ORDER BY rank DESC, m.created_at DESC, m.id
        LIMIT $8 OFFSET $9
    )
    SELECT id::text, status, created_at, rank FROM ranked
    ORDER BY rank DESC, created_at DESC, id
"""  # noqa: S608 - joins constant SQL fragments, no input


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
        status_reason=row["status_reason"],
        flagged_reason=row["flagged_reason"],
        flagged_at=row["flagged_at"],
        reviewed_at=row["reviewed_at"],
    )


@dataclass(frozen=True)
class RecallRow:
    """A memory on a recall page, with the ids of active memories linked to it as similar and of
    active memories sharing its key and scope."""

    memory: Memory
    similar: tuple[str, ...]
    same_key: tuple[str, ...]


def _found(row: asyncpg.Record) -> Found:
    return Found(row["id"], Status(row["status"]), row["created_at"], float(row["rank"]))


def _recall_filter_args(
    statuses: Sequence[Status],
    types: Sequence[MemoryType],
    tags: Sequence[str],
    include_expired: bool,
    as_of: datetime | None,
) -> tuple[Any, ...]:
    """The parameters $3 to $7 of `_RECALL_FILTERS`."""
    return ([s.value for s in statuses], [t.value for t in types] or None, list(tags), include_expired, as_of)


class _PooledConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg's classes are untyped
    """A pool connection handed back without asyncpg's reset query (a round trip on every release).

    The reset undoes session state: session advisory locks, cursors, LISTEN, SET. The vault's pool
    leaves none behind (its locks are transaction locks, it declares no cursors outside a
    transaction, the relay listens on a connection of its own), so the reset would only cost time.
    """

    def get_reset_query(self) -> str:
        return ""


class Store:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Store:
        # JIT compiles a plan for a query the planner thinks is costly; recall's full-text query in a large
        # vault crosses that line and pays tens of milliseconds to compile what runs in a few.
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            server_settings={"jit": "off"},
            connection_class=_PooledConnection,
        )
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        await self._pool.fetchval("SELECT 1")

    async def unknown_migrations(self) -> list[str]:
        """Migrations applied to this database that this code does not know (a newer memvault's)."""
        if await self._pool.fetchval("SELECT to_regclass('_yoyo_migration')") is None:
            return []
        applied = await self._pool.fetch("SELECT migration_id FROM _yoyo_migration")
        return sorted({row["migration_id"] for row in applied} - migration_ids())

    async def missing_migrations(self) -> list[str]:
        """This code's migrations not applied to this database: its queries would fail on the old schema."""
        if await self._pool.fetchval("SELECT to_regclass('_yoyo_migration')") is None:
            return sorted(migration_ids())
        applied = await self._pool.fetch("SELECT migration_id FROM _yoyo_migration")
        return sorted(migration_ids() - {row["migration_id"] for row in applied})

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
            account = await conn.fetchrow(
                "INSERT INTO account (subject) VALUES ($1) ON CONFLICT (subject) DO UPDATE SET subject = EXCLUDED.subject"
                " RETURNING id, display_name",
                subject,
            )
            account_id = account["id"]
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
            text = guide.default_text(account["display_name"])
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

    # --- writes --------------------------------------------------------------------------------

    async def lookup_texts(self, vault: VaultAccess, hashes: Sequence[str]) -> tuple[dict[str, Existing], set[str]]:
        """Memories already holding these texts (by hash), and the hashes excluded from being stored."""
        rows = await self._pool.fetch(
            "SELECT id::text, content_hash, status FROM memory WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
            vault.id,
            list(hashes),
        )
        excluded = await self._pool.fetch(
            "SELECT content_hash FROM exclusion WHERE vault_id = $1 AND content_hash = ANY($2::text[])",
            vault.id,
            list(hashes),
        )
        return (
            {row["content_hash"]: Existing(row["id"], Status(row["status"])) for row in rows},
            {row["content_hash"] for row in excluded},
        )

    async def unindexed_for_compare(self, vault: VaultAccess, limit: int) -> tuple[list[tuple[str, str]], int]:
        """(id, text) of the newest memories a duplicate check compares with whose text the index does not hold
        yet, and how many such memories there are (failed ones not counted: they are reported elsewhere)."""
        rows = await self._pool.fetch(
            """
            SELECT m.id::text, memvault_index_text(m.content, m.context, m.valid_from) AS content,
                   count(*) OVER () AS total
            FROM index_pending p JOIN memory m ON m.id = p.memory_id
            LEFT JOIN index_state s ON s.memory_id = m.id
            WHERE p.vault_id = $1 AND m.status IN ('proposed', 'active', 'superseded')
              AND (s.memory_id IS NULL OR s.state <> 'failed')
              AND p.created_at > now() - interval '1 hour'
            ORDER BY p.created_at DESC
            LIMIT $2
            """,
            vault.id,
            limit,
        )
        return [(row["id"], row["content"]) for row in rows], (int(rows[0]["total"]) if rows else 0)

    async def existing_ids(self, vault: VaultAccess, ids: Sequence[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT id::text FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])", vault.id, list(ids)
        )
        return {row["id"] for row in rows}

    async def write(
        self,
        vault: VaultAccess,
        candidates: Sequence[Candidate],
        *,
        actor: str,
        client: str,
        batch: BatchRecord | None = None,
        audit: tuple[str, dict[str, Any]] = ("memory.remember", {}),
    ) -> WriteReport:
        """Insert candidates in one transaction (with their history, events, batch and audit entry).

        Writes to one vault are serialised, so a text that another write stored since the caller
        looked is caught here (`raced`) instead of failing the whole call.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_vault(conn, vault.id)
            return await self._insert(conn, vault, candidates, actor=actor, client=client, batch=batch, audit=audit)

    async def _lock_vault(self, conn: asyncpg.Connection, vault_id: str) -> None:
        """Writes to one vault are serialised (so an exact duplicate that slips in between is still caught)."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", vault_id)

    async def _insert(
        self,
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
                                    depends_on, similar_to, supersedes, batch_id, context)
                SELECT r.id, $1, r.content, r.content_hash, r.type, r.key, r.scope,
                       ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.source, $2, r.trust, r.confidence,
                       r.status, coalesce(r.valid_from, now()), r.valid_to, r.review_after, r.expires_at,
                       ARRAY(SELECT jsonb_array_elements_text(r.depends_on))::uuid[],
                       ARRAY(SELECT jsonb_array_elements_text(r.similar_to))::uuid[], r.supersedes, $3::uuid,
                       r.context
                FROM jsonb_to_recordset($4::jsonb) AS r(id uuid, content text, content_hash text, type text,
                     key text, scope text, tags jsonb, source text, trust text, confidence real, status text,
                     valid_from timestamptz, valid_to timestamptz, review_after timestamptz,
                     expires_at timestamptz, depends_on jsonb, similar_to jsonb, supersedes uuid, context text)
                RETURNING id::text
                """,
                vault.id,
                client,
                batch_id,
                json.dumps([_row_of(c, now) for c in to_insert], default=str),
            )
            ids = [row["id"] for row in inserted]
            await self._history(conn, ids, "created", actor)
            await self._enqueue(conn, [events.memory_created(c.id, vault.id, c.content_hash) for c in to_insert])
        conflicts = await self._same_key_active(conn, vault, [c.id for c in to_insert])
        action, details = audit
        await self._audit(conn, vault.id, actor, action, batch_id or (to_insert[0].id if to_insert else ""), details)
        return WriteReport(batch_id, {c.id for c in to_insert}, raced, conflicts)

    async def _same_key_active(
        self, conn: asyncpg.Connection, vault: VaultAccess, ids: Sequence[str]
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

    async def _history(
        self, conn: asyncpg.Connection, ids: Sequence[str], change: str, actor: str, cause: str | None = None
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
        include_expired: bool = False,
        as_of: datetime | None = None,
    ) -> list[Found]:
        """The vault's best full-text matches that pass recall's filters, best first (read whole with `recall_page`)."""
        rows = await self._pool.fetch(
            _KEYWORD,
            vault.id,
            query,
            *_recall_filter_args(statuses, types, tags, include_expired, as_of),
            limit,
            offset,
        )
        return [_found(row) for row in rows]

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
        include_expired: bool = False,
        as_of: datetime | None = None,
    ) -> list[Found]:
        """These memories of the vault that pass recall's filters, each with its keyword rank (0 when no word matches)."""
        if not ids:
            return []
        rows = await self._pool.fetch(
            f"""
            WITH {_TERMS}
            SELECT m.id::text, m.status, m.created_at, {_RANK} AS rank
            FROM memory m
            WHERE m.vault_id = $1
              AND m.id = ANY($8::uuid[])
              {_RECALL_FILTERS}
            """,  # noqa: S608 - constant SQL fragments, no input
            vault.id,
            query,
            *_recall_filter_args(statuses, types, tags, include_expired, as_of),
            list(ids),
        )
        return [_found(row) for row in rows]

    async def unindexed_recent(self, vault: VaultAccess, limit: int) -> list[tuple[str, str]]:
        """(id, text) of the newest memories whose current text the index does not hold yet."""
        rows = await self._pool.fetch(
            """
            SELECT m.id::text, memvault_index_text(m.content, m.context, m.valid_from) AS content
            FROM index_pending p JOIN memory m ON m.id = p.memory_id
            WHERE p.vault_id = $1 AND m.status IN ('proposed', 'active')
              -- Only recent writes: older unindexed memories are failures, which keyword search covers.
              AND p.created_at > now() - interval '15 minutes'
            ORDER BY p.created_at DESC
            LIMIT $2
            """,
            vault.id,
            limit,
        )
        return [(row["id"], row["content"]) for row in rows]

    async def unindexed_older(self, vault: VaultAccess) -> int:
        """Memories not in the index that recall cannot score from their text (written over 15 minutes ago):
        a restore or reindex still catching up, or failures. Keyword search alone finds them."""
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM index_pending WHERE vault_id = $1 AND created_at <= now() - interval '15 minutes'",
                vault.id,
            )
        )

    async def documents(self, ids: Sequence[str]) -> list[asyncpg.Record]:
        return list(
            await self._pool.fetch(
                "SELECT m.id::text AS memory_id, m.vault_id::text, memvault_index_text(m.content, m.context, m.valid_from)"
                " AS content, m.index_hash AS content_hash, m.created_at,"
                " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
                " FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed'"
                " WHERE m.id = ANY($1::uuid[])",
                list(ids),
            )
        )

    async def documents_after(self, after_id: str | None, limit: int) -> list[asyncpg.Record]:
        return list(
            await self._pool.fetch(
                "SELECT m.id::text AS memory_id, m.vault_id::text, memvault_index_text(m.content, m.context, m.valid_from)"
                " AS content, m.index_hash AS content_hash, m.created_at,"
                " coalesce(s.content_hash, '') AS indexed_hash, coalesce(s.model, '') AS indexed_model"
                " FROM memory m LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed'"
                " WHERE $1::uuid IS NULL OR m.id > $1::uuid ORDER BY m.id LIMIT $2",
                after_id,
                limit,
            )
        )

    async def report_indexed(self, reports: Sequence[tuple[str, str, str, str, str]]) -> None:
        """Record (memory id, content hash, model, state, error) for memories that still exist; a memory
        whose current text is now indexed is no longer pending.

        The memory's row is locked first, as a delete locks it before its index rows; a memory being
        deleted right now is skipped, not waited for (the wait would end in a foreign-key error, or
        in a deadlock with the delete when both reach the index rows in opposite order)."""
        await self._pool.executemany(
            """
            WITH reported AS (
                INSERT INTO index_state (memory_id, vault_id, content_hash, model, state, attempts, last_error)
                SELECT m.id, m.vault_id, $2, $3, $4, CASE WHEN $4 = 'failed' THEN 1 ELSE 0 END, nullif($5, '')
                FROM memory m WHERE m.id = $1::uuid
                FOR KEY SHARE SKIP LOCKED
                ON CONFLICT (memory_id) DO UPDATE SET
                    content_hash = EXCLUDED.content_hash, model = EXCLUDED.model, state = EXCLUDED.state,
                    attempts = CASE WHEN EXCLUDED.state = 'failed' THEN index_state.attempts + 1 ELSE 0 END,
                    last_error = EXCLUDED.last_error, updated_at = now()
                RETURNING memory_id
            )
            DELETE FROM index_pending p USING reported r, memory m
            WHERE $4 = 'indexed' AND p.memory_id = r.memory_id AND m.id = r.memory_id AND m.index_hash = $2
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
            SELECT count(*) FILTER (WHERE s.state = 'indexed' AND s.content_hash = m.index_hash) AS indexed,
                   count(*) FILTER (WHERE s.state = 'failed') AS failed,
                   count(*) FILTER (WHERE s.memory_id IS NULL OR s.content_hash <> m.index_hash) AS pending
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
        return {
            "memories": by_status,
            "indexed": index["indexed"],
            "index_failed": index["failed"],
            "index_pending": index["pending"],
            "recent_failures": [dict(row) for row in failures],
        }

    # --- lifecycle: supersede, invalidate, review, explain, audit, imports, settings, guide -------------

    async def get_memory(self, vault: VaultAccess, memory_id: str) -> Memory | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM memory WHERE vault_id = $1 AND id = $2::uuid", vault.id, memory_id
        )
        return None if row is None else _memory(row, vault.name)

    async def memories(self, vault: VaultAccess, ids: Sequence[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        rows = await self._pool.fetch(
            "SELECT * FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])", vault.id, list(dict.fromkeys(ids))
        )
        return {str(row["id"]): _memory(row, vault.name) for row in rows}

    async def _locked(self, conn: asyncpg.Connection, vault: VaultAccess, memory_id: str) -> Memory:
        row = await conn.fetchrow(
            "SELECT * FROM memory WHERE vault_id = $1 AND id = $2::uuid FOR UPDATE", vault.id, memory_id
        )
        if row is None:
            raise NotFound(
                f"no memory {memory_id} in vault '{vault.name}'; find ids with recall or list_memories",
                field="memory_id",
            )
        return _memory(row, vault.name)

    async def _retire(
        self, conn: asyncpg.Connection, vault: VaultAccess, ids: Sequence[str], *, by: str, actor: str
    ) -> list[str]:
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
        await self._history(conn, ids, "superseded", actor, cause=by)
        flagged: list[str] = []
        for memory_id in ids:
            flagged += await self._flag_dependents(
                conn, vault, memory_id, f"depends on {memory_id}, which was superseded by {by}", actor, cause=by
            )
        return flagged

    async def _flag_dependents(
        self, conn: asyncpg.Connection, vault: VaultAccess, memory_id: str, reason: str, actor: str, cause: str
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
        await self._history(conn, ids, "flagged", actor, cause=cause)
        return ids

    async def supersede(
        self,
        vault: VaultAccess,
        old_id: str,
        candidate: Candidate,
        *,
        apply: bool,
        expected_version: int,
        actor: str,
        client: str,
    ) -> tuple[WriteReport, list[str]]:
        """Store `candidate` as the replacement of `old_id`; with `apply`, the old one is superseded now."""
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_vault(conn, vault.id)
            old = await self._locked(conn, vault, old_id)
            require_status(old, (Status.ACTIVE, Status.PROPOSED), "supersede")
            check_version(old, expected_version)
            report = await self._insert(
                conn,
                vault,
                [candidate],
                actor=actor,
                client=client,
                batch=None,
                audit=("memory.supersede", {"old": old_id, "applied": apply}),
            )
            if candidate.id in report.raced:
                existing = report.raced[candidate.id]
                raise Conflict(
                    f"the replacement text is already stored as memory {existing.id or '(forgotten)'} "
                    f"({existing.status.value}); supersede {old_id} with different text, or invalidate it",
                    field="content",
                )
            flagged = await self._retire(conn, vault, [old_id], by=candidate.id, actor=actor) if apply else []
            return report, flagged

    async def invalidate(
        self, vault: VaultAccess, memory_id: str, reason: str, *, apply: bool, expected_version: int, actor: str
    ) -> tuple[Memory, list[str]]:
        """Mark a memory no longer true (its validity ends now), or, without `apply`, flag it for the owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            memory = await self._locked(conn, vault, memory_id)
            require_status(memory, (Status.ACTIVE, Status.PROPOSED), "invalidate")
            check_version(memory, expected_version)
            flagged: list[str] = []
            if apply:
                await conn.execute(
                    "UPDATE memory SET status = 'invalidated', status_reason = nullif($2, ''),"
                    " valid_to = coalesce(valid_to, now()), version = version + 1, updated_at = now()"
                    " WHERE id = $1::uuid",
                    memory_id,
                    reason,
                )
                await self._history(conn, [memory_id], "invalidated", actor)
                flagged = await self._flag_dependents(
                    conn, vault, memory_id, f"depends on {memory_id}, which was invalidated", actor, cause=memory_id
                )
            else:
                await conn.execute(
                    "UPDATE memory SET flagged_reason = $2, flagged_at = now(), status_reason = nullif($3, ''),"
                    " version = version + 1, updated_at = now() WHERE id = $1::uuid",
                    memory_id,
                    f"invalidation proposed by {actor}",
                    reason,
                )
                await self._history(conn, [memory_id], "invalidation proposed", actor)
            action = "memory.invalidate" if apply else "memory.propose_invalidation"
            await self._audit(conn, vault.id, actor, action, memory_id, {"flagged_dependents": len(flagged)})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return _memory(row, vault.name), flagged

    async def approve(
        self,
        vault: VaultAccess,
        memory_id: str,
        *,
        replace_similar: bool,
        replace_ids: Sequence[str],
        expected_version: int,
        actor: str,
    ) -> tuple[Memory, list[str], list[str]]:
        """Make a proposed memory active; supersede what it replaces. Returns it, the superseded and the flagged."""
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_vault(conn, vault.id)
            memory = await self._locked(conn, vault, memory_id)
            require_status(memory, (Status.PROPOSED,), "approve")
            check_version(memory, expected_version)
            same_key = (await self._same_key_active(conn, vault, [memory_id])).get(memory_id, ())
            replaceable = dict.fromkeys(
                [*([memory.supersedes] if memory.supersedes else []), *memory.similar_to, *same_key]
            )
            if replace_ids:
                for i, other in enumerate(replace_ids):
                    if other not in replaceable:
                        raise InvalidArgument(
                            f"replace_ids[{i}] {other} is not a memory this one is similar to, replaces or shares a "
                            f"key with; it can replace: {', '.join(replaceable) or 'nothing'}",
                            field=f"replace_ids[{i}]",
                        )
                chosen = list(dict.fromkeys(replace_ids))
            elif replace_similar:
                chosen = list(replaceable)
            else:
                chosen = [memory.supersedes] if memory.supersedes else []
            live = [
                row["id"]
                for row in await conn.fetch(
                    "SELECT id::text FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])"
                    " AND status IN ('active', 'proposed') AND id <> $3::uuid FOR UPDATE",
                    vault.id,
                    chosen,
                    memory_id,
                )
            ]
            await conn.execute(
                "UPDATE memory SET status = 'active', reviewed_at = now(), version = version + 1, updated_at = now()"
                " WHERE id = $1::uuid",
                memory_id,
            )
            await self._history(conn, [memory_id], "approved", actor)
            flagged = await self._retire(conn, vault, live, by=memory_id, actor=actor)
            await self._audit(
                conn,
                vault.id,
                actor,
                "memory.approve",
                memory_id,
                {"superseded": live, "flagged_dependents": len(flagged)},
            )
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return _memory(row, vault.name), live, flagged

    async def reject(
        self, vault: VaultAccess, memory_id: str, reason: str, *, expected_version: int, actor: str
    ) -> Memory:
        async with self._pool.acquire() as conn, conn.transaction():
            memory = await self._locked(conn, vault, memory_id)
            require_status(memory, (Status.PROPOSED,), "reject")
            check_version(memory, expected_version)
            await conn.execute(
                "UPDATE memory SET status = 'rejected', status_reason = nullif($2, ''), reviewed_at = now(),"
                " version = version + 1, updated_at = now() WHERE id = $1::uuid",
                memory_id,
                reason,
            )
            await self._history(conn, [memory_id], "rejected", actor)
            flagged = await self._flag_dependents(
                conn, vault, memory_id, f"depends on {memory_id}, which was rejected", actor, cause=memory_id
            )
            await self._audit(conn, vault.id, actor, "memory.reject", memory_id, {"flagged_dependents": len(flagged)})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return _memory(row, vault.name)

    async def mark_reviewed(
        self, vault: VaultAccess, memory_id: str, next_review: datetime | None, *, expected_version: int, actor: str
    ) -> Memory:
        """Clear a memory's flag and set its next review date: the owner checked it and it still holds."""
        async with self._pool.acquire() as conn, conn.transaction():
            memory = await self._locked(conn, vault, memory_id)
            require_status(memory, (Status.ACTIVE, Status.PROPOSED), "mark as reviewed")
            check_version(memory, expected_version)
            await conn.execute(
                "UPDATE memory SET flagged_reason = NULL, flagged_at = NULL, reviewed_at = now(), review_after = $2,"
                " status_reason = CASE WHEN flagged_reason LIKE 'invalidation proposed%' THEN NULL ELSE status_reason END,"
                " version = version + 1, updated_at = now() WHERE id = $1::uuid",
                memory_id,
                next_review,
            )
            await self._history(conn, [memory_id], "reviewed", actor)
            await self._audit(conn, vault.id, actor, "memory.review", memory_id, {})
            row = await conn.fetchrow("SELECT * FROM memory WHERE id = $1::uuid", memory_id)
            return _memory(row, vault.name)

    async def history(self, vault: VaultAccess, memory_id: str, limit: int) -> list[HistoryRecord]:
        """The newest `limit` versions of a memory, oldest first."""
        rows = await self._pool.fetch(
            """
            SELECT * FROM (
                SELECT version, change, actor, changed_at, coalesce(cause::text, '') AS cause, snapshot::text AS snapshot
                FROM memory_history WHERE vault_id = $1 AND memory_id = $2::uuid
                ORDER BY id DESC LIMIT $3
            ) newest ORDER BY version, changed_at
            """,
            vault.id,
            memory_id,
            limit,
        )
        return [
            HistoryRecord(r["version"], r["change"], r["actor"], r["changed_at"], r["cause"], json.loads(r["snapshot"]))
            for r in rows
        ]

    async def related(self, vault: VaultAccess, memory: Memory, limit: int) -> list[tuple[str, Memory]]:
        """Memories linked to this one, each with how: depends_on, dependent, similar, similar_from,
        supersedes, superseded_by, same_key."""
        rows = await self._pool.fetch(
            """
            SELECT 'depends_on' AS relation, m.* FROM memory m WHERE m.vault_id = $1 AND m.id = ANY($3::uuid[])
            UNION ALL
            SELECT 'dependent', m.* FROM memory m WHERE m.vault_id = $1 AND m.depends_on @> ARRAY[$2::uuid]
            UNION ALL
            SELECT 'similar', m.* FROM memory m WHERE m.vault_id = $1 AND m.id = ANY($4::uuid[])
            UNION ALL
            SELECT 'similar_from', m.* FROM memory m WHERE m.vault_id = $1 AND m.similar_to @> ARRAY[$2::uuid]
            UNION ALL
            SELECT 'supersedes', m.* FROM memory m WHERE m.vault_id = $1 AND m.superseded_by = $2::uuid
            UNION ALL
            SELECT 'superseded_by', m.* FROM memory m WHERE m.vault_id = $1 AND m.id = $5::uuid
            UNION ALL
            SELECT 'same_key', m.* FROM memory m
            WHERE m.vault_id = $1 AND $6::text IS NOT NULL AND m.key = $6 AND m.scope IS NOT DISTINCT FROM $7
              AND m.id <> $2::uuid AND m.status IN ('active', 'proposed')
            LIMIT $8
            """,
            vault.id,
            memory.id,
            list(memory.depends_on),
            list(memory.similar_to),
            memory.superseded_by,
            memory.key,
            memory.scope,
            limit,
        )
        seen: set[tuple[str, str]] = set()
        related: list[tuple[str, Memory]] = []
        for row in rows:
            relation = row["relation"]
            if (relation, str(row["id"])) not in seen:
                seen.add((relation, str(row["id"])))
                related.append((relation, _memory(row, vault.name)))
        if memory.supersedes and ("supersedes", memory.supersedes) not in seen:
            target = await self.get_memory(vault, memory.supersedes)
            if target is not None:
                related.append(("supersedes", target))
        return related

    async def recall_page(self, vault: VaultAccess, ids: Sequence[str]) -> dict[str, RecallRow]:
        """The memories recall returns, whole, each with the active memories linked to it as similar
        (either way) and the active memories sharing its key and scope. A memory deleted since it
        was found is missing."""
        if not ids:
            return {}
        rows = await self._pool.fetch(
            f"""
            SELECT {_COLUMNS},
                   ARRAY(SELECT o.id::text FROM memory o
                         WHERE o.id = ANY(m.similar_to) AND o.vault_id = m.vault_id AND o.status = 'active'
                         UNION
                         SELECT o.id::text FROM memory o
                         WHERE o.similar_to @> ARRAY[m.id] AND o.vault_id = m.vault_id AND o.id <> m.id
                           AND o.status = 'active') AS similar_active,
                   ARRAY(SELECT o.id::text FROM memory o
                         WHERE o.vault_id = m.vault_id AND o.id <> m.id AND o.status = 'active'
                           AND m.key IS NOT NULL AND o.key = m.key AND o.scope IS NOT DISTINCT FROM m.scope) AS same_key
            FROM memory m WHERE m.vault_id = $1 AND m.id = ANY($2::uuid[])
            """,  # noqa: S608 - constant SQL fragments, no input
            vault.id,
            list(ids),
        )
        return {
            str(row["id"]): RecallRow(_memory(row, vault.name), tuple(row["similar_active"]), tuple(row["same_key"]))
            for row in rows
        }

    async def audit_findings(
        self, vault: VaultAccess, kinds: Sequence[str], limit: int, after_id: str | None
    ) -> tuple[list[tuple[Memory, list[str], list[str]]], dict[str, int]]:
        """Active and proposed memories that need attention, by id; and the count of each kind in the vault."""
        rows = await self._pool.fetch(
            _FINDINGS + " WHERE cardinality(f.kinds) > 0 AND f.kinds && $2::text[]"
            " AND ($3::uuid IS NULL OR f.id > $3::uuid) ORDER BY f.id LIMIT $4",
            vault.id,
            list(kinds),
            after_id,
            limit,
        )
        counts = await self._pool.fetch(
            _FINDING_COUNTS,
            vault.id,
            list(kinds),
        )
        found = [(_memory(row, vault.name), list(row["kinds"]), list(row["related"])) for row in rows]
        return found, {row["kind"]: row["count"] for row in counts}

    async def review_queue(
        self, vault: VaultAccess, limit: int, after: tuple[datetime, str] | None
    ) -> tuple[list[Memory], int]:
        """Proposed memories, oldest first, and how many there are."""
        rows = await self._pool.fetch(
            "SELECT * FROM memory WHERE vault_id = $1 AND status = 'proposed'"
            " AND ($2::timestamptz IS NULL OR (created_at, id) > ($2, $3::uuid))"
            " ORDER BY created_at, id LIMIT $4",
            vault.id,
            after[0] if after else None,
            after[1] if after else None,
            limit,
        )
        total = await self._pool.fetchval(
            "SELECT count(*) FROM memory WHERE vault_id = $1 AND status = 'proposed'", vault.id
        )
        return [_memory(row, vault.name) for row in rows], int(total)

    async def batches(self, vault: VaultAccess, limit: int, before: tuple[datetime, str] | None) -> list[BatchInfo]:
        rows = await self._pool.fetch(
            "SELECT id::text, source, actor, item_count, stored_count, created_at, undone_at, outcomes::text"
            " FROM import_batch WHERE vault_id = $1"
            " AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))"
            " ORDER BY created_at DESC, id DESC LIMIT $4",
            vault.id,
            before[0] if before else None,
            before[1] if before else None,
            limit,
        )
        return [_batch(row) for row in rows]

    async def undo_batch(self, vault: VaultAccess, batch_id: str, actor: str) -> UndoReport | None:
        """Delete the batch's memories and put back every other memory it changed; None if no such batch.

        A memory outside the batch that only the batch changed (superseded by one of its memories,
        flagged because of one) is restored exactly as it was. One that changed since for another
        reason keeps that change and only loses its links to the batch.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_vault(conn, vault.id)
            row = await conn.fetchrow(
                "SELECT id::text, source, actor, item_count, stored_count, created_at, undone_at, outcomes::text"
                " FROM import_batch WHERE vault_id = $1 AND id = $2::uuid FOR UPDATE",
                vault.id,
                batch_id,
            )
            if row is None:
                return None
            if row["undone_at"] is not None:
                raise Conflict(
                    f"import {batch_id} was already undone at {row['undone_at'].isoformat()}", field="batch_id"
                )
            ids = [
                r["id"]
                for r in await conn.fetch(
                    "SELECT id::text FROM memory WHERE vault_id = $1 AND batch_id = $2::uuid", vault.id, batch_id
                )
            ]
            touched = await conn.fetch(
                """
                SELECT h.memory_id::text AS id, min(h.version) AS first
                FROM memory_history h
                WHERE h.vault_id = $1 AND h.cause = ANY($2::uuid[]) AND h.memory_id <> ALL($2::uuid[])
                GROUP BY h.memory_id
                """,
                vault.id,
                ids,
            )
            restored = 0
            kept: list[str] = []
            for t in touched:
                other = await conn.fetchval(
                    "SELECT count(*) FROM memory_history WHERE memory_id = $1::uuid AND version >= $2"
                    " AND (cause IS NULL OR cause <> ALL($3::uuid[]))",
                    t["id"],
                    t["first"],
                    ids,
                )
                before = await conn.fetchval(
                    "SELECT snapshot::text FROM memory_history WHERE memory_id = $1::uuid AND version < $2"
                    " ORDER BY version DESC, id DESC LIMIT 1",
                    t["id"],
                    t["first"],
                )
                if other == 0 and before is not None:
                    await conn.execute(_RESTORE, t["id"], before)
                    await conn.execute(
                        "DELETE FROM memory_history WHERE memory_id = $1::uuid AND version >= $2", t["id"], t["first"]
                    )
                    restored += 1
                else:
                    kept.append(t["id"])
            # Memories written or changed since that still point at the batch: links removed, the rest kept.
            linked = await conn.fetch(
                """
                UPDATE memory m SET
                    similar_to = ARRAY(SELECT x FROM unnest(m.similar_to) x WHERE x <> ALL($2::uuid[])),
                    depends_on = ARRAY(SELECT x FROM unnest(m.depends_on) x WHERE x <> ALL($2::uuid[])),
                    status = CASE WHEN m.superseded_by = ANY($2::uuid[]) THEN 'active' ELSE m.status END,
                    valid_to = CASE WHEN m.superseded_by = ANY($2::uuid[]) THEN NULL ELSE m.valid_to END,
                    superseded_by = CASE WHEN m.superseded_by = ANY($2::uuid[]) THEN NULL ELSE m.superseded_by END,
                    supersedes = CASE WHEN m.supersedes = ANY($2::uuid[]) THEN NULL ELSE m.supersedes END,
                    version = m.version + 1, updated_at = now()
                WHERE m.vault_id = $1 AND m.id <> ALL($2::uuid[])
                  AND (m.similar_to && $2::uuid[] OR m.depends_on && $2::uuid[]
                       OR m.superseded_by = ANY($2::uuid[]) OR m.supersedes = ANY($2::uuid[]))
                RETURNING m.id::text
                """,
                vault.id,
                ids,
            )
            unlinked = [r["id"] for r in linked]
            await self._history(conn, unlinked, "import undone", actor)
            kept = list(dict.fromkeys([*kept, *unlinked]))
            await conn.execute(
                "DELETE FROM memory_history WHERE vault_id = $1 AND memory_id = ANY($2::uuid[])", vault.id, ids
            )
            await conn.execute("DELETE FROM memory WHERE vault_id = $1 AND id = ANY($2::uuid[])", vault.id, ids)
            await self._enqueue(conn, [events.memory_forgotten(memory_id, vault.id) for memory_id in ids])
            undone = await conn.fetchrow(
                "UPDATE import_batch SET undone_at = now(), undone_by = $2 WHERE id = $1::uuid"
                " RETURNING id::text, source, actor, item_count, stored_count, created_at, undone_at, outcomes::text",
                batch_id,
                actor,
            )
            await self._audit(
                conn,
                vault.id,
                actor,
                "batch.undo",
                batch_id,
                {"removed": len(ids), "restored": restored, "kept_changes": len(kept)},
            )
            return UndoReport(_batch(undone), len(ids), restored, kept)

    async def settings(self, vault: VaultAccess) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            "SELECT approval_mode, superseded_retention_days, rejected_retention_days, audit_retention_days"
            " FROM vault_settings WHERE vault_id = $1",
            vault.id,
        )
        if row is None:
            return {
                "approval_mode": "review",
                "superseded_retention_days": 365,
                "rejected_retention_days": 30,
                "audit_retention_days": 365,
            }
        return dict(row)

    async def update_settings(self, vault: VaultAccess, changes: dict[str, Any], actor: str) -> dict[str, Any]:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("INSERT INTO vault_settings (vault_id) VALUES ($1) ON CONFLICT DO NOTHING", vault.id)
            before = dict(
                await conn.fetchrow(
                    "SELECT approval_mode, superseded_retention_days, rejected_retention_days, audit_retention_days"
                    " FROM vault_settings WHERE vault_id = $1 FOR UPDATE",
                    vault.id,
                )
            )
            after = {**before, **changes}
            await conn.execute(
                "UPDATE vault_settings SET approval_mode = $2, superseded_retention_days = $3,"
                " rejected_retention_days = $4, audit_retention_days = $5, updated_at = now() WHERE vault_id = $1",
                vault.id,
                after["approval_mode"],
                after["superseded_retention_days"],
                after["rejected_retention_days"],
                after["audit_retention_days"],
            )
            changed = {k: {"from": before[k], "to": v} for k, v in after.items() if before[k] != v}
            await self._audit(conn, vault.id, actor, "settings.update", vault.name, changed)
            return after

    async def owner_name(self, vault: VaultAccess) -> str:
        """The display name of the vault's (first) owner; empty when it has none."""
        name = await self._pool.fetchval(
            "SELECT a.display_name FROM membership m JOIN account a ON a.id = m.account_id"
            " WHERE m.vault_id = $1 AND m.role = 'owner' ORDER BY m.created_at LIMIT 1",
            vault.id,
        )
        return str(name or "")

    async def guide_record(self, vault: VaultAccess) -> GuideRecord:
        row = await self._pool.fetchrow(
            "SELECT text, version, default_revision, updated_by, updated_at FROM operating_guide WHERE vault_id = $1",
            vault.id,
        )
        if row is None:
            return GuideRecord(guide.default_text(), 0, guide.default_revision(), "system", None)
        return GuideRecord(row["text"], row["version"], row["default_revision"], row["updated_by"], row["updated_at"])

    async def update_guide(
        self, vault: VaultAccess, text: str, *, expected_version: int, adopted_default: bool, actor: str
    ) -> int:
        """Save a new version of the guide; the owner has now seen the current default, so its notice stops."""
        async with self._pool.acquire() as conn, conn.transaction():
            current = await conn.fetchrow(
                "SELECT version FROM operating_guide WHERE vault_id = $1 FOR UPDATE", vault.id
            )
            version = current["version"] if current else 0
            if expected_version and expected_version != version:
                raise Conflict(
                    f"the guide is at version {version}, not {expected_version}: someone saved it since you read it. "
                    "Read it again and reapply your edit",
                    field="expected_version",
                )
            new_version = version + 1
            await conn.execute(
                "INSERT INTO operating_guide (vault_id, text, version, default_revision, updated_by)"
                " VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT (vault_id) DO UPDATE SET text = EXCLUDED.text, version = EXCLUDED.version,"
                " default_revision = EXCLUDED.default_revision, updated_by = EXCLUDED.updated_by, updated_at = now()",
                vault.id,
                text,
                new_version,
                guide.default_revision(),
                actor,
            )
            await conn.execute(
                "INSERT INTO operating_guide_history (vault_id, version, text, updated_by) VALUES ($1, $2, $3, $4)",
                vault.id,
                new_version,
                text,
                actor,
            )
            action = "guide.adopt_default" if adopted_default else "guide.update"
            await self._audit(conn, vault.id, actor, action, vault.name, {"version": new_version, "chars": len(text)})
            return int(new_version)

    async def guide_versions(
        self, vault: VaultAccess, limit: int, before_version: int
    ) -> list[tuple[int, str, datetime, str]]:
        rows = await self._pool.fetch(
            "SELECT version, updated_by, updated_at, text FROM operating_guide_history"
            " WHERE vault_id = $1 AND ($2::bigint = 0 OR version < $2) ORDER BY version DESC LIMIT $3",
            vault.id,
            before_version,
            limit,
        )
        return [(r["version"], r["updated_by"], r["updated_at"], r["text"]) for r in rows]

    async def vault_audit(
        self,
        vault: VaultAccess,
        *,
        actor: str,
        action: str,
        target: str,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        before_id: int,
    ) -> list[AuditRecord]:
        """One vault's audit entries, newest first, filtered; an action ending in '.' is a prefix."""
        prefix = action.endswith(".")
        rows = await self._pool.fetch(
            """
            SELECT l.id, $2::text AS vault, l.actor, l.action, l.target, l.details::text AS details, l.at
            FROM audit_log l
            WHERE l.vault_id = $1
              AND ($3 = '' OR l.actor = $3)
              AND ($4 = '' OR (CASE WHEN $5 THEN starts_with(l.action, $4) ELSE l.action = $4 END))
              AND ($6 = '' OR l.target = $6)
              AND ($7::timestamptz IS NULL OR l.at >= $7)
              AND ($8::timestamptz IS NULL OR l.at < $8)
              AND ($9::bigint = 0 OR l.id < $9)
            ORDER BY l.id DESC
            LIMIT $10
            """,
            vault.id,
            vault.name,
            actor,
            action,
            prefix,
            target,
            since,
            until,
            before_id,
            limit,
        )
        return [
            AuditRecord(r["id"], r["vault"], r["actor"], r["action"], r["target"], r["details"], r["at"]) for r in rows
        ]

    async def audit_event(
        self, vault: VaultAccess, actor: str, action: str, target: str, details: dict[str, Any]
    ) -> None:
        """An audit entry on its own, for something refused before any write (a secret, say)."""
        async with self._pool.acquire() as conn:
            await self._audit(conn, vault.id, actor, action, target, details)

    # --- retention (policy in retention.py) ---------------------------------------------------------

    async def purge_retention(self, *, dry_run: bool = False) -> list[Purged] | None:
        """Delete what each vault's retention settings no longer keep; None when another purge holds
        the lock. With `dry_run` the same statements run and are rolled back, so the counts are exact."""
        async with self._pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            try:
                report = await self._purge(conn)
            except BaseException:
                await transaction.rollback()
                raise
            if dry_run or report is None:
                await transaction.rollback()
            else:
                await transaction.commit()
            return report

    async def _purge(self, conn: asyncpg.Connection) -> list[Purged] | None:
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", RETENTION_LOCK_KEY):
            return None
        # A vault without a settings row has the defaults; give it the row so the joins below see them.
        await conn.execute("INSERT INTO vault_settings (vault_id) SELECT id FROM vault ON CONFLICT DO NOTHING")
        vaults = await conn.fetch(f"SELECT DISTINCT m.vault_id::text {_EXPIRED} ORDER BY 1")
        for row in vaults:  # the writers' lock, taken in one order before any row lock
            await self._lock_vault(conn, row["vault_id"])
        doomed = await conn.fetch(f"SELECT m.id, m.vault_id, m.content_hash, m.status {_EXPIRED} FOR UPDATE OF m")
        ids = [r["id"] for r in doomed]
        counts: dict[str, dict[str, int]] = {}  # vault id -> Purged field -> count
        for row in doomed:
            per_vault = counts.setdefault(str(row["vault_id"]), {})
            per_vault[row["status"]] = per_vault.get(row["status"], 0) + 1
        if ids:
            await conn.executemany(
                "INSERT INTO exclusion (vault_id, content_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                [(r["vault_id"], r["content_hash"]) for r in doomed if r["status"] == "rejected"],
            )
            await conn.execute(
                "UPDATE memory SET similar_to = ARRAY(SELECT x FROM unnest(similar_to) x WHERE x <> ALL($1::uuid[]))"
                " WHERE similar_to && $1::uuid[]",
                ids,
            )
            await conn.execute("DELETE FROM memory_history WHERE memory_id = ANY($1::uuid[])", ids)
            await conn.execute("DELETE FROM memory WHERE id = ANY($1::uuid[])", ids)
            await self._enqueue(conn, [events.memory_forgotten(str(r["id"]), str(r["vault_id"])) for r in doomed])
        for row in await conn.fetch(_OLD_AUDIT):
            per_vault = counts.setdefault(str(row["vault_id"]), {})
            per_vault["audit_entries"] = per_vault.get("audit_entries", 0) + 1
        names = {
            str(r["id"]): r["name"]
            for r in await conn.fetch("SELECT id, name FROM vault WHERE id = ANY($1::uuid[])", list(counts))
        }
        purged = []
        for vault_id, vault_counts in counts.items():
            vault = Purged(names[vault_id], **vault_counts)
            await self._audit(conn, vault_id, ACTOR, "retention.purge", vault.vault, vault_counts)
            purged.append(vault)
        return sorted(purged, key=lambda p: p.vault)

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
            account = await conn.fetchrow(
                "INSERT INTO account (subject) VALUES ($1) ON CONFLICT (subject) DO UPDATE SET subject = EXCLUDED.subject"
                " RETURNING id, display_name",
                subject,
            )
            account_id = account["id"]
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


_FINDINGS = """
    SELECT * FROM (
        SELECT m.*,
               array_remove(ARRAY[
                   CASE WHEN m.expires_at IS NOT NULL AND m.expires_at <= now() THEN 'expired' END,
                   CASE WHEN cardinality(k.ids) > 0 THEN 'conflict' END,
                   CASE WHEN cardinality(s.ids) > 0 THEN 'may_conflict' END,
                   CASE WHEN m.review_after IS NOT NULL AND m.review_after <= now() THEN 'past_review' END,
                   CASE WHEN m.flagged_reason IS NOT NULL THEN 'flagged' END
               ], NULL) AS kinds,
               k.ids || s.ids AS related
        FROM memory m
        CROSS JOIN LATERAL (
            SELECT ARRAY(SELECT o.id::text FROM memory o
                         WHERE m.status = 'active' AND m.key IS NOT NULL AND o.vault_id = m.vault_id
                           AND o.key = m.key AND o.scope IS NOT DISTINCT FROM m.scope AND o.id <> m.id
                           AND o.status = 'active') AS ids) k
        CROSS JOIN LATERAL (
            SELECT ARRAY(SELECT o.id::text FROM memory o
                         WHERE m.status = 'active' AND o.vault_id = m.vault_id AND o.id <> m.id
                           AND o.status = 'active' AND (o.id = ANY(m.similar_to) OR o.similar_to @> ARRAY[m.id]))
                   AS ids) s
        WHERE m.vault_id = $1 AND m.status IN ('active', 'proposed')
    ) f
"""

# A memory put back exactly as a history snapshot holds it (every column but the generated one).
_RESTORE = """
    UPDATE memory m SET
        (content, content_hash, type, key, scope, tags, source, client, trust, confidence, status, valid_from,
         valid_to, review_after, expires_at, depends_on, supersedes, superseded_by, similar_to, batch_id, version,
         pinned, created_at, updated_at, status_reason, flagged_reason, flagged_at, reviewed_at)
      = (SELECT s.content, s.content_hash, s.type, s.key, s.scope, s.tags, s.source, s.client, s.trust,
                s.confidence, s.status, s.valid_from, s.valid_to, s.review_after, s.expires_at, s.depends_on,
                s.supersedes, s.superseded_by, s.similar_to, s.batch_id, s.version, s.pinned, s.created_at,
                s.updated_at, s.status_reason, s.flagged_reason, s.flagged_at, s.reviewed_at
         FROM jsonb_populate_record(NULL::memory, $2::jsonb) s)
    WHERE m.id = $1::uuid
"""
_FINDING_COUNTS = (
    "WITH findings AS (" + _FINDINGS + ") SELECT kind, count(*) FROM findings, unnest(kinds) AS kind"  # noqa: S608 (constants)
    " WHERE kind = ANY($2::text[]) GROUP BY kind"
)


# Memories past their vault's retention period (see retention.py), and audit entries past theirs.
_EXPIRED = """
FROM memory m JOIN vault_settings s ON s.vault_id = m.vault_id
WHERE (m.status = 'rejected' AND s.rejected_retention_days > 0
       AND m.updated_at < now() - make_interval(days => s.rejected_retention_days))
   OR (m.status IN ('superseded', 'invalidated') AND s.superseded_retention_days > 0
       AND m.updated_at < now() - make_interval(days => s.superseded_retention_days))
"""

_OLD_AUDIT = """
DELETE FROM audit_log l USING vault_settings s
WHERE s.vault_id = l.vault_id AND s.audit_retention_days > 0
  AND l.at < now() - make_interval(days => s.audit_retention_days)
RETURNING l.vault_id
"""


@dataclass(frozen=True)
class HistoryRecord:
    version: int
    change: str
    actor: str
    at: datetime
    cause: str
    snapshot: dict[str, Any]


@dataclass(frozen=True)
class BatchInfo:
    id: str
    source: str
    actor: str
    item_count: int
    stored_count: int
    created_at: datetime
    undone_at: datetime | None
    outcomes: dict[str, int]


@dataclass(frozen=True)
class UndoReport:
    batch: BatchInfo
    removed: int
    restored: int
    kept_changes: list[str]


@dataclass(frozen=True)
class GuideRecord:
    text: str
    version: int
    default_revision: str
    updated_by: str
    updated_at: datetime | None


def _batch(row: asyncpg.Record) -> BatchInfo:
    return BatchInfo(
        row["id"],
        row["source"],
        row["actor"],
        row["item_count"],
        row["stored_count"],
        row["created_at"],
        row["undone_at"],
        json.loads(row["outcomes"] or "{}"),
    )


def _row_of(candidate: Candidate, now: datetime) -> dict[str, Any]:
    draft = candidate.draft
    start = draft.valid_from or now
    return {
        "id": candidate.id,
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
        "valid_to": draft.valid_to.isoformat() if draft.valid_to else None,
        "review_after": (ra.isoformat() if (ra := review_date(draft, start)) else None),
        "expires_at": draft.expires_at.isoformat() if draft.expires_at else None,
        "depends_on": list(draft.depends_on),
        "similar_to": list(candidate.similar_to),
        "supersedes": candidate.supersedes,
        "context": draft.context,
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
