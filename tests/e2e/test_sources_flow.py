"""Tracked sources through the MCP tools (official client) on vault, mcp and gateway as processes, with
local files and a local HTTP server: the seed's campaign-budget story, a text policy, failing URLs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from e2e_helpers import call, call_error, mcp_session
from test_lifecycle_flow import set_mode

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.source_server import source_server

pytestmark = pytest.mark.e2e


async def test_campaign_budget_text_policy_and_urls_through_the_tools(
    fresh_stack: StackStarter, tmp_path: Path
) -> None:
    root = tmp_path / "sources"
    root.mkdir()
    budget = root / "campaign.json"
    budget.write_text(json.dumps({"campaign": {"budget": "$50,000"}}))
    policy = root / "refunds.md"
    policy.write_text("Refunds within 30 days.")
    with source_server() as http:
        env = {
            "MEMVAULT_SOURCES__FILE_ROOTS": json.dumps([str(root)]),
            "MEMVAULT_SOURCES__URL_HOSTS": json.dumps(["127.0.0.1", "10.9.9.9"]),
            "MEMVAULT_SOURCES__PRIVATE_NETWORKS": json.dumps(["127.0.0.1/32"]),
            "MEMVAULT_SOURCES__FETCH_TIMEOUT_SECONDS": "2",
            "MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS": "0",
        }
        stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"), service_env={"vault": env})
        await set_mode(stack, "auto")
        async with mcp_session(stack.mcp_url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"track_source", "sources"} <= names

            old = await call(client, "remember", content="The campaign budget is $50,000.")
            plan = await call(
                client,
                "remember",
                content="Paid search gets 40% of the spring money.",
                depends_on=[old["id"]],
                metadata={"team": "ads"},
            )
            tracked = await call(
                client,
                "track_source",
                memory_id=old["id"],
                kind="json_file",
                location=str(budget),
                selector="/campaign/budget",
                statement_template="The campaign budget is {{value}}.",
                mode="auto",
            )
            assert tracked["current_statement"] == "The campaign budget is $50,000."
            source_id = tracked["source"]["source_id"]

            budget.write_text(json.dumps({"campaign": {"budget": "$35,000"}}))
            synced = await call(client, "sources", action="sync", source_id=source_id)
            [check] = synced["checks"]
            assert check["outcome"] == "superseded" and check["flagged_dependents"] == [plan["id"]]
            new = await call(client, "explain_memory", memory_id=check["replacement_id"])
            assert new["memory"]["content"] == "The campaign budget is $35,000."
            assert new["sources"][0]["source_id"] == source_id
            flagged = await call(client, "explain_memory", memory_id=plan["id"])
            assert flagged["memory"].get("flagged_reason")
            assert (await call(client, "explain_memory", memory_id=plan["id"]))["memory"]["metadata"] == {"team": "ads"}

            rule = await call(client, "remember", content="Refunds are accepted within 30 days.")
            text = await call(client, "track_source", memory_id=rule["id"], kind="text_file", location=str(policy))
            policy.write_text("Refunds within 14 days.")
            await call(client, "sources", action="sync", source_id=text["source"]["source_id"])
            [change] = (await call(client, "sources", action="changes"))["changes"]
            assert "new_value" not in change and "next_step" in change
            missing = await call_error(client, "sources", action="resolve", change_id=change["change_id"], accept=True)
            assert "replacement statement" in missing
            done = await call(
                client,
                "sources",
                action="resolve",
                change_id=change["change_id"],
                accept=True,
                statement="Refunds are accepted within 14 days.",
            )
            assert done["outcome"] == "superseded"

            url = http.set("/ads.json", json.dumps({"ads": 100}))
            ads = await call(client, "remember", content="The ads budget is 100 euros.")
            web = await call(
                client,
                "track_source",
                memory_id=ads["id"],
                kind="json_url",
                location=url,
                selector="/ads",
                statement_template="The ads budget is {{value}} euros.",
            )
            http.set("/ads.json", status=302, location="http://10.9.9.9/ads.json")
            [failed] = (await call(client, "sources", action="sync", source_id=web["source"]["source_id"]))["checks"]
            assert failed["outcome"] == "error" and "private address" in failed["message"]
            health = await call(client, "sources", action="status")
            assert health["errors"] == 1
            outside = await call_error(
                client, "track_source", memory_id=ads["id"], kind="text_file", location=str(tmp_path / "x.md")
            )
            assert "outside the configured file roots" in outside or "does not exist" in outside
