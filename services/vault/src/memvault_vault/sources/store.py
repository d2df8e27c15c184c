"""Tracked sources' SQL: every query filtered by vault id, except the scheduler's look for due sources
across vaults (which returns each source with its vault, for the check to run with its tracker's access)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from memvault_core.errors import Conflict, NotFound
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.sources import ChangeStatus, Reading, SourceKind, SourceMode, SourceSpec, render
from memvault_vault.sources.records import SourceChange, TrackedSource

_SOURCE_COLUMNS = """
    s.id::text AS id, s.vault_id::text AS vault_id, v.name AS vault, s.memory_id::text AS memory_id, s.kind,
    s.location, s.selector, s.template, s.mode, s.interval_seconds, s.baseline_hash, s.baseline_value,
    s.tracked_by, s.created_at, s.next_check_at, s.last_checked_at, s.last_error, s.error_since,
    (SELECT count(*) FROM source_change c WHERE c.source_id = s.id AND c.status = 'pending') AS pending_changes
"""


def _value(raw: Any) -> Any:
    return None if raw is None else json.loads(raw)


def _baseline_json(source: TrackedSource) -> str | None:
    """The value a change replaces: the source's baseline (JSON sources only; text keeps hashes alone)."""
    return json.dumps(source.baseline_value) if source.kind.is_json and source.baseline_value is not None else None


def source_from_row(row: asyncpg.Record) -> TrackedSource:
    return TrackedSource(
        id=row["id"],
        vault_id=row["vault_id"],
        vault=row["vault"],
        memory_id=row["memory_id"],
        kind=SourceKind(row["kind"]),
        location=row["location"],
        selector=row["selector"],
        template=row["template"],
        mode=SourceMode(row["mode"]),
        interval_seconds=row["interval_seconds"],
        baseline_hash=row["baseline_hash"],
        baseline_value=_value(row["baseline_value"]),
        tracked_by=row["tracked_by"],
        created_at=row["created_at"],
        next_check_at=row["next_check_at"],
        last_checked_at=row["last_checked_at"],
        last_error=row["last_error"],
        error_since=row["error_since"],
        pending_changes=row["pending_changes"],
    )


def change_from_row(row: asyncpg.Record) -> SourceChange:
    kind = SourceKind(row["kind"])
    has_value = row["new_value"] is not None
    value = _value(row["new_value"])
    has_old = row["old_value"] is not None
    return SourceChange(
        id=row["id"],
        vault=row["vault"],
        source_id=row["source_id"],
        memory_id=row["memory_id"],
        kind=kind,
        location=row["location"],
        old_hash=row["old_hash"],
        new_hash=row["new_hash"],
        new_value=value,
        has_value=has_value,
        old_value=_value(row["old_value"]),
        has_old_value=has_old,
        status=ChangeStatus(row["status"]),
        detected_at=row["detected_at"],
        resolved_at=row["resolved_at"],
        resolved_by=row["resolved_by"],
        replacement_id=row["replacement_id"] or "",
        proposed_statement=render(row["template"], value) if kind.is_json and has_value else "",
    )


_CHANGE_COLUMNS = """
    c.id::text AS id, v.name AS vault, c.source_id::text AS source_id, c.memory_id::text AS memory_id, s.kind,
    s.location, s.template, c.old_hash, c.new_hash, c.old_value, c.new_value, c.status, c.detected_at, c.resolved_at,
    c.resolved_by, c.replacement_id::text AS replacement_id
"""


_SELECT_SOURCES = (
    "SELECT " + _SOURCE_COLUMNS + " FROM tracked_source s JOIN vault v ON v.id = s.vault_id"  # noqa: S608 (constants)
)
_SELECT_DUE = (
    "SELECT " + _SOURCE_COLUMNS + ", coalesce(vs.approval_mode, 'review') AS approval_mode"  # noqa: S608
    " FROM tracked_source s JOIN vault v ON v.id = s.vault_id LEFT JOIN vault_settings vs ON vs.vault_id = s.vault_id"
)
_SELECT_CHANGES = (
    "SELECT " + _CHANGE_COLUMNS + " FROM source_change c JOIN tracked_source s ON s.id = c.source_id"  # noqa: S608
    " JOIN vault v ON v.id = c.vault_id"
)


class SourceStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def track(
        self, vault: VaultAccess, memory_id: str, spec: SourceSpec, reading: Reading, *, tracked_by: str, actor: str
    ) -> str:
        """Link the memory (which must be active) to the source, with `reading` as its baseline."""
        async with self._pool.acquire() as conn, conn.transaction():
            status = await conn.fetchval(
                "SELECT status FROM memory WHERE vault_id = $1 AND id = $2::uuid FOR SHARE", vault.id, memory_id
            )
            if status is None:
                raise NotFound(
                    f"no memory {memory_id} in vault '{vault.name}'; find ids with recall or list_memories",
                    field="memory_id",
                )
            if status != "active":
                raise Conflict(
                    f"memory {memory_id} is {status}; only an active memory can track a source", field="memory_id"
                )
            same = await conn.fetchval(
                "SELECT id::text FROM tracked_source WHERE vault_id = $1 AND memory_id = $2::uuid AND kind = $3"
                " AND location = $4 AND selector = $5",
                vault.id,
                memory_id,
                spec.kind.value,
                spec.location,
                spec.selector,
            )
            if same is not None:
                raise Conflict(f"memory {memory_id} already tracks this source (source {same})", field="location")
            source_id: str = await conn.fetchval(
                "INSERT INTO tracked_source (vault_id, memory_id, kind, location, selector, template, mode,"
                " interval_seconds, baseline_hash, baseline_value, tracked_by, actor, last_checked_at, next_check_at)"
                " VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8::int, $9, $10::jsonb, $11, $12, now(),"
                " now() + make_interval(secs => $8::int)) RETURNING id::text",
                vault.id,
                memory_id,
                spec.kind.value,
                spec.location,
                spec.selector,
                spec.template,
                spec.mode.value,
                spec.interval_seconds,
                reading.hash,
                json.dumps(reading.value) if reading.has_value else None,
                tracked_by,
                actor,
            )
            await append_audit(
                conn,
                vault.id,
                actor,
                "source.track",
                memory_id,
                {"source": source_id, "kind": spec.kind.value, "mode": spec.mode.value},
            )
            return source_id

    async def untrack(self, vault: VaultAccess, source_id: str, actor: str) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            memory_id = await conn.fetchval(
                "DELETE FROM tracked_source WHERE vault_id = $1 AND id = $2::uuid RETURNING memory_id::text",
                vault.id,
                source_id,
            )
            if memory_id is None:
                return False
            await append_audit(conn, vault.id, actor, "source.untrack", memory_id, {"source": source_id})
            return True

    async def sources(
        self, vault: VaultAccess, *, memory_id: str | None = None, source_id: str | None = None, limit: int = 200
    ) -> list[TrackedSource]:
        rows = await self._pool.fetch(
            _SELECT_SOURCES + " WHERE s.vault_id = $1 AND ($2::uuid IS NULL OR s.memory_id = $2::uuid)"
            " AND ($3::uuid IS NULL OR s.id = $3::uuid) ORDER BY s.created_at, s.id LIMIT $4",
            vault.id,
            memory_id,
            source_id,
            limit,
        )
        return [source_from_row(r) for r in rows]

    async def sources_for(self, vault: VaultAccess, memory_ids: list[str]) -> list[TrackedSource]:
        rows = await self._pool.fetch(
            _SELECT_SOURCES + " WHERE s.vault_id = $1 AND s.memory_id = ANY($2::uuid[]) ORDER BY s.created_at, s.id",
            vault.id,
            memory_ids,
        )
        return [source_from_row(r) for r in rows]

    async def due(self, vault_id: str | None, limit: int) -> list[tuple[TrackedSource, str]]:
        """Sources whose check is due (in one vault, or every vault), each with its vault's approval mode; a
        vault pending deletion is read-only, so its sources wait (checked again if the deletion is cancelled)."""
        rows = await self._pool.fetch(
            _SELECT_DUE + " WHERE ($1::uuid IS NULL OR s.vault_id = $1::uuid) AND s.next_check_at <= now()"
            " AND v.delete_after IS NULL"
            " AND (s.claimed_until IS NULL OR s.claimed_until < now())"
            " ORDER BY s.next_check_at, s.id LIMIT $2",
            vault_id,
            limit,
        )
        return [(source_from_row(r), r["approval_mode"]) for r in rows]

    async def claim(self, source_id: str, seconds: float) -> bool:
        """Hold the source for one check, so two syncs (a CronJob and a person) never apply one change twice;
        a process that dies mid-check lets it go after `seconds` (`MEMVAULT_SOURCES__CLAIM_SECONDS`)."""
        claimed = await self._pool.fetchval(
            "UPDATE tracked_source SET claimed_until = now() + make_interval(secs => $2)"
            " WHERE id = $1::uuid AND (claimed_until IS NULL OR claimed_until < now()) RETURNING id",
            source_id,
            seconds,
        )
        return claimed is not None

    async def reload(self, source_id: str) -> TrackedSource | None:
        row = await self._pool.fetchrow(
            _SELECT_SOURCES + " WHERE s.id = $1::uuid",
            source_id,
        )
        return None if row is None else source_from_row(row)

    async def finish(self, source_id: str, *, error: str = "") -> None:
        """Record a check (and its error, or none) and let the source go until its next check."""
        await self._pool.execute(
            "UPDATE tracked_source SET claimed_until = NULL, last_checked_at = now(),"
            " next_check_at = now() + make_interval(secs => interval_seconds), last_error = $2,"
            " error_since = CASE WHEN $2 = '' THEN NULL ELSE coalesce(error_since, now()) END"
            " WHERE id = $1::uuid",
            source_id,
            error[:1000],
        )

    async def follow(self, source_id: str, memory_id: str) -> None:
        """The memory was superseded by another route: the source now tracks its replacement."""
        await self._pool.execute(
            "UPDATE tracked_source SET memory_id = $2::uuid WHERE id = $1::uuid", source_id, memory_id
        )

    async def pending_hash(self, source_id: str) -> str | None:
        value: str | None = await self._pool.fetchval(
            "SELECT new_hash FROM source_change WHERE source_id = $1::uuid AND status = 'pending'", source_id
        )
        return value

    async def add_pending(self, source: TrackedSource, reading: Reading) -> str:
        """A newer change replaces a pending one of the same source; the record holds hashes and the JSON value."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE source_change SET status = 'replaced', resolved_at = now(), resolved_by = 'source'"
                " WHERE vault_id = $1 AND source_id = $2::uuid AND status = 'pending'",
                source.vault_id,
                source.id,
            )
            change_id: str = await conn.fetchval(
                "INSERT INTO source_change (vault_id, source_id, memory_id, old_hash, new_hash, new_value, status,"
                " old_value) VALUES ($1, $2::uuid, $3::uuid, $4, $5, $6::jsonb, 'pending', $7::jsonb) RETURNING id::text",
                source.vault_id,
                source.id,
                source.memory_id,
                source.baseline_hash,
                reading.hash,
                json.dumps(reading.value) if reading.has_value else None,
                _baseline_json(source),
            )
            await append_audit(
                conn, source.vault_id, "source:sync", "source.change_pending", source.memory_id, {"source": source.id}
            )
            return change_id

    async def revert_pending(self, source: TrackedSource) -> list[str]:
        rows = await self._pool.fetch(
            "UPDATE source_change SET status = 'reverted', resolved_at = now(), resolved_by = 'source'"
            " WHERE vault_id = $1 AND source_id = $2::uuid AND status = 'pending' RETURNING id::text",
            source.vault_id,
            source.id,
        )
        return [r["id"] for r in rows]

    async def rebase(
        self,
        source: TrackedSource,
        reading: Reading,
        *,
        memory_id: str,
        status: ChangeStatus,
        actor: str,
        change_id: str | None = None,
        replacement_id: str | None = None,
    ) -> str:
        """The source's baseline becomes `reading` and it tracks `memory_id`; the change is recorded (or the
        pending one resolved) as `status`. One transaction, so a change is recorded once or not at all."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE tracked_source SET memory_id = $3::uuid, baseline_hash = $4, baseline_value = $5::jsonb"
                " WHERE vault_id = $1 AND id = $2::uuid",
                source.vault_id,
                source.id,
                memory_id,
                reading.hash,
                json.dumps(reading.value) if reading.has_value else None,
            )
            if change_id is None:
                await conn.execute(
                    "UPDATE source_change SET status = 'replaced', resolved_at = now(), resolved_by = $3"
                    " WHERE vault_id = $1 AND source_id = $2::uuid AND status = 'pending'",
                    source.vault_id,
                    source.id,
                    actor,
                )
                change_id = await conn.fetchval(
                    "INSERT INTO source_change (vault_id, source_id, memory_id, old_hash, new_hash, new_value,"
                    " status, resolved_at, resolved_by, replacement_id, old_value)"
                    " VALUES ($1, $2::uuid, $3::uuid, $4, $5, $6::jsonb, $7, now(), $8, $9::uuid, $10::jsonb)"
                    " RETURNING id::text",
                    source.vault_id,
                    source.id,
                    source.memory_id,
                    source.baseline_hash,
                    reading.hash,
                    json.dumps(reading.value) if reading.has_value else None,
                    status.value,
                    actor,
                    replacement_id,
                    _baseline_json(source),
                )
            else:
                await conn.execute(
                    "UPDATE source_change SET status = $3, resolved_at = now(), resolved_by = $4,"
                    " replacement_id = $5::uuid WHERE vault_id = $1 AND id = $2::uuid",
                    source.vault_id,
                    change_id,
                    status.value,
                    actor,
                    replacement_id,
                )
            await append_audit(
                conn,
                source.vault_id,
                actor,
                f"source.change_{status.value}",
                source.memory_id,
                {
                    "source": source.id,
                    "change": change_id,
                    **({"replacement": replacement_id} if replacement_id else {}),
                },
            )
            assert change_id is not None
            return change_id

    async def changes(self, vault: VaultAccess, statuses: list[str], limit: int) -> list[SourceChange]:
        rows = await self._pool.fetch(
            _SELECT_CHANGES + " WHERE c.vault_id = $1 AND c.status = ANY($2::text[])"
            " ORDER BY c.detected_at DESC, c.id LIMIT $3",
            vault.id,
            statuses,
            limit,
        )
        return [change_from_row(r) for r in rows]

    async def change(self, vault: VaultAccess, change_id: str) -> SourceChange:
        row = await self._pool.fetchrow(
            _SELECT_CHANGES + " WHERE c.vault_id = $1 AND c.id = $2::uuid",
            vault.id,
            change_id,
        )
        if row is None:
            raise NotFound(
                f"no source change {change_id} in vault '{vault.name}'; list them with sources action 'changes'",
                field="change_id",
            )
        return change_from_row(row)

    async def every_source(self, limit: int) -> list[TrackedSource]:
        """Every vault's sources, for the operator's `memvault-vault sources status`."""
        rows = await self._pool.fetch(
            _SELECT_SOURCES + " ORDER BY v.name, s.created_at, s.id LIMIT $1",
            limit,
        )
        return [source_from_row(r) for r in rows]

    async def every_pending_change(self, limit: int) -> list[SourceChange]:
        """Every vault's pending changes, for the operator's `memvault-vault sources changes`."""
        rows = await self._pool.fetch(
            _SELECT_CHANGES + " WHERE c.status = 'pending' ORDER BY c.detected_at, c.id LIMIT $1",
            limit,
        )
        return [change_from_row(r) for r in rows]

    async def release(self, source_id: str) -> None:
        await self._pool.execute("UPDATE tracked_source SET claimed_until = NULL WHERE id = $1::uuid", source_id)
