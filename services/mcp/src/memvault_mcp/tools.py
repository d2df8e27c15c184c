"""The MCP tools. Each is a thin call to the vault: validate the shape, call, shape the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits
from memvault_core.errors import MemvaultError
from memvault_core.identity import HTTP_HEADER
from memvault_mcp.vault_client import VaultClient

MemoryTypeName = Literal["fact", "preference", "decision", "constraint", "assumption", "observation", "instruction"]
StatusName = Literal["proposed", "active", "superseded", "rejected", "invalidated"]
TrustName = Literal["stated", "inferred"]

VaultArg = Annotated[
    str,
    Field(
        description="Vault name. Leave empty for your default vault; list_memories and errors name the others.",
        json_schema_extra={"maxLength": 63},
    ),
]
ContentArg = Annotated[
    str,
    Field(
        description=(
            "The memory: one idea as full sentences that make sense on their own, e.g. "
            f"'The homelab runs k3s on three Intel NUCs.' At most {limits.MAX_CONTENT_CHARS} characters."
        ),
        json_schema_extra={"minLength": 1, "maxLength": limits.MAX_CONTENT_CHARS},
    ),
]
TypeArg = Annotated[
    MemoryTypeName,
    Field(description="What kind of memory this is; 'fact' when unsure. Decides how soon it is due for review."),
]
KeyArg = Annotated[
    str,
    Field(
        description=(
            "Optional: a stable name for a value that can change, e.g. 'editor' or 'deploy-target'. Two active "
            "memories with the same key and scope are a conflict."
        ),
        json_schema_extra={"maxLength": limits.MAX_KEY_CHARS},
    ),
]
ScopeArg = Annotated[
    str,
    Field(
        description="Optional, with key: where the value applies, e.g. 'project:memvault'.",
        json_schema_extra={"maxLength": limits.MAX_KEY_CHARS},
    ),
]
TagsArg = Annotated[
    list[str],
    Field(
        description=f"Optional labels without spaces, e.g. ['homelab', 'networking']; at most {limits.MAX_TAGS}.",
        json_schema_extra={"maxItems": limits.MAX_TAGS},
    ),
]
SourceArg = Annotated[
    str,
    Field(
        description="Optional: where this came from, e.g. 'conversation about the NAS, 2026-11-30'.",
        json_schema_extra={"maxLength": limits.MAX_SOURCE_CHARS},
    ),
]


class BulkItem(BaseModel):
    """One memory in a bulk import."""

    model_config = ConfigDict(extra="forbid")

    content: ContentArg
    type: TypeArg = "fact"
    key: KeyArg = ""
    scope: ScopeArg = ""
    tags: TagsArg = Field(default_factory=list)
    source: SourceArg = ""


_TYPE_TO_PB = {name: getattr(pb, f"MEMORY_TYPE_{name.upper()}") for name in get_args(MemoryTypeName)}
_STATUS_TO_PB = {name: getattr(pb, f"MEMORY_STATUS_{name.upper()}") for name in get_args(StatusName)}
_TRUST_TO_PB = {"stated": pb.TRUST_STATED, "inferred": pb.TRUST_INFERRED}
_TYPE_NAME = {v: k for k, v in _TYPE_TO_PB.items()}
_STATUS_NAME = {v: k for k, v in _STATUS_TO_PB.items()}
_OUTCOME_NAME = {
    vpb.WRITE_OUTCOME_STORED: "stored",
    vpb.WRITE_OUTCOME_DUPLICATE: "duplicate",
    vpb.WRITE_OUTCOME_EXCLUDED: "excluded",
    vpb.WRITE_OUTCOME_INVALID: "invalid",
}


def _iso(stamp: Timestamp, present: bool) -> str | None:
    return stamp.ToDatetime().isoformat() + "Z" if present else None


def memory_view(memory: pb.Memory, score: float | None = None) -> dict[str, Any]:
    """A compact memory for an agent: empty fields left out."""
    view: dict[str, Any] = {
        "id": memory.id,
        "content": memory.content,
        "type": _TYPE_NAME.get(memory.type, "fact"),
        "status": _STATUS_NAME.get(memory.status, "active"),
    }
    if score is not None:
        view["score"] = round(score, 4)
    for name in ("key", "scope", "source"):
        if value := getattr(memory, name):
            view[name] = value
    if memory.tags:
        view["tags"] = list(memory.tags)
    view["created_at"] = _iso(memory.created_at, memory.HasField("created_at"))
    if memory.HasField("review_after"):
        view["review_after"] = _iso(memory.review_after, True)
    return view


def _write_view(result: vpb.WriteResult) -> dict[str, Any]:
    view: dict[str, Any] = {"outcome": _OUTCOME_NAME.get(result.outcome, "stored")}
    if result.memory_id:
        view["id"] = result.memory_id
    if result.outcome != vpb.WRITE_OUTCOME_EXCLUDED:
        view["status"] = _STATUS_NAME.get(result.status, "active")
    if result.message:
        view["message"] = result.message
    return view


def _draft(
    content: str, type: str, key: str, scope: str, tags: list[str], source: str, trust: str = ""
) -> pb.MemoryDraft:
    return pb.MemoryDraft(
        content=content,
        type=_TYPE_TO_PB[type],
        key=key,
        scope=scope,
        tags=tags,
        source=source,
        trust=_TRUST_TO_PB.get(trust, pb.TRUST_UNSPECIFIED),
    )


def _identity(ctx: Context) -> str:
    headers = ctx.headers or {}
    token = headers.get(HTTP_HEADER.lower()) or headers.get(HTTP_HEADER)
    if not token:
        raise ToolError("this request did not come through the memvault gateway; connect to the gateway's /mcp URL")
    return token


def build_tools(client: VaultClient) -> list[Tool]:
    """Every tool, bound to one vault client."""

    async def call(ctx: Context, action: Callable[[str], Any]) -> Any:
        try:
            return await action(_identity(ctx))
        except MemvaultError as error:
            raise ToolError(error.message) from None

    async def get_operating_guide(ctx: Context, vault: VaultArg = "") -> dict[str, Any]:
        response = await call(ctx, lambda who: client.guide(who, vpb.GetOperatingGuideRequest(vault=vault)))
        listing = await call(ctx, client.list_vaults)
        caps = await call(ctx, client.capabilities)
        return {
            "vault": response.vault,
            "guide": response.text,
            "guide_version": response.version,
            "vaults": [{"name": v.name, "role": v.role, "approval_mode": v.approval_mode} for v in listing.vaults],
            "limits": {field.name: value for field, value in caps.limits.ListFields()},
        }

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
            int,
            Field(
                description=f"Results per page, 1 to {limits.MAX_RECALL_RESULTS}; default {limits.DEFAULT_RECALL_RESULTS}.",
                json_schema_extra={"minimum": 1, "maximum": limits.MAX_RECALL_RESULTS},
            ),
        ] = limits.DEFAULT_RECALL_RESULTS,
        cursor: Annotated[str, Field(description="next_cursor from the previous page, to get the next one.")] = "",
        types: Annotated[list[MemoryTypeName], Field(description="Only these memory types.")] | None = None,
        tags: Annotated[list[str], Field(description="Only memories carrying all of these tags.")] | None = None,
        statuses: Annotated[list[StatusName], Field(description="Statuses to include; default proposed and active.")]
        | None = None,
    ) -> dict[str, Any]:
        request = vpb.RecallRequest(
            vault=vault,
            query=query,
            limit=limit,
            cursor=cursor,
            types=[_TYPE_TO_PB[t] for t in types or ()],
            tags=tags or [],
            statuses=[_STATUS_TO_PB[s] for s in statuses or ()],
        )
        response = await call(ctx, lambda who: client.recall(who, request))
        return {
            "vault": response.vault,
            "mode": response.mode,
            "results": [memory_view(hit.memory, hit.score) for hit in response.hits],
            "warnings": list(response.warnings),
            "next_cursor": response.next_cursor or None,
        }

    async def write_one(ctx: Context, vault: str, draft: pb.MemoryDraft, propose: bool) -> dict[str, Any]:
        request = vpb.RememberRequest(vault=vault, memory=draft, propose=propose)
        response = await call(ctx, lambda who: client.remember(who, request))
        return {"vault": response.vault, **_write_view(response.result)}

    async def remember(
        ctx: Context,
        content: ContentArg,
        type: TypeArg = "fact",
        key: KeyArg = "",
        scope: ScopeArg = "",
        tags: TagsArg | None = None,
        source: SourceArg = "",
        vault: VaultArg = "",
    ) -> dict[str, Any]:
        draft = _draft(content, type, key, scope, tags or [], source, trust="stated")
        return await write_one(ctx, vault, draft, propose=False)

    async def propose_memory(
        ctx: Context,
        content: ContentArg,
        type: TypeArg = "fact",
        key: KeyArg = "",
        scope: ScopeArg = "",
        tags: TagsArg | None = None,
        source: SourceArg = "",
        vault: VaultArg = "",
    ) -> dict[str, Any]:
        draft = _draft(content, type, key, scope, tags or [], source, trust="inferred")
        return await write_one(ctx, vault, draft, propose=True)

    async def bulk_remember(
        ctx: Context,
        items: Annotated[
            list[BulkItem],
            Field(
                description=f"The memories to import, 1 to {limits.MAX_BULK_ITEMS} per call.",
                json_schema_extra={"minItems": 1, "maxItems": limits.MAX_BULK_ITEMS},
            ),
        ],
        source: SourceArg = "",
        vault: VaultArg = "",
    ) -> dict[str, Any]:
        request = vpb.BulkRememberRequest(
            vault=vault,
            source=source,
            items=[_draft(i.content, i.type, i.key, i.scope, i.tags, i.source) for i in items],
        )
        response = await call(ctx, lambda who: client.bulk_remember(who, request))
        outcomes = [_write_view(r) for r in response.results]
        summary: dict[str, int] = {}
        for outcome in outcomes:
            summary[outcome["outcome"]] = summary.get(outcome["outcome"], 0) + 1
        return {"vault": response.vault, "batch_id": response.batch_id, "summary": summary, "items": outcomes}

    async def list_memories(
        ctx: Context,
        vault: VaultArg = "",
        statuses: Annotated[list[StatusName], Field(description="Only these statuses; default all.")] | None = None,
        types: Annotated[list[MemoryTypeName], Field(description="Only these memory types.")] | None = None,
        tags: Annotated[list[str], Field(description="Only memories carrying all of these tags.")] | None = None,
        limit: Annotated[
            int,
            Field(
                description=f"Memories per page, 1 to {limits.MAX_LIST_RESULTS}; default {limits.DEFAULT_LIST_RESULTS}.",
                json_schema_extra={"minimum": 1, "maximum": limits.MAX_LIST_RESULTS},
            ),
        ] = limits.DEFAULT_LIST_RESULTS,
        cursor: Annotated[str, Field(description="next_cursor from the previous page, to get the next one.")] = "",
    ) -> dict[str, Any]:
        request = vpb.ListMemoriesRequest(
            vault=vault,
            statuses=[_STATUS_TO_PB[s] for s in statuses or ()],
            types=[_TYPE_TO_PB[t] for t in types or ()],
            tags=tags or [],
            limit=limit,
            cursor=cursor,
        )
        response = await call(ctx, lambda who: client.list_memories(who, request))
        return {
            "vault": response.vault,
            "memories": [memory_view(m) for m in response.memories],
            "next_cursor": response.next_cursor or None,
        }

    async def forget(
        ctx: Context,
        memory_id: Annotated[
            str,
            Field(
                description="The id of the memory to forget, from recall or list_memories.",
                json_schema_extra={"format": "uuid"},
            ),
        ],
        vault: VaultArg = "",
    ) -> dict[str, Any]:
        request = vpb.ForgetRequest(vault=vault, memory_id=memory_id)
        response = await call(ctx, lambda who: client.forget(who, request))
        return {"vault": response.vault, "forgotten": response.memory_id}

    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    additive = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    destructive = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    )
    specs: list[tuple[Callable[..., Any], str, str, ToolAnnotations]] = [
        (
            get_operating_guide,
            "Get operating guide",
            "Read this first in every conversation: the owner's rules for when to recall, what to save and what "
            "never to save, plus the vaults you can use and the size limits.",
            read_only,
        ),
        (
            recall,
            "Recall memories",
            "Search long-term memory shared by all of the owner's agents. Use it at the start of a task and "
            "before asking the owner something they may have said before. Returns the best matches with ids, "
            "scores and status, a `mode` ('hybrid' or 'keyword-only') and `warnings`; follow `next_cursor` for "
            "more. Proposed memories are not yet reviewed by the owner.",
            read_only,
        ),
        (
            remember,
            "Remember",
            "Save something the owner stated that will matter in later conversations: one idea per call, as "
            "full sentences. Recall first to avoid duplicates. Never save secrets. Depending on the vault's "
            "approval mode it is stored active or waits for review (see `status`). The same text is stored once.",
            additive,
        ),
        (
            propose_memory,
            "Propose memory",
            "Suggest a memory you inferred rather than heard stated; it always waits for the owner's review "
            "before it is trusted.",
            additive,
        ),
        (
            bulk_remember,
            "Import memories",
            f"Import up to {limits.MAX_BULK_ITEMS} memories at once, e.g. an app's saved memories. The import is "
            "one batch; each item reports 'stored', 'duplicate' (with the id of the existing memory) or "
            "'excluded' (forgotten earlier). Split larger imports into several calls.",
            additive,
        ),
        (
            list_memories,
            "List memories",
            "Page through memories newest first, optionally by status, type or tag; use recall to search.",
            read_only,
        ),
        (
            forget,
            "Forget memory",
            "Delete a memory for good, only when the owner asks. Its text is remembered as excluded, so the same "
            "text will not be stored again by any agent.",
            destructive,
        ),
    ]
    tools = []
    for fn, title, description, hints in specs:
        tool = Tool.from_function(fn, name=fn.__name__, title=title, description=description, annotations=hints)
        # A misspelt argument must fail loudly, not be dropped (see UnknownArgumentsMiddleware).
        tool.parameters["additionalProperties"] = False
        tools.append(tool)
    return tools
