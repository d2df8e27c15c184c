"""recall with conversations: the tag filter reaches the archive search, conversation hits page with their
own cursor, and the whole answer stays under the 48 KiB ceiling with what did not fit named in `omitted`."""

from __future__ import annotations

import pytest
from mcp_helpers import Service

from memvault.vault.v1 import archive_pb2 as apb
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_mcp.tools import fitting

pytestmark = pytest.mark.unit


def hit(number: int, content: str = "The NAS is a Synology DS920+.") -> vpb.RecallHit:
    memory = pb.Memory(id=f"m{number}", vault="home", content=content, type=pb.MEMORY_TYPE_FACT, version=1)
    return vpb.RecallHit(memory=memory, score=0.9 - number / 100)


def message(number: int, snippet: str = "the NAS sits under the stairs") -> apb.MessageHit:
    return apb.MessageHit(
        conversation_id="c1",
        revision=2,
        message_id=f"x{number}",
        role="user",
        snippet=snippet,
        score=0.5,
        position=number,
    )


async def test_recall_passes_tags_to_the_archive_and_pages_conversation_hits_with_their_own_cursor(
    service: Service,
) -> None:
    service.vault.answer("Recall", vpb.RecallResponse(vault="home", mode="hybrid", hits=[hit(1)], next_cursor="m-2"))
    service.vault.answer(
        "SearchMessages", apb.SearchMessagesResponse(hits=[message(1)], next_cursor="c-2", mode="hybrid")
    )
    async with service.agent() as agent:
        first = await agent.call("recall", query="nas", vault="home", tags=["homelab"], conversations=True, limit=5)
        memories_only = await agent.call("recall", query="nas", vault="home", conversations=True, cursor="m-2")
        hits_only = await agent.call("recall", query="nas", vault="home", conversation_cursor="c-2")
    assert [r["id"] for r in first["results"]] == ["m1"] and first["next_cursor"] == "m-2"
    assert [h["message_id"] for h in first["conversation_hits"]] == ["x1"]
    assert first["conversation_cursor"] == "c-2" and "omitted" not in first
    # The second page of memories does not repeat the first page's conversation hits, and the
    # conversation cursor continues the hits without reading memories again.
    assert "conversation_hits" not in memories_only
    assert hits_only["results"] == [] and hits_only["next_cursor"] is None
    assert [h["message_id"] for h in hits_only["conversation_hits"]] == ["x1"]
    assert [r.cursor for r in service.vault.requests("Recall")] == ["", "m-2"]
    searches = service.vault.requests("SearchMessages")
    assert [(s.cursor, list(s.tags_all), list(s.tags_any), s.limit) for s in searches] == [
        ("", ["homelab"], [], 5),
        ("c-2", [], [], 10),
    ]
    assert all(4096 <= s.max_bytes <= 32768 for s in searches)


async def test_recall_keeps_memories_and_conversation_hits_under_the_ceiling_and_names_the_rest(
    service: Service,
) -> None:
    # Fifty memories of 1,500 non-ASCII characters: a page the vault allows (64 KiB of text) but the
    # agent's answer must not carry whole.
    hits = [hit(n, "é" * 1_500) for n in range(50)]
    service.vault.answer("Recall", vpb.RecallResponse(vault="home", mode="hybrid", hits=hits, next_cursor="m-2"))
    service.vault.answer(
        "SearchMessages",
        apb.SearchMessagesResponse(hits=[message(n, "ü" * 300) for n in range(50)], next_cursor="c-2", mode="hybrid"),
    )
    async with service.agent() as agent:
        answer = await agent.call("recall", query="nas", vault="home", conversations=True, limit=50)
    assert agent.sent <= fitting.CEILING  # the text the agent got, as the SDK made it
    kept = [r["id"] for r in answer["results"]]
    assert 0 < len(kept) < 50 and kept == [f"m{n}" for n in range(len(kept))]
    omitted = answer["omitted"]
    memory_reads = [o["read"] for o in omitted if o["kind"] == "memory"]
    message_reads = [o["read"] for o in omitted if o["kind"] == "message"]
    assert memory_reads == [
        {"tool": "explain_memory", "memory_id": f"m{n}", "vault": "home"} for n in range(len(kept), 50)
    ]
    shown = len(answer["conversation_hits"])
    assert message_reads == [
        {"tool": "archive_read", "mode": "context", "message_id": f"x{n}", "revision": 2, "vault": "home"}
        for n in range(shown, 50)
    ]
    assert answer["conversation_cursor"] == "c-2" and answer["next_cursor"] == "m-2"


@pytest.mark.parametrize("text", ["a", "é", "𝄞"])
def test_fit_recall_fills_up_to_the_ceiling_and_never_past_it(text: str) -> None:
    for count in (1, 10, 50):
        results = [{"id": f"m{n}", "content": text * 3_900, "kind": "memory"} for n in range(count)]
        hits = [{"message_id": f"x{n}", "revision": 1, "snippet": text * 400} for n in range(count)]
        answer = fitting.fit_recall({"vault": "", "results": results, "conversation_hits": hits})
        assert fitting.size(answer) <= fitting.CEILING
        shown = len(answer["results"]) + len(answer["conversation_hits"])
        assert shown + len(answer.get("omitted", [])) == 2 * count
        if count == 1 and text != "𝄞":
            assert "omitted" not in answer
        if "omitted" in answer:
            # Nothing was cut that would have fitted: the first item cut, in place of its entry, passes the ceiling.
            first = answer["omitted"][0]
            key = "results" if first["kind"] == "memory" else "conversation_hits"
            pending = (results if key == "results" else hits)[len(answer[key])]
            swapped = {**answer, key: [*answer[key], pending], "omitted": answer["omitted"][1:]}
            assert fitting.size(swapped) > fitting.CEILING


@pytest.mark.parametrize("tag", ["c++", "über", "x" * 65])
async def test_recall_with_a_tag_no_conversation_can_carry_answers_the_memories_and_no_conversations(
    service: Service, tag: str
) -> None:
    # Memory tags take any non-space characters; the archive refuses these, so asking it would lose the memories.
    service.vault.answer("Recall", vpb.RecallResponse(vault="home", mode="hybrid", hits=[hit(1)]))
    service.vault.answer("SearchMessages", apb.SearchMessagesResponse(hits=[message(1)], mode="hybrid"))
    async with service.agent() as agent:
        answer = await agent.call("recall", query="nas", vault="home", tags=["Homelab", tag], conversations=True)
    assert [r["id"] for r in answer["results"]] == ["m1"]
    assert answer["conversation_hits"] == [] and answer["conversation_cursor"] is None
    assert any("conversations not searched" in w for w in answer["warnings"])
    assert service.vault.requests("SearchMessages") == []
    assert [list(r.tags) for r in service.vault.requests("Recall")] == [["Homelab", tag]]
