"""The conversation archive as agents see it: search archived messages, and read conversations,
revisions and import progress with one `archive_read` whose `mode` says what to read. Answers stay
under RESULT_CEILING bytes; what does not fit is named in `omitted` as a ready-made read request."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core import limits, wire
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools.archive_writing import PackIn, build_pack
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


def _message(m: pb.ArchivedMessage) -> dict[str, Any]:
    """A message as batch and context reads return it (the vault counts budgets on this shape)."""
    return {
        "message_id": m.id,
        "position": m.position,
        "role": m.role,
        "content_type": m.content_type,
        "text": m.text,
        "created_at": _iso(wire.from_timestamp(m, "created_at")),
    }


@tool(
    "Search conversations",
    "Hybrid search (meaning and words) over archived conversations: compact references (conversation_id, "
    "revision, message_id, snippet, score); archive_read mode=context reads around one. Continue with "
    "next_cursor alone.",
    READ_ONLY,
)
async def archive_search(
    ctx: Context,
    query: Annotated[str, Field(description="What to find; omit with a cursor.", max_length=1000)] = "",
    limit: Annotated[int, Field(description="Hits, 1-50 (default 10).", ge=0, le=50)] = 0,
    tags: Annotated[list[str], Field(description="Only conversations with these tags.", max_length=20)] = [],  # noqa: B006
    tag_mode: Annotated[Literal["any", "all"], Field(description="Of the tags.")] = "any",
    cursor: Annotated[str, Field(description="next_cursor of the previous page.", max_length=4000)] = "",
    max_bytes: Annotated[int, Field(description="4096-49152 (default 32768).", ge=0, le=49_152)] = 0,
    vault: VaultArg = "",
) -> dict[str, Any]:
    request = pb.SearchMessagesRequest(
        vault=vault,
        query=query,
        limit=limit,
        cursor=cursor,
        max_bytes=max_bytes,
        tags_any=tags if tag_mode == "any" else [],
        tags_all=tags if tag_mode == "all" else [],
    )
    response = await ask_vault(ctx, VaultClient.search_messages, request)
    return {
        "mode": response.mode,
        "hits": [
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
        ],
        "warnings": list(response.warnings),
        "next_cursor": response.next_cursor or None,
        "used_bytes": response.used_bytes,
    }


@tool(
    "Read conversations",
    "Read the archive. list: metadata, tags. conversation: messages at the head or a pinned revision. "
    "context: up to 10 messages either side of message_id (default 3). batch: 1-20 conversations within "
    "max_bytes; loop on next_cursor alone. resolve: exact titles. revisions, import, stats (counts, index). "
    "pack: a pinned, deduplicated context pack fitted to max_tokens/max_bytes.",
    READ_ONLY,
)
async def archive_read(
    ctx: Context,
    mode: Annotated[
        Literal["list", "conversation", "context", "batch", "resolve", "revisions", "import", "stats", "pack"],
        Field(description="What to read."),
    ],
    conversation_id: Annotated[str, Field(description="For conversation and revisions.", max_length=64)] = "",
    revision: Annotated[int, Field(description="Pin a revision (0: the head).", ge=0, le=limits.MAX_INT32)] = 0,
    graph: Annotated[bool, Field(description="Every branch.")] = False,
    after_position: Annotated[
        int, Field(description="After this position (-1: start).", ge=-1, le=limits.MAX_INT32 - 1)
    ] = -1,
    limit: Annotated[int, Field(description="Per page; context: either side.", ge=0, le=200)] = 0,
    cursor: Annotated[str, Field(description="next_cursor of the previous page.", max_length=4000)] = "",
    tags: Annotated[list[str], Field(description="list: only with all these tags.", max_length=20)] = [],  # noqa: B006
    import_id: Annotated[str, Field(description="For mode=import.", max_length=64)] = "",
    message_id: Annotated[str, Field(description="For context.", max_length=64)] = "",
    conversations: Annotated[
        list[str], Field(description="batch: ids (id@3 pins revision 3); resolve: titles.", max_length=20)
    ] = [],  # noqa: B006
    max_bytes: Annotated[int, Field(description="4096-49152 (default 32768).", ge=0, le=49_152)] = 0,
    pack: PackIn | None = None,
    vault: VaultArg = "",
) -> dict[str, Any]:
    if mode == "pack":
        if pack is None:
            raise ToolError("mode=pack needs pack: {conversations: [...], queries: [...]}")
        return await build_pack(ctx, vault, pack)
    if mode in ("context", "batch", "resolve", "stats"):
        around = 3 if limit == 0 and mode == "context" else limit
        return await _read_more(ctx, mode, vault, message_id, revision, around, conversations, max_bytes, cursor)
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
            "key": m.key or None,
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


def _pin(selector: str) -> pb.ConversationReadRequest:
    conversation_id, _, revision = selector.partition("@")
    if revision and not revision.isdigit():
        raise ToolError(f"{selector!r}: write a conversation id, or id@revision with a revision number")
    return pb.ConversationReadRequest(conversation_id=conversation_id, revision=int(revision or 0))


async def _read_more(
    ctx: Context,
    mode: str,
    vault: str,
    message_id: str,
    revision: int,
    around: int,
    conversations: list[str],
    max_bytes: int,
    cursor: str,
) -> dict[str, Any]:
    """archive_read's modes for agents that searched: context, batch, resolve and stats."""
    if mode == "context":
        request = pb.GetMessageContextRequest(
            vault=vault, message_id=message_id, revision=revision, before=around, after=around
        )
        found = await ask_vault(ctx, VaultClient.get_message_context, request)
        return {
            "conversation_id": found.conversation.id,
            "title": found.conversation.title if found.conversation.has_title else None,
            "revision": found.revision,
            "position": found.position,
            "messages": [_message(m) for m in found.messages],
        }
    if mode == "batch":
        batch = pb.ReadConversationsRequest(
            vault=vault, requests=[_pin(s) for s in conversations], cursor=cursor, max_bytes=max_bytes
        )
        page = await ask_vault(ctx, VaultClient.read_conversations, batch)
        return {
            "results": [
                {
                    "request_index": r.request_index,
                    "conversation_id": r.conversation_id,
                    "revision": r.revision,
                    "title": r.title if r.has_title else None,
                    "message_count": r.message_count,
                    "complete": r.complete,
                    "error": r.error or None,
                    "messages": [_message(m) for m in r.messages],
                    "oversized": [
                        {"message_id": o.message_id, "position": o.position, "bytes": o.bytes} for o in r.oversized
                    ],
                }
                for r in page.results
            ],
            "completed": page.completed,
            "remaining": page.remaining,
            "next_cursor": page.next_cursor or None,
            "used_bytes": page.used_bytes,
            "max_bytes": page.max_bytes,
        }
    if mode == "resolve":
        resolved = await ask_vault(
            ctx, VaultClient.resolve_conversations, pb.ResolveConversationsRequest(vault=vault, titles=conversations)
        )
        return {
            "resolved": [
                {
                    "title": r.title,
                    "conversations": [
                        {"id": c.id, "head_revision": c.head_revision, "tags": list(c.tags)} for c in r.conversations
                    ],
                }
                for r in resolved.resolved
            ]
        }
    stats = await ask_vault(ctx, VaultClient.get_archive_stats, pb.GetArchiveStatsRequest(vault=vault))
    return {
        "conversations": stats.conversations,
        "revisions": stats.revisions,
        "messages": stats.messages,
        "index": {
            "indexed": stats.indexed,
            "pending": stats.pending,
            "failed": stats.failed,
            "model": stats.index_model or None,
            "last_errors": list(stats.last_errors),
        },
        "imports": stats.imports,
        "imports_running": stats.imports_running,
    }
