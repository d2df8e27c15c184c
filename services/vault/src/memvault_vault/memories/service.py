"""What remember, list, forget, supersede, invalidate, explain and stats do, between rpc/ and the store."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import Conflict, InvalidArgument, NotFound, PermissionDenied
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.domain import cursor, lifecycle
from memvault_vault.domain.filters import MemoryFilter
from memvault_vault.domain.inputs import check_reason, parse_memory_id, validate_draft, validate_page_size
from memvault_vault.domain.memory import (
    ApprovalMode,
    Draft,
    Memory,
    MemoryType,
    Outcome,
    Status,
    Trust,
    WriteResult,
    content_hash,
    fit_page,
)
from memvault_vault.memories.records import (
    Candidate,
    ExclusionRecord,
    Explanation,
    HistoryStep,
    SupersedeOutcome,
    WritePlan,
    WriteSummary,
)
from memvault_vault.memories.store import MemoryStore
from memvault_vault.memories.writes import Writer

_SHA256 = re.compile(r"[0-9a-f]{64}")


class MemoryService:
    def __init__(self, store: MemoryStore, writer: Writer, accounts: AccountService) -> None:
        self._store = store
        self._writer = writer
        self._accounts = accounts

    async def remember(
        self, identity: Identity, vault_name: str, draft: Draft, *, propose: bool
    ) -> tuple[VaultAccess, WriteSummary]:
        draft = validate_draft(draft)
        vault = await self._accounts.access(identity, vault_name, write=True)
        await self._writer.refuse_secret(identity, vault, draft)
        summary = await self._writer.write(
            identity, vault, [draft], propose=propose, default_trust=Trust.INFERRED, batch_source=None
        )
        invalid = summary.results[0]
        if invalid.outcome is Outcome.INVALID:  # a dependency that is not in the vault
            raise NotFound(invalid.message.removeprefix("items[0]."), field="depends_on")
        return vault, summary

    async def stats(self, identity: Identity, vault_name: str) -> tuple[VaultAccess, dict[str, Any]]:
        vault = await self._accounts.access(identity, vault_name)
        return vault, await self._store.stats(vault)

    async def list_memories(
        self,
        identity: Identity,
        vault_name: str,
        *,
        statuses: Sequence[Status] = (),
        types: Sequence[MemoryType] = (),
        tags: Sequence[str] = (),
        limit: int = 0,
        page_cursor: str = "",
        filters: MemoryFilter = MemoryFilter(),  # noqa: B008 (frozen: never changed)
    ) -> tuple[VaultAccess, list[Memory], str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        tags = sorted({t.strip().lower() for t in tags})
        request = cursor.fingerprint("list", vault.id, sorted(statuses), sorted(types), tags, filters.fingerprint())
        position = cursor.decode(page_cursor, "list", request)
        after = cursor.keyset_of(position)
        found = await self._store.list_memories(
            vault, statuses=statuses, types=types, tags=tags, limit=limit + 1, after=after, filters=filters
        )
        memories, more = fit_page([(m, 0.0) for m in found], limit)
        page = [m for m, _ in memories]
        next_cursor = ""
        if more and page:
            last = page[-1]
            assert last.created_at is not None
            next_cursor = cursor.encode("list", request, {"created_at": last.created_at.isoformat(), "id": last.id})
        return vault, page, next_cursor

    async def forget(self, identity: Identity, vault_name: str, memory_id: str) -> tuple[VaultAccess, str]:
        memory_id = parse_memory_id(memory_id)
        vault = await self._accounts.access(identity, vault_name, write=True)
        if not await self._store.forget(vault, memory_id, identity.actor):
            raise NotFound(
                f"no memory {memory_id} in vault '{vault.name}' (if you forgot it already, it is gone); "
                "find ids with recall or list_memories",
                field="memory_id",
            )
        return vault, memory_id

    async def exclusions(
        self, identity: Identity, vault_name: str, *, limit: int = 0, offset: int = 0, text: str = ""
    ) -> tuple[VaultAccess, list[ExclusionRecord], int]:
        """Texts refused because they were forgotten (or rejected and purged); with `text`, only its own."""
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        if offset < 0:
            raise InvalidArgument("offset must be 0 or more", field="offset")
        if len(text) > limits.MAX_CONTENT_CHARS:
            raise InvalidArgument(f"text is longer than {limits.MAX_CONTENT_CHARS} characters", field="text")
        vault = await self._accounts.access(identity, vault_name)
        only = content_hash(text) if text.strip() else None
        found, total = await self._store.exclusions(vault, limit=limit, offset=offset, only_hash=only)
        return vault, found, total

    async def lift_exclusion(
        self, identity: Identity, vault_name: str, *, hash_of: str = "", text: str = ""
    ) -> tuple[VaultAccess, str]:
        """Let a forgotten text be stored again (owners and editors, as people: it undoes a forget)."""
        if bool(hash_of.strip()) == bool(text.strip()):
            raise InvalidArgument("give either content_hash or text", field="content_hash")
        if text.strip():
            target = content_hash(text)
        else:
            target = hash_of.strip().lower()
            if not _SHA256.fullmatch(target):
                raise InvalidArgument("content_hash must be 64 hexadecimal characters (a sha256)", field="content_hash")
        vault = await self._accounts.reviewer(identity, vault_name)
        if not await self._store.lift_exclusion(vault, target, identity.actor):
            raise NotFound(f"vault '{vault.name}' has no exclusion {target}", field="content_hash")
        return vault, target

    def _applies_now(self, identity: Identity, vault: VaultAccess) -> bool:
        """An agent's change to existing memories waits for review unless the vault is in auto mode; a person
        acting with the admin scope (the owner in the dashboard or API) decides at once."""
        return vault.approval_mode == ApprovalMode.AUTO or (not identity.client and "admin" in identity.scopes)

    async def supersede(
        self, identity: Identity, vault_name: str, memory_id: str, replacement: Draft, *, expected_version: int = 0
    ) -> tuple[VaultAccess, SupersedeOutcome]:
        memory_id = parse_memory_id(memory_id)
        replacement = validate_draft(replacement)
        vault = await self._accounts.access(identity, vault_name, write=True)
        await self._writer.refuse_secret(identity, vault, replacement)
        similar_to, plan = await self._check_replacement(vault, memory_id, replacement)
        apply = self._applies_now(identity, vault)
        draft = self._writer.annotated(replacement, identity)
        candidate = Candidate(
            id=str(uuid.uuid4()),
            content=draft.content,
            content_hash=draft.hash,
            draft=draft,
            status=Status.ACTIVE if apply else Status.PROPOSED,
            trust=draft.trust or Trust.INFERRED,
            outcome=Outcome.SIMILAR.value if similar_to else Outcome.STORED.value,
            similar_to=similar_to,
            supersedes=memory_id,
        )
        report, flagged = await self._store.supersede(
            vault,
            memory_id,
            candidate,
            apply=apply,
            expected_version=expected_version,
            actor=identity.actor,
            client=identity.client,
        )
        conflicts = tuple(c for c in report.conflicts.get(candidate.id, ()) if c != memory_id)
        message = (
            f"memory {memory_id} is superseded by {candidate.id}"
            if apply
            else f"the replacement {candidate.id} waits for the owner's review; {memory_id} stays active until it is approved"
        )
        if flagged:
            message += f"; {len(flagged)} memories that depend on it were flagged for review"
        if similar_to:
            message += (
                f"; the replacement is also similar to {', '.join(similar_to)}: check that it does not contradict "
                "them (recall shows may_conflict_with while both are active)"
            )
        outcome = Outcome.SIMILAR if similar_to else Outcome.STORED
        result = WriteResult(
            outcome, candidate.id, candidate.status, message, 0, similar_to=similar_to, conflicts_with=conflicts
        )
        return vault, SupersedeOutcome(result, apply, flagged, plan.check, plan.notices)

    async def _check_replacement(
        self, vault: VaultAccess, memory_id: str, replacement: Draft
    ) -> tuple[tuple[str, ...], WritePlan]:
        """A replacement gets the same duplicate rules as any write. Repeating the memory it replaces, or
        another memory, is refused (nothing would change; if another memory already says it, the old one is
        simply no longer true). Memories similar to it, other than the one it replaces, are linked."""
        refused: dict[int, WriteResult] = {}
        plan = await self._writer.plan(vault, {0: replacement}, refused, wait_for_index=False)
        if 0 in refused:
            found = refused[0]
            if found.outcome is Outcome.INVALID:  # a dependency that is not in the vault, as in remember
                raise NotFound(found.message.removeprefix("items[0]."), field="depends_on")
            if found.outcome is Outcome.DUPLICATE and found.memory_id == memory_id:
                raise Conflict(
                    f"the replacement text is the text of memory {memory_id}; supersede it with the new text",
                    field="content",
                )
            if found.outcome is Outcome.DUPLICATE:
                raise Conflict(
                    f"the replacement text is already stored as memory {found.memory_id} ({found.status.value}); "
                    f"if {memory_id} is simply no longer true, invalidate it",
                    field="content",
                )
            raise Conflict(f"the replacement cannot be stored: {found.message}", field="content")
        decision = plan.decisions[0]
        if decision.kind == "duplicate" and decision.duplicate_of == memory_id:
            raise Conflict(
                f"the replacement says the same as memory {memory_id} (cosine {decision.cosine:.2f}, same numbers, "
                "dates, names and negations): nothing would change. Supersede only when a fact changed, and say what "
                "it is now",
                field="content",
            )
        if decision.kind == "duplicate":
            raise Conflict(
                f"memory {decision.duplicate_of} already says this (cosine {decision.cosine:.2f}, same numbers, "
                f"dates, names and negations); if {memory_id} is simply no longer true, invalidate it",
                field="content",
            )
        return tuple(m for m in decision.similar_to if m != memory_id), plan

    async def edit(
        self,
        identity: Identity,
        vault_name: str,
        memory_id: str,
        *,
        content: str | None,
        tags: Sequence[str] | None,
        expected_version: int = 0,
    ) -> tuple[VaultAccess, Memory, list[str]]:
        """Fix a memory in place: its text (a typo, not a changed fact: that is supersede) and its tags.

        The same duplicate, exclusion and secret rules as any write apply to the new text. Only a
        change that applies at once may edit (the owner, or any writer in auto mode); an agent in
        review mode supersedes instead, which waits for the owner."""
        memory_id = parse_memory_id(memory_id)
        if content is None and tags is None:
            raise InvalidArgument("nothing to change: give the corrected content, tags, or both", field="content")
        vault = await self._accounts.access(identity, vault_name, write=True)
        if not self._applies_now(identity, vault):
            raise PermissionDenied(
                f"vault '{vault.name}' reviews agents' changes: supersede the memory instead, which waits for the "
                "owner's review",
                field="memory_id",
            )
        current = await self._store.require_memory(vault, memory_id)
        draft = validate_draft(
            Draft(
                content=current.content if content is None else content,
                type=current.type,
                key=current.key,
                scope=current.scope,
                tags=tuple(current.tags) if tags is None else tuple(tags),
            )
        )
        if draft.hash != current.content_hash:
            await self._writer.refuse_secret(identity, vault, draft)
            await self._check_edit(vault, memory_id, draft)
        memory, changed = await self._store.edit(
            vault,
            memory_id,
            content=draft.content,
            tags=sorted(set(draft.tags)),
            expected_version=expected_version,
            actor=identity.actor,
        )
        return vault, memory, changed

    async def _check_edit(self, vault: VaultAccess, memory_id: str, draft: Draft) -> None:
        """An edited text may not repeat another memory, nor a forgotten text (the store checks the exact
        text again under the vault's lock)."""
        refused: dict[int, WriteResult] = {}
        plan = await self._writer.plan(vault, {0: draft}, refused, wait_for_index=False)
        if 0 in refused:
            found = refused[0]
            if found.outcome is Outcome.DUPLICATE and found.memory_id != memory_id:
                raise Conflict(
                    f"the new text is already stored as memory {found.memory_id} ({found.status.value}); "
                    f"if {memory_id} is no longer needed, invalidate or forget it",
                    field="content",
                )
            if found.outcome is Outcome.EXCLUDED:
                raise Conflict(
                    "the new text was forgotten in this vault and is refused from then on; lift its exclusion first "
                    "if it should be stored again",
                    field="content",
                )
            if found.outcome is not Outcome.DUPLICATE:
                raise Conflict(f"the new text cannot be stored: {found.message}", field="content")
            return
        decision = plan.decisions[0]
        if decision.kind == "duplicate" and decision.duplicate_of != memory_id:
            raise Conflict(
                f"memory {decision.duplicate_of} already says this (cosine {decision.cosine:.2f}, same numbers, "
                f"dates, names and negations); if {memory_id} is no longer needed, invalidate or forget it",
                field="content",
            )

    async def invalidate(
        self, identity: Identity, vault_name: str, memory_id: str, reason: str, *, expected_version: int = 0
    ) -> tuple[VaultAccess, Memory, bool, list[str]]:
        memory_id = parse_memory_id(memory_id)
        reason = check_reason(reason)
        vault = await self._accounts.access(identity, vault_name, write=True)
        apply = self._applies_now(identity, vault)
        memory, flagged = await self._store.invalidate(
            vault, memory_id, reason, apply=apply, expected_version=expected_version, actor=identity.actor
        )
        return vault, memory, apply, flagged

    async def explain(self, identity: Identity, vault_name: str, memory_id: str) -> tuple[VaultAccess, Explanation]:
        memory_id = parse_memory_id(memory_id)
        vault = await self._accounts.access(identity, vault_name)
        memory = await self._store.require_memory(vault, memory_id)
        records = await self._store.history(vault, memory_id, limits.MAX_HISTORY_ENTRIES)
        history: list[HistoryStep] = []
        previous: dict[str, Any] | None = None
        for record in records:
            fields = lifecycle.changed_fields(previous, record.snapshot)
            content_changed = previous is None or "content" in fields
            history.append(
                HistoryStep(
                    record.version,
                    record.change,
                    record.actor,
                    record.at,
                    record.cause,
                    fields,
                    Status(record.snapshot.get("status", memory.status.value)),
                    str(record.snapshot.get("content", "")) if content_changed else "",
                )
            )
            previous = record.snapshot
        related = await self._store.related(vault, memory, limits.MAX_LIST_RESULTS)
        referenced = {
            *memory.depends_on,
            *memory.similar_to,
            *(i for i in (memory.supersedes, memory.superseded_by) if i),
        }
        present = {m.id for _, m in related}
        missing = sorted(referenced - present)
        now = datetime.now(UTC)
        return vault, Explanation(memory, history, related, lifecycle.notes(memory, now), missing)
