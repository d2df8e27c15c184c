"""Retention's SQL: one purge at a time across replicas, each vault it touches locked against writes."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, lock_vault
from memvault_vault.outbox import events
from memvault_vault.outbox.store import enqueue
from memvault_vault.retention import vault_deletion
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

    async def delete_due_vaults(self, now: datetime, *, dry_run: bool = False) -> list[str]:
        """Delete the vaults whose deletion grace period ended at or before `now` (`vault_deletion`)."""
        return await vault_deletion.delete_due_vaults(self._pool, now, dry_run=dry_run)

    async def outlook(self, vault_id: str) -> tuple[Purged, bool, datetime | None, datetime | None]:
        """In one read-only statement: what the next run removes from the vault as things stand (no
        locks taken); whether the audit count stopped at AUDIT_COUNT_CAP; when the next memory or
        audit entry not due yet becomes due; and when retention last ran over the installation."""
        row = await self._pool.fetchrow(_OUTLOOK, vault_id, AUDIT_COUNT_CAP)
        due = Purged(
            "",
            rejected=row["rejected"],
            superseded=row["superseded"],
            invalidated=row["invalidated"],
            audit_entries=row["audit_entries"],
        )
        return due, row["audit_entries"] >= AUDIT_COUNT_CAP, row["next_due"], row["last_run"]


# What retention removes from one vault ($1) at its next run, and when the next item falls due; a
# vault without a settings row has the table's defaults. Audit entries are counted up to $2, oldest
# first: the order makes the planner walk the (vault_id, at) index instead of the whole table.
_OUTLOOK = """
WITH s AS (
    SELECT coalesce((SELECT superseded_retention_days FROM vault_settings WHERE vault_id = $1), 365) AS kept,
           coalesce((SELECT rejected_retention_days FROM vault_settings WHERE vault_id = $1), 30) AS rejected,
           coalesce((SELECT audit_retention_days FROM vault_settings WHERE vault_id = $1), 365) AS audit
),
old AS (
    SELECT m.status, m.updated_at,
           CASE WHEN m.status = 'rejected' THEN s.rejected ELSE s.kept END AS days
    FROM memory m, s
    WHERE m.vault_id = $1 AND m.status IN ('rejected', 'superseded', 'invalidated')
)
SELECT
    (SELECT count(*) FROM old WHERE days > 0 AND status = 'rejected'
        AND updated_at < now() - make_interval(days => days)) AS rejected,
    (SELECT count(*) FROM old WHERE days > 0 AND status = 'superseded'
        AND updated_at < now() - make_interval(days => days)) AS superseded,
    (SELECT count(*) FROM old WHERE days > 0 AND status = 'invalidated'
        AND updated_at < now() - make_interval(days => days)) AS invalidated,
    (SELECT count(*) FROM (SELECT 1 FROM audit_log a WHERE s.audit > 0 AND a.vault_id = $1
        AND a.at < now() - make_interval(days => s.audit) ORDER BY a.at LIMIT $2) AS due) AS audit_entries,
    least(
        (SELECT min(updated_at + make_interval(days => days)) FROM old
            WHERE days > 0 AND updated_at >= now() - make_interval(days => days)),
        (SELECT min(a.at) + make_interval(days => s.audit) FROM audit_log a
            WHERE s.audit > 0 AND a.vault_id = $1 AND a.at >= now() - make_interval(days => s.audit))
    ) AS next_due,
    (SELECT max(ran_at) FROM retention_run) AS last_run
FROM s
"""


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
