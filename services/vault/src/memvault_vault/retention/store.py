"""Retention's SQL: one purge at a time across replicas, each vault it touches locked against writes."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, lock_vault
from memvault_vault.outbox import events
from memvault_vault.outbox.store import enqueue
from memvault_vault.retention.records import Purged

AUDIT_COUNT_CAP = 10_000
"""The outlook counts due audit entries up to this many (a vault may hold millions; the page stays fast)."""

RETENTION_LOCK_KEY = 0x6D657274  # "mert": one purge at a time across replicas
ACTOR = "memvault:retention"


# Memories past their vault's retention period (see the package's docstring), and audit entries past theirs.
_EXPIRED = """
FROM memory m JOIN vault_settings s ON s.vault_id = m.vault_id
WHERE ($1::uuid IS NULL OR m.vault_id = $1::uuid)
  AND ((m.status = 'rejected' AND s.rejected_retention_days > 0
        AND m.updated_at < now() - make_interval(days => s.rejected_retention_days))
    OR (m.status IN ('superseded', 'invalidated') AND s.superseded_retention_days > 0
        AND m.updated_at < now() - make_interval(days => s.superseded_retention_days)))
"""

_OLD_AUDIT = """
DELETE FROM audit_log l USING vault_settings s
WHERE s.vault_id = l.vault_id AND s.audit_retention_days > 0
  AND l.at < now() - make_interval(days => s.audit_retention_days)
  AND ($1::uuid IS NULL OR l.vault_id = $1::uuid)
RETURNING l.vault_id
"""


class RetentionStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def purge(
        self, *, dry_run: bool = False, vault_id: str | None = None, actor: str = ACTOR, runner: str = ""
    ) -> list[Purged] | None:
        """Delete what each vault's retention settings no longer keep; None when another purge holds
        the lock. With `dry_run` the same statements run and are rolled back, so the counts are exact.
        With `vault_id`, only that vault ("clean up now"), audited with `actor`. A whole-installation
        run names its `runner` ('in-process' or 'command'), recorded as the last run of that runner."""
        async with self._pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            try:
                report = await _purge(conn, vault_id, actor)
                if report is not None and runner and vault_id is None and not dry_run:
                    await conn.execute(
                        "INSERT INTO retention_run (runner, ran_at, memories, audit_entries) VALUES ($1, now(), $2, $3)"
                        " ON CONFLICT (runner) DO UPDATE SET ran_at = EXCLUDED.ran_at, memories = EXCLUDED.memories,"
                        " audit_entries = EXCLUDED.audit_entries",
                        runner,
                        sum(p.memories for p in report),
                        sum(p.audit_entries for p in report),
                    )
            except BaseException:
                await transaction.rollback()
                raise
            if dry_run or report is None:
                await transaction.rollback()
            else:
                await transaction.commit()
            return report

    async def last_run(self) -> datetime | None:
        """When retention last ran over the whole installation (either runner); None if never recorded."""
        found: datetime | None = await self._pool.fetchval("SELECT max(ran_at) FROM retention_run")
        return found

    async def due(self, vault_id: str) -> tuple[Purged, bool, datetime | None]:
        """What the next run removes from the vault as things stand (read only, no locks); whether the
        audit count stopped at AUDIT_COUNT_CAP; when the next item not due yet becomes due."""
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            settings = await conn.fetchrow(
                "SELECT superseded_retention_days, rejected_retention_days, audit_retention_days"
                " FROM vault_settings WHERE vault_id = $1",
                vault_id,
            )
            superseded_days, rejected_days, audit_days = (
                (
                    settings["superseded_retention_days"],
                    settings["rejected_retention_days"],
                    settings["audit_retention_days"],
                )
                if settings is not None
                else (365, 30, 365)  # a vault without a settings row has the table's defaults
            )
            counts: dict[str, int] = {}
            next_due: list[datetime] = []
            for statuses, days in ((["rejected"], rejected_days), (["superseded", "invalidated"], superseded_days)):
                if days <= 0:
                    continue
                for row in await conn.fetch(
                    "SELECT status, count(*) FROM memory WHERE vault_id = $1 AND status = ANY($2::text[])"
                    " AND updated_at < now() - make_interval(days => $3) GROUP BY status",
                    vault_id,
                    statuses,
                    days,
                ):
                    counts[row["status"]] = row["count"]
                soonest = await conn.fetchval(
                    "SELECT min(updated_at) + make_interval(days => $3) FROM memory WHERE vault_id = $1"
                    " AND status = ANY($2::text[]) AND updated_at >= now() - make_interval(days => $3)",
                    vault_id,
                    statuses,
                    days,
                )
                if soonest is not None:
                    next_due.append(soonest)
            capped = False
            if audit_days > 0:
                counts["audit_entries"] = await conn.fetchval(
                    "SELECT count(*) FROM (SELECT 1 FROM audit_log WHERE vault_id = $1"
                    " AND at < now() - make_interval(days => $2) LIMIT $3) due",
                    vault_id,
                    audit_days,
                    AUDIT_COUNT_CAP,
                )
                capped = counts["audit_entries"] >= AUDIT_COUNT_CAP
                soonest = await conn.fetchval(
                    "SELECT min(at) + make_interval(days => $2) FROM audit_log WHERE vault_id = $1"
                    " AND at >= now() - make_interval(days => $2)",
                    vault_id,
                    audit_days,
                )
                if soonest is not None:
                    next_due.append(soonest)
        return Purged("", **counts), capped, min(next_due, default=None)


async def _purge(conn: asyncpg.Connection, vault_id: str | None, actor: str) -> list[Purged] | None:
    if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", RETENTION_LOCK_KEY):
        return None
    # A vault without a settings row has the defaults; give it the row so the joins below see them.
    await conn.execute("INSERT INTO vault_settings (vault_id) SELECT id FROM vault ON CONFLICT DO NOTHING")
    vaults = await conn.fetch(f"SELECT DISTINCT m.vault_id::text {_EXPIRED} ORDER BY 1", vault_id)
    for row in vaults:  # the writers' lock, taken in one order before any row lock
        await lock_vault(conn, row["vault_id"])
    doomed = await conn.fetch(f"SELECT m.id, m.vault_id, m.content_hash, m.status {_EXPIRED} FOR UPDATE OF m", vault_id)
    ids = [r["id"] for r in doomed]
    counts: dict[str, dict[str, int]] = {}  # vault id -> Purged field -> count
    for row in doomed:
        per_vault = counts.setdefault(str(row["vault_id"]), {})
        per_vault[row["status"]] = per_vault.get(row["status"], 0) + 1
    if ids:
        await conn.executemany(
            "INSERT INTO exclusion (vault_id, content_hash, reason) VALUES ($1, $2, 'rejected') ON CONFLICT DO NOTHING",
            [(r["vault_id"], r["content_hash"]) for r in doomed if r["status"] == "rejected"],
        )
        await conn.execute(
            "UPDATE memory SET similar_to = ARRAY(SELECT x FROM unnest(similar_to) x WHERE x <> ALL($1::uuid[]))"
            " WHERE similar_to && $1::uuid[]",
            ids,
        )
        await conn.execute("DELETE FROM memory_history WHERE memory_id = ANY($1::uuid[])", ids)
        await conn.execute("DELETE FROM memory WHERE id = ANY($1::uuid[])", ids)
        await enqueue(conn, [events.memory_forgotten(str(r["id"]), str(r["vault_id"])) for r in doomed])
    for row in await conn.fetch(_OLD_AUDIT, vault_id):
        per_vault = counts.setdefault(str(row["vault_id"]), {})
        per_vault["audit_entries"] = per_vault.get("audit_entries", 0) + 1
    names = {
        str(r["id"]): r["name"]
        for r in await conn.fetch("SELECT id, name FROM vault WHERE id = ANY($1::uuid[])", list(counts))
    }
    purged = []
    for purged_id, vault_counts in counts.items():
        vault = Purged(names[purged_id], **vault_counts)
        await append_audit(conn, purged_id, actor, "retention.purge", vault.vault, vault_counts)
        purged.append(vault)
    return sorted(purged, key=lambda p: p.vault)
