"""Ranking an archive search: the vector side (the indexer's nearest messages, read as hits on a second
connection as soon as they are back) and the keyword side (keyword_sql, one statement returning its hits)
at once, the keyword hits scored against the query, the union fused as recall fuses memories."""

from __future__ import annotations

import asyncio
import logging

from memvault_core.errors import Unavailable
from memvault_vault.archive.reading_store import ArchiveReadStore, Found
from memvault_vault.archive.records import MessageHit
from memvault_vault.database import VaultAccess
from memvault_vault.domain import archive_reads as reads
from memvault_vault.domain import fusion
from memvault_vault.domain.memory import Status
from memvault_vault.index_client import IndexClient

log = logging.getLogger("memvault_vault.archive")

HYBRID = "hybrid"
KEYWORD_ONLY = "keyword-only"


async def rank(
    store: ArchiveReadStore,
    index: IndexClient | None,
    vault: VaultAccess,
    query: str,
    tags_all: list[str],
    tags_any: list[str],
) -> tuple[list[MessageHit], str]:
    """The ranked hits of a search's first page, best first, and the mode (HYBRID, or KEYWORD_ONLY when
    the indexer is unavailable)."""
    # Both sides at once: the indexer embeds the query and finds the nearest messages while Postgres
    # ranks the keyword matches (the statement returns them as hits), and as soon as the nearest are
    # back a second connection reads them as hits too; then a second, small call to the indexer scores
    # the keyword hits against the same query. The indexer embeds the query once for both calls (a text
    # being embedded is awaited, a recent one kept: Indexer.embed), so the second call costs a round
    # trip and a lookup, and the search's time is the slower side's instead of the sum (archive-search
    # in docs/benchmarks.md).
    nearest = (
        asyncio.ensure_future(
            index.search(vault.id, query, limit=reads.SEARCH_CANDIDATES, score_ids=[], pending=[], messages=True)
        )
        if index is not None
        else None
    )
    nearest_found = (
        asyncio.ensure_future(_nearest_hits(store, vault, query, nearest, tags_all, tags_any))
        if nearest is not None
        else None
    )
    try:
        keyword, found = await store.keyword_candidates(vault, query, tags_all, tags_any, reads.SEARCH_CANDIDATES)
    except BaseException:
        for task in (nearest_found, nearest):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        raise
    ranks = {message_id: keyword_rank for message_id, keyword_rank, _ in keyword}
    # Keyword hits the indexer has not reached yet (a fresh import) are scored from their text.
    pending = [(message_id, text) for message_id, _, text in keyword if text][: fusion.PENDING_TO_SCORE]
    cosines: dict[str, float] = {}
    mode = KEYWORD_ONLY
    if index is not None and nearest is not None and nearest_found is not None:
        scoring = index.search(
            vault.id,
            query,
            limit=0,
            score_ids=[i for i in ranks if i not in dict(pending)],
            pending=pending,
            messages=True,
        )
        near, scored, near_found = await asyncio.gather(nearest, scoring, nearest_found, return_exceptions=True)
        if isinstance(near_found, BaseException):
            raise near_found
        if isinstance(near, dict) and isinstance(scored, dict):
            cosines, mode = {**near, **scored}, HYBRID
            found = near_found | found
        else:
            error = next(answer for answer in (near, scored) if isinstance(answer, BaseException))
            if not isinstance(error, Unavailable):
                raise error
            log.warning("archive search fell back to keyword-only", extra={"reason": error.message})
    # The union of both lists, filtered to head revisions and the tags, then fused as recall fuses: a
    # message only the vector side found still gets its keyword rank (below the keyword list's cut).
    union = [*ranks, *(i for i in cosines if i not in ranks)]
    candidates = [
        fusion.Found(message_id, Status.ACTIVE, found[message_id][1], found[message_id][2])
        for message_id in union
        if message_id in found
    ]
    fused = fusion.fuse(candidates, cosines, cosine_weight=fusion.COSINE_WEIGHT if mode == HYBRID else 0.0)
    ranked = []
    for candidate, score in fused:
        hit = found[candidate.id][0]
        ranked.append(
            MessageHit(
                hit.conversation_id,
                hit.revision,
                hit.message_id,
                hit.title,
                hit.role,
                hit.text,
                score,
                hit.position,
            )
        )
    return ranked, mode


async def _nearest_hits(
    store: ArchiveReadStore,
    vault: VaultAccess,
    query: str,
    nearest: asyncio.Future[dict[str, float]],
    tags_all: list[str],
    tags_any: list[str],
) -> dict[str, Found]:
    """The vector side's nearest messages as hits, read while the keyword statement runs; none when the
    indexer did not answer (the search then says why, from `nearest`)."""
    try:
        near = await asyncio.shield(nearest)
    except Exception:
        return {}
    return await store.hits(vault, query, list(near), tags_all, tags_any)
