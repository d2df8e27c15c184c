"""The secret detector on its corpus: every secret refused, every look-alike kept."""

from __future__ import annotations

import pytest
from secret_corpus import NEGATIVES, POSITIVES

from memvault_vault.domain.secrets import (
    _ASSIGNMENT,
    _ASSIGNMENT_NAMES,
    _FORMATS,
    _QUICK_FORMATS,
    SecretFinding,
    entropy,
    find_secret,
)

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


def test_the_quick_look_passes_over_nothing_the_full_scan_would_find() -> None:
    # The quick patterns only skip work: on every corpus text, each finds a match wherever its format
    # does, and the names' search wherever an assignment matches.
    texts = [text for _, text in [*POSITIVES, *NEGATIVES]]
    texts += [f"{prefix}{text}" for prefix in ("x", "_", "/", "1") for text in texts]  # no word boundary
    for text in texts:
        for (kind, pattern, _, _), quick in zip(_FORMATS, _QUICK_FORMATS, strict=True):
            if pattern.search(text):
                assert quick.search(text), kind
        if _ASSIGNMENT.search(text):
            assert _ASSIGNMENT_NAMES.search(text)
    assert sum(1 for text in texts if any(pattern.search(text) for _, pattern, _, _ in _FORMATS)) >= 100


def test_an_assignment_is_found_whatever_the_case_of_its_name() -> None:
    for name in ("PASSWORD", "Db_Pwd", "API_KEY", "Client-Secret", "RECOVERY CODES", "Credentials"):
        finding = find_secret(f"{name}: Zq7-rT9wXp2LmN4vB8kQ")
        assert isinstance(finding, SecretFinding), name
    assert find_secret("Garage PIN: 482913") == SecretFinding("PIN", 7, 18)


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
