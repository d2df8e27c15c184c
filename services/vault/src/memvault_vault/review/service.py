"""What the owner's review calls do: approve, reject, mark reviewed, the queue and the audit of memories."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from memvault_core import limits
from memvault_core.errors import InvalidArgument
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.domain import cursor, lifecycle
from memvault_vault.domain.inputs import check_reason, parse_memory_id, validate_page_size
from memvault_vault.domain.memory import Memory, review_after
from memvault_vault.memories.store import MemoryStore
from memvault_vault.review.records import Finding
from memvault_vault.review.store import ReviewStore


class ReviewService:
    def __init__(self, store: ReviewStore, memories: MemoryStore, accounts: AccountService) -> None:
        self._store = store
        self._memories = memories
        self._accounts = accounts

    async def approve(
        self,
        identity: Identity,
        vault_name: str,
        memory_id: str,
        *,
        replace_similar: bool = False,
        replace_ids: Sequence[str] = (),
        expected_version: int = 0,
    ) -> tuple[VaultAccess, Memory, list[str], list[str]]:
        memory_id = parse_memory_id(memory_id)
        replace = [parse_memory_id(v, f"replace_ids[{i}]") for i, v in enumerate(replace_ids)]
        vault = await self._accounts.reviewer(identity, vault_name)
        memory, superseded, flagged = await self._store.approve(
            vault,
            memory_id,
            replace_similar=replace_similar,
            replace_ids=replace,
            expected_version=expected_version,
            actor=identity.actor,
        )
        return vault, memory, superseded, flagged

    async def reject(
        self, identity: Identity, vault_name: str, memory_id: str, reason: str, *, expected_version: int = 0
    ) -> tuple[VaultAccess, Memory]:
        memory_id = parse_memory_id(memory_id)
        reason = check_reason(reason)
        vault = await self._accounts.reviewer(identity, vault_name)
        return vault, await self._store.reject(
            vault, memory_id, reason, expected_version=expected_version, actor=identity.actor
        )

    async def mark_reviewed(
        self, identity: Identity, vault_name: str, memory_id: str, *, expected_version: int = 0
    ) -> tuple[VaultAccess, Memory]:
        memory_id = parse_memory_id(memory_id)
        vault = await self._accounts.reviewer(identity, vault_name)
        current = await self._memories.require_memory(vault, memory_id)
        next_review = review_after(current.type, datetime.now(UTC))
        return vault, await self._store.mark_reviewed(
            vault, memory_id, next_review, expected_version=expected_version, actor=identity.actor
        )

    async def audit_memories(
        self, identity: Identity, vault_name: str, kinds: Sequence[str], *, limit: int = 0, page_cursor: str = ""
    ) -> tuple[VaultAccess, list[Finding], dict[str, int], str]:
        unknown = [k for k in kinds if k not in lifecycle.AUDIT_KINDS]
        if unknown:
            raise InvalidArgument(
                f"kinds has {', '.join(repr(k) for k in unknown)}; choose from: {', '.join(lifecycle.AUDIT_KINDS)}",
                field="kinds",
            )
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_AUDIT_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        chosen = sorted(set(kinds)) or list(lifecycle.AUDIT_KINDS)
        request = cursor.fingerprint("audit", vault.id, chosen)
        position = cursor.decode(page_cursor, "audit", request)
        found, counts = await self._store.audit_findings(vault, chosen, limit + 1, cursor.id_of(position))
        now = datetime.now(UTC)
        page = [
            Finding(memory, kinds_found, related, lifecycle.finding_message(memory, kinds_found, related, now))
            for memory, kinds_found, related in found[:limit]
        ]
        next_cursor = cursor.encode("audit", request, {"id": page[-1].memory.id}) if len(found) > limit else ""
        return vault, page, counts, next_cursor

    async def review_queue(
        self, identity: Identity, vault_name: str, *, limit: int = 0, page_cursor: str = ""
    ) -> tuple[VaultAccess, list[tuple[Memory, list[tuple[str, Memory]]]], int, str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        request = cursor.fingerprint("review", vault.id)
        position = cursor.decode(page_cursor, "review", request)
        after = cursor.keyset_of(position)
        memories, total = await self._store.review_queue(vault, limit + 1, after)
        # Every proposal's related memories in one statement (a page is up to 100 proposals).
        found = await self._memories.related_many(vault, memories[:limit], limits.MAX_LIST_RESULTS)
        items = [
            (
                memory,
                [
                    (relation, other)
                    for relation, other in related
                    if relation in ("similar", "similar_from", "supersedes", "same_key", "depends_on")
                ],
            )
            for memory in memories[:limit]
            for related in [found[memory.id]]
        ]
        next_cursor = ""
        if len(memories) > limit and items:
            last = items[-1][0]
            assert last.created_at is not None
            next_cursor = cursor.encode("review", request, {"created_at": last.created_at.isoformat(), "id": last.id})
        return vault, items, total, next_cursor
