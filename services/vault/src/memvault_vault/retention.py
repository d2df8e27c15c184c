"""Retention: delete what each vault's settings say to keep no longer.

Per vault (settings `rejected_retention_days`, `superseded_retention_days`, `audit_retention_days`;
0 keeps forever), counted from a memory's last change:

- rejected memories are deleted and their text becomes an exclusion, so the owner's "no" still
  stands: the same text is not stored again;
- superseded and invalidated memories are deleted with their history (their replacements and
  dependents stay; links to them are dropped, `explain_memory` lists a missing dependency);
- audit log entries older than the period are deleted.

The SQL is `Store.purge_retention`. The vault service runs it every
`MEMVAULT_VAULT__RETENTION_INTERVAL_SECONDS`;
`memvault-vault retention --dry-run` shows what it would delete. One purge runs at a time across
replicas (an advisory lock), and each vault it touches is locked against writes while it runs.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memvault_core.supervise import run_forever

if TYPE_CHECKING:
    from memvault_vault.store import Store

log = logging.getLogger(__name__)

RETENTION_LOCK_KEY = 0x6D657274  # "mert": one purge at a time across replicas
ACTOR = "memvault:retention"


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


async def run_periodically(store: Store, interval_seconds: float) -> None:
    """Purge now and then every `interval_seconds`, until cancelled; a failed run is retried with backoff."""

    async def step() -> None:
        report = await store.purge_retention()
        if report:
            log.info("retention purged", extra={"vaults": len(report), "memories": sum(p.memories for p in report)})
        await asyncio.sleep(interval_seconds)

    await run_forever(step, "retention")
