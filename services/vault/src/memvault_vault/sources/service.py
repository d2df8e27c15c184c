"""What track, sync, changes, resolve and status do for tracked sources.

A check reads the source (inside the operator's fences), compares it with the baseline and decides
(`domain/sources.decide`). An exact JSON value in auto mode supersedes the memory through the vault's
one supersede path (`MemoryService.supersede`: the duplicate, conflict and secret rules, history,
dependents flagged), acting as the account that tracked the source; anything else becomes a pending
change. A scheduled check runs with that account's access, so a tracker who lost the vault cannot
change it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memvault_core import limits
from memvault_core.errors import Conflict, InvalidArgument, MemvaultError, NotFound
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.domain.inputs import parse_memory_id
from memvault_vault.domain.memory import Draft, Memory, Status, Trust, content_hash
from memvault_vault.domain.sources import (
    ChangeStatus,
    Reading,
    SourceError,
    SourceKind,
    Verdict,
    decide,
    read_json,
    read_text,
    render,
    validate_spec,
)
from memvault_vault.memories.service import MemoryService
from memvault_vault.memories.store import MemoryStore
from memvault_vault.sources.reader import SourceReader
from memvault_vault.sources.records import CheckResult, SourceChange, SourceHealth, TrackedSource
from memvault_vault.sources.store import SourceStore

log = logging.getLogger(__name__)

SYNC_CLIENT = "source-sync"
"""The client a scheduled check acts through (the audit log names it `mcp:source-sync`)."""
OVERDUE_AFTER = timedelta(minutes=1)
MAX_FOLLOW = 20
DUE_PER_SYNC = 100


def _parse_id(value: str, field: str) -> str:
    return parse_memory_id(value, field)


class SourceService:
    def __init__(
        self,
        store: SourceStore,
        memories: MemoryService,
        memory_store: MemoryStore,
        accounts: AccountService,
        reader: SourceReader,
    ) -> None:
        self._store = store
        self._memories = memories
        self._memory_store = memory_store
        self._accounts = accounts
        self.reader = reader

    # --- track ---------------------------------------------------------------------------------------

    async def track(
        self,
        identity: Identity,
        vault_name: str,
        memory_id: str,
        *,
        kind: str,
        location: str,
        selector: str = "",
        template: str = "",
        mode: str = "",
        interval_seconds: int = 0,
    ) -> tuple[VaultAccess, TrackedSource, str]:
        """Link an active memory to a source; the source's current content is the baseline. Returns the source
        and, for JSON, the statement its current value renders."""
        memory_id = _parse_id(memory_id, "memory_id")
        spec = validate_spec(kind, location, selector, template, mode, interval_seconds)
        vault = await self._accounts.access(identity, vault_name, write=True)
        self.reader.check_location(spec.kind, spec.location)
        try:
            reading = await self._read(spec.kind, spec.location, spec.selector)
        except SourceError as error:
            raise InvalidArgument(f"cannot track this source: {error}", field="location") from None
        source_id = await self._store.track(
            vault, memory_id, spec, reading, tracked_by=identity.subject, actor=identity.actor
        )
        source = (await self._store.sources(vault, source_id=source_id))[0]
        rendered = render(spec.template, reading.value) if spec.kind.is_json else ""
        return vault, source, rendered

    async def untrack(self, identity: Identity, vault_name: str, source_id: str) -> VaultAccess:
        source_id = _parse_id(source_id, "source_id")
        vault = await self._accounts.access(identity, vault_name, write=True)
        if not await self._store.untrack(vault, source_id, identity.actor):
            raise NotFound(f"no tracked source {source_id} in vault '{vault.name}'", field="source_id")
        return vault

    # --- sync ----------------------------------------------------------------------------------------

    async def sync(
        self, identity: Identity, vault_name: str, source_id: str = ""
    ) -> tuple[VaultAccess, list[CheckResult]]:
        """Check one source now, or every source of the vault whose interval has passed."""
        vault = await self._accounts.access(identity, vault_name, write=True)
        if source_id:
            found = await self._store.sources(vault, source_id=_parse_id(source_id, "source_id"))
            if not found:
                raise NotFound(f"no tracked source {source_id} in vault '{vault.name}'", field="source_id")
            return vault, [await self._check(found[0], vault.approval_mode, identity)]
        due = await self._store.due(vault.id, DUE_PER_SYNC)
        return vault, [await self._check(source, mode, identity) for source, mode in due]

    async def sync_due(self, limit: int = DUE_PER_SYNC) -> list[CheckResult]:
        """The scheduler's run: every due source of every vault, each checked with its tracker's access."""
        results = []
        for source, mode in await self._store.due(None, limit):
            identity = Identity(subject=source.tracked_by, client=SYNC_CLIENT, scopes=frozenset({"read", "write"}))
            results.append(await self._check(source, mode, identity))
        return results

    async def _read(self, kind: SourceKind, location: str, selector: str) -> Reading:
        body = await self.reader.read(kind, location)
        return read_json(body, selector) if kind.is_json else read_text(body)

    async def _current_memory(self, source: TrackedSource) -> Memory | None:
        """The memory the source tracks, following supersessions made by other routes (an owner approving a
        replacement, an agent's supersede), so a source stays with the fact it is about."""
        vault = VaultAccess(source.vault_id, source.vault, "owner", "")
        memory = await self._memory_store.get_memory(vault, source.memory_id)
        hops = 0
        while memory is not None and memory.status is Status.SUPERSEDED and memory.superseded_by and hops < MAX_FOLLOW:
            successor = await self._memory_store.get_memory(vault, memory.superseded_by)
            if successor is None:
                break
            memory, hops = successor, hops + 1
        if memory is not None and memory.id != source.memory_id:
            await self._store.follow(source.id, memory.id)
        return memory

    async def _check(self, source: TrackedSource, approval_mode: str, identity: Identity) -> CheckResult:
        if not await self._store.claim(source.id, self.reader.rules.claim_seconds):
            return CheckResult(source.id, source.vault, source.memory_id, "busy", "another check of it is running")
        try:
            result = await self._check_claimed(source, approval_mode, identity)
        except Exception as error:
            log.exception("source check failed", extra={"source": source.id})
            await self._store.finish(source.id, error=f"the check failed ({type(error).__name__})")
            raise
        await self._store.finish(source.id, error=result.message if result.outcome == "error" else "")
        return replace(result, previous_error=source.last_error)

    async def _check_claimed(self, source: TrackedSource, approval_mode: str, identity: Identity) -> CheckResult:
        def result(outcome: str, message: str = "", **more: object) -> CheckResult:
            return CheckResult(source.id, source.vault, memory_id, outcome, message, **more)  # type: ignore[arg-type]

        memory = await self._current_memory(source)
        memory_id = memory.id if memory is not None else source.memory_id
        if memory is None or memory.status is not Status.ACTIVE:
            state = "gone" if memory is None else memory.status.value
            return result("error", f"the tracked memory is {state}; track the current memory instead")
        try:
            reading = await self._read(source.kind, source.location, source.selector)
        except SourceError as error:
            return result("error", str(error))
        pending = await self._store.pending_hash(source.id)
        verdict = decide(
            reading,
            source.baseline_hash,
            pending,
            kind=source.kind,
            mode=source.mode,
            vault_auto=approval_mode == "auto",
        )
        if verdict is Verdict.UNCHANGED:
            return result("unchanged")
        if verdict is Verdict.ALREADY_PENDING:
            return result("already_pending", "a change of this source already waits for review")
        if verdict is Verdict.REVERTED:
            reverted = await self._store.revert_pending(source)
            return result(
                "reverted",
                "the source is back to its baseline; its pending change was dismissed",
                change_id=reverted[0] if reverted else "",
            )
        if verdict is Verdict.PENDING:
            change_id = await self._store.add_pending(source, reading)
            why = "text changes always wait for review" if not source.kind.is_json else "the source is in review mode"
            if source.kind.is_json and source.mode.value == "auto":
                why = "the vault is in review mode, so the owner decides"
            return result("pending", f"the source changed; {why}", change_id=change_id)
        statement = render(source.template, reading.value)
        if memory.content_hash == content_hash(statement):
            # Already applied (a check that stopped after its supersede committed): record it, apply nothing.
            change_id = await self._store.rebase(
                source,
                reading,
                memory_id=memory.id,
                status=ChangeStatus.APPLIED,
                actor=identity.actor,
                replacement_id=memory.id,
            )
            return result("superseded", "already applied", change_id=change_id, replacement_id=memory.id)
        try:
            _, outcome = await self._memories.supersede(
                identity,
                source.vault,
                memory.id,
                self._replacement(memory, source, statement, synced=True),
                expected_version=memory.version,
            )
        except MemvaultError as error:
            return result("error", f"the new value was not applied: {error.message}")
        new_id = outcome.result.memory_id
        change_id = await self._store.rebase(
            source,
            reading,
            memory_id=new_id if outcome.applied else memory.id,
            status=ChangeStatus.APPLIED,
            actor=identity.actor,
            replacement_id=new_id,
        )
        message = f"superseded by {new_id}" if outcome.applied else f"the replacement {new_id} waits for the owner"
        return result(
            "superseded" if outcome.applied else "proposed",
            message,
            change_id=change_id,
            replacement_id=new_id,
            flagged_dependents=tuple(outcome.flagged),
        )

    @staticmethod
    def _replacement(memory: Memory, source: TrackedSource, statement: str, *, synced: bool) -> Draft:
        return Draft(
            content=statement,
            type=memory.type,
            key=memory.key,
            scope=memory.scope,
            tags=memory.tags,
            source=f"{source.kind.value}: {source.location}"[: limits.MAX_SOURCE_CHARS],
            trust=Trust.SYNCED if synced else None,
            confidence=memory.confidence,
            depends_on=memory.depends_on,
            metadata=memory.metadata,
        )

    # --- review --------------------------------------------------------------------------------------

    async def changes(
        self, identity: Identity, vault_name: str, *, include_resolved: bool = False, limit: int = 0
    ) -> tuple[VaultAccess, list[SourceChange]]:
        vault = await self._accounts.access(identity, vault_name)
        limit = min(limit or limits.MAX_SOURCES_LISTED, limits.MAX_SOURCES_LISTED)
        statuses = [s.value for s in ChangeStatus] if include_resolved else [ChangeStatus.PENDING.value]
        return vault, await self._store.changes(vault, statuses, limit)

    async def resolve(
        self, identity: Identity, vault_name: str, change_id: str, *, accept: bool, statement: str = ""
    ) -> tuple[VaultAccess, CheckResult]:
        """Accept a pending change (superseding the memory with the rendered statement, or for text the one the
        caller read from the source and gives) or dismiss it (the memory stays; the source's new content
        becomes its baseline)."""
        change_id = _parse_id(change_id, "change_id")
        statement = statement.strip()
        vault = await self._accounts.access(identity, vault_name, write=True)
        change = await self._store.change(vault, change_id)
        if change.status is not ChangeStatus.PENDING:
            raise Conflict(f"source change {change_id} is already {change.status.value}", field="change_id")
        if accept and not statement and not change.kind.is_json:
            raise InvalidArgument(
                "a text source changed: read it and give the replacement statement (memvault does not interpret "
                "prose), or dismiss the change",
                field="statement",
            )
        source = (await self._store.sources(vault, source_id=change.source_id))[0]
        if not await self._store.claim(source.id, self.reader.rules.claim_seconds):
            raise Conflict("a check of this source is running; try again in a moment", field="change_id")
        try:
            return vault, await self._resolve_claimed(identity, vault, source, change, accept, statement)
        finally:
            await self._store.release(source.id)

    async def _resolve_claimed(
        self,
        identity: Identity,
        vault: VaultAccess,
        source: TrackedSource,
        change: SourceChange,
        accept: bool,
        statement: str,
    ) -> CheckResult:
        reading = Reading(change.new_hash, change.new_value, change.has_value)
        if not accept:
            await self._store.rebase(
                source,
                reading,
                memory_id=source.memory_id,
                status=ChangeStatus.DISMISSED,
                actor=identity.actor,
                change_id=change.id,
            )
            return CheckResult(
                source.id, vault.name, source.memory_id, "dismissed", "the memory stays as it is", change_id=change.id
            )
        memory = await self._current_memory(source)
        if memory is None or memory.status is not Status.ACTIVE:
            state = "gone" if memory is None else memory.status.value
            raise Conflict(f"the tracked memory is {state}; dismiss this change", field="change_id")
        text = statement or change.proposed_statement
        _, outcome = await self._memories.supersede(
            identity,
            vault.name,
            memory.id,
            self._replacement(memory, source, text, synced=not statement),
            expected_version=memory.version,
        )
        new_id = outcome.result.memory_id
        await self._store.rebase(
            source,
            reading,
            memory_id=new_id if outcome.applied else memory.id,
            status=ChangeStatus.ACCEPTED,
            actor=identity.actor,
            change_id=change.id,
            replacement_id=new_id,
        )
        message = (
            f"memory {memory.id} is superseded by {new_id}"
            if outcome.applied
            else f"the replacement {new_id} waits for the owner's review"
        )
        if outcome.flagged:
            message += f"; {len(outcome.flagged)} memories that depend on it were flagged for review"
        return CheckResult(
            source.id,
            vault.name,
            memory.id,
            "superseded" if outcome.applied else "proposed",
            message,
            change_id=change.id,
            replacement_id=new_id,
            flagged_dependents=tuple(outcome.flagged),
        )

    # --- health --------------------------------------------------------------------------------------

    async def status(self, identity: Identity, vault_name: str) -> tuple[VaultAccess, SourceHealth]:
        vault = await self._accounts.access(identity, vault_name)
        sources = await self._store.sources(vault, limit=limits.MAX_SOURCES_LISTED)
        return vault, health(sources, datetime.now(UTC))

    async def for_memory(self, identity: Identity, vault_name: str, memory_id: str) -> list[TrackedSource]:
        vault = await self._accounts.access(identity, vault_name)
        return await self._store.sources(vault, memory_id=_parse_id(memory_id, "memory_id"))

    # --- the operator's commands (no caller: every vault) -----------------------------------------------

    async def every_source(self, limit: int) -> list[TrackedSource]:
        return await self._store.every_source(limit)

    async def every_pending_change(self, limit: int) -> list[SourceChange]:
        return await self._store.every_pending_change(limit)


def is_overdue(source: TrackedSource, now: datetime) -> bool:
    return now - source.next_check_at > OVERDUE_AFTER


def health(sources: list[TrackedSource], now: datetime) -> SourceHealth:
    return SourceHealth(
        sources=sources,
        errors=sum(1 for s in sources if s.last_error),
        overdue=sum(1 for s in sources if is_overdue(s, now)),
        pending_changes=sum(s.pending_changes for s in sources),
    )
