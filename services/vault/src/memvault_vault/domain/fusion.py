"""How recall turns keyword and vector evidence into one ranking.

Every keyword candidate is kept (a keyword-only hit is never dropped); a vector candidate
that shares no word with the query is kept only if its cosine reaches MIN_COSINE (below
that it is unrelated, and a small vault would fill every page with such hits). Each gets
one score:

    score = COSINE_WEIGHT * cosine + (1 - COSINE_WEIGHT) * keyword_rank / best_keyword_rank

where cosine is 0 for a memory the index could not score and the keyword part is 0
for a memory that shares no word with the query. Status and recency only break
near-ties (scores within TIE_WINDOW): active before proposed, then newer first.
The weights were chosen on the retrieval evaluation (docs/benchmarks.md), not per
query or per vault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memvault_vault.domain.memory import Status

COSINE_WEIGHT = 0.75
KEYWORD_CANDIDATES = 50
DENSE_CANDIDATES = 50
PENDING_TO_SCORE = 32
"""At most this many recent, not yet indexed memories are scored from their text per query."""
TIE_WINDOW = 0.01
MIN_COSINE = 0.2
"""all-MiniLM-L6-v2 puts unrelated sentences around 0 to 0.15; a paraphrase scores well above."""

_STATUS_ORDER = {Status.ACTIVE: 0, Status.PROPOSED: 1}


@dataclass(frozen=True, slots=True)
class Found:
    """A memory one of recall's searches found: what fusion needs of it, not the memory itself."""

    id: str
    status: Status
    created_at: datetime
    keyword_rank: float
    """Full-text rank; 0 when the memory shares no word with the query."""


def fuse(
    found: Sequence[Found], cosines: Mapping[str, float], cosine_weight: float = COSINE_WEIGHT
) -> list[tuple[Found, float]]:
    """Every memory found, ranked best first, each with its fused score (`cosines`: by memory id,
    missing for a memory the index could not score)."""
    best_rank = max((f.keyword_rank for f in found), default=0.0)
    scored = []
    for f in found:
        keyword = f.keyword_rank / best_rank if best_rank > 0 else 0.0
        cosine = max(cosines.get(f.id, 0.0), 0.0)
        if cosine_weight > 0 and f.keyword_rank <= 0 and cosine < MIN_COSINE:
            continue
        scored.append((f, cosine_weight * cosine + (1 - cosine_weight) * keyword))

    def order(item: tuple[Found, float]) -> tuple[float, int, float]:
        f, score = item
        return (-round(score / TIE_WINDOW), _STATUS_ORDER.get(f.status, 2), -f.created_at.timestamp())

    return sorted(scored, key=order)
