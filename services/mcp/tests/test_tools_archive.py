"""archive_read's answers at the 48 KiB ceiling, against a stand-in vault: a message larger than any
answer named as metadata and passed over (never the same read again), messages by node id or key,
the context around a hit and the list, each with `omitted` reads that continue exactly."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from mcp_helpers import Service

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.errors import Unavailable

CEILING = 48 * 1024
CONVERSATION = "c0ffee00-0000-4000-8000-000000000001"


def message(position: int, text_bytes: int) -> pb.ArchivedMessage:
    return pb.ArchivedMessage(
        id=f"m{position}", node_id=f"n{position}", role="user", text="x" * text_bytes, active=True, position=position
    )


def summary() -> pb.ConversationSummary:
    return pb.ConversationSummary(id=CONVERSATION, title="Big", has_title=True, head_revision=3)


async def test_a_message_over_the_ceiling_is_named_and_passed_over_so_paging_moves_on(service: Service) -> None:
    page = [message(5, 60_000), message(6, 30_000), message(7, 30_000)]
    service.vault.answer(
        "GetConversation", pb.GetConversationResponse(conversation=summary(), revision=2, messages=page)
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "archive_read", mode="conversation", conversation_id=CONVERSATION, after_position=4, vault="home"
        )
    assert agent.sent <= CEILING
    [note] = answer["oversized"]
    assert (note["message_id"], note["node_id"], note["position"], note["bytes"]) == ("m5", "n5", 5, 60_000)
    assert (
        note["read_whole"] == f"GET /api/v1/vaults/home/conversations/{CONVERSATION}/messages?revision=2&message_id=m5"
    )
    assert "x" * 100 not in json.dumps(note)
    assert [m["position"] for m in answer["messages"]] == [6]
    [omitted] = answer["omitted"]
    # Past the last message named or held, with the revision pinned: never position 5 again.
    assert omitted["count"] == 1
    assert omitted["read"] == {
        "tool": "archive_read",
        "mode": "conversation",
        "conversation_id": CONVERSATION,
        "revision": 2,
        "graph": False,
        "after_position": 6,
    }
    assert service.vault.requests("GetConversation")[0].start_position == 5
    assert service.vault.requests("ListVaults") == []  # a vault was named: nothing to look up

    # The oversized message alone on its page, no vault named: named, the link names the vault the read
    # used (the caller's only one here), and the next read starts after it.
    service.vault.answer(
        "GetConversation", pb.GetConversationResponse(conversation=summary(), revision=2, messages=page[:1])
    )
    service.vault.answer("ListVaults", vpb.ListVaultsResponse(vaults=[vpb.VaultInfo(name="work notes")]))
    async with service.agent() as agent:
        alone = await agent.call("archive_read", mode="conversation", conversation_id=CONVERSATION, limit=1)
    assert alone["messages"] == [] and alone["oversized"][0]["position"] == 5
    assert "/vaults/work%20notes/" in alone["oversized"][0]["read_whole"]
    assert alone["omitted"][0]["read"]["after_position"] == 5
    assert len(service.vault.requests("ListVaults")) == 1
    # Several vaults: the one named "default", as the vault chose it for the read.
    service.vault.answer(
        "ListVaults", vpb.ListVaultsResponse(vaults=[vpb.VaultInfo(name="work"), vpb.VaultInfo(name="default")])
    )
    async with service.agent() as agent:
        several = await agent.call("archive_read", mode="conversation", conversation_id=CONVERSATION, limit=1)
    assert "/vaults/default/" in several["oversized"][0]["read_whole"]
    # The lookup failing leaves the read as it was, with `<vault>` to fill in.
    service.vault.answer("ListVaults", Unavailable("the vault is restarting"))
    async with service.agent() as agent:
        failed = await agent.call("archive_read", mode="conversation", conversation_id=CONVERSATION, limit=1)
    assert "/vaults/<vault>/" in failed["oversized"][0]["read_whole"]
    assert failed["omitted"][0]["read"]["after_position"] == 5
    # Nothing oversized: nothing to look up.
    looked_up = len(service.vault.requests("ListVaults"))
    service.vault.answer(
        "GetConversation", pb.GetConversationResponse(conversation=summary(), revision=2, messages=page[1:])
    )
    async with service.agent() as agent:
        await agent.call("archive_read", mode="conversation", conversation_id=CONVERSATION)
    assert len(service.vault.requests("ListVaults")) == looked_up

    # Past the last message: an empty page, nothing omitted.
    service.vault.answer("GetConversation", pb.GetConversationResponse(conversation=summary(), revision=2))
    async with service.agent() as agent:
        end = await agent.call("archive_read", mode="conversation", conversation_id=CONVERSATION, after_position=5)
    assert end["messages"] == [] and "omitted" not in end and "oversized" not in end


async def test_the_read_whole_link_is_quoted_and_names_the_message_by_its_id(service: Service) -> None:
    # A Claude message without a uuid has a node id like "#3" ('#' would start a fragment); any id is quoted.
    big = pb.ArchivedMessage(id="m 5+#&", node_id="#3", role="user", text="x" * 60_000, active=True, position=3)
    service.vault.answer(
        "GetConversation", pb.GetConversationResponse(conversation=summary(), revision=2, messages=[big])
    )
    async with service.agent() as agent:
        answer = await agent.call("archive_read", mode="conversation", conversation_id=CONVERSATION, vault="home")
    link = answer["oversized"][0]["read_whole"]
    assert link == f"GET /api/v1/vaults/home/conversations/{CONVERSATION}/messages?revision=2&message_id=m+5%2B%23%26"
    assert "#" not in link and urllib.parse.parse_qs(urllib.parse.urlsplit(link[4:]).query) == {
        "revision": ["2"],
        "message_id": ["m 5+#&"],
    }


async def test_messages_by_node_id_key_or_id_fit_the_ceiling_and_name_the_rest_by_id(service: Service) -> None:
    found = [message(1, 20_000), message(4, 20_000), message(9, 20_000), message(12, 70_000)]
    service.vault.answer("ListVaults", vpb.ListVaultsResponse(vaults=[vpb.VaultInfo(name="home")]))
    service.vault.answer(
        "GetMessages",
        pb.GetMessagesResponse(
            conversation=summary(),
            revision=3,
            messages=found,
            missing_node_ids=["zz"],
            missing_keys=["k9"],
            missing_message_ids=["m99"],
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "archive_read",
            mode="messages",
            conversation_id=CONVERSATION,
            revision=3,
            nodes=["n1", "n4", "n9", "n12", "zz"],
            keys=["k9"],
            message_ids=["m99"],
        )
    [request] = service.vault.requests("GetMessages")
    assert (request.conversation_id, request.revision) == (CONVERSATION, 3)
    assert (list(request.node_ids), list(request.keys)) == (["n1", "n4", "n9", "n12", "zz"], ["k9"])
    assert list(request.message_ids) == ["m99"]
    assert agent.sent <= CEILING
    assert answer["revision"] == 3 and answer["missing"] == {"nodes": ["zz"], "keys": ["k9"], "message_ids": ["m99"]}
    assert [m["node_id"] for m in answer["messages"]] == ["n1", "n4"]
    [omitted] = answer["omitted"]
    assert omitted["read"] == {
        "tool": "archive_read",
        "mode": "messages",
        "conversation_id": CONVERSATION,
        "revision": 3,
        "message_ids": ["m9", "m12"],
    }


async def test_messages_the_vault_left_for_another_call_are_named_by_id(service: Service) -> None:
    service.vault.answer(
        "GetMessages",
        pb.GetMessagesResponse(
            conversation=summary(), revision=3, messages=[message(1, 100)], not_read_message_ids=["m7", "m8"]
        ),
    )
    async with service.agent() as agent:
        answer = await agent.call(
            "archive_read", mode="messages", conversation_id=CONVERSATION, message_ids=["m1", "m7", "m8"]
        )
    assert [m["message_id"] for m in answer["messages"]] == ["m1"]
    assert answer["omitted"] == [
        {
            "count": 2,
            "read": {
                "tool": "archive_read",
                "mode": "messages",
                "conversation_id": CONVERSATION,
                "revision": 3,
                "message_ids": ["m7", "m8"],
            },
        }
    ]


async def test_context_is_bounded_around_the_hit_and_names_both_sides_left_out(service: Service) -> None:
    # 21 messages of 4 KB around position 110 (active positions 100-120): about 90 KB.
    around = [message(100 + i, 4_000) for i in range(21)]
    service.vault.answer("ListVaults", vpb.ListVaultsResponse(vaults=[vpb.VaultInfo(name="home")]))
    service.vault.answer(
        "GetMessageContext",
        pb.GetMessageContextResponse(conversation=summary(), revision=3, messages=around, position=110),
    )
    async with service.agent() as agent:
        answer = await agent.call("archive_read", mode="context", message_id="m110", limit=10)
    assert CEILING - 5_000 < agent.sent <= CEILING
    positions = [m["position"] for m in answer["messages"]]
    assert 110 in positions and positions == list(range(positions[0], positions[-1] + 1))
    assert abs((110 - positions[0]) - (positions[-1] - 110)) <= 1
    before, after = answer["omitted"]
    assert before["read"]["mode"] == "conversation" and before["read"]["revision"] == 3
    assert (before["read"]["after_position"], before["read"]["limit"]) == (99, positions[0] - 100)
    assert (after["read"]["after_position"], after["read"]["limit"]) == (positions[-1], 120 - positions[-1])
    assert before["count"] + len(positions) + after["count"] == 21

    # The hit itself over the ceiling: named, its neighbours still read.
    around[10] = message(110, 60_000)
    service.vault.answer(
        "GetMessageContext",
        pb.GetMessageContextResponse(conversation=summary(), revision=3, messages=around[8:13], position=110),
    )
    async with service.agent() as agent:
        big = await agent.call("archive_read", mode="context", message_id="m110", limit=2)
    assert [n["position"] for n in big["oversized"]] == [110]
    assert [m["position"] for m in big["messages"]] == [108, 109, 111, 112] and "omitted" not in big


def listing(titles: list[str], start: int = 0) -> Any:
    """A stand-in ListConversations over conversations c<start>.. : a page of `limit` from the first, its
    cursor bound to that page size as the vault's is."""

    def answer(request: pb.ListConversationsRequest) -> pb.ListConversationsResponse:
        page = [
            pb.ConversationSummary(id=f"c{i}", title=titles[i], has_title=True, tags=["t"], head_revision=1)
            for i in range(start, len(titles))
        ][: request.limit]
        more = bool(page) and page[-1].id != f"c{len(titles) - 1}"
        return pb.ListConversationsResponse(conversations=page, next_cursor=f"after-{page[-1].id}" if more else "")

    return answer


async def test_the_list_fits_the_ceiling_and_continues_from_the_last_summary_kept(service: Service) -> None:
    service.vault.answer("ListConversations", listing(["😀" * 500] * 200))
    async with service.agent() as agent:
        answer = await agent.call("archive_read", mode="list", limit=100, tags_any=["t", "u"], cursor="page-2")
    assert CEILING - 3_000 < agent.sent <= CEILING
    kept = len(answer["conversations"])
    assert 10 < kept < 100 and answer["next_cursor"] is None
    first, again = service.vault.requests("ListConversations")
    assert (list(first.tags_any), list(first.tags_all), first.limit, first.cursor) == (["t", "u"], [], 100, "page-2")
    # The same page asked for just the summaries kept: its cursor continues after the last of them.
    assert (list(again.tags_any), again.limit, again.cursor) == (["t", "u"], kept, "page-2")
    assert [c["id"] for c in answer["conversations"]] == [f"c{i}" for i in range(kept)]
    [omitted] = answer["omitted"]
    assert omitted["count"] == 100 - kept
    assert omitted["read"] == {
        "tool": "archive_read",
        "mode": "list",
        "tags": [],
        "tags_any": ["t", "u"],
        "limit": kept,
        "cursor": f"after-c{kept - 1}",
    }


async def test_the_list_answers_from_the_page_its_cursor_belongs_to(service: Service) -> None:
    # c0 is deleted between the vault's two answers: the page asked again starts at c1.
    titles = ["😀" * 500] * 200
    calls = []

    def shifting(request: pb.ListConversationsRequest) -> pb.ListConversationsResponse:
        calls.append(request.limit)
        return listing(titles, start=0 if len(calls) == 1 else 1)(request)

    service.vault.answer("ListConversations", shifting)
    async with service.agent() as agent:
        answer = await agent.call("archive_read", mode="list", limit=100)
    kept = len(answer["conversations"])
    ids = [c["id"] for c in answer["conversations"]]
    # The summaries given are the ones the cursor continues after: nothing between them and it is skipped.
    assert ids == [f"c{i}" for i in range(1, kept + 1)]
    assert answer["omitted"][0]["read"]["cursor"] == f"after-{ids[-1]}"

    # Everything past the cursor deleted in between: no read that would start again from the top.
    titles = ["😀" * 500] * 100
    calls.clear()
    service.vault.answer(
        "ListConversations",
        lambda request: listing(titles)(request) if not calls.append(1) and len(calls) == 1 else listing([])(request),
    )
    async with service.agent() as agent:
        answer = await agent.call("archive_read", mode="list", limit=100)
    assert answer == {"next_cursor": None, "conversations": []}


async def test_a_list_that_fits_is_returned_whole_with_the_vaults_cursor(service: Service) -> None:
    service.vault.answer(
        "ListConversations",
        pb.ListConversationsResponse(conversations=[summary()], next_cursor="more"),
    )
    async with service.agent() as agent:
        answer = await agent.call("archive_read", mode="list", tags=["a"])
    assert answer == {
        "next_cursor": "more",
        "conversations": [
            {"id": CONVERSATION, "title": "Big", "tags": [], "head_revision": 3, "messages": 0, "source": ""}
        ],
    }
    [request] = service.vault.requests("ListConversations")
    assert (list(request.tags_all), list(request.tags_any)) == (["a"], [])
