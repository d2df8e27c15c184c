"""Lifecycle rules without I/O: the facts that make a near-duplicate, the import decisions, text splitting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_vault.domain import duplicates
from memvault_vault.domain.duplicates import Decision, Match, decide
from memvault_vault.domain.imports import split_text
from memvault_vault.domain.inputs import SecretFound, validate_items
from memvault_vault.domain.lifecycle import warnings_for
from memvault_vault.domain.memory import Draft, Memory, MemoryType, RecallHit, Status, Trust, review_date

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


# The same sentence about someone or something else: never a near-duplicate, however close the vectors.
@pytest.mark.parametrize(
    ("a", "b"),
    [
        # people: first name starting the sentence, last name, a possessive, a title
        ("Xavier Eriksen always orders oat flat white, 2 cups a day.", "Marco Eriksen always orders oat flat white, 2 cups a day."),
        ("Xavier Eriksen always orders oat flat white, 2 cups a day.", "Xavier Larsen always orders oat flat white, 2 cups a day."),
        ("Sam prefers dark mode in every editor.", "Dana prefers dark mode in every editor."),
        ("Sam's daughter was born in 2019.", "Dana's daughter was born in 2019."),
        ("The family dentist is Dr. Okafor.", "The family dentist is Dr. Mensah."),
        ("Carmen Silva sees Dr. Jensen about it.", "Carmen Silva sees Dr. Silva about it."),
        ("The book is by J. Smith.", "The book is by J. Jones."),
        ("Backups run nightly. Restic sends them to the NAS.", "Backups run nightly. Borg sends them to the NAS."),
        ("Sam prefers dark mode.", "Every editor: Dana prefers dark mode."),
        # a name one text has and the other lacks
        ("Sam's laptop is a ThinkPad.", "The laptop is a ThinkPad."),
        ("Likes dark mode in every editor.", "Likes dark mode in VS Code."),
        # places, organisations, products
        ("Mia goes to the school on Elm Street.", "Mia goes to the school on Oak Street."),
        ("The team offsite is in Lisbon.", "The team offsite is in Porto."),
        ("Sam works at Acme as an engineer.", "Sam works at Globex as an engineer."),
        ("The router runs OpenWrt.", "The router runs DD-WRT."),
        ("The phone is an iPhone.", "The phone is an iPad."),
        ("The NAS is a Synology DS920+.", "The NAS is a Synology DS920j."),
        # emails, URLs, hostnames, paths
        ("Alice's email is alice@acme.example.", "Alice's email is alice@globex.example."),
        ("The wiki is at https://wiki.home.arpa/start.", "The wiki is at https://docs.home.arpa/start."),
        ("The wiki is at https://wiki.home.arpa/start.", "The wiki is at https://wiki.home.arpa/Start?page=intro."),
        ("The build server is ci-alpha.lab.local.", "The build server is ci-beta.lab.local."),
        ("The config lives at /etc/nas/main.conf.", "The config lives at /etc/nas/backup.conf."),
        ("The deploy script is scripts/deploy.sh.", "The deploy script is scripts/release.sh."),
        ("Keys live in ~/.ssh/work.", "Keys live in ~/.ssh/home."),
        ("The share is C:\\Shares\\Photos.", "The share is C:\\Shares\\Music."),
        ("The repo is anthropics/claude-code.", "The repo is openai/codex."),
    ],
)  # fmt: skip
def test_a_changed_name_or_identifier_is_never_a_near_duplicate(a: str, b: str) -> None:
    assert duplicates.same_facts(a, b) is False
    assert duplicates.same_facts(b, a) is False
    assert duplicates.classify(0.99, b, a) == "similar"


# Rewordings that move names, change their case or start with another word: still near-duplicates.
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Xavier Eriksen always orders oat flat white, 2 cups a day.", "Two cups a day: Xavier Eriksen always orders oat flat white."),
        ("Xavier Eriksen always orders oat flat white, 2 cups a day.", "xavier eriksen always orders oat flat white, 2 cups a day"),
        ("the homelab nas is a synology ds920+", "The homelab NAS is a Synology DS920+!"),
        ("Sam's daughter Mia was born in 2019.", "Mia, Sam's daughter, was born in 2019."),
        ("The Grafana dashboard lives at grafana.home.arpa.", "Grafana's dashboard is at GRAFANA.home.arpa."),
        ("Uses Tailscale for remote access.", "Remote access goes through Tailscale."),
        ("Chose Postgres over SQLite for memvault.", "Memvault uses Postgres rather than SQLite."),
        ("The NAS is in the attic.", "Our NAS is in the attic."),
        ("I keep the NAS in the attic.", "The NAS is kept in the attic, I think."),
        ("The wiki is at https://wiki.home.arpa/start.", "The wiki lives at https://wiki.home.arpa/start/ now."),
        ("Alice's email is alice@acme.example.", "Alice can be reached at alice@acme.example."),
        ("ci-alpha.lab.local is the build server.", "The build server is ci-alpha.lab.local."),
        ("The config lives at /etc/nas/main.conf.", "The config is /etc/nas/main.conf."),
        ("The NAS has 8TB of space.", "The NAS has 8 TB of space."),
        ("Backups run on the 2nd of each month.", "Backups run on the 2nd of every month."),
        ("Use British spelling, e.g. colour.", "Use British spelling, for example colour."),
        ("- Sam prefers tea.\n- Sam runs on Sundays.", "Sam prefers tea. Sam runs on Sundays."),
    ],
)  # fmt: skip
def test_a_rewording_with_names_is_still_a_near_duplicate(a: str, b: str) -> None:
    assert duplicates.same_facts(a, b) is True
    assert duplicates.same_facts(b, a) is True
    assert duplicates.classify(0.95, b, a) == "near-duplicate"


def test_identifiers_found_in_a_text() -> None:
    found = duplicates.identifiers(
        "Xavier Eriksen mailed sam@acme.example from ci-01.lab.local: see https://wiki.home.arpa/x/, "
        "/etc/hosts and the DS920+ in Lisbon. I agreed."
    )
    assert found.names == {
        "eriksen", "sam@acme.example", "ci-01.lab.local", "https://wiki.home.arpa/x", "/etc/hosts", "ds920+", "lisbon",
    }  # fmt: skip
    assert found.initial == {"xavier"}  # a sentence-initial "I" is not a name
    assert "see" in found.words


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
