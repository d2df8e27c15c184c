"""The archive tools through the official MCP client: an export uploaded, its import
followed with archive_read, a fact found with archive_search, long results kept under the
ceiling with ready-made reads in `omitted`, a message over the ceiling named and passed over, and
messages read by source node id."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from e2e_helpers import call, call_error, mcp_session

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e


def export() -> bytes:
    def node(node_id: str, parent: str | None, children: list[str], role: str, text: str) -> dict[str, Any]:
        message = {"id": node_id, "author": {"role": role}, "content": {"content_type": "text", "parts": [text]}}
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    long = [
        node(
            f"n{i}", f"n{i - 1}" if i else None, [f"n{i + 1}"] if i < 59 else [], "user", f"paragraph {i} " + "x" * 2000
        )
        for i in range(60)
    ]
    return json.dumps(
        [
            {
                "title": "Garage",
                "conversation_id": "garage",
                "current_node": "b",
                "mapping": {
                    "a": node("a", None, ["b"], "user", "the spare garage key hangs behind the water heater"),
                    "b": node("b", "a", [], "assistant", "noted"),
                },
            },
            {"title": "Long", "conversation_id": "long", "current_node": "n59", "mapping": {n["id"]: n for n in long}},
            {
                "title": "Huge",
                "conversation_id": "huge",
                "current_node": "h2",
                "mapping": {
                    "h0": node("h0", None, ["h1"], "user", "paste the log"),
                    "h1": node("h1", "h0", ["h2"], "user", "log line " * 7_000),  # 63 KB: over any answer
                    "h2": node("h2", "h1", [], "assistant", "the log ends with a timeout"),
                },
            },
        ]
    ).encode()


async def test_agent_searches_and_reads_the_archive(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    data = export()
    # The dev owner uploads over gRPC (the /api/v1 upload is covered by test_archive_import.py).
    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    channel = client_channel(stack.vault_address)
    try:
        started = await archive_pb2_grpc.ArchiveServiceStub(channel).StartImport(
            pb.StartImportRequest(vault="default", data=data), metadata=((GRPC_METADATA_KEY, token),)
        )
    finally:
        await channel.close()
    import_id = getattr(started, "import").id

    async with mcp_session(stack.mcp_url) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"archive_search", "archive_read"} <= names
        deadline = time.monotonic() + 60
        while (status := await call(client, "archive_read", mode="import", import_id=import_id))["state"] != "done":
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.2)
        assert (status["total"], status["done"], status["remaining"], status["failed"]) == (3, 3, 0, 0)

        found = await call(client, "archive_search", query="where is the spare garage key")
        hit = found["hits"][0]
        assert hit["kind"] == "message" and hit["title"] == "Garage" and "water heater" in hit["snippet"]
        # One call finds it wherever it lives: memories and conversations, each hit saying which.
        await call(client, "remember", content="The bike lock code is 4312.")
        both = await call(client, "recall", query="spare garage key", conversations=True)
        assert [h["kind"] for h in both["conversation_hits"]][:1] == ["message"]
        assert both["conversation_hits"][0]["conversation_id"] == hit["conversation_id"]
        # recall's tags filter the conversations too (none of them is tagged "nowhere").
        tagged = await call(client, "recall", query="spare garage key", conversations=True, tags=["nowhere"])
        assert tagged["conversation_hits"] == []
        # The hits page with their own cursor; the memories' next page does not repeat them.
        first = await call(client, "recall", query="paragraph", conversations=True, limit=1)
        assert len(first["conversation_hits"]) == 1 and first["conversation_cursor"]
        more = await call(
            client, "recall", query="paragraph", limit=1, conversation_cursor=first["conversation_cursor"]
        )
        assert more["results"] == [] and more["conversation_hits"]
        assert more["conversation_hits"][0]["message_id"] != first["conversation_hits"][0]["message_id"]
        bike = await call(client, "recall", query="bike lock code", conversations=True)
        assert bike["results"][0]["kind"] == "memory" and "4312" in bike["results"][0]["content"]
        around = await call(client, "archive_read", mode="conversation", conversation_id=hit["conversation_id"])
        assert [m["text"] for m in around["messages"]][1] == "noted"

        listed = await call(client, "archive_read", mode="list")
        long_id = next(c["id"] for c in listed["conversations"] if c["title"] == "Long")
        page = await call(client, "archive_read", mode="conversation", conversation_id=long_id, limit=60)
        assert len(json.dumps(page)) < 48 * 1024
        (omitted,) = page["omitted"]
        read = omitted["read"]
        assert read["tool"] == "archive_read" and read["after_position"] == page["messages"][-1]["position"]
        positions = [m["position"] for m in page["messages"]]
        while page.get("omitted"):
            read = page["omitted"][0]["read"]
            page = await call(client, "archive_read", **{k: v for k, v in read.items() if k != "tool"}, limit=60)
            assert len(json.dumps(page)) < 48 * 1024
            positions += [m["position"] for m in page["messages"]]
        assert positions == list(range(60))

        # A message over the ceiling is named with its whole read and passed over: paging moves on.
        huge_id = next(c["id"] for c in listed["conversations"] if c["title"] == "Huge")
        past = await call(client, "archive_read", mode="conversation", conversation_id=huge_id, after_position=0)
        assert [m["text"] for m in past["messages"]] == ["the log ends with a timeout"]
        [note] = past["oversized"]
        assert (note["node_id"], note["position"], note["bytes"]) == ("h1", 1, len(("log line " * 7_000).encode()))
        whole = f"/conversations/{huge_id}/messages?revision=1&message_id={note['message_id']}"
        assert note["read_whole"].endswith(whole)
        assert "omitted" not in past and len(json.dumps(past)) < 48 * 1024
        # By source node id at the pinned revision, the unknown one named.
        nodes = await call(
            client, "archive_read", mode="messages", conversation_id=huge_id, revision=1, nodes=["h2", "h0", "zz"]
        )
        assert [m["node_id"] for m in nodes["messages"]] == ["h0", "h2"]
        assert nodes["missing"] == {"nodes": ["zz"], "keys": [], "message_ids": []}
        # By the archive's own message id, as read_whole names it.
        by_id = await call(
            client,
            "archive_read",
            mode="messages",
            conversation_id=huge_id,
            revision=1,
            message_ids=[note["message_id"]],
        )
        assert [m["node_id"] for m in by_id["messages"]] == [] and [o["node_id"] for o in by_id["oversized"]] == ["h1"]
        # The context around the last message, with the huge one beside it named, not cut.
        around = await call(client, "archive_read", mode="context", message_id=past["messages"][0]["message_id"])
        assert [m["position"] for m in around["messages"]] == [0, 2]
        assert [n["position"] for n in around["oversized"]] == [1]
        assert "mode" in await call_error(client, "archive_read", mode="everything")
