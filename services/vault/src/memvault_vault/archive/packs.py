"""Context packs: 1-20 required conversations (whole active timeline, or its tail) pinned at a
revision, plus up to 8 optional archive searches, fitted whole-message to a caller's token and byte
budgets (domain/context_pack.py). Read-only and extractive: nothing is written or summarised."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.archive.records import MessageHit
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.archive.write_store import ArchiveWriteStore
from memvault_vault.domain import archive as rules
from memvault_vault.domain import context_pack as packing

Search = Callable[[Identity, str, str, list[str], int], Awaitable[list[MessageHit]]]
"""The archive's message search (the same call archive_search makes)."""


@dataclass(frozen=True)
class PackMessage:
    conversation_id: str
    revision: int
    message_id: str
    position: int
    role: str
    authority: str
    text: str
    score: float = 0.0
    node_id: str = ""
    key: str = ""
    query_index: int = -1


@dataclass(frozen=True)
class Pack:
    pack_id: str
    fits: bool
    max_tokens: int
    max_bytes: int
    pins: list[tuple[str, int]]
    tokens: int = 0
    bytes: int = 0
    messages: list[PackMessage] = field(default_factory=list)
    left_out: int = 0
    duplicates: int = 0
    min_max_tokens: int = 0
    min_max_bytes: int = 0
    shortfall: list[dict[str, Any]] = field(default_factory=list)


def _budget(value: int, default: int, least: int, most: int, name: str) -> int:
    if value == 0:
        return default
    if value < least or value > most:
        raise LimitExceeded(f"{name} must be {least}-{most} (default {default})", field=name)
    return value


class ContextPacks:
    def __init__(
        self, store: ArchiveStore, writes: ArchiveWriteStore, accounts: AccountService, search: Search
    ) -> None:
        self._store = store
        self._writes = writes
        self._accounts = accounts
        self._search = search

    async def build(
        self,
        identity: Identity,
        vault_name: str,
        *,
        required: list[tuple[str, int, int]],
        searches: list[tuple[str, int]],
        max_tokens: int,
        max_bytes: int,
    ) -> Pack:
        """`required`: (conversation id, revision or 0 for the head, tail or 0 for the whole timeline);
        `searches`: (query, hits or 0 for 5)."""
        if not 1 <= len(required) <= packing.MAX_PACK_CONVERSATIONS:
            raise InvalidArgument(
                f"conversations must name 1-{packing.MAX_PACK_CONVERSATIONS} conversations", field="conversations"
            )
        if len(searches) > packing.MAX_PACK_SEARCHES:
            raise LimitExceeded(f"at most {packing.MAX_PACK_SEARCHES} searches per pack", field="queries")
        max_tokens = _budget(
            max_tokens, packing.DEFAULT_PACK_TOKENS, packing.MIN_PACK_TOKENS, packing.MAX_PACK_TOKENS, "max_tokens"
        )
        max_bytes = _budget(
            max_bytes, packing.DEFAULT_PACK_BYTES, packing.MIN_PACK_BYTES, packing.MAX_PACK_BYTES, "max_bytes"
        )
        asked: list[tuple[str, int, int]] = []
        for index, (conversation_id, revision, tail) in enumerate(required):
            conversation_id = rules.parse_conversation_id(conversation_id, f"conversations[{index}].id")
            if revision < 0:
                raise InvalidArgument("revision must be 0 (the head) or a revision number", field="revision")
            if not 0 <= tail <= packing.MAX_PACK_TAIL:
                raise LimitExceeded(f"tail must be 0 (whole) to {packing.MAX_PACK_TAIL}", field="tail")
            asked.append((conversation_id, revision, tail))
        if len({a[0] for a in asked}) != len(asked):
            raise InvalidArgument("each conversation may be required once per pack", field="conversations")
        for index, (query, wanted) in enumerate(searches):
            if not query.strip():
                raise InvalidArgument(f"queries[{index}] is empty", field="queries")
            if not 0 <= wanted <= packing.MAX_PACK_SEARCH_RESULTS:
                raise LimitExceeded(f"a pack's search brings 1-{packing.MAX_PACK_SEARCH_RESULTS} hits", field="hits")
        vault = await self._accounts.access(identity, vault_name)

        # Pin every required revision before any text is read.
        pins: list[tuple[str, int]] = []
        for conversation_id, revision, _ in asked:
            head = (await self._store.conversation(vault, conversation_id)).head_revision
            pinned = revision or head
            if not await self._store.has_revision(vault, conversation_id, pinned):
                raise InvalidArgument(f"conversation {conversation_id} has no revision {pinned}", field="revision")
            pins.append((conversation_id, pinned))
        required_candidates: list[packing.Candidate] = []
        for rank, ((conversation_id, pinned), (_, _, tail)) in enumerate(zip(pins, asked, strict=True)):
            for position, message_id, size in await self._writes.timeline(vault, conversation_id, pinned, tail):
                required_candidates.append(
                    packing.Candidate(conversation_id, pinned, message_id, position, size, packing.REQUIRED, rank)
                )
        hits: dict[tuple[str, int, str], tuple[MessageHit, int]] = {}
        retrieved: list[packing.Candidate] = []
        for rank, (query, limit) in enumerate(searches):
            for hit in await self._search(
                identity, vault.name, query, [], limit or packing.DEFAULT_PACK_SEARCH_RESULTS
            ):
                hits.setdefault((hit.conversation_id, hit.revision, hit.message_id), (hit, rank))
                retrieved.append(
                    packing.Candidate(
                        hit.conversation_id,
                        hit.revision,
                        hit.message_id,
                        hit.position,
                        len(hit.text.encode()),
                        packing.RETRIEVED,
                        rank,
                        round(hit.score, 6),
                    )
                )
        # The pins stand for the revisions asked (0 or the head's number give the same pack).
        request = {
            "required": [(c, tail) for c, _, tail in asked],
            "searches": searches,
            "max_tokens": max_tokens,
            "max_bytes": max_bytes,
        }
        fitted = packing.fit(required_candidates, retrieved, max_tokens, max_bytes)
        if isinstance(fitted, packing.Shortfall):
            return Pack(
                pack_id=packing.pack_id(request, pins, []),
                fits=False,
                max_tokens=max_tokens,
                max_bytes=max_bytes,
                pins=pins,
                min_max_tokens=fitted.min_max_tokens,
                min_max_bytes=fitted.min_max_bytes,
                shortfall=fitted.conversations,
            )
        texts: dict[str, Any] = {}
        for conversation_id, pinned in pins:
            positions = [
                c.position
                for c in fitted.kept
                if c.authority == packing.REQUIRED and c.conversation_id == conversation_id
            ]
            for record in await self._writes.messages_at(vault, conversation_id, pinned, positions):
                texts[record.id] = record
        messages: list[PackMessage] = []
        for c in fitted.kept:
            if c.authority == packing.REQUIRED:
                record = texts[c.message_id]
                messages.append(
                    PackMessage(
                        c.conversation_id,
                        c.revision,
                        c.message_id,
                        c.position,
                        record.role,
                        c.authority,
                        record.text,
                        node_id=record.node_id,
                        key=record.key or "",
                    )
                )
            else:
                hit, rank = hits[(c.conversation_id, c.revision, c.message_id)]
                messages.append(
                    PackMessage(
                        c.conversation_id,
                        c.revision,
                        c.message_id,
                        c.position,
                        hit.role,
                        c.authority,
                        hit.text,
                        score=c.score,
                        query_index=rank,
                    )
                )
        return Pack(
            pack_id=packing.pack_id(request, pins, fitted.kept),
            fits=True,
            max_tokens=max_tokens,
            max_bytes=max_bytes,
            pins=pins,
            tokens=fitted.tokens,
            bytes=fitted.bytes,
            messages=messages,
            left_out=fitted.left_out,
            duplicates=fitted.duplicates,
        )
