"""/api/v1 archive reads in-process against a real vault and Postgres: messages by source node id or
key at a pinned revision (whole, over the MCP ceiling too), and the list filtered by every or any tag;
both in the API reference."""

from __future__ import annotations

import uuid

import pytest
from gateway_helpers import StartGateway
from test_dashboard_http import signed_in

from memvault_vault.database import Database as VaultDatabase

pytestmark = pytest.mark.integration


async def test_messages_by_node_id_or_key_at_a_pinned_revision_whole(
    start_gateway: StartGateway, vault_store: VaultDatabase
) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    stranger, stranger_vault = await signed_in(gateway)
    vault = "reads-" + uuid.uuid4().hex[:8]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    big = "y" * 60_000  # over the MCP answers' 48 KiB: this read returns it whole
    created = await owner.api(
        "POST",
        f"/api/v1/vaults/{vault}/conversations",
        json={"title": "Lookups", "messages": [{"role": "user", "text": "first"}, {"role": "assistant", "text": big}]},
    )
    assert created.status_code == 201, created.text
    conversation_id = created.json()["receipts"][0]["conversation_id"]
    upserted = await owner.api(
        "POST",
        f"/api/v1/vaults/{vault}/conversations/{conversation_id}/messages/upsert",
        json={"base_revision": 1, "messages": [{"key": "note/a", "role": "user", "text": "keyed"}]},
    )
    assert upserted.status_code == 200, upserted.text
    nodes = [
        r["node_id"]
        for r in await vault_store.pool.fetch(
            "SELECT m.node_id FROM archive_revision_message rm JOIN archive_message m ON m.id = rm.message_id"
            " WHERE rm.conversation_id = $1 AND rm.revision = 1 ORDER BY rm.position",
            uuid.UUID(conversation_id),
        )
    ]

    url = f"/api/v1/vaults/{vault}/conversations/{conversation_id}/messages"
    head = await owner.api("GET", url, params=[("node_id", nodes[1]), ("node_id", "nope"), ("key", "note/a")])
    assert head.status_code == 200, head.text
    body = head.json()
    assert (body["revision"], body["head_revision"], body["title"]) == (2, 2, "Lookups")
    assert [(m["text"], m["key"]) for m in body["messages"]] == [(big, None), ("keyed", "note/a")]
    assert body["missing"] == {"node_ids": ["nope"], "keys": [], "message_ids": []}
    pinned = (await owner.api("GET", url, params=[("revision", "1"), ("key", "note/a"), ("node_id", nodes[0])])).json()
    assert pinned["revision"] == 1 and [m["text"] for m in pinned["messages"]] == ["first"]
    assert pinned["missing"] == {"node_ids": [], "keys": ["note/a"], "message_ids": []}

    # By the archive's own message ids, repeated; an unknown one is named.
    big_id, unknown = body["messages"][0]["message_id"], str(uuid.uuid4())
    by_id = (await owner.api("GET", url, params=[("message_id", big_id), ("message_id", unknown)])).json()
    assert [m["text"] for m in by_id["messages"]] == [big]
    assert by_id["missing"] == {"node_ids": [], "keys": [], "message_ids": [unknown]} and by_id["not_read"] == []

    nothing = await owner.api("GET", url)
    assert nothing.status_code == 400 and "node_ids, keys or message_ids" in nothing.json()["detail"]
    many = await owner.api("GET", url, params=[("node_id", f"n{i}") for i in range(101)])
    assert many.status_code == 422
    assert (await owner.api("GET", url, params=[("revision", "9"), ("key", "k")])).status_code == 404
    foreign = await stranger.api(
        "GET", f"/api/v1/vaults/{stranger_vault}/conversations/{conversation_id}/messages", params={"key": "k"}
    )
    assert foreign.status_code == 404

    reference = (await owner.api("GET", "/api/v1/openapi.json")).json()
    route = reference["paths"]["/api/v1/vaults/{vault}/conversations/{conversation_id}/messages"]["get"]
    assert {p["name"] for p in route["parameters"]} >= {"revision", "node_id", "key", "message_id"}
    listing = reference["paths"]["/api/v1/vaults/{vault}/conversations"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {"tag", "tags_any"}


async def test_the_list_filters_by_every_tag_or_by_any_tag(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    vault = "tags-" + uuid.uuid4().hex[:8]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    for title, tags in (("garden", ["home", "plants"]), ("boiler", ["home"]), ("tax", ["money"]), ("bare", [])):
        made = await owner.api(
            "POST",
            f"/api/v1/vaults/{vault}/conversations",
            json={"title": title, "tags": tags, "messages": [{"role": "user", "text": title}]},
        )
        assert made.status_code == 201, made.text

    async def titles(*params: tuple[str, str]) -> set[str]:
        answer = await owner.api("GET", f"/api/v1/vaults/{vault}/conversations", params=list(params))
        assert answer.status_code == 200, answer.text
        return {c["title"] for c in answer.json()["conversations"]}

    assert await titles(("tag", "home"), ("tag", "plants")) == {"garden"}
    assert await titles(("tags_any", "plants"), ("tags_any", "money")) == {"garden", "tax"}
    assert await titles(("tag", "home"), ("tags_any", "plants"), ("tags_any", "money")) == {"garden"}
    assert await titles(("tags_any", "HOME")) == {"garden", "boiler"}
    assert await titles() == {"garden", "boiler", "tax", "bare"}
