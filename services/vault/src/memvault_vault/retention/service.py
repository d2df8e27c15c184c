"""Retention run in the background (purge now and then every interval, until cancelled), and for one
vault on its owner's request."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from croniter import croniter

from memvault_core.errors import PermissionDenied, Unavailable
from memvault_core.identity import Identity
from memvault_core.supervise import run_forever
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.retention.records import Purged, RetentionOutlook, RetentionPlan
from memvault_vault.retention.store import RetentionStore

log = logging.getLogger(__name__)


async def run_periodically(store: RetentionStore, interval_seconds: float) -> None:
    """Purge now and then every `interval_seconds`, until cancelled; a failed run is retried with backoff."""

    async def step() -> None:
        report = await store.purge(runner="in-process")
        if report:
            log.info("retention purged", extra={"vaults": len(report), "memories": sum(p.memories for p in report)})
        deleted = await store.delete_due_vaults(datetime.now(UTC))
        if deleted:
            log.info("vaults deleted after their grace period", extra={"vaults": len(deleted)})
        await asyncio.sleep(interval_seconds)

    await run_forever(step, "retention")


class RetentionService:
    """ "Clean up now" for one vault, for its owners with the admin scope: what retention removes
    from it now, counted (`dry_run`) or deleted, audited with the owner as actor."""

    def __init__(self, store: RetentionStore, accounts: AccountService, plan: RetentionPlan | None = None) -> None:
        self._store = store
        self._accounts = accounts
        self._plan = plan or RetentionPlan()

    async def outlook(self, vault: VaultAccess) -> RetentionOutlook:
        """How retention runs for the vault (any member may see it): last and next run, what it removes."""
        plan = self._plan
        due, capped, next_due_at, last_run = await self._store.outlook(str(vault.id))
        now = datetime.now(UTC)
        next_run: datetime | None = None
        if plan.runner == "in-process":
            # The loop runs when the vault starts and then every interval; a run past due is about to happen.
            next_run = max(last_run + timedelta(seconds=plan.interval_seconds), now) if last_run else now
        elif plan.runner == "cronjob":
            next_run = croniter(plan.schedule, now).get_next(datetime)
        return RetentionOutlook(
            runner=plan.runner,
            interval_seconds=plan.interval_seconds,
            schedule=plan.schedule,
            last_run=last_run,
            next_run=next_run,
            due=Purged(vault.name, due.rejected, due.superseded, due.invalidated, due.audit_entries),
            audit_entries_capped=capped,
            next_due_at=next_due_at,
        )

    async def purge_vault(self, identity: Identity, vault_name: str, *, dry_run: bool) -> Purged:
        identity.require("admin")
        vault = await self._accounts.access(identity, vault_name, write=not dry_run)
        if vault.role != "owner":
            raise PermissionDenied(
                f"only an owner of vault '{vault.name}' can run its retention (your role: {vault.role})"
            )
        report = await self._store.purge(dry_run=dry_run, vault_id=str(vault.id), actor=identity.actor)
        if report is None:
            raise Unavailable("another retention run is under way; try again in a moment")
        return report[0] if report else Purged(vault.name)
