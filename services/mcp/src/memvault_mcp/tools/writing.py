"""The tools that add memories: remember, propose_memory and bulk_remember."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core.vault_client import VaultClient
from memvault_core.wire import MemoryTypeName
from memvault_mcp.tools.arguments import (
    BulkEntry,
    BulkItem,
    ConfidenceArg,
    ContentArg,
    DateArg,
    DependsOnArg,
    KeyArg,
    ReviewAfterArg,
    ScopeArg,
    SourceArg,
    TagsArg,
    TypeArg,
    VaultArg,
    draft,
    source_date,
)
from memvault_mcp.tools.registry import ADDITIVE, ask_vault, tool


async def _write_one(ctx: Context, vault: str, memory: pb.MemoryDraft, propose: bool) -> dict[str, Any]:
    request = vpb.RememberRequest(vault=vault, memory=memory, propose=propose)
    response = await ask_vault(ctx, VaultClient.remember, request)
    return {
        "vault": response.vault,
        **wire.write_result_for_agent(response.result),
        **wire.duplicate_check_for_agent(response.duplicate_check, response.notices),
    }


@tool(
    "Remember",
    "Save something the owner stated that will matter in later conversations: one idea per call, as "
    "full sentences. Recall first. Never save secrets (they are refused). Depending on the vault's "
    "approval mode it is stored active or waits for review (see `status`). A repeat of a stored memory "
    "is skipped ('duplicate', with the `id` of the stored one); one that may update or contradict a stored memory "
    "is stored and linked ('similar', with `similar_to`). Give `key` (and `scope`) for a value that can "
    "change, `depends_on` for memories it relies on, `expires_at` for something temporary.",
    ADDITIVE,
)
async def remember(
    ctx: Context,
    content: ContentArg,
    type: TypeArg = "fact",
    key: KeyArg = "",
    scope: ScopeArg = "",
    tags: TagsArg | None = None,
    source: SourceArg = "",
    vault: VaultArg = "",
    confidence: ConfidenceArg = 0.0,
    valid_from: DateArg = "",
    valid_to: DateArg = "",
    review_after: ReviewAfterArg = "",
    expires_at: DateArg = "",
    depends_on: DependsOnArg | None = None,
    metadata: Annotated[dict[str, Any], Field(description="Free-form JSON object.")] | None = None,
) -> dict[str, Any]:
    memory = draft(
        content,
        type,
        key,
        scope,
        tags or [],
        source,
        trust="stated",
        confidence=confidence,
        valid_from=valid_from,
        valid_to=valid_to,
        review_after=review_after,
        expires_at=expires_at,
        depends_on=depends_on,
    )
    if metadata:
        encoded = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
        if len(encoded.encode()) > limits.MAX_METADATA_BYTES:
            raise ToolError(f"metadata is larger than {limits.MAX_METADATA_BYTES} bytes of JSON")
        memory.metadata_json = encoded
    return await _write_one(ctx, vault, memory, propose=False)


@tool(
    "Propose memory",
    "Suggest a memory you inferred rather than heard stated; it always waits for the owner's review "
    "before it is trusted.",
    ADDITIVE,
)
async def propose_memory(
    ctx: Context,
    content: ContentArg,
    type: TypeArg = "fact",
    key: KeyArg = "",
    scope: ScopeArg = "",
    tags: TagsArg | None = None,
    source: SourceArg = "",
    vault: VaultArg = "",
    confidence: ConfidenceArg = 0.0,
    valid_from: DateArg = "",
    valid_to: DateArg = "",
    review_after: ReviewAfterArg = "",
    expires_at: DateArg = "",
    depends_on: DependsOnArg | None = None,
) -> dict[str, Any]:
    memory = draft(
        content,
        type,
        key,
        scope,
        tags or [],
        source,
        trust="inferred",
        confidence=confidence,
        valid_from=valid_from,
        valid_to=valid_to,
        review_after=review_after,
        expires_at=expires_at,
        depends_on=depends_on,
    )
    return await _write_one(ctx, vault, memory, propose=True)


@tool(
    "Import memories",
    f"Import up to {limits.MAX_BULK_ITEMS} memories at once, e.g. an app's saved memories, as a list of "
    "items (objects, or plain strings of content; `source_date` per item says when it was stated) or as "
    "markdown/plain text to split. The import is one batch the owner can undo; each item "
    "(by its `index`) reports 'stored', 'similar' (stored, linked to `similar_to`), 'duplicate' (with the `id` it repeats), "
    "'excluded' (forgotten or rejected earlier), 'secret' (refused) or 'invalid' (with the reason). "
    "Split larger imports into several calls.",
    ADDITIVE,
)
async def bulk_remember(
    ctx: Context,
    items: Annotated[
        list[BulkEntry],
        Field(
            description=f"The memories to import, 1 to {limits.MAX_BULK_ITEMS} per call; or send text instead.",
            json_schema_extra={"maxItems": limits.MAX_BULK_ITEMS},
        ),
    ]
    | None = None,
    text: Annotated[
        str,
        Field(
            description=(
                "Instead of items: markdown or plain text, split into one memory per bullet line, per "
                "paragraph, or per section between '---' lines (headings are skipped)."
            ),
            json_schema_extra={"maxLength": limits.MAX_IMPORT_TEXT_CHARS},
        ),
    ] = "",
    type: Annotated[MemoryTypeName, Field(description="With text: the type of every memory.")] = "fact",
    sequence: Annotated[
        bool,
        Field(
            description=(
                "True when the items are consecutive parts of one conversation or document, in order (a "
                "chat transcript, a long note split up): each is then searched together with the one before "
                "it. Leave false for independent memories."
            )
        ),
    ] = False,
    source: SourceArg = "",
    vault: VaultArg = "",
) -> dict[str, Any]:
    if not items and not text.strip():
        raise ToolError("send items (a list of memories) or text (markdown or plain text to split)")
    entries = [BulkItem(content=i) if isinstance(i, str) else i for i in items or ()]
    drafts = [
        draft(
            i.content,
            i.type,
            i.key,
            i.scope,
            i.tags,
            i.source,
            valid_from=source_date(i.source_date, f"items[{n}].source_date"),
        )
        for n, i in enumerate(entries)
    ]
    request = vpb.BulkRememberRequest(
        vault=vault,
        source=source,
        items=drafts,
        text=text,
        text_type=wire.MEMORY_TYPES.value(type),
        sequence=sequence,
    )
    response = await ask_vault(ctx, VaultClient.bulk_remember, request)
    # Each outcome names its item's position (in `items`, or among the pieces `text` was split into).
    outcomes = [{"index": r.index, **wire.write_result_for_agent(r)} for r in response.results]
    summary: dict[str, int] = {}
    for outcome in outcomes:
        summary[outcome["outcome"]] = summary.get(outcome["outcome"], 0) + 1
    return {
        "vault": response.vault,
        "batch_id": response.batch_id,
        "summary": summary,
        **wire.duplicate_check_for_agent(response.duplicate_check, response.notices),
        "items": outcomes,
    }
