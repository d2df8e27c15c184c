"""All services as processes, driven over HTTP with the official MCP Python client."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from e2e_helpers import call, call_error, mcp_session

from memvault_core import limits
from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_remember_recall_import_forget_and_restart(fresh_stack: StackStarter, mode: str) -> None:
    stack = await asyncio.to_thread(fresh_stack)  # all four services
    nas = "The homelab NAS is a Synology DS920+ with four 8 TB drives."
    async with mcp_session(stack.mcp_url, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names >= {
            "get_operating_guide",
            "recall",
            "remember",
            "propose_memory",
            "bulk_remember",
            "list_memories",
            "forget",
        }
        guide = await call(client, "get_operating_guide")
        assert "What never to save" in guide["guide"]
        assert guide["limits"]["max_bulk_items"] == limits.MAX_BULK_ITEMS

        stored = await call(client, "remember", content=nas, tags=["homelab"])
        assert stored["outcome"] == "stored"

        found = await call(client, "recall", query="which NAS is in the homelab?")
        assert found["results"][0]["id"] == stored["id"]
        assert found["results"][0]["content"] == nas

        imported = await call(
            client,
            "bulk_remember",
            source="chat export",
            items=[
                {"content": "the homelab NAS is a Synology DS920+ with four 8 TB drives."},
                {"content": "Backups run nightly at 02:00 to the NAS."},
                {"content": "Backups run nightly at 02:00 to the NAS.  "},
            ],
        )
        assert [(i["index"], i["outcome"]) for i in imported["items"]] == [
            (0, "duplicate"),
            (1, "stored"),
            (2, "duplicate"),
        ]
        assert imported["items"][0]["id"] == stored["id"]
        assert imported["summary"] == {"duplicate": 2, "stored": 1}

        forgotten = await call(client, "forget", memory_id=stored["id"])
        assert forgotten["forgotten"] == stored["id"]
        assert "if you forgot it already, it is gone" in await call_error(client, "forget", memory_id=stored["id"])
        after = await call(client, "recall", query="which NAS is in the homelab?")
        assert stored["id"] not in [r["id"] for r in after["results"]]
        again = await call(client, "remember", content=nas)
        assert again["outcome"] == "excluded"

    await asyncio.to_thread(stack.restart_services)
    async with mcp_session(stack.mcp_url, mode) as client:
        kept = await call(client, "recall", query="when do backups run")
        assert [r["content"] for r in kept["results"]] == ["Backups run nightly at 02:00 to the NAS."]
        listed = await call(client, "list_memories")
        assert len(listed["memories"]) == 1
        assert (await call(client, "remember", content=nas))["outcome"] == "excluded"


async def test_bad_input_is_refused_with_a_clear_message(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    async with mcp_session(stack.mcp_url) as client:
        assert "content is empty" in await call_error(client, "remember", content="   ")
        too_long = await call_error(client, "remember", content="x" * (limits.MAX_CONTENT_CHARS + 1))
        assert "max_content_chars" in too_long
        too_many = await call_error(
            client, "bulk_remember", items=[{"content": f"item {i}"} for i in range(limits.MAX_BULK_ITEMS + 1)]
        )
        assert "max_bulk_items" in too_many
        assert "send items" in await call_error(client, "bulk_remember", items=[])
        assert "is not a memory id" in await call_error(client, "forget", memory_id="memory-1")
        assert "no vault named 'elsewhere'" in await call_error(client, "recall", query="x", vault="elsewhere")
        assert "has no argument 'tag'" in await call_error(client, "remember", content="x", tag=["a"])
        wrong_types = await call_error(client, "remember", content="x", tags="homelab", confidence="high")
        assert wrong_types.startswith('remember: tags: input should be a valid list (got "homelab"); confidence:')
        assert "pydantic" not in wrong_types and "validation error" not in wrong_types
        assert "items[0]" in await call_error(client, "bulk_remember", items=[7])
        for bad_date, problem in (("last tuesday", "is not a date"), ("2999-01-01", "is in the future")):
            refused = await call_error(
                client, "bulk_remember", items=["fine", {"content": "dated", "source_date": bad_date}]
            )
            assert f"items[1].source_date '{bad_date}' {problem}" in refused
        listed = await call(client, "list_memories", statuses=["proposed", "active"])
        assert listed["memories"] == []  # nothing was written by any of the refused calls
        # In an import, each bad item is reported on its own and the rest is stored.
        mixed = await call(client, "bulk_remember", items=[{"content": "fine"}, {"content": ""}])
        assert [i["outcome"] for i in mixed["items"]] == ["stored", "invalid"]
        assert "items[1].content is empty" in mixed["items"][1]["message"]


async def test_bulk_remember_takes_plain_strings_and_the_date_each_was_stated(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    async with mcp_session(stack.mcp_url) as client:
        imported = await call(
            client,
            "bulk_remember",
            items=[
                "The owner's bike is a green Brompton.",
                {"content": "The owner moved to Lisbon.", "source_date": "2024-03-01"},
                {"content": "The owner started learning Portuguese.", "source_date": "2024-03-05T18:30:00+01:00"},
            ],
        )
        assert [i["outcome"] for i in imported["items"]] == ["stored", "stored", "stored"]
        ids = [i["id"] for i in imported["items"]]
        explained = [(await call(client, "explain_memory", memory_id=i))["memory"] for i in ids]
        assert explained[0]["content"] == "The owner's bike is a green Brompton."
        assert explained[1]["valid_from"].startswith("2024-03-01T00:00:00")
        assert explained[2]["valid_from"].startswith("2024-03-05T17:30:00")
        # Stated in March 2024, so it was not yet true in 2023.
        before = await call(client, "recall", query="where does the owner live? Lisbon", as_of="2023-06-01")
        assert ids[1] not in [r["id"] for r in before["results"]]
        now = await call(client, "recall", query="where does the owner live? Lisbon")
        assert ids[1] in [r["id"] for r in now["results"]]


async def test_gateway_health_connect_and_refusals(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    async with httpx.AsyncClient(base_url=stack.gateway_url) as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).json()["checks"] == {"vault": "ok", "mcp": "ok"}
        connect = await http.get("/connect")
        assert connect.headers["content-type"].startswith("text/markdown")
        assert f"{stack.gateway_url}/mcp" in connect.text
        assert "get_operating_guide" in connect.text
        evil = await http.post("/mcp", headers={"Origin": "https://evil.example"}, json={})
        assert evil.status_code == 403
        proxied = await http.post("/mcp", headers={"X-Forwarded-For": "203.0.113.9"}, json={})
        assert proxied.status_code == 401
        assert proxied.headers["www-authenticate"].startswith("Bearer")
    # The mcp service itself refuses anything that did not come through the gateway.
    async with httpx.AsyncClient() as http:
        direct = await http.post(stack.mcp_service_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert direct.status_code == 401
