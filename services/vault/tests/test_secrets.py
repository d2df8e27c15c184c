"""The secret detector on its corpus: every secret refused, every look-alike kept."""

from __future__ import annotations

import pytest
from secret_corpus import NEGATIVES, POSITIVES

from memvault_vault.domain.secrets import entropy, find_secret

pytestmark = pytest.mark.unit


def test_the_corpus_is_big_enough_to_mean_something() -> None:
    assert len(POSITIVES) >= 50
    assert len(NEGATIVES) >= 50
    assert len({kind for kind, _ in POSITIVES}) >= 25


@pytest.mark.parametrize(("kind", "text"), POSITIVES, ids=[f"{i}-{k}" for i, (k, _) in enumerate(POSITIVES)])
def test_secret_is_found_and_named(kind: str, text: str) -> None:
    finding = find_secret(text)
    assert finding is not None, "missed"
    assert finding.kind == kind
    assert 0 <= finding.start < finding.end <= len(text)


@pytest.mark.parametrize(("why", "text"), NEGATIVES, ids=[f"{i}-{w}" for i, (w, _) in enumerate(NEGATIVES)])
def test_look_alike_is_not_a_secret(why: str, text: str) -> None:
    finding = find_secret(text)
    assert finding is None, f"flagged as {finding.kind}: {text[finding.start : finding.end]!r}" if finding else ""


def test_a_finding_describes_itself_without_the_value() -> None:
    text = "The wifi password is sunshine-Meadow-42."
    finding = find_secret(text)
    assert finding is not None
    assert "sunshine" not in finding.describe()
    assert finding.describe() == f"password at characters {finding.start + 1}-{finding.end}"


def test_entropy() -> None:
    assert entropy("") == 0
    assert entropy("aaaa") == 0
    assert entropy("abcd") == 2
