"""Lifecycle rules without I/O: the facts that make a near-duplicate, the import decisions, text splitting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_vault.domain import duplicates
from memvault_vault.domain.duplicates import Decision, Match, decide
from memvault_vault.domain.imports import split_text
from memvault_vault.domain.lifecycle import warnings_for
from memvault_vault.domain.memory import (
    Draft,
    Memory,
    MemoryType,
    RecallHit,
    SecretFound,
    Status,
    Trust,
    review_date,
    validate_items,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("The NAS has four 8 TB drives.", "The NAS has 4 drives of 8 TB.", True),
        ("Backups run nightly at 02:00.", "Every night at 2:00 the backups run.", True),
        ("Rent is 1,450 EUR.", "Rent is 1450 EUR.", True),
        ("The internet is 1 Gbps.", "The internet is 2 Gbps.", False),
        ("OpenWrt 23.05 on the router.", "OpenWrt 24.10 on the router.", False),
        ("The NAS is at 192.168.1.20.", "The NAS is at 192.168.1.30.", False),
        ("Trash goes out on Tuesday.", "Trash goes out on Thursday.", False),
        ("Sam drinks coffee.", "Sam doesn't drink coffee.", False),
        ("Sam likes cilantro.", "Sam dislikes cilantro.", False),
        ("Sam does not drink coffee.", "Sam never drinks coffee.", True),
    ],
)
def test_same_facts(a: str, b: str, same: bool) -> None:
    assert duplicates.same_facts(a, b) is same


def test_classify_thresholds() -> None:
    assert duplicates.classify(0.95, "The internet is 1 Gbps.", "The internet is 1 Gbps!") == "near-duplicate"
    assert duplicates.classify(0.97, "The internet is 2 Gbps.", "The internet is 1 Gbps.") == "similar"
    assert duplicates.classify(0.85, "Uses k3s.", "Uses k3s at home.") == "similar"
    assert duplicates.classify(0.74, "Sam drinks coffee.", "Sam does not drink coffee.") == "similar"
    assert duplicates.classify(0.74, "Sam drinks coffee.", "Sam drinks tea.") is None


def test_decide_against_stored_memories_and_earlier_items() -> None:
    texts = ["The internet is 1 Gbps.", "The internet is 1 Gbps!", "The internet is 2 Gbps.", "Unrelated."]
    stored = [
        [Match("old-rejected", 0.99, "The internet is 1 Gbps.", Status.REJECTED)],
        [],
        [Match("superseded", 0.96, "The internet is 3 Gbps.", Status.SUPERSEDED)],
        [],
    ]
    earlier: list[dict[int, float]] = [{}, {0: 0.98}, {0: 0.96, 1: 0.96}, {}]
    assert decide(texts, stored, earlier) == [
        Decision("store"),
        Decision("duplicate", duplicate_of_item=0, cosine=0.98),
        Decision("similar", similar_items=(0,), cosine=0.96),
        Decision("store"),
    ]


def test_a_repeat_of_a_duplicate_points_at_the_original() -> None:
    texts = ["A is 1.", "A is 1!", "a is 1?"]
    stored = [[Match("m1", 0.97, "A is 1", Status.ACTIVE)], [], []]
    earlier: list[dict[int, float]] = [{}, {0: 0.99}, {0: 0.95, 1: 0.99}]
    decisions = decide(texts, stored, earlier)
    assert decisions[0] == Decision("duplicate", duplicate_of="m1", cosine=0.97)
    assert decisions[1].duplicate_of == "m1" and decisions[2].duplicate_of == "m1"


def test_pending_texts_are_sent_newest_first_within_the_byte_budget() -> None:
    text = "x" * 100_000
    pending = [(f"m{i}", text) for i in range(15)]
    kept = duplicates.sendable(pending)
    assert [memory_id for memory_id, _ in kept] == [f"m{i}" for i in range(10)]
    assert duplicates.sendable(pending[:3]) == pending[:3]
    assert duplicates.sendable(pending, budget=250_000) == pending[:2]
    assert duplicates.sendable(pending, budget=0) == []
    assert duplicates.PENDING_TO_COMPARE > limits.MAX_BULK_ITEMS


def test_text_is_split_on_separators_paragraphs_and_bullets() -> None:
    text = """# Memories from ChatGPT

- Prefers dark mode.
- Uses k3s at home,
  on three NUCs.
* [x] Backups run nightly.
1. Works at Acme.

The NAS is a Synology
DS920+.

---
Deploys happen on Fridays.
***
Lives in Lisbon.
"""
    assert split_text(text) == [
        "Prefers dark mode.",
        "Uses k3s at home, on three NUCs.",
        "Backups run nightly.",
        "Works at Acme.",
        "The NAS is a Synology DS920+.",
        "Deploys happen on Fridays.",
        "Lives in Lisbon.",
    ]


def test_text_limits() -> None:
    with pytest.raises(InvalidArgument, match="text holds no memories"):
        split_text("# Only a heading\n\n---\n")
    with pytest.raises(LimitExceeded, match="max_bulk_items"):
        split_text("\n".join(f"- item {i}" for i in range(limits.MAX_BULK_ITEMS + 1)))
    with pytest.raises(LimitExceeded, match="max_import_text_chars"):
        split_text("x" * (limits.MAX_IMPORT_TEXT_CHARS + 1))


def test_each_import_item_is_checked_on_its_own() -> None:
    checked = validate_items(
        [
            Draft(content="fine"),
            Draft(content=""),
            Draft(content="x" * (limits.MAX_CONTENT_CHARS + 1)),
            Draft(content="key is AKIA" + "QWERTYUIOPASDFGH"),
            Draft(content="fine too", source="token sk_live_" + "a1B2c3D4e5F6g7H8i9J0"),
        ]
    )
    assert isinstance(checked[0], Draft)
    assert isinstance(checked[1], InvalidArgument) and checked[1].field == "items[1].content"
    assert isinstance(checked[2], InvalidArgument) and "max_content_chars" in checked[2].message
    assert isinstance(checked[3], SecretFound) and checked[3].finding.kind == "AWS access key"
    assert isinstance(checked[4], SecretFound) and checked[4].field == "items[4].source"


def test_review_date_default_override_and_none() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert review_date(Draft(content="x", type=MemoryType.ASSUMPTION), start) == start + timedelta(days=30)
    assert review_date(Draft(content="x", type=MemoryType.OBSERVATION), start) is None
    assert review_date(Draft(content="x", no_review=True), start) is None
    chosen = start + timedelta(days=3)
    assert review_date(Draft(content="x", review_after=chosen), start) == chosen


def test_warnings_name_what_to_do() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    memory = Memory(
        id="m1",
        vault="v",
        content="x",
        content_hash="h",
        type=MemoryType.FACT,
        status=Status.ACTIVE,
        trust=Trust.STATED,
        key="editor",
        review_after=now - timedelta(days=1),
    )
    kinds = [w.kind for w in warnings_for(RecallHit(memory, 1.0, ("m2",), ("m3",)), now, None)]
    assert kinds == ["conflict", "may_conflict", "past_review"]
