"""The conversation archive as agents see it: search archived messages, and read conversations,
revisions and import progress with one `archive_read` whose `mode` says what to read. Answers stay
under RESULT_CEILING bytes; what does not fit is named in `omitted` as a ready-made read request."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core import limits, wire
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools.arguments import VaultArg
from memvault_mcp.tools.registry import READ_ONLY, ask_vault, tool

RESULT_CEILING = 48 * 1024
"""Bytes of one archive tool result; the rest is named in `omitted`."""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _fit(answer: dict[str, Any], key: str, items: list[dict[str, Any]], more: dict[str, Any] | None) -> dict[str, Any]:
    """Admit whole items while the answer stays under the ceiling; name the rest in `omitted`."""
    kept: list[dict[str, Any]] = []
    used = _size(answer) + 200
    for index, item in enumerate(items):
        size = _size(item) + 1
        if used + size > RESULT_CEILING:
            rest = items[index:]
            answer["omitted"] = [
                {
                    "count": len(rest),
                    "read": {"tool": "archive_read", **(more or {}), "after_position": rest[0].get("position", 0) - 1},
                }
            ]
            break
        kept.append(item)
        used += size
    answer[key] = kept
    return answer


@tool(
    "Search conversations",
    "Full-text search over archived conversations (imported ChatGPT exports and saved transcripts). "
    "Returns references: conversation_id, revision, message_id, position, snippet, score. Read around a hit "
    "with archive_read mode=conversation.",
    READ_ONLY,
)
async def archive_search(
    ctx: Context,
    query: Annotated[str, Field(description="Words to find.", min_length=1, max_length=1000)],
    limit: Annotated[int, Field(description="Hits, 1-50 (default 10).", ge=0, le=50)] = 0,
    tags: Annotated[list[str], Field(description="Only conversations with any of these tags.", max_length=20)] = [],  # noqa: B006
    vault: VaultArg = "",
) -> dict[str, Any]:
    request = pb.SearchMessagesRequest(vault=vault, query=query, limit=limit, tags_any=tags)
    response = await ask_vault(ctx, VaultClient.search_messages, request)
    hits = [
        {
            "kind": "message",
            "conversation_id": h.conversation_id,
            "title": h.title or None,
            "revision": h.revision,
            "message_id": h.message_id,
            "position": h.position,
            "role": h.role,
            "snippet": h.snippet,
            "score": round(h.score, 4),
        }
        for h in response.hits
    ]
    return _fit({}, "hits", hits, None)


@tool(
    "Read conversations",
    "Read the archive. mode=list: conversations (metadata and tags, paged by cursor). mode=conversation: "
    "one conversation's messages (active timeline, or every branch with graph=true) at the head or a pinned "
    "revision, from after_position. mode=revisions: its revisions, newest first. mode=import: an import's "
    "progress and failures.",
    READ_ONLY,
)
async def archive_read(
    ctx: Context,
    mode: Annotated[Literal["list", "conversation", "revisions", "import"], Field(description="What to read.")],
    conversation_id: Annotated[str, Field(description="For conversation and revisions.", max_length=64)] = "",
    revision: Annotated[int, Field(description="Pin a revision (0: the head).", ge=0, le=limits.MAX_INT32)] = 0,
    graph: Annotated[bool, Field(description="Every branch, not only the active timeline.")] = False,
    after_position: Annotated[
        int, Field(description="Messages after this position (-1: from the start).", ge=-1, le=limits.MAX_INT32 - 1)
    ] = -1,
    limit: Annotated[int, Field(description="Items per page (default 20 or 50).", ge=0, le=200)] = 0,
    cursor: Annotated[str, Field(description="next_cursor of the previous page (mode=list).", max_length=2000)] = "",
    tags: Annotated[
        list[str], Field(description="mode=list: only conversations with all of these tags.", max_length=20)
    ] = [],  # noqa: B006
    import_id: Annotated[str, Field(description="For mode=import.", max_length=64)] = "",
    vault: VaultArg = "",
) -> dict[str, Any]:
    if mode == "list":
        listed = await ask_vault(
            ctx,
            VaultClient.list_conversations,
            pb.ListConversationsRequest(vault=vault, tags_all=tags, limit=min(limit, 100), cursor=cursor),
        )
        items = [
            {
                "id": c.id,
                "title": c.title if c.has_title else None,
                "tags": list(c.tags),
                "head_revision": c.head_revision,
                "messages": c.message_count,
                "source": c.source,
            }
            for c in listed.conversations
        ]
        return {"conversations": items, "next_cursor": listed.next_cursor or None}
    if mode == "revisions":
        revisions = await ask_vault(
            ctx,
            VaultClient.list_revisions,
            pb.ListRevisionsRequest(vault=vault, conversation_id=conversation_id, limit=min(limit, 100), cursor=cursor),
        )
        return {
            "revisions": [
                {
                    "number": r.number,
                    "parent": r.parent or None,
                    "kind": r.kind,
                    "messages": r.message_count,
                    "head": r.head,
                }
                for r in revisions.revisions
            ],
            "next_cursor": revisions.next_cursor or None,
        }
    if mode == "import":
        status = getattr(
            await ask_vault(ctx, VaultClient.get_import, pb.GetImportRequest(vault=vault, import_id=import_id)),
            "import",
        )
        return {
            "id": status.id,
            "state": status.state,
            "total": status.total,
            "done": status.done,
            "remaining": status.remaining,
            "duplicates": status.duplicates,
            "failed": status.failed,
            "failures": [{"conversation_id": f.conversation_id, "error": f.error} for f in status.failures],
        }
    # mode == "conversation": page by position; `omitted` names the next read with the revision pinned.
    request = pb.GetConversationRequest(
        vault=vault,
        conversation_id=conversation_id,
        revision=revision,
        view=pb.CONVERSATION_VIEW_GRAPH if graph else pb.CONVERSATION_VIEW_ACTIVE,
        limit=min(limit or 50, 200),
        start_position=after_position + 1,
    )
    body = await ask_vault(ctx, VaultClient.get_conversation, request)
    messages = list(body.messages)
    items = [
        {
            "position": m.position,
            "message_id": m.id,
            "node_id": m.node_id,
            "role": m.role,
            "content_type": m.content_type,
            "text": m.text,
            "created_at": _iso(wire.from_timestamp(m, "created_at")),
            "active": m.active,
        }
        for m in messages
    ]
    answer: dict[str, Any] = {
        "conversation_id": body.conversation.id,
        "title": body.conversation.title if body.conversation.has_title else None,
        "revision": body.revision,
        "head_revision": body.conversation.head_revision,
    }
    more = {"mode": "conversation", "conversation_id": body.conversation.id, "revision": body.revision, "graph": graph}
    answer = _fit(answer, "messages", items, more)
    if "omitted" not in answer and len(body.messages) == request.limit:
        answer["omitted"] = [{"read": {"tool": "archive_read", **more, "after_position": body.messages[-1].position}}]
    return answer
