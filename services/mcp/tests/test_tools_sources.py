"""track_source and sources against a stand-in vault: what they send and what the agent reads."""

from __future__ import annotations

import pytest
from mcp_helpers import Service

from memvault.vault.v1 import sources_pb2 as spb
from memvault_core import limits
from memvault_core.errors import InvalidArgument

pytestmark = pytest.mark.unit

MEMORY = "7d3f6a52-0a0e-4c55-9b6e-2f1a6e0c1d11"


async def test_track_source_sends_the_kind_and_template_and_shows_the_rendered_statement(service: Service) -> None:
    service.vault.answer(
        "TrackSource",
        spb.TrackSourceResponse(
            vault="home",
            source=spb.TrackedSource(
                id="s1", memory_id=MEMORY, kind=spb.SOURCE_KIND_JSON_FILE, mode=spb.SOURCE_MODE_AUTO
            ),
            current_statement="The campaign budget is $50,000.",
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "track_source",
            memory_id=MEMORY,
            kind="json_file",
            location="/data/campaign.json",
            selector="/campaign/budget",
            statement_template="The campaign budget is {{value}}.",
            mode="auto",
        )
    [request] = service.vault.requests("TrackSource")
    assert request.kind == spb.SOURCE_KIND_JSON_FILE and request.mode == spb.SOURCE_MODE_AUTO
    assert request.selector == "/campaign/budget"
    assert answer["current_statement"] == "The campaign budget is $50,000."
    assert answer["source"]["kind"] == "json_file" and answer["source"]["mode"] == "auto"


async def test_each_sources_action_reaches_its_call(service: Service) -> None:
    service.vault.answer(
        "SyncSources",
        spb.SyncSourcesResponse(
            vault="home",
            checks=[
                spb.SourceCheck(source_id="s1", outcome="superseded", replacement_id="m2", flagged_dependents=["m3"])
            ],
        ),
    )
    service.vault.answer(
        "ListSourceChanges",
        spb.ListSourceChangesResponse(
            vault="home",
            changes=[
                spb.SourceChange(
                    id="c1", kind=spb.SOURCE_KIND_JSON_FILE, new_value_json='"$35,000"', proposed_statement="B"
                ),
                spb.SourceChange(id="c2", kind=spb.SOURCE_KIND_TEXT_FILE, status=spb.SOURCE_CHANGE_STATUS_PENDING),
            ],
        ),
    )
    service.vault.answer(
        "ResolveSourceChange", InvalidArgument("a text source changed: give the replacement statement")
    )
    service.vault.answer(
        "GetSourceStatus", spb.GetSourceStatusResponse(vault="home", errors=1, overdue=0, pending_changes=2)
    )
    async with service.agent() as agent:
        synced = await agent.call("sources", action="sync")
        changes = await agent.call("sources", action="changes")
        refused = await agent.error("sources", action="resolve", change_id="c2", accept=True)
        no_id = await agent.error("sources", action="resolve")
        health = await agent.call("sources", action="status")
    assert synced["checks"] == [
        {
            "source_id": "s1",
            "memory_id": "",
            "outcome": "superseded",
            "replacement_id": "m2",
            "flagged_dependents": ["m3"],
        }
    ]
    json_change, text_change = changes["changes"]
    assert json_change["new_value"] == "$35,000" and json_change["proposed_statement"] == "B"
    assert "new_value" not in text_change and text_change["status"] == "pending" and "next_step" in text_change
    assert "give the replacement statement" in refused
    assert "needs change_id" in no_id
    assert service.vault.requests("ResolveSourceChange")[0].accept is True
    assert health["errors"] == 1 and health["pending_changes"] == 2


async def test_track_source_refuses_an_interval_past_its_bound_before_calling_the_vault(service: Service) -> None:
    """Found by the MCP tool fuzzer: an interval above int32 crashed the tool ("Error executing tool")."""
    async with service.agent() as agent:
        refused = await agent.error(
            "track_source", memory_id=MEMORY, kind="json_file", location="/data/x.json", interval_seconds=2**40
        )
    assert "interval_seconds" in refused and str(limits.MAX_SOURCE_INTERVAL_SECONDS) in refused
    assert service.vault.calls == []
