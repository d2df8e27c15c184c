"""Recall's fusion of keyword and vector evidence."""

from datetime import UTC, datetime, timedelta

import pytest

from memvault_vault.domain.fusion import COSINE_WEIGHT, MIN_COSINE, Found, fuse
from memvault_vault.domain.memory import Status

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def found(memory_id: str, keyword_rank: float, status: Status = Status.ACTIVE, age_days: int = 0) -> Found:
    return Found(memory_id, status, NOW - timedelta(days=age_days), keyword_rank)


def test_one_score_from_both_sides_and_a_keyword_only_hit_is_never_dropped() -> None:
    ranked = fuse(
        [found("both", 2.0), found("words", 1.0), found("meaning", 0.0)],
        {"both": 0.8, "meaning": 0.6},
    )
    scores = {f.id: round(score, 4) for f, score in ranked}
    assert scores == {
        "both": round(COSINE_WEIGHT * 0.8 + (1 - COSINE_WEIGHT), 4),
        "meaning": round(COSINE_WEIGHT * 0.6, 4),
        "words": round((1 - COSINE_WEIGHT) * 0.5, 4),  # no cosine at all, still kept
    }
    assert [f.id for f, _ in ranked] == ["both", "meaning", "words"]


def test_a_vector_hit_sharing_no_word_is_dropped_below_the_cosine_floor() -> None:
    ranked = fuse(
        [found("close", 0.0), found("unrelated", 0.0), found("negative", 0.0), found("worded", 1.0)],
        {"close": MIN_COSINE, "unrelated": MIN_COSINE - 0.01, "negative": -0.2, "worded": 0.0},
    )
    assert {f.id for f, _ in ranked} == {"close", "worded"}


def test_keyword_only_mode_keeps_every_keyword_hit() -> None:
    ranked = fuse([found("a", 1.0), found("b", 0.5)], {}, cosine_weight=0.0)
    assert [(f.id, score) for f, score in ranked] == [("a", 1.0), ("b", 0.5)]


def test_near_ties_go_to_active_then_newer() -> None:
    ranked = fuse(
        [
            found("old active", 1.0, Status.ACTIVE, age_days=30),
            found("new proposed", 1.0, Status.PROPOSED),
            found("new active", 1.0, Status.ACTIVE),
        ],
        {"old active": 0.5, "new proposed": 0.5, "new active": 0.5},
    )
    assert [f.id for f, _ in ranked] == ["new active", "old active", "new proposed"]
