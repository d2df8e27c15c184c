"""Retention: delete what each vault's settings say to keep no longer.

Per vault (settings `rejected_retention_days`, `superseded_retention_days`, `audit_retention_days`;
0 keeps forever), counted from a memory's last change:

- rejected memories are deleted and their text becomes an exclusion, so the owner's "no" still
  stands: the same text is not stored again;
- superseded and invalidated memories are deleted with their history (their replacements and
  dependents stay; links to them are dropped, `explain_memory` lists a missing dependency);
- audit log entries older than the period are deleted.

The vault service runs this every `MEMVAULT_VAULT__RETENTION_INTERVAL_SECONDS`;
`memvault-vault retention --dry-run` shows what it would delete. One purge runs at a time across
replicas (an advisory lock), and each vault it touches is locked against writes while it runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass

import asyncpg

from memvault_vault import events

log = logging.getLogger(__name__)

RETENTION_LOCK_KEY = 0x6D657274  # "mert": one purge at a time across replicas
ACTOR = "memvault:retention"

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
class Purged:
    """What one vault lost to retention in one run."""

    vault: str
    rejected: int = 0
    superseded: int = 0
    invalidated: int = 0
    audit_entries: int = 0

    @property
    def memories(self) -> int:
        return self.rejected + self.superseded + self.invalidated


async def purge(pool: asyncpg.Pool, *, dry_run: bool = False) -> list[Purged] | None:
    """Delete what retention allows, per vault; None when another purge holds the lock.

    With `dry_run` the same statements run and are rolled back, so the counts are exact."""
    async with pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            report = await _purge(conn)
        except BaseException:
            await transaction.rollback()
            raise
        if dry_run or report is None:
            await transaction.rollback()
        else:
            await transaction.commit()
        return report


async def _purge(conn: asyncpg.Connection) -> list[Purged] | None:
    if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", RETENTION_LOCK_KEY):
        return None
    # A vault without a settings row has the defaults; give it the row so the joins below see them.
    await conn.execute("INSERT INTO vault_settings (vault_id) SELECT id FROM vault ON CONFLICT DO NOTHING")
    vaults = await conn.fetch(f"SELECT DISTINCT m.vault_id::text {_EXPIRED} ORDER BY 1")
    for row in vaults:  # the writers' lock, taken in one order before any row lock
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", row["vault_id"])
    doomed = await conn.fetch(f"SELECT m.id, m.vault_id, m.content_hash, m.status {_EXPIRED} FOR UPDATE OF m")
    ids = [r["id"] for r in doomed]
    counts: dict[str, dict[str, int]] = {}
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
        outbox = [events.memory_forgotten(str(r["id"]), str(r["vault_id"])) for r in doomed]
        await conn.executemany(
            "INSERT INTO outbox (id, subject, payload, headers) VALUES ($1, $2, $3, $4::jsonb)",
            [(e.id, e.subject, e.payload, json.dumps(e.headers)) for e in outbox],
        )
        await conn.execute("SELECT pg_notify('memvault_outbox', '')")
    for row in await conn.fetch(_OLD_AUDIT):
        per_vault = counts.setdefault(str(row["vault_id"]), {})
        per_vault["audit"] = per_vault.get("audit", 0) + 1
    names = {
        str(r["id"]): r["name"]
        for r in await conn.fetch("SELECT id, name FROM vault WHERE id = ANY($1::uuid[])", list(counts))
    }
    report = sorted(
        (
            (
                vault_id,
                Purged(
                    names[vault_id],
                    rejected=c.get("rejected", 0),
                    superseded=c.get("superseded", 0),
                    invalidated=c.get("invalidated", 0),
                    audit_entries=c.get("audit", 0),
                ),
            )
            for vault_id, c in counts.items()
        ),
        key=lambda item: item[1].vault,
    )
    await conn.executemany(
        "INSERT INTO audit_log (vault_id, actor, action, target, details)"
        " VALUES ($1, $2, 'retention.purge', $3, $4::jsonb)",
        [
            (vault_id, ACTOR, p.vault, json.dumps({k: v for k, v in asdict(p).items() if k != "vault"}))
            for vault_id, p in report
        ],
    )
    return [p for _, p in report]


async def run_periodically(pool: asyncpg.Pool, interval_seconds: float) -> None:
    """Purge now and then every `interval_seconds`, until cancelled; a failed run is retried next time."""
    while True:
        try:
            report = await purge(pool)
            if report:
                log.info(
                    "retention purged",
                    extra={"vaults": len(report), "memories": sum(p.memories for p in report)},
                )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("retention run failed", extra={"error": type(error).__name__})
        await asyncio.sleep(interval_seconds)
