"""forget, supersede and invalidate: the change asked for, and what the vault did about it."""

from __future__ import annotations

from mcp_helpers import Service

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.errors import Conflict, NotFound

ID = "8d0e6f0a-0000-4000-8000-000000000001"


async def test_forget_names_what_was_forgotten(service: Service) -> None:
    service.vault.answer("Forget", vpb.ForgetResponse(vault="home", memory_id=ID))
    async with service.agent() as agent:
        answer = await agent.call("forget", memory_id=ID, vault="home")
    assert service.vault.requests("Forget") == [vpb.ForgetRequest(vault="home", memory_id=ID)]
    assert answer == {"vault": "home", "forgotten": ID}


async def test_forgetting_a_memory_the_vault_does_not_hold_says_so(service: Service) -> None:
    service.vault.answer("Forget", NotFound(f"no memory {ID} in vault home; recall or list_memories gives ids"))
    async with service.agent() as agent:
        text = await agent.error("forget", memory_id=ID)
    assert f"no memory {ID} in vault home; recall or list_memories gives ids" in text


async def test_supersede_sends_the_whole_replacement_and_reports_what_it_replaced(service: Service) -> None:
    service.vault.answer(
        "SupersedeMemory",
        vpb.SupersedeMemoryResponse(
            vault="home",
            applied=True,
            result=vpb.WriteResult(outcome=vpb.WRITE_OUTCOME_STORED, memory_id="m2", status=pb.MEMORY_STATUS_ACTIVE),
            flagged_dependents=["m7"],
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "supersede", memory_id=ID, content="The NAS is a DS1522+.", key="nas", expected_version=3
        )
    assert service.vault.requests("SupersedeMemory") == [
        vpb.SupersedeMemoryRequest(
            memory_id=ID,
            replacement=pb.MemoryDraft(
                content="The NAS is a DS1522+.", type=pb.MEMORY_TYPE_FACT, key="nas", trust=pb.TRUST_STATED
            ),
            expected_version=3,
        )
    ]
    assert answer == {
        "vault": "home",
        "replaced": ID,
        "applied": True,
        "outcome": "stored",
        "id": "m2",
        "status": "active",
        "duplicate_check": "semantic",
        "flagged_dependents": ["m7"],
    }


async def test_a_stale_expected_version_is_refused_with_the_vaults_advice(service: Service) -> None:
    service.vault.answer("SupersedeMemory", Conflict("memory changed since version 3; explain_memory, then retry"))
    async with service.agent() as agent:
        text = await agent.error("supersede", memory_id=ID, content="x", expected_version=3)
        negative = await agent.error("supersede", memory_id=ID, content="x", expected_version=-1)
    assert "memory changed since version 3; explain_memory, then retry" in text
    assert "expected_version" in negative
    assert len(service.vault.calls) == 1


async def test_invalidate_says_whether_it_applied_or_waits_for_the_owner(service: Service) -> None:
    memory = pb.Memory(id=ID, content="Old.", status=pb.MEMORY_STATUS_INVALIDATED, status_reason="moved")
    service.vault.answer("InvalidateMemory", vpb.InvalidateMemoryResponse(vault="home", memory=memory, applied=True))
    async with service.agent() as agent:
        applied = await agent.call("invalidate", memory_id=ID, reason="moved")
        service.vault.answer("InvalidateMemory", vpb.InvalidateMemoryResponse(vault="home", memory=memory))
        waiting = await agent.call("invalidate", memory_id=ID)
    assert service.vault.requests("InvalidateMemory")[0] == vpb.InvalidateMemoryRequest(memory_id=ID, reason="moved")
    assert applied == {
        "vault": "home",
        "applied": True,
        "memory": {
            "id": ID,
            "content": "Old.",
            "type": "fact",
            "status": "invalidated",
            "created_at": None,
            "status_reason": "moved",
        },
        "message": "invalidated: recall no longer returns it (except as_of an earlier time)",
    }
    assert waiting["applied"] is False
    assert waiting["message"] == "flagged for the owner, who decides; it stays as it is until then"
