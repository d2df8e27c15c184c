"""Archive search's ranking of a first page: the vector side (the indexer's nearest messages) and the
keyword side (Postgres's full-text candidates, `keyword_sql`) as a union, filtered to head revisions and
the tags, fused as recall fuses (domain/fusion.py). Without the indexer, keyword-only."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from memvault_core.errors import Unavailable
from memvault_vault.archive.reading_store import ArchiveReadStore
from memvault_vault.archive.records import MessageHit
from memvault_vault.domain import archive_reads as reads
from memvault_vault.domain import fusion
from memvault_vault.domain.memory import Status
from memvault_vault.index_client import IndexClient

log = logging.getLogger("memvault_vault.archive")

HYBRID = "hybrid"
KEYWORD_ONLY = "keyword-only"

Found = dict[str, tuple[MessageHit, datetime, float]]
"""Hits by message id, with their creation time and keyword rank (ArchiveReadStore.hits)."""


async def rank(
    store: ArchiveReadStore,
    index: IndexClient | None,
    vault: Any,
    query: str,
    tags_all: list[str],
    tags_any: list[str],
) -> tuple[list[MessageHit], str]:
    """Every hit of the query, best first, and the mode (hybrid, or keyword-only without the indexer).

    Both sides at once: the indexer embeds the query and finds the nearest messages (and Postgres reads
    those as hits) while Postgres ranks the keyword matches; then a second, small call scores the keyword
    hits against the same query while Postgres reads them as hits. The indexer embeds the query once for
    both calls (a text being embedded is awaited, a recent one kept: Indexer.embed), so the second call
    costs a round trip and a lookup, and the search's time is the slower side's instead of the sum
    (archive-search and archive-hits-beside in docs/benchmarks.md)."""
    near_side = asyncio.ensure_future(_nearest_hits(store, index, vault, query, tags_all, tags_any)) if index else None
    keyword_hits: asyncio.Future[Found] | None = None
    try:
        keyword = await store.keyword_candidates(vault, query, tags_all, tags_any, reads.SEARCH_CANDIDATES)
        ranks = {message_id: rank for message_id, rank, _ in keyword}
        keyword_hits = asyncio.ensure_future(store.hits(vault, query, list(ranks), tags_all, tags_any))
        # Keyword hits the indexer has not reached yet (a fresh import) are scored from their text.
        pending = [(message_id, text) for message_id, _, text in keyword if text][: fusion.PENDING_TO_SCORE]
        cosines: dict[str, float] = {}
        found: Found = {}
        mode = KEYWORD_ONLY
        if index is not None and near_side is not None:
            scoring = index.search(
                vault.id,
                query,
                limit=0,
                score_ids=[i for i in ranks if i not in dict(pending)],
                pending=pending,
                messages=True,
            )
            near, scored = await asyncio.gather(near_side, scoring, return_exceptions=True)
            if isinstance(near, tuple) and isinstance(scored, dict):
                (nearest, found), mode = near, HYBRID
                cosines = {**nearest, **scored}
            else:
                # Keyword-only when the indexer is unavailable; any other error of either call is the search's.
                errors = [answer for answer in (near, scored) if isinstance(answer, BaseException)]
                for error in errors:
                    if not isinstance(error, Unavailable):
                        raise error
                log.warning("archive search fell back to keyword-only", extra={"reason": str(errors[0])})
        found = {**found, **await keyword_hits}
    finally:
        # On an error, nothing is left running and no error unretrieved: every side is cancelled first,
        # then all are awaited at once.
        sides = [side for side in (near_side, keyword_hits) if side is not None]
        for side in sides:
            side.cancel()
        await asyncio.gather(*sides, return_exceptions=True)
    # The union of both lists, filtered to head revisions and the tags (`found`), then fused as recall
    # fuses: a message only the vector side found still gets its keyword rank (below the keyword list's cut).
    union = [*ranks, *(i for i in cosines if i not in ranks)]
    candidates = [
        fusion.Found(message_id, Status.ACTIVE, found[message_id][1], found[message_id][2])
        for message_id in union
        if message_id in found
    ]
    fused = fusion.fuse(candidates, cosines, cosine_weight=fusion.COSINE_WEIGHT if mode == HYBRID else 0.0)
    return [replace(found[candidate.id][0], score=score) for candidate, score in fused], mode


async def _nearest_hits(
    store: ArchiveReadStore, index: IndexClient, vault: Any, query: str, tags_all: list[str], tags_any: list[str]
) -> tuple[dict[str, float], Found]:
    """The vector side: cosine by message id of the nearest messages, and those read as hits."""
    nearest = await index.search(
        vault.id, query, limit=reads.SEARCH_CANDIDATES, score_ids=[], pending=[], messages=True
    )
    return nearest, await store.hits(vault, query, list(nearest), tags_all, tags_any)
