"""Running source checks outside a caller's request: the vault process's loop, and the operator's
`memvault-vault sources sync|status|changes|watch` commands (quiet when nothing changed: one line per
meaningful change or error)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from memvault_core import limits
from memvault_vault.sources.records import CheckResult
from memvault_vault.sources.service import SourceService, health, is_overdue

log = logging.getLogger(__name__)

QUIET = frozenset({"unchanged", "already_pending", "busy"})


def describe(check: CheckResult) -> str | None:
    """One line for a check worth telling about; None for one that changed nothing, and for an error the
    source already had (said when it began; a source that reads again is said once too)."""
    start = f"{check.vault}: source {check.source_id} (memory {check.memory_id})"
    if check.outcome == "error" and check.message[:1000] == check.previous_error:
        return None
    if check.outcome in QUIET:
        if check.previous_error and check.outcome == "unchanged":
            return f"{start}: recovered: it reads again and has not changed"
        return None
    line = f"{start}: {check.outcome}"
    if check.message:
        line += f": {check.message}"
    if check.flagged_dependents:
        line += f"; flagged for review: {', '.join(check.flagged_dependents)}"
    return line


async def sync_once(service: SourceService, say: Callable[[str], None]) -> int:
    """Check every due source once; returns how many checks ended in an error."""
    errors = 0
    for check in await service.sync_due():
        line = describe(check)
        if line is not None:
            say(line)
        errors += check.outcome == "error"
    return errors


async def run_periodically(service: SourceService, interval_seconds: float) -> None:
    """The vault process's loop (`MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS`); a failed round is logged and
    the next one runs as usual."""
    while True:
        try:
            for check in await service.sync_due():
                if describe(check) is not None:  # as `watch`: an error is logged when it begins, not every round
                    log.info(
                        "source checked",
                        extra={"source": check.source_id, "vault": check.vault, "outcome": check.outcome},
                    )
        except Exception:
            log.exception("source checks failed; trying again next round")
        await asyncio.sleep(interval_seconds)


async def watch(service: SourceService, poll_seconds: float, say: Callable[[str], None]) -> None:
    """Sync what is due every `poll_seconds` until cancelled (SIGTERM or Ctrl-C end it cleanly)."""
    while True:
        await sync_once(service, say)
        await asyncio.sleep(poll_seconds)


async def print_status(service: SourceService, say: Callable[[str], None]) -> None:
    sources = await service.every_source(limits.MAX_SOURCES_LISTED)
    now = datetime.now(UTC)
    summary = health(sources, now)
    say(
        f"{len(sources)} sources: {summary.errors} with errors, {summary.overdue} overdue, "
        f"{summary.pending_changes} pending changes"
    )
    for s in sources:
        checked = s.last_checked_at.isoformat(timespec="seconds") if s.last_checked_at else "never"
        flags = []
        if s.last_error:
            flags.append(f"error: {s.last_error}")
        if is_overdue(s, now):
            flags.append("overdue")
        if s.pending_changes:
            flags.append(f"{s.pending_changes} pending")
        say(
            f"{s.vault}: source {s.id} {s.kind.value} {s.location} -> memory {s.memory_id}; last check {checked}"
            + (f"; {'; '.join(flags)}" if flags else "")
        )


async def print_changes(service: SourceService, say: Callable[[str], None]) -> None:
    for c in await service.every_pending_change(limits.MAX_SOURCES_LISTED):
        what = f"proposed: {c.proposed_statement!r}" if c.proposed_statement else "text changed: review it"
        say(f"{c.vault}: change {c.id} of source {c.source_id} (memory {c.memory_id}) {c.location}: {what}")
