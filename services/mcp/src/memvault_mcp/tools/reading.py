"""The read-only tools: recall, list, audit and explain memories."""

from __future__ import annotations

import re
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field, StrictInt

from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core.validation import Between
from memvault_core.vault_client import VaultClient
from memvault_core.wire import AUDIT_KINDS, AuditKindName, MemoryTypeName, StatusName
from memvault_mcp.tools import archive, fitting
from memvault_mcp.tools.arguments import CursorArg, MemoryIdArg, VaultArg, parse_time
from memvault_mcp.tools.registry import READ_ONLY, ask_vault, tool
from memvault_mcp.tools.sources import source_for_agent

TypesFilter = Annotated[list[MemoryTypeName], Field(description="Only these memory types.")]
TagsFilter = Annotated[list[str], Field(description="Only memories carrying all of these tags.")]


@tool(
    "Recall memories",
    "Search long-term memory shared by all of the owner's agents. Use it at the start of a task and "
    "before asking the owner something they may have said before. Returns the best matches with ids, "
    "scores (0 to 1, higher is closer; compare them only within one answer) and status, and a `mode`: "
    "'hybrid' matches by meaning and by words; 'keyword-only' means semantic search is off or down, so "
    "only memories sharing words with the query are found: retry with the exact words you expect. "
    "Weigh `warnings` before relying on a result (conflicts, superseded or stale memories, past review); results carry "
    "`may_conflict_with` / `conflicts_with`. `as_of` answers with what was valid at a past time. "
    "Proposed memories are not yet reviewed by the owner; follow `next_cursor` for more (and "
    "`conversation_cursor` for more conversation hits; a call with cursors continues only those lists). "
    "What passes 48 KiB is named in `omitted` with a read request.",
    READ_ONLY,
)
async def recall(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            description=(
                "What you want to know, in a few specific words or a question, e.g. 'which NAS model' or "
                f"'deploy target for memvault'. At most {limits.MAX_QUERY_CHARS} characters."
            ),
            json_schema_extra={"minLength": 1, "maxLength": limits.MAX_QUERY_CHARS},
        ),
    ],
    vault: VaultArg = "",
    limit: Annotated[
        StrictInt,
        Between(1, limits.MAX_RECALL_RESULTS),
        Field(description=f"Results per page; default {limits.DEFAULT_RECALL_RESULTS}."),
    ] = limits.DEFAULT_RECALL_RESULTS,
    cursor: CursorArg = "",
    types: TypesFilter | None = None,
    tags: TagsFilter | None = None,
    statuses: Annotated[
        list[StatusName],
        Field(description="Statuses to include; default proposed and active (with as_of: whatever was valid then)."),
    ]
    | None = None,
    as_of: Annotated[
        str,
        Field(
            description="Answer with what was valid at this past time (ISO 8601, e.g. '2026-03-01'), including "
            "memories superseded or invalidated since.",
            json_schema_extra={"maxLength": 40},
        ),
    ] = "",
    include_expired: Annotated[bool, Field(description="Also return memories past their expires_at.")] = False,
    conversations: Annotated[
        bool, Field(description="Also search archived conversations; their hits come in conversation_hits.")
    ] = False,
    conversation_cursor: Annotated[
        str, Field(description="conversation_cursor of the previous page.", max_length=4000)
    ] = "",
) -> dict[str, Any]:
    answer: dict[str, Any] = {"vault": vault, "mode": "", "results": [], "warnings": [], "next_cursor": None}
    # A call with cursors continues only the lists whose cursors it carries; the first call starts both.
    if cursor or not conversation_cursor:
        answer = await _recall_memories(
            ctx,
            vpb.RecallRequest(
                vault=vault,
                query=query,
                limit=limit,
                cursor=cursor,
                types=[wire.MEMORY_TYPES.value(t) for t in types or ()],
                tags=tags or [],
                statuses=[wire.MEMORY_STATUSES.value(s) for s in statuses or ()],
                as_of=parse_time(as_of, "as_of"),
                include_expired=include_expired,
            ),
        )
    if (conversation_cursor or (conversations and not cursor)) and not _archive_tags(tags or []):
        # A memory tag no conversation can carry (the archive's tags are narrower): no conversation has all of
        # them, so the archive is not asked (it would refuse the tag and the memories would be lost with it).
        answer["warnings"].append(
            "no conversation can carry these tags (a-z, 0-9, . _ : / -): conversations not searched"
        )
        answer["conversation_hits"] = []
        answer["conversation_cursor"] = None
    elif conversation_cursor or (conversations and not cursor):
        # Recall's tags mean all of them, for memories and conversations alike.
        room = fitting.CEILING - fitting.size(answer) - 2_000
        found = await archive.archive_search(
            ctx,
            query=query,
            limit=limit,
            tags=tags or [],
            tag_mode="all",
            cursor=conversation_cursor,
            max_bytes=min(max(room, fitting.MIN_SEARCH_BYTES), fitting.DEFAULT_SEARCH_BYTES),
            vault=vault,
        )
        answer["mode"] = answer["mode"] or found["mode"]
        answer["warnings"] += [w for w in found["warnings"] if w not in answer["warnings"]]
        answer["conversation_hits"] = found["hits"]
        answer["conversation_cursor"] = found["next_cursor"]
    return fitting.fit_recall(answer)


_ARCHIVE_TAG = re.compile(r"^[a-z0-9][a-z0-9._:/-]*$")
"""The archive's tag pattern (vault domain/archive.py), applied after trimming and lowercasing as the vault does."""


def _archive_tags(tags: list[str]) -> bool:
    """Whether every tag is one a conversation could carry."""
    return all(
        not t.strip() or (len(t.strip()) <= limits.MAX_TAG_CHARS and _ARCHIVE_TAG.match(t.strip().lower()))
        for t in tags
    )


async def _recall_memories(ctx: Context, request: vpb.RecallRequest) -> dict[str, Any]:
    response = await ask_vault(ctx, VaultClient.recall, request)
    flags: dict[str, list[str]] = {}
    for warning in response.memory_warnings:
        flags.setdefault(warning.memory_id, []).append(warning.kind)
    results = []
    for hit in response.hits:
        view = wire.memory_for_agent(hit.memory, hit.score)
        if hit.may_conflict_with:
            view["may_conflict_with"] = list(hit.may_conflict_with)
        if hit.conflicts_with:
            view["conflicts_with"] = list(hit.conflicts_with)
        if hit.memory.id in flags:
            view["warnings"] = flags[hit.memory.id]
        view["kind"] = "memory"
        results.append(view)
    return {
        "vault": response.vault,
        "mode": response.mode,
        "results": results,
        "warnings": [*response.warnings, *(w.message for w in response.memory_warnings)],
        "next_cursor": response.next_cursor or None,
    }


@tool(
    "List memories",
    "Page through memories newest first, optionally by status, type or tag; use recall to search.",
    READ_ONLY,
)
async def list_memories(
    ctx: Context,
    vault: VaultArg = "",
    statuses: Annotated[list[StatusName], Field(description="Only these statuses; default all.")] | None = None,
    types: TypesFilter | None = None,
    tags: TagsFilter | None = None,
    limit: Annotated[
        StrictInt,
        Between(1, limits.MAX_LIST_RESULTS),
        Field(description=f"Memories per page; default {limits.DEFAULT_LIST_RESULTS}."),
    ] = limits.DEFAULT_LIST_RESULTS,
    cursor: CursorArg = "",
) -> dict[str, Any]:
    request = vpb.ListMemoriesRequest(
        vault=vault,
        statuses=[wire.MEMORY_STATUSES.value(s) for s in statuses or ()],
        types=[wire.MEMORY_TYPES.value(t) for t in types or ()],
        tags=tags or [],
        limit=limit,
        cursor=cursor,
    )
    response = await ask_vault(ctx, VaultClient.list_memories, request)
    return {
        "vault": response.vault,
        "memories": [wire.memory_for_agent(m) for m in response.memories],
        "next_cursor": response.next_cursor or None,
    }


@tool(
    "Audit memories",
    "Find memories that need attention: expired, conflicting (same key and scope), possibly contradicting "
    "(similar and both active), past their review date, or flagged because something they depend on "
    "changed. Use it when the owner asks to tidy up, then supersede, invalidate or ask the owner.",
    READ_ONLY,
)
async def audit_memory(
    ctx: Context,
    kinds: Annotated[
        list[AuditKindName],
        Field(description=f"Only these problems ({', '.join(AUDIT_KINDS)}); default all."),
    ]
    | None = None,
    vault: VaultArg = "",
    limit: Annotated[
        StrictInt,
        Between(1, limits.MAX_AUDIT_RESULTS),
        Field(description=f"Findings per page; default {limits.DEFAULT_LIST_RESULTS}."),
    ] = limits.DEFAULT_LIST_RESULTS,
    cursor: CursorArg = "",
) -> dict[str, Any]:
    request = vpb.AuditMemoriesRequest(vault=vault, kinds=list(kinds or ()), limit=limit, cursor=cursor)
    response = await ask_vault(ctx, VaultClient.audit_memories, request)
    return {
        "vault": response.vault,
        "counts": dict(response.counts),
        "findings": [
            {
                "memory": wire.memory_for_agent(f.memory),
                "problems": list(f.kinds),
                **({"related": list(f.related)} if f.related else {}),
                "advice": f.message,
            }
            for f in response.findings
        ],
        "next_cursor": response.next_cursor or None,
    }


@tool(
    "Explain memory",
    "Everything about one memory: its state and whether recall returns it, every version with who changed "
    "what, what it depends on, what depends on it, similar memories, and what it replaced or was replaced by.",
    READ_ONLY,
)
async def explain_memory(ctx: Context, memory_id: MemoryIdArg, vault: VaultArg = "") -> dict[str, Any]:
    request = vpb.ExplainMemoryRequest(vault=vault, memory_id=memory_id)
    response = await ask_vault(ctx, VaultClient.explain_memory, request)
    tracked = await ask_vault(
        ctx, VaultClient.list_memory_sources, spb.ListMemorySourcesRequest(vault=vault, memory_id=memory_id)
    )
    related: dict[str, list[dict[str, Any]]] = {}
    for item in response.related:
        related.setdefault(item.relation, []).append(wire.memory_for_agent(item.memory))
    return {
        "vault": response.vault,
        "memory": wire.memory_in_full_for_agent(response.memory),
        "state": list(response.notes),
        "history": [
            {
                "version": h.version,
                "change": h.change,
                "by": h.actor,
                "at": wire.iso_for_agent(h, "at"),
                "status": wire.MEMORY_STATUSES.name_or(h.status, "active"),
                **({"changed": list(h.changed_fields)} if h.changed_fields else {}),
                **({"caused_by": h.cause} if h.cause else {}),
                **({"content": h.content} if h.content else {}),
            }
            for h in response.history
        ],
        "related": related,
        **({"missing": list(response.missing)} if response.missing else {}),
        **({"sources": [source_for_agent(s) for s in tracked.sources]} if tracked.sources else {}),
    }
