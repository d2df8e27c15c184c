"""Archive writes as an agent and a script make them: the official MCP client over HTTP with service
tokens through the gateway (archive_write, archive_read mode=pack, the capabilities in the guide),
and the same calls on /api/v1. Receipts stay under 48 KiB, oversized writes are refused before
anything is written, and a read-only grant neither sees nor calls the write tool."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from e2e_helpers import call, call_error, mcp_session
from mcp import MCPError
from test_sdk_client import oauth_stack, signed_in_owner

from memvault_core.identity import missing_scope_message
from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e

CEILING = 48 * 1024


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def test_agent_and_script_write_the_archive(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_in_owner(stack)
    me = (await browser.http.get("/api/v1/me")).json()
    csrf = {"X-CSRF-Token": me["csrf_token"]}
    (vault,) = [v["name"] for v in (await browser.http.get("/api/v1/vaults")).json()["vaults"]]
    assert (await browser.http.post("/api/v1/vaults", json={"name": "shelf"}, headers=csrf)).status_code == 201

    async def token(scopes: list[str], vaults: list[str]) -> str:
        made = await browser.http.post(
            "/api/v1/service-tokens",
            json={"name": f"t-{len(scopes)}", "scopes": scopes, "vaults": vaults},
            headers=csrf,
        )
        assert made.status_code == 201, made.text
        return str(made.json()["token"])

    writer, reader = await token(["read", "write"], [vault, "shelf"]), await token(["read"], [vault])
    bearer = {"Authorization": f"Bearer {writer}"}

    async with mcp_session(stack.mcp_url, headers=bearer) as client:
        guide = await call(client, "get_operating_guide")
        caps = guide["capabilities"]
        assert caps["protocol_version"] == "2026-07-28" and caps["capabilities_version"]
        assert caps["features"]["message_keys"] and caps["features"]["atomic_multi_conversation_commit"]
        assert guide["limits"]["max_receipt_bytes"] == CEILING
        assert guide["limits"]["max_write_request_bytes"] == 1024 * 1024
        assert guide["limits"]["max_content_chars"] == 4000  # the memory limits are there as well
        # The bounds the tools advertise are the limits the vault reports (and enforces).
        limits = guide["limits"]
        tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        write, read = tools["archive_write"], tools["archive_read"]
        message = write["$defs"]["MessageIn"]["properties"]
        assert write["properties"]["messages"]["maxItems"] == limits["max_messages_per_write"]
        assert message["text"]["maxLength"] == limits["max_message_chars"]
        assert message["key"]["maxLength"] == limits["max_message_key_chars"]
        assert write["properties"]["writes"]["maxItems"] == limits["max_batch_writes"]
        assert write["properties"]["conversation_ids"]["maxItems"] == limits["max_copy_conversations"]
        assert write["properties"]["tags"]["maxItems"] == limits["max_conversation_tags"]
        pack = read["$defs"]["PackIn"]["properties"]
        assert pack["conversations"]["maxItems"] == limits["max_pack_conversations"]
        assert pack["queries"]["maxItems"] == limits["max_pack_searches"]
        assert (pack["max_tokens"]["maximum"], pack["max_bytes"]["maximum"]) == (
            limits["max_pack_tokens"],
            limits["max_pack_bytes"],
        )

        made = await call(
            client,
            "archive_write",
            op="create",
            title="Campaign",
            messages=[{"role": "user", "text": "the party rests at the Gilded Goose"}],
            verify=True,
        )
        (receipt,) = made["receipts"]
        conversation = receipt["conversation_id"]
        assert receipt["durable"] and receipt["revision"] == 1
        # At commit the message waits for the vector index (unless the indexer was already that quick).
        assert (receipt["indexing"], receipt["indexing_pending"]) in {("pending", 1), ("indexed", 0)}
        assert [m["text"] for m in receipt["readback"]] == ["the party rests at the Gilded Goose"]

        keyed = await call(
            client,
            "archive_write",
            op="upsert",
            conversation_id=conversation,
            base_revision=1,
            messages=[{"key": "scene.current", "text": "the docks at night"}],
        )
        assert keyed["receipts"][0]["revision"] == 2 and keyed["receipts"][0]["changes"]["added"] == 1
        same = await call(
            client,
            "archive_write",
            op="upsert",
            conversation_id=conversation,
            base_revision=2,
            messages=[{"key": "scene.current", "text": "the docks at night"}],
        )
        assert same["receipts"][0]["revision"] == 2 and same["receipts"][0]["changes"]["unchanged"] == 1
        page = await call(client, "archive_read", mode="conversation", conversation_id=conversation)
        node = page["messages"][0]["node_id"]
        edited = await call(
            client,
            "archive_write",
            op="edit",
            conversation_id=conversation,
            base_revision=2,
            messages=[{"node_id": node, "text": "the party rests at the Silver Stag"}],
            idempotency_key="edit-inn",
        )
        assert edited["receipts"][0]["revision"] == 3
        replay = await call(
            client,
            "archive_write",
            op="edit",
            conversation_id=conversation,
            base_revision=2,
            messages=[{"node_id": node, "text": "the party rests at the Silver Stag"}],
            idempotency_key="edit-inn",
        )
        assert replay["receipts"][0]["replayed"] and replay["receipts"][0]["revision"] == 3
        clash = await call_error(
            client,
            "archive_write",
            op="edit",
            conversation_id=conversation,
            base_revision=2,
            messages=[{"node_id": node, "text": "somewhere else"}],
            idempotency_key="edit-inn",
        )
        assert "idempotency_key" in clash

        # A batch with one stale base revision writes nothing at all.
        other = (await call(client, "archive_write", op="create", messages=[{"text": "second"}]))["receipts"][0]
        writes = [
            {"conversation_id": conversation, "op": "append", "base_revision": 3, "messages": [{"text": "x"}]},
            {
                "conversation_id": other["conversation_id"],
                "op": "append",
                "base_revision": 9,
                "messages": [{"text": "y"}],
            },
        ]
        stale = await call_error(client, "archive_write", op="commit", writes=writes)
        assert "stale" in stale and "Nothing was written" in stale
        assert (await call(client, "archive_read", mode="revisions", conversation_id=conversation))["revisions"][0][
            "number"
        ] == 3
        writes[1]["base_revision"] = 1
        committed = await call(client, "archive_write", op="commit", writes=writes)
        assert [r["revision"] for r in committed["receipts"]] == [4, 2]

        copied = await call(
            client,
            "archive_write",
            op="copy",
            conversation_ids=[conversation],
            target_vault="shelf",
            idempotency_key="to-shelf",
        )
        (copy,) = copied["receipts"]
        assert copy["derived_from"] == {"vault": vault, "conversation_id": conversation, "revision": 4}
        source = await call(client, "archive_read", mode="conversation", conversation_id=conversation)
        target = await call(
            client, "archive_read", mode="conversation", conversation_id=copy["conversation_id"], vault="shelf"
        )
        assert [(m["node_id"], m["text"]) for m in target["messages"]] == [
            (m["node_id"], m["text"]) for m in source["messages"]
        ]
        again = await call(
            client,
            "archive_write",
            op="copy",
            conversation_ids=[conversation],
            target_vault="shelf",
            idempotency_key="to-shelf",
        )
        assert again["receipts"][0]["replayed"] and again["receipts"][0]["conversation_id"] == copy["conversation_id"]

        # A large verified write: the receipt stays under the ceiling; omitted names ready-made reads.
        big = [{"key": f"note.{i}", "text": f"note {i} " + "q" * 9_000} for i in range(8)]
        verified = await call(
            client,
            "archive_write",
            op="upsert",
            conversation_id=conversation,
            base_revision=4,
            messages=big,
            verify=True,
        )
        assert size(verified) < CEILING
        (shed,) = verified["receipts"][0]["omitted"]
        read = {k: v for k, v in shed["read"].items() if k != "tool"}
        rest = await call(client, "archive_read", **read)
        assert rest["messages"][0]["text"].startswith(f"note {len(verified['receipts'][0]['readback'])} ")

        # Over max_write_request_bytes: refused up front with a suggested count, nothing written.
        huge = [{"key": f"huge.{i}", "text": "h" * 90_000} for i in range(20)]
        too_large = await call_error(
            client, "archive_write", op="upsert", conversation_id=conversation, base_revision=5, messages=huge
        )
        assert "REQUEST_TOO_LARGE" in too_large and "suggested_max_items=" in too_large
        head = await call(client, "archive_read", mode="revisions", conversation_id=conversation, limit=1)
        assert head["revisions"][0]["number"] == 5

        pack = await call(
            client,
            "archive_read",
            mode="pack",
            pack={"conversations": [f"{other['conversation_id']}"], "queries": ["Silver Stag"], "max_bytes": 8192},
        )
        assert pack["fits"] and pack["pack_id"].startswith("pack_") and size(pack) <= 8192
        assert [m["authority"] for m in pack["messages"]][:2] == ["required", "required"]
        assert any(m["authority"] == "retrieved" and "Silver Stag" in m["text"] for m in pack["messages"])
        assert (await call(client, "archive_read", mode="pack", pack={"conversations": [other["conversation_id"]], "queries": ["Silver Stag"], "max_bytes": 8192}))["pack_id"] == pack["pack_id"]  # fmt: skip
        short = await call(
            client, "archive_read", mode="pack", pack={"conversations": [conversation], "max_bytes": 4096}
        )
        assert not short["fits"] and short["min_max_bytes"] > 4096 and "messages" not in short

        restored = await call(
            client, "archive_write", op="restore", conversation_id=conversation, revision=2, base_revision=5
        )
        assert restored["receipts"][0]["revision"] == 2
        listed = await call(client, "archive_read", mode="revisions", conversation_id=conversation)
        assert [r["number"] for r in listed["revisions"] if r["head"]] == [2] and listed["revisions"][0]["number"] == 5
        tagged = await call(
            client, "archive_write", op="tags", conversation_id=conversation, tags=["Campaign", "rp"], tags_version=1
        )
        assert tagged["tags"] == ["campaign", "rp"] and tagged["tags_version"] == 2
        wrong = await call_error(client, "archive_write", op="delete", conversation_id=conversation, confirm="yes")
        assert "confirm" in wrong
        gone = await call(
            client,
            "archive_write",
            op="delete",
            conversation_id=other["conversation_id"],
            confirm=other["conversation_id"],
        )
        assert gone["revisions_deleted"] == 2

        emptied = await call(client, "archive_write", op="empty", vault="shelf", confirm="shelf")
        assert emptied["done"] and emptied["deleted_conversations"] == 1

    async with mcp_session(stack.mcp_url, headers={"Authorization": f"Bearer {reader}"}) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "archive_read" in names and "archive_write" not in names
        with pytest.raises(MCPError) as refused:
            await client.call_tool("archive_write", {"op": "create", "messages": [{"text": "no"}]})
        assert missing_scope_message("archive_write", "write", ["read"]) in str(refused.value)
        readable = await call(client, "archive_read", mode="pack", pack={"conversations": [f"{conversation}~2"]})
        assert readable["fits"] and len(readable["messages"]) == 2

    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as api:
        capabilities = (await api.get("/api/v1/capabilities", headers=bearer)).json()
        assert (
            capabilities["limits"]["max_receipt_bytes"] == CEILING and "2026-07-28" in capabilities["protocol_versions"]
        )
        base = f"/api/v1/vaults/{vault}/conversations"
        created = await api.post(
            base, json={"title": "API", "messages": [{"role": "user", "text": "hi"}]}, headers=bearer
        )
        assert created.status_code == 201 and created.json()["receipts"][0]["revision"] == 1
        made_id = created.json()["receipts"][0]["conversation_id"]
        stale = await api.post(
            f"{base}/{made_id}/append",
            json={"base_revision": 7, "messages": [{"role": "user", "text": "x"}]},
            headers=bearer,
        )
        assert stale.status_code == 409 and "stale" in stale.json()["detail"]
        upserted = await api.post(
            f"{base}/{made_id}/messages/upsert",
            json={"base_revision": 1, "messages": [{"key": "a", "role": "user", "text": "keyed"}], "verify": True},
            headers=bearer,
        )
        assert upserted.status_code == 200 and upserted.json()["receipts"][0]["readback"][0]["key"] == "a"
        packed = await api.post(
            f"/api/v1/vaults/{vault}/archive/packs",
            json={"conversations": [{"conversation_id": made_id}]},
            headers=bearer,
        )
        assert [m["text"] for m in packed.json()["messages"]] == ["hi", "keyed"]
        refused_write = await api.post(
            base, json={"messages": [{"role": "user", "text": "no"}]}, headers={"Authorization": f"Bearer {reader}"}
        )
        assert refused_write.status_code == 403
        assert (await api.post(base, json={"messages": []}, headers=bearer)).status_code == 422
        node = upserted.json()["receipts"][0]["readback"][0]["node_id"]
        edited = await api.post(
            f"{base}/{made_id}/messages/edit",
            json={"base_revision": 2, "edits": [{"node_id": node, "text": "keyed, edited"}]},
            headers=bearer,
        )
        assert edited.status_code == 200 and edited.json()["receipts"][0]["revision"] == 3
        replaced = await api.post(
            f"{base}/{made_id}/replace",
            json={"base_revision": 3, "messages": [{"role": "user", "text": "all new"}]},
            headers=bearer,
        )
        assert replaced.json()["receipts"][0]["message_count"] == 1
        restored = await api.post(f"{base}/{made_id}/restore", json={"revision": 3, "base_revision": 4}, headers=bearer)
        assert restored.json()["receipts"][0]["revision"] == 3
        tags = await api.put(f"{base}/{made_id}/tags", json={"tags": ["api"], "tags_version": 1}, headers=bearer)
        assert tags.json()["tags_version"] == 2
        archive = f"/api/v1/vaults/{vault}/archive"
        appended = {"conversation_id": made_id, "kind": "append", "base_revision": 3}
        committed = await api.post(
            f"{archive}/commit",
            json={"writes": [{**appended, "messages": [{"role": "user", "text": "c"}]}]},
            headers=bearer,
        )
        assert committed.status_code == 200 and committed.json()["receipts"][0]["revision"] == 5
        copy_body = {"target_vault": "shelf", "conversation_ids": [made_id]}
        copied = await api.post(f"{archive}/copy", json={**copy_body, "idempotency_key": "api-copy"}, headers=bearer)
        assert copied.json()["receipts"][0]["derived_from"]["revision"] == 5
        assert (await api.post(f"{archive}/copy", json=copy_body, headers=bearer)).status_code == 422
        deleted = await api.delete(f"{base}/{made_id}", params={"confirm": made_id}, headers=bearer)
        assert deleted.json()["revisions_deleted"] == 5
        step = await api.post("/api/v1/vaults/shelf/archive/empty", json={"confirm": "shelf"}, headers=bearer)
        assert step.json() == {
            "durable": True,
            "deleted_conversations": 1,
            "deleted_imports": 0,
            "remaining_conversations": 0,
            "remaining_imports": 0,
            "done": True,
        }
    await browser.http.aclose()
