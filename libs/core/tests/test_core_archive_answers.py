"""Receipts as the edges answer them: never over the ceiling, identity and status never shed, and what
is shed named as reads that continue exactly where the kept readback stops."""

from __future__ import annotations

import pytest

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core.archive_answers import MAX_RECEIPT_BYTES, fit_receipts, receipt_json, size_of

pytestmark = pytest.mark.unit


def receipt(conversation: str, messages: int, text_bytes: int) -> pb.WriteReceipt:
    return pb.WriteReceipt(
        conversation_id=conversation,
        revision=3,
        durable=True,
        indexing="pending",
        indexing_pending=messages,
        message_count=messages,
        verified=pb.ConversationSummary(id=conversation, head_revision=3, message_count=messages),
        readback=[
            pb.ArchivedMessage(id=f"m{i}", node_id=f"n{i}", role="user", text="é" * (text_bytes // 2), position=i)
            for i in range(messages)
        ],
    )


def test_readback_is_shed_from_the_end_into_ready_made_reads() -> None:
    answer = fit_receipts(
        {"op": "commit", "receipts": [receipt_json(receipt("a", 4, 8000)), receipt_json(receipt("b", 6, 8000))]}
    )
    assert size_of(answer) < MAX_RECEIPT_BYTES
    first, second = answer["receipts"]
    assert (first["indexing"], first["indexing_pending"], second["indexing_pending"]) == ("pending", 4, 6)
    assert len(first["readback"]) == 4 and first["omitted"] == []
    kept = len(second["readback"])
    assert 0 < kept < 6
    (omitted,) = second["omitted"]
    assert omitted["count"] == 6 - kept
    assert omitted["read"] == {
        "tool": "archive_read",
        "mode": "conversation",
        "conversation_id": "b",
        "revision": 3,
        "after_position": kept - 1,
    }
    assert all(r["durable"] and r["revision"] == 3 for r in answer["receipts"])


def test_an_answer_that_fits_is_left_alone() -> None:
    whole = {"op": "create", "receipts": [receipt_json(receipt("a", 2, 100))]}
    assert fit_receipts(whole)["receipts"][0]["omitted"] == [] and len(whole["receipts"][0]["readback"]) == 2
