"""URL sources through the MCP tools (official client over HTTP) on vault, mcp and gateway as processes,
against a local HTTP server the test starts: JSON and text that change, a server that fails, a redirect
to a private address, a body over the size limit, a server too slow; each failure is a source error
that leaves the memory as it is, and clears once the source answers again."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from e2e_helpers import call, mcp_session
from mcp import Client
from test_lifecycle_flow import set_mode

from memvault_core import limits
from memvault_devstack.fixtures import StackStarter
from memvault_devstack.source_server import source_server

pytestmark = pytest.mark.e2e

TIMEOUT_SECONDS = 2


async def sync_one(client: Client, source_id: str) -> dict[str, Any]:
    [check] = (await call(client, "sources", action="sync", source_id=source_id))["checks"]
    assert check["source_id"] == source_id
    return check


async def content_of(client: Client, memory_id: str) -> tuple[str, str]:
    memory = (await call(client, "explain_memory", memory_id=memory_id))["memory"]
    return memory["content"], memory["status"]


async def test_url_sources_change_fail_and_recover_through_the_tools(fresh_stack: StackStarter) -> None:
    with source_server() as http:
        env = {
            "MEMVAULT_SOURCES__URL_HOSTS": json.dumps(["127.0.0.1", "10.9.9.9", "169.254.169.254"]),
            "MEMVAULT_SOURCES__PRIVATE_NETWORKS": json.dumps(["127.0.0.1/32"]),
            "MEMVAULT_SOURCES__FETCH_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
            "MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS": "0",
        }
        stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"), service_env={"vault": env})
        await set_mode(stack, "auto")
        async with mcp_session(stack.mcp_url) as client:
            # JSON over HTTP, auto mode: the value changes, the memory is superseded by the rendered statement.
            prices = http.set("/prices.json", json.dumps({"plan": {"pro": 20}}))
            price = await call(client, "remember", content="The pro plan costs 20 euros a month.")
            tracked = await call(
                client,
                "track_source",
                memory_id=price["id"],
                kind="json_url",
                location=prices,
                selector="/plan/pro",
                statement_template="The pro plan costs {{value}} euros a month.",
                interval_seconds=60,
            )
            json_source = tracked["source"]["source_id"]
            assert tracked["current_statement"] == "The pro plan costs 20 euros a month."
            assert (await sync_one(client, json_source))["outcome"] == "unchanged"
            http.set("/prices.json", json.dumps({"plan": {"pro": 25}}))
            changed = await sync_one(client, json_source)
            assert changed["outcome"] == "superseded", changed
            current = changed["replacement_id"]
            assert await content_of(client, current) == ("The pro plan costs 25 euros a month.", "active")
            assert (await content_of(client, price["id"]))[1] == "superseded"

            # Text over HTTP: a change always waits; its record holds no text; going back dismisses it.
            http.set("/terms.txt", "Cancel any time.", content_type="text/plain")
            terms = await call(client, "remember", content="Customers can cancel any time.")
            text = await call(
                client, "track_source", memory_id=terms["id"], kind="text_url", location=http.url("/terms.txt")
            )
            text_source = text["source"]["source_id"]
            http.set("/terms.txt", "Cancel with 30 days notice. PROSE-MARKER", content_type="text/plain")
            assert (await sync_one(client, text_source))["outcome"] == "pending"
            [waiting] = (await call(client, "sources", action="changes"))["changes"]
            assert "PROSE-MARKER" not in json.dumps(waiting) and "new_value" not in waiting
            http.set("/terms.txt", "Cancel any time.", content_type="text/plain")
            assert (await sync_one(client, text_source))["outcome"] == "reverted"
            assert (await call(client, "sources", action="changes"))["changes"] == []
            http.set("/terms.txt", "Cancel with 30 days notice.", content_type="text/plain")
            await sync_one(client, text_source)
            [waiting] = (await call(client, "sources", action="changes"))["changes"]
            done = await call(
                client,
                "sources",
                action="resolve",
                change_id=waiting["change_id"],
                accept=True,
                statement="Customers cancel with 30 days notice.",
            )
            assert done["outcome"] == "superseded"

            # Failures: each is a source error, the memory stays as it is, nothing waits for review.
            failures = {
                "server error": ({"status": 500}, "500"),
                "redirect to a private address": (
                    {"status": 302, "location": "http://10.9.9.9/prices.json"},
                    "private address",
                ),
                "redirect to link-local metadata": (
                    {"status": 302, "location": "http://169.254.169.254/latest/meta-data"},
                    "private address",
                ),
                "too large": ({"body": b"[" + b"1," * (limits.MAX_SOURCE_BYTES // 2) + b"1]"}, "larger than"),
                "too slow": ({"delay": TIMEOUT_SECONDS + 2.0}, f"within {TIMEOUT_SECONDS} seconds"),
                "not JSON": ({"body": b"<html>maintenance</html>"}, "JSON"),
            }
            for name, (route, said) in failures.items():
                http.set("/prices.json", **{"body": b"", **route})  # type: ignore[arg-type]
                failed = await sync_one(client, json_source)
                assert failed["outcome"] == "error", (name, failed)
                assert said in failed["message"], (name, failed["message"])
                assert await content_of(client, current) == ("The pro plan costs 25 euros a month.", "active"), name
                health = await call(client, "sources", action="status")
                assert health["errors"] == 1 and health["pending_changes"] == 0, (name, health)
                [shown] = [s for s in health["sources"] if s["source_id"] == json_source]
                assert said in shown["error"], (name, shown)

            # The source answers again with the value already applied: the error clears, nothing changes.
            http.set("/prices.json", json.dumps({"plan": {"pro": 25}}))
            assert (await sync_one(client, json_source))["outcome"] == "unchanged"
            health = await call(client, "sources", action="status")
            assert health["errors"] == 0 and all("error" not in s for s in health["sources"])
            history = await call(client, "explain_memory", memory_id=current)
            assert history["memory"]["status"] == "active"
