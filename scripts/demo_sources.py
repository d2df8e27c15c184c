"""`make demo`: the campaign-budget story of tracked sources, end to end on this machine.

Starts Postgres, NATS, the vault, mcp and the gateway (embedded, in a temporary directory), then
through the MCP tools: a JSON file's budget changes from $50,000 to $35,000 -> the memory is
superseded automatically -> a memory that depends on it is flagged for review; a text policy file
changes -> a pending change waits for someone to read it. Prints each step.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.stack import Stack


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text if result.content else result}")
    assert result.structured_content is not None
    return dict(result.structured_content)


async def auto_mode(stack: Stack) -> None:
    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    channel = client_channel(stack.vault_address)
    try:
        await vault_pb2_grpc.VaultServiceStub(channel).UpdateSettings(
            vpb.UpdateSettingsRequest(vault="default", approval_mode="auto"), metadata=((GRPC_METADATA_KEY, token),)
        )
    finally:
        await channel.close()


async def story(stack: Stack, root: Path) -> None:
    budget, policy = root / "campaign.json", root / "refund-policy.md"
    await auto_mode(stack)
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        Client(streamable_http_client(stack.mcp_url, http_client=http)) as client,  # type: ignore[arg-type]
    ):
        step(f"{budget.name} says the budget is $50,000")
        budget.write_text(json.dumps({"campaign": {"budget": "$50,000"}}, indent=2))
        old = await call(client, "remember", content="The campaign budget is $50,000.", key="campaign.budget")
        print(f"remember -> memory {old['id']} ({old['status']})")
        plan = await call(
            client,
            "remember",
            content="Paid search gets 40% of the spring campaign money.",
            depends_on=[old["id"]],
        )
        print(f"remember -> memory {plan['id']}, depends on {old['id']}")
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
        source = tracked["source"]["source_id"]
        print(f"track_source -> source {source}; the template renders {tracked['current_statement']!r}")

        step("the file changes to $35,000; sources sync")
        budget.write_text(json.dumps({"campaign": {"budget": "$35,000"}}, indent=2))
        [check] = (await call(client, "sources", action="sync", source_id=source))["checks"]
        print(f"sync -> {check['outcome']}: {check.get('message', '')}")
        new = await call(client, "explain_memory", memory_id=check["replacement_id"])
        print(f"new memory: {new['memory']['content']!r} (trust {new['memory']['trust']})")
        old_now = await call(client, "explain_memory", memory_id=old["id"])
        print(f"old memory: {old_now['memory']['status']}, kept with {len(old_now['history'])} history entries")
        flagged = await call(client, "explain_memory", memory_id=plan["id"])
        print(f"dependent memory flagged for review: {flagged['memory'].get('flagged_reason')!r}")

        step(f"{policy.name}: a text policy, tracked for review")
        policy.write_text("Refunds are accepted within 30 days of purchase.\n")
        rule = await call(client, "remember", content="Refunds are accepted within 30 days of purchase.")
        text = await call(client, "track_source", memory_id=rule["id"], kind="text_file", location=str(policy))
        print(f"track_source -> source {text['source']['source_id']} (mode {text['source']['mode']})")
        policy.write_text("Refunds are accepted within 14 days of purchase.\n")
        [check] = (await call(client, "sources", action="sync", source_id=text["source"]["source_id"]))["checks"]
        print(f"sync -> {check['outcome']}: {check.get('message', '')}")
        [change] = (await call(client, "sources", action="changes"))["changes"]
        print(f"pending change {change['change_id']}: {change['next_step']}")
        status = await call(client, "sources", action="status")
        print(f"status -> {status['pending_changes']} pending, {status['errors']} errors, {status['overdue']} overdue")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="memvault-demo-") as tmp:
        root = Path(tmp) / "sources"
        root.mkdir()
        env = {"MEMVAULT_SOURCES__FILE_ROOTS": json.dumps([str(root)]), "MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS": "0"}
        step("starting Postgres, NATS, vault, mcp and gateway (no indexer: duplicate check exact-only)")
        with Stack(Path(tmp) / "data", services=("vault", "mcp", "gateway"), service_env={"vault": env}) as stack:
            asyncio.run(story(stack, root))
    print("\ndone", flush=True)


if __name__ == "__main__":
    sys.exit(main())
