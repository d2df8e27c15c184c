"""The conversation archive as agents see it: search archived messages, and read conversations,
revisions and import progress with one `archive_read` whose `mode` says what to read. Answers stay
under 48 KiB (archive_fit); what does not fit is named in `omitted` as a ready-made read request."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core.archive_answers import message_json
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools.archive_fit import fit, fit_around, whole_read
from memvault_mcp.tools.archive_writing import PackIn, build_pack
from memvault_mcp.tools.arguments import VaultArg
from memvault_mcp.tools.registry import READ_ONLY, ask_vault, tool


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


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


async def _fit_linked(
    ctx: Context,
    vault: str,
    conversation_id: str,
    revision: int,
    fitting: Callable[[Callable[[dict[str, Any]], dict[str, Any]]], dict[str, Any]],
) -> dict[str, Any]:
    """`fitting(link)` fits an answer, naming each message too large for any answer with `link`'s
    `read_whole`. That link names the vault the read used: the one asked for or, with none named, the
    caller's default as the vault chose it (one named "default", else the only one), looked up only when
    a message was named; `<vault>` if that lookup fails."""
    vault = vault.strip()
    answer = fitting(whole_read(vault, conversation_id, revision))
    if vault or "oversized" not in answer:
        return answer
    try:
        listing = await ask_vault(ctx, VaultClient.list_vaults, vpb.ListVaultsRequest())
    except ToolError:
        return answer
    names = [v.name for v in listing.vaults]
    default = "default" if "default" in names else names[0] if len(names) == 1 else ""
    return fitting(whole_read(default, conversation_id, revision)) if default else answer


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
    "list: metadata, tags. conversation: messages at the head or a revision. "
    "messages: by node id, key or message id. "
    "context: 0-10 messages each side of message_id (default 3). batch: 1-20 conversations within "
    "max_bytes; loop on next_cursor. resolve: exact titles. "
    "pack: a pinned, deduplicated pack within max_tokens/max_bytes.",
    READ_ONLY,
)
async def archive_read(
    ctx: Context,
    mode: Annotated[
        Literal[
            "list", "conversation", "messages", "context", "batch", "resolve", "revisions", "import", "stats", "pack"
        ],
        Field(description="What to read."),
    ],
    conversation_id: Annotated[str, Field(description="conversation, messages, revisions.", max_length=64)] = "",
    revision: Annotated[int, Field(description="0: the head.", ge=0, le=limits.MAX_INT32)] = 0,
    graph: Annotated[bool, Field(description="Every branch.")] = False,
    after_position: Annotated[
        int, Field(description="After this position (-1: start).", ge=-1, le=limits.MAX_INT32 - 1)
    ] = -1,
    limit: Annotated[int, Field(description="Per page; context: either side.", ge=0, le=200)] = 0,
    cursor: Annotated[str, Field(description="next_cursor of the previous page.", max_length=4000)] = "",
    tags: Annotated[list[str], Field(description="list: with all these tags.", max_length=20)] = [],  # noqa: B006
    tags_any: Annotated[list[str], Field(description="list: with any of these.", max_length=20)] = [],  # noqa: B006
    import_id: Annotated[str, Field(description="mode=import.", max_length=64)] = "",
    message_id: Annotated[str, Field(description="context.", max_length=64)] = "",
    conversations: Annotated[
        list[str], Field(description="batch: ids (id@3: revision 3); resolve: titles.", max_length=20)
    ] = [],  # noqa: B006
    nodes: Annotated[list[str], Field(description="messages: node ids.", max_length=100)] = [],  # noqa: B006
    keys: Annotated[list[str], Field(description="messages: keys.", max_length=100)] = [],  # noqa: B006
    message_ids: Annotated[list[str], Field(description="messages: ids.", max_length=100)] = [],  # noqa: B006
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
        return await _list(ctx, vault, tags, tags_any, min(limit, 100), cursor)
    if mode == "messages":
        return await _by_ids(ctx, vault, conversation_id, revision, nodes, keys, message_ids)
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
    items = [message_json(m) | {"content_type": m.content_type, "active": m.active} for m in body.messages]
    answer = _header(body)
    more = {"mode": "conversation", "conversation_id": body.conversation.id, "revision": body.revision, "graph": graph}

    def omit(consumed: list[dict[str, Any]], rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Past the last message this answer holds or names: never the same read again.
        after = consumed[-1]["position"] if consumed else rest[0]["position"] - 1
        return [{"count": len(rest), "read": {"tool": "archive_read", **more, "after_position": after}}]

    base = answer
    answer = await _fit_linked(
        ctx, vault, body.conversation.id, body.revision, lambda link: fit({**base}, "messages", items, omit, link)
    )
    if "omitted" not in answer and len(body.messages) == request.limit:
        answer["omitted"] = [{"read": {"tool": "archive_read", **more, "after_position": body.messages[-1].position}}]
    return answer


def _header(body: pb.GetConversationResponse | pb.GetMessagesResponse) -> dict[str, Any]:
    return {
        "conversation_id": body.conversation.id,
        "title": body.conversation.title if body.conversation.has_title else None,
        "revision": body.revision,
        "head_revision": body.conversation.head_revision,
    }


async def _by_ids(
    ctx: Context,
    vault: str,
    conversation_id: str,
    revision: int,
    nodes: list[str],
    keys: list[str],
    message_ids: list[str],
) -> dict[str, Any]:
    """mode=messages: by node id, key or message id at a pinned revision; what does not fit is named by
    message id (exact, and short whatever the source's node ids are)."""
    request = pb.GetMessagesRequest(
        vault=vault,
        conversation_id=conversation_id,
        revision=revision,
        node_ids=nodes,
        keys=keys,
        message_ids=message_ids,
    )
    body = await ask_vault(ctx, VaultClient.get_messages, request)
    answer = _header(body)
    if body.missing_node_ids or body.missing_keys or body.missing_message_ids:
        answer["missing"] = {
            "nodes": list(body.missing_node_ids),
            "keys": list(body.missing_keys),
            "message_ids": list(body.missing_message_ids),
        }
    more = {"mode": "messages", "conversation_id": body.conversation.id, "revision": body.revision}

    def omit(_: list[dict[str, Any]], rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
        read = {"tool": "archive_read", **more, "message_ids": [m["message_id"] for m in rest]}
        return [{"count": len(rest), "read": read}]

    items = [message_json(m) | {"content_type": m.content_type} for m in body.messages]
    base = answer
    answer = await _fit_linked(
        ctx, vault, body.conversation.id, body.revision, lambda link: fit({**base}, "messages", items, omit, link)
    )
    if body.not_read_message_ids:  # past what one vault answer carries: the next read names them
        rest = list(body.not_read_message_ids)
        more_read = {"count": len(rest), "read": {"tool": "archive_read", **more, "message_ids": rest}}
        answer["omitted"] = [*answer.get("omitted", []), more_read]
    return answer


async def _list(
    ctx: Context, vault: str, tags: list[str], tags_any: list[str], limit: int, cursor: str
) -> dict[str, Any]:
    """mode=list: summaries while they fit; past the last one given, a cursor read names the rest."""
    filters = {"tags": tags, "tags_any": tags_any} if tags or tags_any else {}

    async def page(size: int) -> tuple[pb.ListConversationsResponse, dict[str, Any]]:
        request = pb.ListConversationsRequest(vault=vault, tags_all=tags, tags_any=tags_any, limit=size, cursor=cursor)
        listed = await ask_vault(ctx, VaultClient.list_conversations, request)
        items = [_summary(c) for c in listed.conversations]
        # The largest read `omitted` could name (a cursor the size of the one just given, doubled for safety).
        cursor_room = "c" * (2 * len(listed.next_cursor) + 400)
        room = {"tool": "archive_read", "mode": "list", **filters, "limit": len(items), "cursor": cursor_room}

        def omit(_: list[dict[str, Any]], rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{"count": len(rest), "read": room}]

        return listed, fit({"next_cursor": None}, "conversations", items, omit)

    listed, answer = await page(limit)
    asked = len(listed.conversations)
    if "omitted" not in answer:
        answer["next_cursor"] = listed.next_cursor or None
        return answer
    # The vault's list cursor is bound to its page size: the page is asked again for just the summaries
    # that fit, and the answer is that page, so the cursor it names continues right after its last one
    # (a conversation deleted or added in between cannot shift it).
    kept = asked
    while "omitted" in answer:
        if not 0 < len(answer["conversations"]) < kept:  # each page asked is smaller, so this ends
            raise ToolError(
                "the conversation list could not be fitted under the result ceiling; ask with a smaller limit"
            )
        kept = len(answer["conversations"])
        listed, answer = await page(kept)
    answer["next_cursor"] = None
    if listed.next_cursor:
        read = {"tool": "archive_read", "mode": "list", **filters, "limit": kept, "cursor": listed.next_cursor}
        answer["omitted"] = [{"count": asked - len(answer["conversations"]), "read": read}]
    return answer


def _summary(c: pb.ConversationSummary) -> dict[str, Any]:
    return {
        "id": c.id,
        "title": c.title if c.has_title else None,
        "tags": list(c.tags),
        "head_revision": c.head_revision,
        "messages": c.message_count,
        "source": c.source,
    }


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
        answer = {
            "conversation_id": found.conversation.id,
            "title": found.conversation.title if found.conversation.has_title else None,
            "revision": found.revision,
            "position": found.position,
        }
        items = [_message(m) | {"node_id": m.node_id} for m in found.messages]
        centre = next((i for i, m in enumerate(found.messages) if m.position == found.position), 0)
        more = {"mode": "conversation", "conversation_id": found.conversation.id, "revision": found.revision}
        return await _fit_linked(
            ctx,
            vault,
            found.conversation.id,
            found.revision,
            lambda link: fit_around({**answer}, items, centre, more, link),
        )
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
