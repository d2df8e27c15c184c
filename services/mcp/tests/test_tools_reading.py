"""recall, list_memories, audit_memory and explain_memory: arguments translated into the vault's request,
answers shaped compactly for an agent."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from mcp_helpers import Service

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire

ID = "8d0e6f0a-0000-4000-8000-000000000001"
CREATED = wire.to_timestamp(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))


def memory(**fields: object) -> pb.Memory:
    base: dict[str, object] = {
        "id": ID,
        "vault": "home",
        "content": "The NAS is a Synology DS920+.",
        "type": pb.MEMORY_TYPE_FACT,
        "status": pb.MEMORY_STATUS_ACTIVE,
        "trust": pb.TRUST_STATED,
        "created_at": CREATED,
        "version": 1,
    }
    return pb.Memory(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_recall_sends_the_filters_and_returns_ranked_results_with_their_warnings(
    service: Service, mode: str
) -> None:
    service.vault.answer(
        "Recall",
        vpb.RecallResponse(
            vault="home",
            mode="hybrid",
            hits=[
                vpb.RecallHit(memory=memory(key="nas", tags=["homelab"]), score=0.876543, conflicts_with=["m2"]),
                vpb.RecallHit(memory=memory(id="m3", content="Old NAS."), score=0.5, may_conflict_with=[ID]),
            ],
            warnings=["only common words matched"],
            memory_warnings=[vpb.MemoryWarning(kind="conflict", memory_id=ID, message="m1 conflicts with m2")],
            next_cursor="page-2",
        ),
    )
    async with service.agent(mode=mode) as agent:
        answer = await agent.call(
            "recall",
            query="which NAS",
            vault="home",
            limit=5,
            types=["fact", "decision"],
            statuses=["active", "superseded"],
            tags=["homelab"],
            as_of="2026-03-01",
            include_expired=True,
        )
    assert service.vault.requests("Recall") == [
        vpb.RecallRequest(
            vault="home",
            query="which NAS",
            limit=5,
            types=[pb.MEMORY_TYPE_FACT, pb.MEMORY_TYPE_DECISION],
            statuses=[pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_SUPERSEDED],
            tags=["homelab"],
            as_of=wire.to_timestamp(datetime(2026, 3, 1, tzinfo=UTC)),
            include_expired=True,
        )
    ]
    assert answer == {
        "vault": "home",
        "mode": "hybrid",
        "results": [
            {
                "id": ID,
                "content": "The NAS is a Synology DS920+.",
                "type": "fact",
                "status": "active",
                "score": 0.8765,
                "key": "nas",
                "tags": ["homelab"],
                "created_at": "2026-11-30T12:00:00Z",
                "conflicts_with": ["m2"],
                "warnings": ["conflict"],
                "kind": "memory",
            },
            {
                "id": "m3",
                "content": "Old NAS.",
                "type": "fact",
                "status": "active",
                "score": 0.5,
                "created_at": "2026-11-30T12:00:00Z",
                "may_conflict_with": [ID],
                "kind": "memory",
            },
        ],
        "warnings": ["only common words matched", "m1 conflicts with m2"],
        "next_cursor": "page-2",
    }


async def test_recall_refuses_bad_arguments_before_calling_the_vault(service: Service) -> None:
    async with service.agent() as agent:
        not_a_date = await agent.error("recall", query="nas", as_of="last tuesday")
        too_many = await agent.error("recall", query="nas", limit=10_000)
        unknown_type = await agent.error("recall", query="nas", types=["rumour"])
        misspelt = await agent.error("recall", query="nas", tag=["homelab"])
    assert "as_of 'last tuesday' is not a date" in not_a_date and "ISO 8601" in not_a_date
    assert "limit" in too_many
    assert "types" in unknown_type
    assert "recall has no argument 'tag'" in misspelt and "tags" in misspelt
    assert service.vault.calls == []


async def test_list_memories_pages_with_filters(service: Service) -> None:
    service.vault.answer("ListMemories", vpb.ListMemoriesResponse(vault="home", memories=[memory()]))
    async with service.agent() as agent:
        answer = await agent.call("list_memories", statuses=["proposed"], types=["preference"], cursor="c1")
    assert service.vault.requests("ListMemories") == [
        vpb.ListMemoriesRequest(
            statuses=[pb.MEMORY_STATUS_PROPOSED], types=[pb.MEMORY_TYPE_PREFERENCE], limit=20, cursor="c1"
        )
    ]
    assert answer["vault"] == "home" and answer["next_cursor"] is None
    assert [m["id"] for m in answer["memories"]] == [ID]


async def test_audit_memory_lists_findings_with_their_problems_and_advice(service: Service) -> None:
    service.vault.answer(
        "AuditMemories",
        vpb.AuditMemoriesResponse(
            vault="home",
            counts={"conflict": 2},
            findings=[
                vpb.AuditFinding(memory=memory(), kinds=["conflict"], related=["m2"], message="keep one"),
                vpb.AuditFinding(memory=memory(id="m4"), kinds=["expired"], message="forget it"),
            ],
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call("audit_memory", kinds=["conflict", "expired"], limit=2)
    assert service.vault.requests("AuditMemories") == [vpb.AuditMemoriesRequest(kinds=["conflict", "expired"], limit=2)]
    assert answer["counts"] == {"conflict": 2}
    assert [(f["memory"]["id"], f["problems"], f.get("related"), f["advice"]) for f in answer["findings"]] == [
        (ID, ["conflict"], ["m2"], "keep one"),
        ("m4", ["expired"], None, "forget it"),
    ]


async def test_explain_memory_shows_the_memory_in_full_with_history_and_relations(service: Service) -> None:
    service.vault.answer(
        "ListMemorySources",
        spb.ListMemorySourcesResponse(
            vault="home",
            sources=[
                spb.TrackedSource(
                    id="s1",
                    memory_id="m1",
                    kind=spb.SOURCE_KIND_JSON_FILE,
                    location="/data/c.json",
                    selector="/budget",
                    mode=spb.SOURCE_MODE_AUTO,
                    interval_seconds=300,
                    last_error="gone",
                )
            ],
        ),
    )
    service.vault.answer(
        "ExplainMemory",
        vpb.ExplainMemoryResponse(
            vault="home",
            memory=memory(version=2, client="claude", updated_at=CREATED),
            notes=["recall returns it"],
            history=[
                vpb.HistoryEntry(
                    version=1, change="created", actor="claude", at=CREATED, status=pb.MEMORY_STATUS_PROPOSED
                ),
                vpb.HistoryEntry(
                    version=2,
                    change="edited",
                    actor="owner",
                    at=CREATED,
                    status=pb.MEMORY_STATUS_ACTIVE,
                    changed_fields=["content"],
                ),
            ],
            related=[vpb.RelatedMemory(relation="similar", memory=memory(id="m5"))],
            missing=["m9"],
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call("explain_memory", memory_id=ID)
    assert answer["memory"]["version"] == 2 and answer["memory"]["trust"] == "stated"
    assert answer["memory"]["client"] == "claude" and answer["memory"]["updated_at"] == "2026-11-30T12:00:00Z"
    assert answer["state"] == ["recall returns it"]
    assert answer["history"] == [
        {"version": 1, "change": "created", "by": "claude", "at": "2026-11-30T12:00:00Z", "status": "proposed"},
        {
            "version": 2,
            "change": "edited",
            "by": "owner",
            "at": "2026-11-30T12:00:00Z",
            "status": "active",
            "changed": ["content"],
        },
    ]
    assert [m["id"] for m in answer["related"]["similar"]] == ["m5"]
    assert answer["missing"] == ["m9"]
    [source] = answer["sources"]
    assert source["source_id"] == "s1" and source["kind"] == "json_file" and source["error"] == "gone"


async def test_archive_read_refuses_positions_and_revisions_past_int32_before_calling_the_vault(
    service: Service,
) -> None:
    """Found by the MCP tool fuzzer: after_position above int32 crashed the tool ("Error executing tool")."""
    async with service.agent() as agent:
        position = await agent.error("archive_read", mode="conversation", conversation_id="c1", after_position=2**57)
        revision = await agent.error("archive_read", mode="conversation", conversation_id="c1", revision=2**31)
    assert "after_position" in position and str(limits.MAX_INT32 - 1) in position
    assert "revision" in revision and str(limits.MAX_INT32) in revision
    assert service.vault.calls == []
