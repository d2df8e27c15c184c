"""What the vault does, between the wire (rpc/) and the database (store.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import InvalidArgument, NotFound, PermissionDenied, Unavailable
from memvault_core.identity import Identity
from memvault_vault.domain import cursor, fusion
from memvault_vault.domain.guide import Guide
from memvault_vault.domain.memory import (
    RECALLABLE_BY_DEFAULT,
    Draft,
    Memory,
    MemoryType,
    RecallHit,
    RecallPage,
    Status,
    Trust,
    WriteResult,
    initial_status,
    parse_memory_id,
    validate_bulk,
    validate_draft,
    validate_page_size,
    validate_query,
)
from memvault_vault.index_client import IndexClient
from memvault_vault.store import Candidate, Store, VaultAccess

log = logging.getLogger(__name__)

HYBRID = "hybrid"
KEYWORD_ONLY = "keyword-only"


class MemoryService:
    def __init__(self, store: Store, index: IndexClient | None = None) -> None:
        self.store = store
        self.index = index

    async def vaults(self, identity: Identity) -> list[VaultAccess]:
        identity.require("read")
        return [v for v in await self.store.vaults_of(identity.subject) if identity.allows_vault(v.name)]

    async def access(self, identity: Identity, name: str, *, write: bool = False) -> VaultAccess:
        """The vault `name` as this identity may use it; unknown and forbidden vaults look the same."""
        identity.require("write" if write else "read")
        name = name.strip()
        if not name:
            usable = await self.vaults(identity)
            by_name = {v.name: v for v in usable}
            if "default" in by_name:
                vault: VaultAccess | None = by_name["default"]
            elif len(usable) == 1:
                vault = usable[0]
            else:
                raise InvalidArgument(
                    "vault is required here; choose one of: " + (", ".join(by_name) or "(none)"),
                    field="vault",
                )
        else:
            vault = await self.store.vault_of(identity.subject, name) if identity.allows_vault(name) else None
        if vault is None:
            names = ", ".join(v.name for v in await self.vaults(identity)) or "(none)"
            raise NotFound(f"no vault named {name[:64]!r} is open to you; your vaults: {names}", field="vault")
        if write and not vault.writable:
            raise PermissionDenied(f"you can read vault '{vault.name}' but not write to it (role: {vault.role})")
        return vault

    async def guide(self, identity: Identity, vault_name: str) -> Guide:
        return await self.store.guide(await self.access(identity, vault_name))

    async def remember(
        self, identity: Identity, vault_name: str, draft: Draft, *, propose: bool
    ) -> tuple[VaultAccess, WriteResult]:
        draft = validate_draft(draft)
        vault = await self.access(identity, vault_name, write=True)
        candidate = self._candidate(draft, vault, propose=propose, default_trust=Trust.INFERRED, identity=identity)
        _, results = await self.store.write(vault, [candidate], actor=identity.actor, client=identity.client)
        return vault, results[0]

    async def bulk_remember(
        self, identity: Identity, vault_name: str, drafts: Sequence[Draft], source: str
    ) -> tuple[VaultAccess, str, list[WriteResult]]:
        if len(source) > limits.MAX_SOURCE_CHARS:
            raise InvalidArgument(f"source is longer than {limits.MAX_SOURCE_CHARS} characters", field="source")
        checked = validate_bulk(list(drafts))
        vault = await self.access(identity, vault_name, write=True)
        candidates = [
            self._candidate(
                d if d.source else Draft(**{**d.__dict__, "source": source.strip()}),
                vault,
                propose=False,
                default_trust=Trust.IMPORTED,
                identity=identity,
            )
            for d in checked
        ]
        batch_id, results = await self.store.write(
            vault, candidates, actor=identity.actor, client=identity.client, batch_source=source.strip()
        )
        assert batch_id is not None
        return vault, batch_id, results

    def _candidate(
        self, draft: Draft, vault: VaultAccess, *, propose: bool, default_trust: Trust, identity: Identity
    ) -> Candidate:
        source = draft.source
        if identity.client:
            source = f"{source} (via {identity.client})" if source else f"via {identity.client}"
        return Candidate(
            content=draft.content,
            content_hash=draft.hash,
            draft=Draft(**{**draft.__dict__, "source": source[: limits.MAX_SOURCE_CHARS + 64]}),
            status=initial_status(vault.approval_mode, propose),
            trust=draft.trust or default_trust,
        )

    async def recall(
        self,
        identity: Identity,
        vault_name: str,
        query: str,
        *,
        limit: int = 0,
        page_cursor: str = "",
        types: Sequence[MemoryType] = (),
        tags: Sequence[str] = (),
        statuses: Sequence[Status] = (),
    ) -> tuple[VaultAccess, RecallPage]:
        query = validate_query(query)
        limit = validate_page_size(limit, limits.DEFAULT_RECALL_RESULTS, limits.MAX_RECALL_RESULTS)
        vault = await self.access(identity, vault_name)
        statuses = tuple(statuses) or RECALLABLE_BY_DEFAULT
        tags = sorted({t.strip().lower() for t in tags})
        request = cursor.fingerprint("recall", vault.id, query, sorted(types), tags, sorted(statuses))
        position = cursor.decode(page_cursor, "recall", request)
        offset = int(position["offset"]) if position else 0
        ranked, mode = await self._rank(vault, query, statuses=statuses, types=types, tags=tags)
        window = ranked[offset : offset + limit + 1]
        hits, more = _fit(window, limit)
        warnings: list[str] = []
        if mode == KEYWORD_ONLY and self.index is not None:
            warnings.append(
                "semantic search is unavailable right now; only memories sharing words with the query were searched"
            )
        if not ranked and offset == 0 and not await self.store.has_search_terms(query) and mode == KEYWORD_ONLY:
            warnings.append("the query has only common words (like 'what' or 'the'); add the specific terms you want")
        next_cursor = cursor.encode("recall", request, {"offset": offset + len(hits)}) if more else ""
        page = RecallPage(
            hits=[RecallHit(memory, score) for memory, score in hits],
            mode=mode,
            warnings=warnings,
            next_cursor=next_cursor,
        )
        return vault, page

    async def _rank(
        self,
        vault: VaultAccess,
        query: str,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
    ) -> tuple[list[tuple[Memory, float]], str]:
        """Every candidate from keyword and vector search, fused, best first; and which search answered."""
        filters: dict[str, Any] = {"statuses": statuses, "types": types, "tags": tags}
        keyword_search = self.store.keyword_search(vault, query, limit=fusion.KEYWORD_CANDIDATES, offset=0, **filters)
        if self.index is None:
            keyword = await keyword_search
            return fusion.fuse([fusion.Candidate(m, r, None) for m, r in keyword], cosine_weight=0.0), KEYWORD_ONLY
        index = self.index
        pending = await self.store.unindexed_recent(vault, fusion.PENDING_TO_SCORE)
        # Full-text and vector search run side by side; the keyword hits the vector search did not
        # return are scored afterwards (the indexer keeps the query's embedding, so that is cheap).
        dense_search = asyncio.ensure_future(
            index.search(vault.id, query, limit=fusion.DENSE_CANDIDATES, score_ids=(), pending=pending)
        )
        try:
            keyword = await keyword_search
        except BaseException:
            dense_search.cancel()
            raise
        try:
            cosines = await dense_search
            unscored = [memory.id for memory, _ in keyword if memory.id not in cosines]
            if unscored:
                cosines.update(await index.search(vault.id, query, limit=0, score_ids=unscored, pending=()))
        except Unavailable as error:
            log.warning("recall fell back to keyword-only", extra={"reason": error.message})
            return fusion.fuse([fusion.Candidate(m, r, None) for m, r in keyword], cosine_weight=0.0), KEYWORD_ONLY
        known = {memory.id for memory, _ in keyword}
        dense_only = [i for i in cosines if i not in known]
        extra = await self.store.memories_by_ids(vault, dense_only, query, **filters) if dense_only else []
        candidates = [fusion.Candidate(memory, rank, cosines.get(memory.id)) for memory, rank in [*keyword, *extra]]
        return fusion.fuse(candidates), HYBRID

    async def stats(self, identity: Identity, vault_name: str) -> tuple[VaultAccess, dict[str, Any]]:
        vault = await self.access(identity, vault_name)
        return vault, await self.store.stats(vault)

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
    ) -> tuple[VaultAccess, list[Memory], str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self.access(identity, vault_name)
        tags = sorted({t.strip().lower() for t in tags})
        request = cursor.fingerprint("list", vault.id, sorted(statuses), sorted(types), tags)
        position = cursor.decode(page_cursor, "list", request)
        after = (datetime.fromisoformat(position["created_at"]), str(position["id"])) if position else None
        found = await self.store.list_memories(
            vault, statuses=statuses, types=types, tags=tags, limit=limit + 1, after=after
        )
        memories, more = _fit([(m, 0.0) for m in found], limit)
        page = [m for m, _ in memories]
        next_cursor = ""
        if more and page:
            last = page[-1]
            assert last.created_at is not None
            next_cursor = cursor.encode("list", request, {"created_at": last.created_at.isoformat(), "id": last.id})
        return vault, page, next_cursor

    async def forget(self, identity: Identity, vault_name: str, memory_id: str) -> tuple[VaultAccess, str]:
        memory_id = parse_memory_id(memory_id)
        vault = await self.access(identity, vault_name, write=True)
        if not await self.store.forget(vault, memory_id, identity.actor):
            raise NotFound(
                f"no memory {memory_id} in vault '{vault.name}'; find ids with recall or list_memories",
                field="memory_id",
            )
        return vault, memory_id


def _fit(found: Sequence[tuple[Memory, float]], limit: int) -> tuple[list[tuple[Memory, float]], bool]:
    """The first `limit` results within the result byte budget, and whether more remain."""
    page: list[tuple[Memory, float]] = []
    size = 0
    for memory, score in found[:limit]:
        size += len(memory.content.encode())
        if page and size > limits.MAX_RESULT_BYTES:
            return page, True
        page.append((memory, score))
    return page, len(found) > limit
