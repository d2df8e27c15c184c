"""Unit tests of the evaluation library (loader, metrics, BM25, fusion) on small made-up data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.eval import documents, locomo
from tests.eval.fusion import reciprocal_rank_fusion, score_fusion
from tests.eval.keyword import Bm25
from tests.eval.metrics import FactCovers, Judged, mean, score_ranking, turn_covers


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", ["D1:3"]),
        ("D:11:26", ["D11:26"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D26:14, D26:34", ["D26:14", "D26:34"]),
        (["D2:1", "D"], ["D2:1"]),
        ("D", []),
        ("", []),
    ],
)
def test_dia_ids_are_normalised(raw: object, expected: list[str]) -> None:
    assert locomo.normalise_dia_ids(raw) == expected


def write_sample(tmp_path: Path) -> Path:
    sample = [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
                    {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a photo of a dog"},
                ],
                "session_2_date_time": "9:00 am on 1 June, 2023",
                "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The dog is called Rex."}],
            },
            "observation": {
                "session_1_observation": {"Ann": [["Ann adopted a dog.", "D1:1"]]},
                "session_2_observation": {"Ann": [["Ann's dog is Rex.", ["D2:1", "D9:9"]]]},
            },
            "qa": [
                {"question": "What is Ann's dog called?", "answer": "Rex", "evidence": ["D:2:1"], "category": 4},
                {"question": "Unknown evidence", "answer": "-", "evidence": ["D7:7"], "category": 1},
                {"question": "Trick", "adversarial_answer": "x", "evidence": ["D1:2"], "category": 5},
            ],
        }
    ]
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(sample))
    return path


@pytest.mark.unit
def test_loader_builds_turns_facts_and_questions(tmp_path: Path) -> None:
    [conv] = locomo.load(write_sample(tmp_path))
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1].content == "Bo: Lovely! [shares a photo of a dog]"
    assert conv.facts[1].dia_ids == frozenset({"D2:1"})  # D9:9 names no turn
    assert [(q.text, q.evidence, q.headline) for q in conv.questions] == [
        ("What is Ann's dog called?", frozenset({"D2:1"}), True),
        ("Trick", frozenset({"D1:2"}), False),
    ]
    assert documents.with_date(conv.turns[0].content, conv.turns[0].date) == "8 May 2023 Ann: I adopted a dog."
    assert documents.previous_turns(conv.turns) == ["", "Ann: I adopted a dog.", ""]


@pytest.mark.unit
def test_metrics_for_turns() -> None:
    gold = frozenset({"D1:1", "D1:2"})
    scores = score_ranking(["D5:5", "D1:2", "D3:3", "D1:1"], gold, turn_covers)
    assert scores["mrr"] == 0.5
    assert scores["recall_any@5"] == scores["recall_any@10"] == scores["recall_all@10"] == 1.0
    ideal = 1 + 1 / np.log2(3)
    assert scores["ndcg@10"] == pytest.approx((1 / np.log2(3) + 1 / np.log2(5)) / ideal)
    missing = score_ranking(["D5:5"] * 5 + ["D1:1"], gold, turn_covers)
    assert (missing["recall_any@5"], missing["recall_any@10"], missing["recall_all@10"]) == (0.0, 1.0, 0.0)


@pytest.mark.unit
def test_metrics_for_facts_count_facts_that_cite_gold() -> None:
    covers = FactCovers({"F1": frozenset({"D1:1"}), "F2": frozenset({"D1:1", "D1:2"}), "F3": frozenset()})
    scores = score_ranking(["F3", "F2"], frozenset({"D1:1", "D1:2"}), covers)
    assert scores["recall_all@10"] == 1.0
    assert scores["mrr"] == 0.5
    assert covers.relevant_count(frozenset({"D1:1"})) == 2
    averaged = mean([Judged(1, scores), Judged(5, {k: 0.0 for k in scores})], frozenset({1, 2, 3, 4}))
    assert averaged["n"] == 1 and averaged["mrr"] == 0.5


@pytest.mark.unit
def test_bm25_prefers_rare_terms() -> None:
    index = Bm25(["ann likes dogs", "ann likes cats", "ann ann ann", "rex is a dog named rex"])
    ranked = [i for i, _ in index.search("does ann like rex", 10)]
    assert ranked[0] == 3
    assert index.search("the", 10) == []


@pytest.mark.unit
def test_score_fusion_keeps_keyword_only_hits_and_weights_both_sides() -> None:
    cosines = np.array([0.9, 0.8, 0.1, 0.2], dtype=np.float32)
    keyword = [(2, 4.0), (1, 2.0)]
    fused = score_fusion(cosines, keyword, alpha=0.5, n_dense=2, n_keyword=2)
    # doc 1: 0.4 + 0.25; doc 2 (keyword only): 0.05 + 0.5; doc 0: 0.45
    assert fused == [1, 2, 0]
    floor = score_fusion(cosines, keyword, alpha=0.5, n_dense=2, n_keyword=2, missing_cosine="floor")
    assert floor == [2, 1, 0]  # the floor (0.8) flatters the keyword-only hit
    assert set(reciprocal_rank_fusion(cosines, keyword, n_dense=2, n_keyword=2)) == {0, 1, 2}


@pytest.mark.unit
def test_a_conversation_becomes_a_chatgpt_export_the_importer_reads_turn_by_turn(tmp_path: Path) -> None:
    from memvault_vault.archive.chatgpt import parse_conversation
    from tests.eval.archive import chatgpt_export

    [conv] = locomo.load(write_sample(tmp_path))
    raws = json.loads(chatgpt_export(conv))  # the importer streams the same list; here it is small
    parsed = [parse_conversation(raw, index) for index, raw in enumerate(raws)]
    assert len(parsed) == len({t.session for t in conv.turns})
    messages = [m for p in parsed for m in p.messages]
    # Every turn is one message on the active timeline, its node id the dia_id, its text the turn track's.
    assert [(m.node_id, m.text, m.active) for m in messages] == [(t.dia_id, t.content, True) for t in conv.turns]
    first = conv.turns[0].speaker
    assert [m.role for m in messages] == ["user" if t.speaker == first else "assistant" for t in conv.turns]
    assert parsed[0].title == f"{conv.sample_id} session {conv.turns[0].session}"
