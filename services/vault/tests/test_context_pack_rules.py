"""How a context pack orders, deduplicates and fits whole messages, without I/O."""

from __future__ import annotations

import pytest

from memvault_vault.domain import context_pack as packing
from memvault_vault.domain.context_pack import REQUIRED, RETRIEVED, Candidate, Fitted, Shortfall

pytestmark = pytest.mark.unit


def req(conversation: str, position: int, size: int = 100, rank: int = 0) -> Candidate:
    return Candidate(conversation, 1, f"{conversation}-{position}", position, size, REQUIRED, rank)


def hit(conversation: str, position: int, score: float, size: int = 100, rank: int = 0) -> Candidate:
    return Candidate(conversation, 1, f"{conversation}-{position}", position, size, RETRIEVED, rank, score)


def test_required_first_in_request_and_timeline_order_then_retrieved_by_score() -> None:
    fitted = packing.fit(
        [req("b", 1, rank=1), req("a", 2), req("a", 1), req("b", 0, rank=1)],
        [hit("c", 4, 0.2), hit("c", 9, 0.9), hit("a", 1, 0.99)],
        max_tokens=10_000,
        max_bytes=48 * 1024,
    )
    assert isinstance(fitted, Fitted)
    assert [c.message_id for c in fitted.kept] == ["a-1", "a-2", "b-0", "b-1", "c-9", "c-4"]
    assert fitted.duplicates == 1  # a-1 was also a search hit: kept once, as required
    assert fitted.tokens == sum(c.tokens for c in fitted.kept)


def test_retrieved_messages_that_do_not_fit_are_skipped_whole() -> None:
    big, small = hit("c", 1, 0.9, size=20_000), hit("c", 2, 0.5, size=100)
    fitted = packing.fit([req("a", 0)], [big, small], max_tokens=10_000, max_bytes=8 * 1024)
    assert isinstance(fitted, Fitted)
    assert [c.message_id for c in fitted.kept] == ["a-0", "c-2"] and fitted.left_out == 1
    assert fitted.bytes <= 8 * 1024


def test_required_part_over_a_budget_gives_the_minimums_per_conversation() -> None:
    short = packing.fit([req("a", 0, 6_000), req("a", 1, 6_000), req("b", 0, 100, rank=1)], [], 1_000, 48 * 1024)
    assert isinstance(short, Shortfall)
    assert short.min_max_tokens == sum(c.tokens for c in [req("a", 0, 6_000), req("a", 1, 6_000), req("b", 0, 100)])
    assert [(c["conversation_id"], c["messages"]) for c in short.conversations] == [("a", 2), ("b", 1)]


def test_the_pack_id_depends_on_request_pins_and_messages_only() -> None:
    kept = [req("a", 0), hit("c", 1, 0.5)]
    first = packing.pack_id({"q": ["x"]}, [("a", 1)], kept)
    assert first == packing.pack_id({"q": ["x"]}, [("a", 1)], list(kept))
    assert first != packing.pack_id({"q": ["x"]}, [("a", 2)], kept)
    assert first != packing.pack_id({"q": ["y"]}, [("a", 1)], kept)
    assert first != packing.pack_id({"q": ["x"]}, [("a", 1)], kept[:1])
