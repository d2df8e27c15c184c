"""Candidate fusion for hybrid recall: pure functions over per-question scores.

Recall takes the union of the dense candidates (top `n_dense` by cosine) and the keyword
candidates (top `n_keyword` by keyword rank), so a keyword-only hit is never dropped, and
orders the union by one score:

    score = alpha * cosine + (1 - alpha) * keyword / best_keyword_in_this_query

The keyword term is relative to the query's best keyword score, which puts any keyword scorer
(BM25, ts_rank, ts_rank_cd with any normalisation) on the same 0..1 scale without corpus
statistics. A candidate the keyword side did not return scores 0 there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

Cosines = NDArray[np.float32]


def dense_ranking(cosines: Cosines, limit: int) -> list[int]:
    """Document indexes by descending cosine."""
    order = np.argsort(-cosines, kind="stable")
    return [int(i) for i in order[:limit]]


def score_fusion(
    cosines: Cosines,
    keyword: Sequence[tuple[int, float]],
    *,
    alpha: float,
    n_dense: int,
    n_keyword: int,
    limit: int = 50,
    missing_cosine: Literal["exact", "floor"] = "exact",
) -> list[int]:
    """Weighted cosine plus relative keyword score over the union of both candidate lists.

    `missing_cosine="exact"` scores keyword-only candidates with their true cosine (the vault
    asks the indexer to score those ids); `"floor"` gives them the lowest cosine among the dense
    candidates, as if no extra call were made.
    """
    dense = dense_ranking(cosines, n_dense)
    top_keyword = keyword[:n_keyword]
    best = max((score for _, score in top_keyword), default=0.0)
    relative = {index: score / best for index, score in top_keyword} if best > 0 else {}
    floor = float(cosines[dense[-1]]) if dense else 0.0
    dense_set = set(dense)
    scored: dict[int, float] = {}
    for index in dense_set | relative.keys():
        cosine = float(cosines[index]) if (index in dense_set or missing_cosine == "exact") else floor
        scored[index] = alpha * cosine + (1.0 - alpha) * relative.get(index, 0.0)
    return sorted(scored, key=lambda i: (-scored[i], i))[:limit]


def reciprocal_rank_fusion(
    cosines: Cosines,
    keyword: Sequence[tuple[int, float]],
    *,
    n_dense: int,
    n_keyword: int,
    k: int = 60,
    limit: int = 50,
) -> list[int]:
    """Reciprocal rank fusion of the same two candidate lists (for comparison)."""
    scored: dict[int, float] = {}
    for rank, index in enumerate(dense_ranking(cosines, n_dense), start=1):
        scored[index] = scored.get(index, 0.0) + 1.0 / (k + rank)
    for rank, (index, _) in enumerate(keyword[:n_keyword], start=1):
        scored[index] = scored.get(index, 0.0) + 1.0 / (k + rank)
    return sorted(scored, key=lambda i: (-scored[i], i))[:limit]
