"""get_operating_guide: the owner's guide, the caller's vaults and the limits, from three vault calls."""

from __future__ import annotations

from mcp_helpers import Service

from memvault.common.v1 import limits_pb2
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.errors import NotFound


async def test_the_guide_comes_with_the_vaults_and_limits_and_the_identity_is_passed_on(service: Service) -> None:
    service.vault.answer(
        "GetOperatingGuide", vpb.GetOperatingGuideResponse(vault="home", text="Recall first.", version=3)
    )
    service.vault.answer(
        "ListVaults",
        vpb.ListVaultsResponse(vaults=[vpb.VaultInfo(name="home", role="owner", approval_mode="auto")]),
    )
    service.vault.answer(
        "GetCapabilities",
        vpb.GetCapabilitiesResponse(
            limits=limits_pb2.Limits(max_content_chars=4000, max_bulk_items=500),
            capabilities_version="2026-12-02",
            more_limits={"max_receipt_bytes": 49152},
            features={"message_keys": True},
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call("get_operating_guide", vault="home")
    assert answer == {
        "vault": "home",
        "guide": "Recall first.",
        "guide_version": 3,
        "vaults": [{"name": "home", "role": "owner", "approval_mode": "auto"}],
        "limits": {"max_content_chars": 4000, "max_bulk_items": 500, "max_receipt_bytes": 49152},
        "capabilities": {
            "protocol_version": answer["capabilities"]["protocol_version"],
            "capabilities_version": "2026-12-02",
            "features": {"message_keys": True},
        },
    }
    assert answer["capabilities"]["protocol_version"] in ("2025-11-25", "2026-07-28")
    assert service.vault.requests("GetOperatingGuide") == [vpb.GetOperatingGuideRequest(vault="home")]
    # The vault checks the identity the gateway signed, so every call must carry it unchanged.
    assert {c.identity for c in service.vault.calls} != {None}
    assert len({c.identity for c in service.vault.calls}) == 1


async def test_a_newer_default_guide_is_mentioned_once_with_how_to_adopt_it(service: Service) -> None:
    service.vault.answer("GetOperatingGuide", vpb.GetOperatingGuideResponse(vault="home", newer_default_available=True))
    service.vault.answer("ListVaults", vpb.ListVaultsResponse())
    service.vault.answer("GetCapabilities", vpb.GetCapabilitiesResponse())
    async with service.agent() as agent:
        answer = await agent.call("get_operating_guide")
    assert "/guide/adopt-default" in answer["newer_default_guide"]


async def test_a_vault_error_reaches_the_agent_as_its_message(service: Service) -> None:
    service.vault.answer("GetOperatingGuide", NotFound("no vault named 'work' is open to you; your vaults: home"))
    async with service.agent() as agent:
        text = await agent.error("get_operating_guide", vault="work")
    assert text == "Error executing tool get_operating_guide: no vault named 'work' is open to you; your vaults: home"
