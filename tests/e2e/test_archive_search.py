"""Archived messages in the vector index, through the whole stack and the official MCP client: an
imported export indexed through outbox, NATS and indexer; hybrid archive search finding meaning without
shared words; recall covering memories and conversations; reads by message id, in batches and by title;
a deleted conversation's points removed; reindex rebuilding messages with memories."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from e2e_helpers import call, call_error, eventually, index_points, mcp_session

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e


def export() -> bytes:
    def conversation(key: str, title: str, texts: list[str]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for i, text in enumerate(texts):
            node_id = f"{key}{i}"
            mapping[node_id] = {
                "id": node_id,
                "parent": f"{key}{i - 1}" if i else None,
                "children": [f"{key}{i + 1}"] if i + 1 < len(texts) else [],
                "message": {
                    "id": node_id,
                    "author": {"role": "user" if i % 2 == 0 else "assistant"},
                    "content": {"content_type": "text", "parts": [text]},
                },
            }
        return {"title": title, "conversation_id": key, "current_node": f"{key}{len(texts) - 1}", "mapping": mapping}

    return json.dumps(
        [
            conversation("pets", "Pets", ["My cat is called Miso.", "Noted: Miso the cat.", "She is four."]),
            conversation(
                "trip",
                "Trip planning",
                [f"Day {n}: we walk along the old harbour and eat grilled sardines." for n in range(12)],
            ),
        ]
    ).encode()


async def archive_call(stack: Any, method: str, request: Any) -> Any:
    token = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    channel = client_channel(stack.vault_address)
    try:
        stub = archive_pb2_grpc.ArchiveServiceStub(channel)
        return await getattr(stub, method)(request, metadata=((GRPC_METADATA_KEY, token),))
    finally:
        await channel.close()


async def test_archived_messages_are_indexed_and_searched_by_meaning(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    await archive_call(stack, "StartImport", pb.StartImportRequest(vault="default", data=export()))

    async with mcp_session(stack.mcp_url) as client:
        await call(client, "remember", content="The bike lock code is 4312.")

        async def indexed() -> dict[str, Any] | None:
            stats = await call(client, "archive_read", mode="stats")
            return stats if stats["messages"] == 15 and stats["index"]["indexed"] == 15 else None

        stats = await eventually(indexed)
        assert (stats["conversations"], stats["index"]["pending"], stats["index"]["failed"]) == (2, 0, 0)
        assert stats["index"]["model"]
        assert await eventually(lambda: _points(stack, 16))  # one point per message, beside the memory's

        # No word in common with "My cat is called Miso.": only the vector side finds it.
        found = await call(client, "archive_search", query="feline companion's name")
        assert found["mode"] == "hybrid"
        top = found["hits"][0]
        assert (top["kind"], top["title"], top["position"]) == ("message", "Pets", 0)
        assert set(top) >= {"conversation_id", "revision", "message_id", "snippet", "score"}

        # One call finds a fact wherever it lives, each hit saying which.
        both = await call(client, "recall", query="feline companion's name", conversations=True)
        assert both["conversation_hits"][0]["message_id"] == top["message_id"]
        assert both["conversation_hits"][0]["kind"] == "message"
        bike = await call(client, "recall", query="bicycle padlock combination", conversations=True)
        assert bike["results"][0]["kind"] == "memory"

        # Pages within a byte budget, continued with the cursor alone; a made-up cursor is refused.
        page = await call(client, "archive_search", query="harbour sardines", limit=12, max_bytes=4096)
        assert len(json.dumps(page, separators=(",", ":")).encode()) <= 4096
        assert page["next_cursor"] and len(page["hits"]) < 12
        rest = await call(client, "archive_search", cursor=page["next_cursor"], limit=12)
        assert len({h["message_id"] for h in page["hits"] + rest["hits"]}) == 12
        assert "not one this server issued" in await call_error(
            client, "archive_search", cursor=page["next_cursor"][:-3] + "abc"
        )
        assert "max_bytes" in await call_error(client, "archive_search", query="x", max_bytes=100)

        # Around a hit, by its message id.
        around = await call(client, "archive_read", mode="context", message_id=rest["hits"][0]["message_id"], limit=1)
        assert len(around["messages"]) in (2, 3) and around["title"] == "Trip planning"

        # By title, then both conversations at once within a budget, looping on the cursor.
        resolved = await call(client, "archive_read", mode="resolve", conversations=["Trip planning", "Pets"])
        ids = [r["conversations"][0]["id"] for r in resolved["resolved"]]
        batch = await call(client, "archive_read", mode="batch", conversations=[f"{ids[0]}@1", ids[1]], max_bytes=4096)
        texts: dict[int, list[str]] = {0: [], 1: []}
        while True:
            assert len(json.dumps(batch, separators=(",", ":")).encode()) <= 4096
            for result in batch["results"]:
                texts[result["request_index"]] += [m["text"] for m in result["messages"]]
            if not batch["next_cursor"]:
                break
            batch = await call(client, "archive_read", mode="batch", cursor=batch["next_cursor"], max_bytes=4096)
        assert len(texts[0]) == 12 and texts[1] == ["My cat is called Miso.", "Noted: Miso the cat.", "She is four."]

        # Deleting a conversation removes its points.
        pets = ids[1]
        await archive_call(
            stack,
            "DeleteConversation",
            pb.DeleteConversationRequest(vault="default", conversation_id=pets, confirm=pets),
        )
        assert await eventually(lambda: _points(stack, 13))
        gone = await call(client, "archive_search", query="feline companion's name")
        assert all(h["conversation_id"] != pets for h in gone["hits"])

    # reindex rebuilds memories and messages alike from Postgres.
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "memvault_indexer", "reindex", "--address", stack.indexer_address],
        env=stack.env_for("indexer"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert "13 of 13" in done.stdout
    assert await index_points(stack) == 13


def _points(stack: Any, expected: int) -> Any:
    async def check() -> bool:
        return await index_points(stack) == expected

    return check()
