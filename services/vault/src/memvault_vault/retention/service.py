"""Retention run in the background: purge now and then every interval, until cancelled."""

from __future__ import annotations

import asyncio
import logging

from memvault_core.supervise import run_forever
from memvault_vault.retention.store import RetentionStore

log = logging.getLogger(__name__)


async def run_periodically(store: RetentionStore, interval_seconds: float) -> None:
    """Purge now and then every `interval_seconds`, until cancelled; a failed run is retried with backoff."""

    async def step() -> None:
        report = await store.purge()
        if report:
            log.info("retention purged", extra={"vaults": len(report), "memories": sum(p.memories for p in report)})
        await asyncio.sleep(interval_seconds)

    await run_forever(step, "retention")
