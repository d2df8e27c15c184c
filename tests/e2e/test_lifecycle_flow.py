"""The memory lifecycle through the MCP tools, on all four services with the real embedder."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from e2e_helpers import call, call_error, eventually, mcp_session, vault_stats

from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e

NAS = "The homelab NAS is a Synology DS920+ with four 8 TB drives."
NAS_REWORDED = "Our homelab NAS is a Synology DS920+ with four 8 TB drives."
NAS_BIGGER = "The homelab NAS is a Synology DS920+ with four 12 TB drives."
SPEED = "The internet connection at home is 1 Gbps."
SPEED_NEW = "The internet connection at home is 2 Gbps."


async def vault_call(stack: Any, method: str, request: Any) -> Any:
    """A VaultService call as the dev owner, over gRPC (for what the dashboard will do: settings, review)."""
    from memvault.vault.v1 import vault_pb2_grpc
    from memvault_core.grpc import client_channel
    from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner

    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    channel = client_channel(stack.vault_address)
    try:
        stub = vault_pb2_grpc.VaultServiceStub(channel)
        return await getattr(stub, method)(request, metadata=((GRPC_METADATA_KEY, token),))
    finally:
        await channel.close()


async def set_mode(stack: Any, mode: str) -> None:
    from memvault.vault.v1 import vault_pb2 as vpb

    await vault_call(stack, "UpdateSettings", vpb.UpdateSettingsRequest(vault="default", approval_mode=mode))


def fully_indexed(stack: Any) -> Any:
    async def check() -> bool:
        stats = await vault_stats(stack)
        return bool(stats.index_pending == 0 and stats.indexed > 0)

    return check


async def test_duplicates_conflicts_and_freshness_through_the_tools(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    async with mcp_session(stack.mcp_url) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names >= {"supersede", "invalidate", "audit_memory", "explain_memory"}

        nas = await call(client, "remember", content=NAS, tags=["homelab"])
        assert nas["outcome"] == "stored" and nas["status"] == "proposed"  # review mode by default
        assert nas["duplicate_check"] == "semantic"
        await eventually(fully_indexed(stack))
        repeat = await call(client, "remember", content=NAS_REWORDED)
        assert repeat["outcome"] == "duplicate" and repeat["match"] == "near" and repeat["id"] == nas["id"]
        same = await call_error(client, "supersede", memory_id=nas["id"], content=NAS_REWORDED)
        assert f"the replacement says the same as memory {nas['id']}" in same
        bigger = await call(client, "remember", content=NAS_BIGGER)
        assert bigger["outcome"] == "similar" and bigger["similar_to"] == [nas["id"]]
        assert bigger["status"] == "proposed"

        await set_mode(stack, "auto")
        speed = await call(client, "remember", content=SPEED, key="internet-speed", scope="home")
        assert speed["status"] == "active"
        speed_new = await call(client, "remember", content=SPEED_NEW, key="internet-speed", scope="home")
        assert speed_new["outcome"] == "similar" and speed_new["status"] == "active"
        assert speed_new["similar_to"] == [speed["id"]] and speed_new["conflicts_with"] == [speed["id"]]
        found = await call(client, "recall", query="internet connection speed at home")
        by_id = {r["id"]: r for r in found["results"]}
        assert by_id[speed["id"]]["may_conflict_with"] == [speed_new["id"]]
        assert set(by_id[speed["id"]]["warnings"]) == {"conflict", "may_conflict"}
        assert any("key 'internet-speed' in scope 'home'" in w for w in found["warnings"])
        audit = await call(client, "audit_memory", kinds=["conflict", "may_conflict"])
        assert audit["counts"] == {"conflict": 2, "may_conflict": 2}

        plan = await call(client, "remember", content="Video calls run from the home office.", depends_on=[speed["id"]])
        replaced = await call(
            client, "supersede", memory_id=speed["id"], content="The internet connection at home is 2.5 Gbps now."
        )
        assert replaced["applied"] and replaced["flagged_dependents"] == [plan["id"]]
        assert replaced["outcome"] == "similar" and replaced["similar_to"] == [speed_new["id"]]  # not speed itself
        await call(client, "invalidate", memory_id=speed_new["id"], reason="the 2 Gbps plan was never installed")
        now = await call(client, "recall", query="internet connection speed at home")
        assert [r["id"] for r in now["results"]][:1] == [replaced["id"]]
        assert not any(r.get("may_conflict_with") for r in now["results"])
        then = await call(
            client, "recall", query="internet connection speed at home", as_of="2000-01-01", statuses=["superseded"]
        )
        assert then["results"] == []

        explained = await call(client, "explain_memory", memory_id=speed["id"])
        assert [h["change"] for h in explained["history"]] == ["created", "superseded"]
        assert explained["related"]["superseded_by"][0]["id"] == replaced["id"]
        assert explained["related"]["dependent"][0]["id"] == plan["id"]
        assert explained["state"][0].startswith(f"superseded by {replaced['id']}")
        flagged = await call(client, "audit_memory", kinds=["flagged"])
        assert [f["memory"]["id"] for f in flagged["findings"]] == [plan["id"]]

        secret = await call_error(
            client, "remember", content="The deploy key is ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
        )
        assert "looks like it contains a secret (GitHub token" in secret
        imported = await call(
            client,
            "bulk_remember",
            text="# Saved memories\n- Prefers British spelling in documents.\n- Prefers British spelling in all documents.\n"
            "- The router password is Tr0ub4dor&3\n\nSam lives in Lisbon.",
            source="ChatGPT export",
        )
        assert [i["outcome"] for i in imported["items"]] == ["stored", "duplicate", "secret", "stored"]
        assert imported["items"][1]["match"] == "near"


async def test_without_the_indexer_only_exact_duplicates_are_caught(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    async with mcp_session(stack.mcp_url) as client:
        await call(client, "remember", content=NAS)
        reworded = await call(client, "remember", content=NAS_REWORDED)
        assert reworded["outcome"] == "stored"
        assert reworded["duplicate_check"] == "exact-only"
        assert "only exact duplicates were caught" in reworded["notices"][0]
        exact = await call(
            client, "bulk_remember", items=[{"content": NAS.upper()}, {"content": "Backups run nightly."}]
        )
        assert [i["outcome"] for i in exact["items"]] == ["duplicate", "stored"]
        assert exact["duplicate_check"] == "exact-only"


async def test_the_guide_says_when_a_newer_default_ships(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    async with mcp_session(stack.mcp_url) as client:
        guide = await call(client, "get_operating_guide")
        assert "newer_default_guide" not in guide
        assert "supersede" in guide["guide"]  # the default guide covers the lifecycle tools
        connection = await asyncpg.connect(stack.postgres_dsn)
        try:
            await connection.execute("UPDATE operating_guide SET default_revision = 'an-older-one'")
        finally:
            await connection.close()
        stale = await call(client, "get_operating_guide")
        assert "newer default operating guide" in stale["newer_default_guide"]
