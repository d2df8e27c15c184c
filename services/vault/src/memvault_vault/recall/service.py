"""What recall does: validate, search both ways, fuse, page, and warn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import InvalidArgument, Unavailable
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.domain import cursor, fusion, lifecycle
from memvault_vault.domain.filters import MemoryFilter
from memvault_vault.domain.inputs import validate_page_size, validate_query
from memvault_vault.domain.memory import (
    AS_OF_STATUSES,
    RECALLABLE_BY_DEFAULT,
    MemoryType,
    MemoryWarning,
    RecallHit,
    RecallPage,
    Status,
    fit_page,
)
from memvault_vault.index_client import IndexClient
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.recall.store import RecallStore

log = logging.getLogger(__name__)

HYBRID = "hybrid"
KEYWORD_ONLY = "keyword-only"
NO_INDEXER = "no indexer is configured"


class RecallService:
    def __init__(
        self, store: RecallStore, feed: IndexFeedStore, accounts: AccountService, index: IndexClient | None = None
    ) -> None:
        self._store = store
        self._feed = feed
        self._accounts = accounts
        self._index = index

    async def search_mode(self) -> tuple[str, str, str]:
        """(mode recall answers in now: hybrid or keyword-only, why when keyword-only, the embedding model)."""
        if self._index is None:
            return KEYWORD_ONLY, NO_INDEXER, ""
        try:
            model, refused = await self._index.searchable()
        except Unavailable as error:
            return KEYWORD_ONLY, error.message, ""
        return (KEYWORD_ONLY, refused, model) if refused else (HYBRID, "", model)

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
        as_of: datetime | None = None,
        include_expired: bool = False,
        filters: MemoryFilter = MemoryFilter(),  # noqa: B008 (frozen: never changed)
    ) -> tuple[VaultAccess, RecallPage]:
        query = validate_query(query)
        limit = validate_page_size(limit, limits.DEFAULT_RECALL_RESULTS, limits.MAX_RECALL_RESULTS)
        now = datetime.now(UTC)
        if as_of is not None and as_of > now:
            raise InvalidArgument("as_of is in the future; leave it out to recall what is valid now", field="as_of")
        vault = await self._accounts.access(identity, vault_name)
        statuses = tuple(statuses) or (AS_OF_STATUSES if as_of else RECALLABLE_BY_DEFAULT)
        tags = sorted({t.strip().lower() for t in tags})
        request = cursor.fingerprint(
            "recall",
            vault.id,
            query,
            sorted(types),
            tags,
            sorted(statuses),
            as_of.isoformat() if as_of else "",
            include_expired,
            filters.fingerprint(),
        )
        position = cursor.decode(page_cursor, "recall", request)
        offset = cursor.offset_of(position)
        ranked, mode, parts = await self._rank(
            vault,
            query,
            statuses=statuses,
            types=types,
            tags=tags,
            include_expired=include_expired,
            as_of=as_of,
            filters=filters,
        )
        window = ranked[offset : offset + limit + 1]
        rows = await self._store.recall_page(vault, [found.id for found, _ in window])
        hits, cut = fit_page([(rows[f.id].memory, score) for f, score in window if f.id in rows], limit)
        more = cut or len(ranked) > offset + limit
        warnings: list[str] = []
        if mode == KEYWORD_ONLY and self._index is not None:
            warnings.append(
                "semantic search is unavailable right now; only memories sharing words with the query were searched"
            )
        elif self._index is None:
            warnings.append(NO_INDEXER + ": only memories sharing words with the query were searched")
        if self._index is not None and (waiting := await self._feed.unindexed_older(vault)):
            warnings.append(
                f"{waiting} memories are not in the search index yet (after a restore or reindex it is catching up); "
                "until they are, only their words are searched"
            )
        if not ranked and offset == 0 and not await self._store.has_search_terms(query) and mode == KEYWORD_ONLY:
            warnings.append("the query has only common words (like 'what' or 'the'); add the specific terms you want")
        next_cursor = cursor.encode("recall", request, {"offset": offset + len(hits)}) if more else ""
        page_hits: list[RecallHit] = []
        memory_warnings: list[MemoryWarning] = []
        replaced = (
            await self._store.recently_replaced(
                vault, [m.id for m, _ in hits if m.status is not Status.SUPERSEDED], now - lifecycle.REPLACED_RECENTLY
            )
            if as_of is None
            else {}
        )
        for memory, score in hits:
            row = rows[memory.id]
            live = memory.status is Status.ACTIVE
            meaning, keyword = parts.get(memory.id, (None, 0.0))
            hit = RecallHit(
                memory,
                score,
                row.similar if live else (),
                row.same_key if live else (),
                meaning_score=meaning,
                keyword_score=keyword,
            )
            page_hits.append(hit)
            memory_warnings.extend(lifecycle.warnings_for(hit, now, as_of))
            if memory.id in replaced:
                memory_warnings.append(lifecycle.replaced_warning(memory.id, replaced[memory.id]))
        page = RecallPage(
            hits=page_hits,
            mode=mode,
            warnings=warnings,
            next_cursor=next_cursor,
            memory_warnings=memory_warnings,
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
        include_expired: bool = False,
        as_of: datetime | None = None,
        filters: MemoryFilter = MemoryFilter(),  # noqa: B008 (frozen: never changed)
    ) -> tuple[list[tuple[fusion.Found, float]], str, dict[str, tuple[float | None, float]]]:
        """Every memory keyword or vector search found, fused, best first; which search answered; and for
        each memory the two parts of its score (meaning, keyword)."""
        narrowing: dict[str, Any] = {
            "statuses": statuses,
            "types": types,
            "tags": tags,
            "include_expired": include_expired,
            "as_of": as_of,
            "filters": filters,
        }
        if self._index is None:
            keyword = await self._store.keyword_search(
                vault, query, limit=fusion.KEYWORD_CANDIDATES, offset=0, **narrowing
            )
            return fusion.fuse(keyword, {}, cosine_weight=0.0), KEYWORD_ONLY, _parts(keyword, None)
        index = self._index
        # Full-text search runs beside the lookup of recent writes the index does not hold yet; then one
        # indexer call embeds the query, finds the nearest memories and scores the keyword hits.
        keyword, pending = await asyncio.gather(
            self._store.keyword_search(vault, query, limit=fusion.KEYWORD_CANDIDATES, offset=0, **narrowing),
            self._feed.unindexed_recent(vault, fusion.PENDING_TO_SCORE),
        )
        try:
            cosines = await index.search(
                vault.id,
                query,
                limit=fusion.DENSE_CANDIDATES,
                score_ids=[found.id for found in keyword],
                pending=pending,
            )
        except Unavailable as error:
            log.warning("recall fell back to keyword-only", extra={"reason": error.message})
            return fusion.fuse(keyword, {}, cosine_weight=0.0), KEYWORD_ONLY, _parts(keyword, None)
        known = {found.id for found in keyword}
        dense_only = [i for i in cosines if i not in known]
        extra = await self._store.memories_by_ids(vault, dense_only, query, **narrowing)
        found = [*keyword, *extra]
        return fusion.fuse(found, cosines), HYBRID, _parts(found, cosines)


def _parts(found: Sequence[fusion.Found], cosines: Mapping[str, float] | None) -> dict[str, tuple[float | None, float]]:
    """Each memory's meaning score (its cosine, None without one) and keyword score (rank / best rank)."""
    best = max((f.keyword_rank for f in found), default=0.0)
    return {
        f.id: (
            cosines.get(f.id) if cosines is not None else None,
            f.keyword_rank / best if best > 0 else 0.0,
        )
        for f in found
    }
