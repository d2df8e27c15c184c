"""Retrieval metrics of the evaluation protocol, per question and averaged.

A ranking is a list of document ids, best first. `relevant` maps each document to the gold
items it covers: for turns a turn covers itself, for facts a fact covers every evidence id it
cites. Relevance is binary.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

METRICS = ("recall_any@5", "recall_any@10", "recall_all@10", "ndcg@10", "mrr")


@dataclass(frozen=True, slots=True)
class Judged:
    """One question's ranking, judged."""

    category: int
    scores: dict[str, float]


def score_ranking(
    ranking: Sequence[str], gold: frozenset[str], covers: Callable[[str], frozenset[str]]
) -> dict[str, float]:
    """The five protocol metrics of one ranking against the gold evidence ids."""
    hits = [bool(covers(doc) & gold) for doc in ranking]
    first = next((rank for rank, hit in enumerate(hits, start=1) if hit), None)
    covered_at_10: set[str] = set()
    for doc in ranking[:10]:
        covered_at_10 |= covers(doc) & gold
    dcg = sum(1.0 / math.log2(rank + 1) for rank, hit in enumerate(hits[:10], start=1) if hit)
    ideal_hits = min(10, _relevant_count(gold, covers))
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, ideal_hits + 1))
    return {
        "recall_any@5": float(any(hits[:5])),
        "recall_any@10": float(any(hits[:10])),
        "recall_all@10": float(covered_at_10 == gold),
        "ndcg@10": dcg / idcg if idcg else 0.0,
        "mrr": 1.0 / first if first else 0.0,
    }


def _relevant_count(gold: frozenset[str], covers: Callable[[str], frozenset[str]]) -> int:
    counter = getattr(covers, "relevant_count", None)
    if counter is not None:
        return int(counter(gold))
    return len(gold)


class FactCovers:
    """`covers` for the facts track: a fact covers the evidence ids it cites."""

    def __init__(self, cited: Mapping[str, frozenset[str]]) -> None:
        self._cited = cited

    def __call__(self, doc: str) -> frozenset[str]:
        return self._cited.get(doc, frozenset())

    def relevant_count(self, gold: frozenset[str]) -> int:
        """How many facts are relevant to `gold` (for the ideal DCG)."""
        return sum(1 for ids in self._cited.values() if ids & gold)


def turn_covers(doc: str) -> frozenset[str]:
    """`covers` for the turns track: a turn covers its own dialogue id."""
    return frozenset((doc,))


def mean(judged: Iterable[Judged], categories: frozenset[int] | None = None) -> dict[str, float]:
    """Average of every metric over the questions in `categories` (all when None), plus `n`."""
    rows = [j for j in judged if categories is None or j.category in categories]
    result = {name: (sum(j.scores[name] for j in rows) / len(rows) if rows else 0.0) for name in METRICS}
    result["n"] = float(len(rows))
    return result


def per_category(judged: Iterable[Judged]) -> dict[int, dict[str, float]]:
    """`mean` for each category separately."""
    groups: dict[int, list[Judged]] = defaultdict(list)
    for j in judged:
        groups[j.category].append(j)
    return {category: mean(rows) for category, rows in sorted(groups.items())}
