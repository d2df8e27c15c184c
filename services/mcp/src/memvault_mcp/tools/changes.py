"""The tools that change or remove a stored memory: forget, supersede and invalidate."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools.arguments import (
    ConfidenceArg,
    ContentArg,
    DateArg,
    DependsOnArg,
    ExpectedVersionArg,
    KeyArg,
    MemoryIdArg,
    ReviewAfterArg,
    ScopeArg,
    SourceArg,
    TagsArg,
    TypeArg,
    VaultArg,
    draft,
)
from memvault_mcp.tools.registry import ADDITIVE, DESTRUCTIVE, ask_vault, tool


@tool(
    "Forget memory",
    "Delete a memory for good, only when the owner asks. Its text is remembered as excluded, so the same "
    "text will not be stored again by any agent.",
    DESTRUCTIVE,
)
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
    response = await ask_vault(ctx, VaultClient.forget, vpb.ForgetRequest(vault=vault, memory_id=memory_id))
    return {"vault": response.vault, "forgotten": response.memory_id}


@tool(
    "Supersede memory",
    "Replace a memory that is out of date with a new one, keeping the old as history (recall stops "
    "returning it). The replacement is a whole memory: give its type, key, scope and tags again, "
    "nothing is carried over. In review mode the replacement waits for the owner and the old one stays "
    "until it is approved. Memories that depend on the old one are flagged for review. A replacement "
    "that says the same as a stored memory is refused.",
    ADDITIVE,
)
async def supersede(
    ctx: Context,
    memory_id: MemoryIdArg,
    content: ContentArg,
    type: TypeArg = "fact",
    key: KeyArg = "",
    scope: ScopeArg = "",
    tags: TagsArg | None = None,
    source: SourceArg = "",
    vault: VaultArg = "",
    confidence: ConfidenceArg = 0.0,
    valid_from: DateArg = "",
    review_after: ReviewAfterArg = "",
    expires_at: DateArg = "",
    depends_on: DependsOnArg | None = None,
    expected_version: ExpectedVersionArg = 0,
) -> dict[str, Any]:
    replacement = draft(
        content,
        type,
        key,
        scope,
        tags or [],
        source,
        trust="stated",
        confidence=confidence,
        valid_from=valid_from,
        review_after=review_after,
        expires_at=expires_at,
        depends_on=depends_on,
    )
    request = vpb.SupersedeMemoryRequest(
        vault=vault, memory_id=memory_id, replacement=replacement, expected_version=expected_version
    )
    response = await ask_vault(ctx, VaultClient.supersede_memory, request)
    answer: dict[str, Any] = {
        "vault": response.vault,
        "replaced": memory_id,
        "applied": response.applied,
        **wire.write_result_for_agent(response.result),
        **wire.duplicate_check_for_agent(response.duplicate_check, response.notices),
    }
    if response.flagged_dependents:
        answer["flagged_dependents"] = list(response.flagged_dependents)
    return answer


@tool(
    "Invalidate memory",
    "Mark a memory as no longer true without replacing it (it is kept as history). Give the reason. In "
    "review mode this flags it for the owner instead. Memories that depend on it are flagged.",
    ADDITIVE,
)
async def invalidate(
    ctx: Context,
    memory_id: MemoryIdArg,
    reason: Annotated[
        str,
        Field(
            description="Why it is no longer true, in a sentence (kept with the memory, not in logs).",
            json_schema_extra={"maxLength": limits.MAX_REASON_CHARS},
        ),
    ] = "",
    vault: VaultArg = "",
    expected_version: ExpectedVersionArg = 0,
) -> dict[str, Any]:
    request = vpb.InvalidateMemoryRequest(
        vault=vault, memory_id=memory_id, reason=reason, expected_version=expected_version
    )
    response = await ask_vault(ctx, VaultClient.invalidate_memory, request)
    answer: dict[str, Any] = {
        "vault": response.vault,
        "applied": response.applied,
        "memory": wire.memory_for_agent(response.memory),
        "message": (
            "invalidated: recall no longer returns it (except as_of an earlier time)"
            if response.applied
            else "flagged for the owner, who decides; it stays as it is until then"
        ),
    }
    if response.flagged_dependents:
        answer["flagged_dependents"] = list(response.flagged_dependents)
    return answer
