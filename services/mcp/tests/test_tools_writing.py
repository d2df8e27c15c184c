"""remember, propose_memory and bulk_remember: what the agent describes becomes the vault's draft, and
each write's outcome comes back compactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mcp_helpers import Service

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import wire

STORED = vpb.WriteResult(outcome=vpb.WRITE_OUTCOME_STORED, memory_id="m1", status=pb.MEMORY_STATUS_ACTIVE)


async def test_remember_sends_a_stated_draft_and_returns_the_outcome(service: Service) -> None:
    service.vault.answer(
        "Remember",
        vpb.RememberResponse(
            vault="home", result=STORED, duplicate_check=vpb.DUPLICATE_CHECK_EXACT_ONLY, notices=["indexer down"]
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "remember",
            content="The deploy target is k3s.",
            type="decision",
            key="deploy-target",
            scope="project:memvault",
            tags=["deploy"],
            confidence=0.9,
            valid_from="2026-11-01T10:00:00+01:00",
            review_after="never",
            expires_at="2027-01-31z",
            depends_on=["m0"],
        )
    (request,) = service.vault.requests("Remember")
    assert request == vpb.RememberRequest(
        memory=pb.MemoryDraft(
            content="The deploy target is k3s.",
            type=pb.MEMORY_TYPE_DECISION,
            key="deploy-target",
            scope="project:memvault",
            tags=["deploy"],
            trust=pb.TRUST_STATED,
            confidence=0.9,
            valid_from=wire.to_timestamp(datetime(2026, 11, 1, 9, tzinfo=UTC)),
            no_review=True,
            expires_at=wire.to_timestamp(datetime(2027, 1, 31, tzinfo=UTC)),
            depends_on=["m0"],
        ),
    )
    assert answer == {
        "vault": "home",
        "outcome": "stored",
        "id": "m1",
        "status": "active",
        "duplicate_check": "exact-only",
        "notices": ["indexer down"],
    }


async def test_propose_memory_always_asks_for_review_as_inferred(service: Service) -> None:
    similar = vpb.WriteResult(
        outcome=vpb.WRITE_OUTCOME_SIMILAR,
        memory_id="m2",
        status=pb.MEMORY_STATUS_PROPOSED,
        similar_to=["m1"],
        cosine=0.8123,
    )
    service.vault.answer("Remember", vpb.RememberResponse(vault="home", result=similar))
    async with service.agent() as agent:
        answer = await agent.call("propose_memory", content="The owner prefers vim.", review_after="2027-06-01")
    (request,) = service.vault.requests("Remember")
    assert request.propose is True and request.memory.trust == pb.TRUST_INFERRED
    assert request.memory.review_after == wire.to_timestamp(datetime(2027, 6, 1, tzinfo=UTC))
    assert answer == {
        "vault": "home",
        "outcome": "similar",
        "id": "m2",
        "status": "proposed",
        "similar_to": ["m1"],
        "cosine": 0.812,
        "duplicate_check": "semantic",
    }


async def test_remember_refuses_what_it_cannot_store_without_calling_the_vault(service: Service) -> None:
    async with service.agent() as agent:
        bad_date = await agent.error("remember", content="x", valid_to="2027-13-01")
        unsure = await agent.error("remember", content="x", confidence=1.5)
    assert "valid_to '2027-13-01' is not a date" in bad_date
    assert "confidence" in unsure
    assert service.vault.calls == []


async def test_bulk_remember_imports_strings_and_objects_and_counts_the_outcomes(service: Service) -> None:
    service.vault.answer(
        "BulkRemember",
        vpb.BulkRememberResponse(
            vault="home",
            batch_id="b1",
            results=[
                vpb.WriteResult(
                    index=0, outcome=vpb.WRITE_OUTCOME_STORED, memory_id="m1", status=pb.MEMORY_STATUS_ACTIVE
                ),
                vpb.WriteResult(
                    index=1,
                    outcome=vpb.WRITE_OUTCOME_DUPLICATE,
                    memory_id="m0",
                    status=pb.MEMORY_STATUS_ACTIVE,
                    match="exact",
                ),
                vpb.WriteResult(index=2, outcome=vpb.WRITE_OUTCOME_SECRET, message="looks like an API key"),
            ],
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "bulk_remember",
            items=["The NAS is a DS920+.", {"content": "Use k3s.", "type": "decision", "source_date": "2025-05-01"}],
            source="ChatGPT memories",
            sequence=True,
        )
    (request,) = service.vault.requests("BulkRemember")
    assert request == vpb.BulkRememberRequest(
        source="ChatGPT memories",
        items=[
            pb.MemoryDraft(content="The NAS is a DS920+.", type=pb.MEMORY_TYPE_FACT),
            pb.MemoryDraft(
                content="Use k3s.",
                type=pb.MEMORY_TYPE_DECISION,
                valid_from=wire.to_timestamp(datetime(2025, 5, 1, tzinfo=UTC)),
            ),
        ],
        text_type=pb.MEMORY_TYPE_FACT,
        sequence=True,
    )
    assert answer == {
        "vault": "home",
        "batch_id": "b1",
        "summary": {"stored": 1, "duplicate": 1, "secret": 1},
        "duplicate_check": "semantic",
        "items": [
            {"index": 0, "outcome": "stored", "id": "m1", "status": "active"},
            {"index": 1, "outcome": "duplicate", "id": "m0", "status": "active", "match": "exact"},
            {"index": 2, "outcome": "secret", "message": "looks like an API key"},
        ],
    }


async def test_bulk_remember_needs_something_to_import_and_no_date_in_the_future(service: Service) -> None:
    tomorrow_but_one = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    async with service.agent() as agent:
        nothing = await agent.error("bulk_remember", text="  ")
        future = await agent.error("bulk_remember", items=["a", {"content": "b", "source_date": tomorrow_but_one}])
    assert "send items (a list of memories) or text" in nothing
    assert f"items[1].source_date '{tomorrow_but_one}' is in the future" in future
    assert service.vault.calls == []
