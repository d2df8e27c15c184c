"""How recall turns keyword and vector evidence into one ranking.

Every candidate from either list is kept (a keyword-only hit is never dropped) and
gets one score:

    score = COSINE_WEIGHT * cosine + (1 - COSINE_WEIGHT) * keyword_rank / best_keyword_rank

where cosine is 0 for a memory the index could not score and the keyword part is 0
for a memory that shares no word with the query. Status and recency only break
near-ties (scores within TIE_WINDOW): active before proposed, then newer first.
The weights were chosen on the retrieval evaluation (docs/benchmarks.md), not per
query or per vault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memvault_vault.domain.memory import Memory, Status

COSINE_WEIGHT = 0.75
KEYWORD_CANDIDATES = 50
DENSE_CANDIDATES = 50
PENDING_TO_SCORE = 32
"""At most this many recent, not yet indexed memories are scored from their text per query."""
TIE_WINDOW = 0.01

_STATUS_ORDER = {Status.ACTIVE: 0, Status.PROPOSED: 1}


@dataclass(frozen=True)
class Candidate:
    memory: Memory
    keyword_rank: float
    cosine: float | None


def fuse(candidates: Sequence[Candidate], cosine_weight: float = COSINE_WEIGHT) -> list[tuple[Memory, float]]:
    """Candidates ranked best first, each with its fused score."""
    best_rank = max((c.keyword_rank for c in candidates), default=0.0)
    scored = []
    for c in candidates:
        keyword = c.keyword_rank / best_rank if best_rank > 0 else 0.0
        cosine = max(c.cosine or 0.0, 0.0)
        scored.append((c.memory, cosine_weight * cosine + (1 - cosine_weight) * keyword))

    def order(item: tuple[Memory, float]) -> tuple[float, int, float]:
        memory, score = item
        created = memory.created_at.timestamp() if isinstance(memory.created_at, datetime) else 0.0
        return (-round(score / TIE_WINDOW), _STATUS_ORDER.get(memory.status, 2), -created)

    return sorted(scored, key=order)
