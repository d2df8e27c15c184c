"""/api/v1 for memories: list, write, explain, forget, review (approve, reject, mark reviewed), edit in place,
supersede, invalidate, the review queue, the memory audit and recall.

Every route acts as the caller (`access.principal`: the owner's session with its CSRF token for
changes, or a bearer token for the API) and is one VaultService call; the vault checks roles and
scopes. Bodies are validated (`shapes`) with the same limits the vault enforces, so a bad request is
refused before anything is sent, with the field and the limit named.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core import vault_client as rpc
from memvault_core.errors import InvalidArgument
from memvault_core.validation import Between
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.api.shapes import (
    ApproveIn,
    AuditKind,
    AuditLimit,
    EditIn,
    LiftIn,
    ListLimit,
    MemoryType,
    ReasonIn,
    RememberIn,
    StatusName,
    SupersedeIn,
    Time,
    VersionIn,
    related_json,
    vault_call,
)

router = APIRouter(prefix="/api/v1")

MAX_CLIENT_CHARS = 200


def memory_filter(
    key: Annotated[
        str, Query(max_length=limits.MAX_KEY_CHARS, description="Only memories with this key (exact).")
    ] = "",
    scope: Annotated[
        str, Query(max_length=limits.MAX_KEY_CHARS, description="Only memories with this scope (exact).")
    ] = "",
    source: Annotated[
        str,
        Query(
            max_length=limits.MAX_SOURCE_CHARS,
            description="Only memories whose source starts with this (e.g. 'import:' for every import).",
        ),
    ] = "",
    client: Annotated[
        str, Query(max_length=MAX_CLIENT_CHARS, description="Only memories written by this client (exact).")
    ] = "",
    created_from: Annotated[
        Time | None, Query(description="Only memories created at or after this time (ISO 8601).")
    ] = None,
    created_to: Annotated[
        Time | None,
        Query(description="Only memories created before this time (exclusive; ISO 8601, a date means its 00:00 UTC)."),
    ] = None,
) -> vpb.MemoryFilter:
    """The filters list and recall share beyond status, type and tag (empty: not filtered)."""
    if created_from is not None and created_to is not None and created_from >= created_to:
        raise InvalidArgument(
            "created_from must be before created_to (created_to is exclusive: the first moment left out)",
            field="created_to",
        )
    return vpb.MemoryFilter(
        key=key.strip(),
        scope=scope.strip(),
        source=source.strip(),
        client=client.strip(),
        created_from=wire.to_timestamp(created_from),
        created_to=wire.to_timestamp(created_to),
    )


Filters = Annotated[vpb.MemoryFilter, Depends(memory_filter)]


@router.get("/vaults/{vault}/memories")
async def list_memories(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    status: Annotated[list[StatusName], Query()] = [],  # noqa: B006 (FastAPI reads it, never mutates it)
    type: Annotated[list[MemoryType], Query()] = [],  # noqa: B006
    tag: Annotated[list[str], Query(max_length=limits.MAX_TAG_CHARS)] = [],  # noqa: B006
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    cursor: Annotated[str, Query(max_length=2000)] = "",
    filters: Filters = vpb.MemoryFilter(),  # noqa: B008 (read only)
) -> dict[str, Any]:
    """Memories newest first, by status, type, tag, key, scope, source, client and creation time; follow
    next_cursor."""
    request = vpb.ListMemoriesRequest(
        vault=vault,
        statuses=[wire.MEMORY_STATUSES.value(s) for s in status],
        types=[wire.MEMORY_TYPES.value(t) for t in type],
        tags=tag,
        limit=limit,
        cursor=cursor,
        filter=filters,
    )
    response = await vault_call(gw, rpc.VaultClient.list_memories, request, caller)
    return {
        "vault": response.vault,
        "memories": [wire.memory_for_api(m) for m in response.memories],
        "next_cursor": response.next_cursor or None,
    }


@router.post("/vaults/{vault}/memories", status_code=201)
async def remember(vault: Vault, body: RememberIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Store one memory (proposed or active by the vault's approval mode; `propose` always queues)."""
    request = vpb.RememberRequest(vault=vault, memory=body.draft(), propose=body.propose)
    response = await vault_call(gw, rpc.VaultClient.remember, request, caller)
    return {
        "vault": response.vault,
        **wire.write_result_for_api(response.result),
        "duplicate_check": wire.DUPLICATE_CHECKS.name_or(response.duplicate_check, "semantic"),
        "notices": list(response.notices),
    }


@router.get("/vaults/{vault}/memories/{memory_id}")
async def explain(vault: Vault, memory_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """One memory with its state, full history, dependencies, dependents and similar memories."""
    response = await vault_call(
        gw, rpc.VaultClient.explain_memory, vpb.ExplainMemoryRequest(vault=vault, memory_id=memory_id), caller
    )
    return {
        "vault": response.vault,
        "memory": wire.memory_for_api(response.memory),
        "state": list(response.notes),
        "history": [
            {
                "version": h.version,
                "change": h.change,
                "actor": h.actor,
                "at": wire.iso_for_api(h, "at"),
                "status": wire.MEMORY_STATUSES.name(h.status),
                "changed_fields": list(h.changed_fields),
                "cause": h.cause or None,
                "content": h.content or None,
            }
            for h in response.history
        ],
        "related": related_json(response.related),
        "missing": list(response.missing),
    }


@router.delete("/vaults/{vault}/memories/{memory_id}")
async def forget(vault: Vault, memory_id: str, caller: Caller, gw: GatewayDep) -> dict[str, str]:
    """Delete a memory and its history; its text is excluded from being stored again."""
    response = await vault_call(gw, rpc.VaultClient.forget, vpb.ForgetRequest(vault=vault, memory_id=memory_id), caller)
    return {"vault": response.vault, "forgotten": response.memory_id}


@router.post("/vaults/{vault}/memories/{memory_id}/approve")
async def approve(vault: Vault, memory_id: str, body: ApproveIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Make a proposed memory active; `replace_similar` (or `replace_ids`) supersedes what it replaces."""
    request = vpb.ApproveMemoryRequest(
        vault=vault,
        memory_id=memory_id,
        replace_similar=body.replace_similar,
        replace_ids=body.replace_ids,
        expected_version=body.expected_version,
    )
    response = await vault_call(gw, rpc.VaultClient.approve_memory, request, caller)
    return {
        "vault": response.vault,
        "memory": wire.memory_for_api(response.memory),
        "superseded": list(response.superseded),
        "flagged_dependents": list(response.flagged_dependents),
    }


@router.post("/vaults/{vault}/memories/{memory_id}/reject")
async def reject(vault: Vault, memory_id: str, body: ReasonIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    request = vpb.RejectMemoryRequest(
        vault=vault, memory_id=memory_id, reason=body.reason, expected_version=body.expected_version
    )
    response = await vault_call(gw, rpc.VaultClient.reject_memory, request, caller)
    return {"vault": response.vault, "memory": wire.memory_for_api(response.memory)}


def exclusion_json(exclusion: vpb.Exclusion) -> dict[str, Any]:
    return {
        "content_hash": exclusion.content_hash,
        "reason": exclusion.reason,
        "created_at": wire.iso_for_api(exclusion, "created_at"),
    }


@router.get("/vaults/{vault}/exclusions")
async def exclusions(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    offset: Annotated[int, Query(), Between(0, 1_000_000)] = 0,
) -> dict[str, Any]:
    """Texts refused because they were forgotten (or rejected), newest first: only their hashes remain."""
    request = vpb.ListExclusionsRequest(vault=vault, limit=limit, offset=offset)
    response = await vault_call(gw, rpc.VaultClient.list_exclusions, request, caller)
    return {
        "vault": response.vault,
        "exclusions": [exclusion_json(e) for e in response.exclusions],
        "total": response.total,
    }


@router.post("/vaults/{vault}/exclusions/check")
async def check_exclusion(vault: Vault, body: LiftIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Whether this text is refused (sent in the body, so it stays out of URLs and logs)."""
    request = vpb.ListExclusionsRequest(vault=vault, limit=1, text=body.text)
    response = await vault_call(gw, rpc.VaultClient.list_exclusions, request, caller)
    found = [exclusion_json(e) for e in response.exclusions]
    return {"vault": response.vault, "excluded": bool(found), "exclusion": found[0] if found else None}


@router.post("/vaults/{vault}/exclusions/lift")
async def lift_exclusion_of_text(vault: Vault, body: LiftIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Let this forgotten text be stored again."""
    request = vpb.LiftExclusionRequest(vault=vault, text=body.text)
    response = await vault_call(gw, rpc.VaultClient.lift_exclusion, request, caller)
    return {"vault": response.vault, "lifted": response.content_hash}


@router.delete("/vaults/{vault}/exclusions/{content_hash}")
async def lift_exclusion(vault: Vault, content_hash: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Let the forgotten text with this hash be stored again."""
    request = vpb.LiftExclusionRequest(vault=vault, content_hash=content_hash[:100])
    response = await vault_call(gw, rpc.VaultClient.lift_exclusion, request, caller)
    return {"vault": response.vault, "lifted": response.content_hash}


@router.patch("/vaults/{vault}/memories/{memory_id}")
async def edit(vault: Vault, memory_id: str, body: EditIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Fix a memory in place (its text, its tags): same id, the previous version stays in its history."""
    if body.content is None and body.tags is None:
        raise InvalidArgument("nothing to change: give the corrected content, tags, or both", field="content")
    response = await vault_call(gw, rpc.VaultClient.edit_memory, body.request(vault, memory_id), caller)
    return {"vault": response.vault, "changed": list(response.changed), "memory": wire.memory_for_api(response.memory)}


@router.post("/vaults/{vault}/memories/{memory_id}/supersede")
async def supersede(vault: Vault, memory_id: str, body: SupersedeIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replace a memory; the old one is kept as history and its dependents are flagged."""
    request = vpb.SupersedeMemoryRequest(
        vault=vault, memory_id=memory_id, replacement=body.replacement.draft(), expected_version=body.expected_version
    )
    response = await vault_call(gw, rpc.VaultClient.supersede_memory, request, caller)
    return {
        "vault": response.vault,
        "applied": response.applied,
        **wire.write_result_for_api(response.result),
        "flagged_dependents": list(response.flagged_dependents),
    }


@router.post("/vaults/{vault}/memories/{memory_id}/invalidate")
async def invalidate(vault: Vault, memory_id: str, body: ReasonIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    request = vpb.InvalidateMemoryRequest(
        vault=vault, memory_id=memory_id, reason=body.reason, expected_version=body.expected_version
    )
    response = await vault_call(gw, rpc.VaultClient.invalidate_memory, request, caller)
    return {
        "vault": response.vault,
        "applied": response.applied,
        "memory": wire.memory_for_api(response.memory),
        "flagged_dependents": list(response.flagged_dependents),
    }


@router.post("/vaults/{vault}/memories/{memory_id}/reviewed")
async def mark_reviewed(
    vault: Vault, memory_id: str, body: VersionIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """The owner checked it and it still holds: clears its flag and sets the next review date."""
    request = vpb.MarkReviewedRequest(vault=vault, memory_id=memory_id, expected_version=body.expected_version)
    response = await vault_call(gw, rpc.VaultClient.mark_reviewed, request, caller)
    return {"vault": response.vault, "memory": wire.memory_for_api(response.memory)}


@router.get("/vaults/{vault}/review-queue")
async def review_queue(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    cursor: Annotated[str, Query(max_length=2000)] = "",
) -> dict[str, Any]:
    """Proposed memories, oldest first, each with what it may duplicate, contradict or replace."""
    request = vpb.ListReviewQueueRequest(vault=vault, limit=limit, cursor=cursor)
    response = await vault_call(gw, rpc.VaultClient.list_review_queue, request, caller)
    return {
        "vault": response.vault,
        "total": response.total,
        "items": [
            {"memory": wire.memory_for_api(i.memory), "related": related_json(i.related)} for i in response.items
        ],
        "next_cursor": response.next_cursor or None,
    }


@router.get("/vaults/{vault}/memory-audit")
async def memory_audit(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    kind: Annotated[list[AuditKind], Query()] = [],  # noqa: B006
    limit: AuditLimit = limits.DEFAULT_LIST_RESULTS,
    cursor: Annotated[str, Query(max_length=2000)] = "",
) -> dict[str, Any]:
    """Memories that need attention: expired, conflicting, possibly contradicting, past review, flagged."""
    request = vpb.AuditMemoriesRequest(vault=vault, kinds=kind, limit=limit, cursor=cursor)
    response = await vault_call(gw, rpc.VaultClient.audit_memories, request, caller)
    return {
        "vault": response.vault,
        "counts": dict(response.counts),
        "findings": [
            {
                "memory": wire.memory_for_api(f.memory),
                "kinds": list(f.kinds),
                "related": list(f.related),
                "advice": f.message,
            }
            for f in response.findings
        ],
        "next_cursor": response.next_cursor or None,
    }


@router.get("/vaults/{vault}/recall")
async def recall(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    q: Annotated[str, Query(min_length=1, max_length=limits.MAX_QUERY_CHARS)],
    limit: Annotated[int, Query(), Between(1, limits.MAX_RECALL_RESULTS)] = limits.DEFAULT_RECALL_RESULTS,
    cursor: Annotated[str, Query(max_length=2000)] = "",
    status: Annotated[list[StatusName], Query()] = [],  # noqa: B006
    type: Annotated[list[MemoryType], Query()] = [],  # noqa: B006
    tag: Annotated[list[str], Query(max_length=limits.MAX_TAG_CHARS)] = [],  # noqa: B006
    as_of: Time | None = None,
    include_expired: bool = False,
    filters: Filters = vpb.MemoryFilter(),  # noqa: B008 (read only)
) -> dict[str, Any]:
    """Hybrid recall with warnings; `as_of` answers with what was valid then. The same filters as the list."""
    request = vpb.RecallRequest(
        vault=vault,
        query=q,
        limit=limit,
        cursor=cursor,
        statuses=[wire.MEMORY_STATUSES.value(s) for s in status],
        types=[wire.MEMORY_TYPES.value(t) for t in type],
        tags=tag,
        as_of=wire.to_timestamp(as_of),
        include_expired=include_expired,
        filter=filters,
    )
    response = await vault_call(gw, rpc.VaultClient.recall, request, caller)
    return {
        "vault": response.vault,
        "mode": response.mode,
        "results": [
            {
                **wire.memory_for_api(h.memory),
                "score": round(h.score, 4),
                "meaning_score": round(h.meaning_score, 4) if h.HasField("meaning_score") else None,
                "keyword_score": round(h.keyword_score, 4),
                "may_conflict_with": list(h.may_conflict_with),
                "conflicts_with": list(h.conflicts_with),
            }
            for h in response.hits
        ],
        "warnings": list(response.warnings),
        "memory_warnings": [
            {"kind": w.kind, "memory_id": w.memory_id, "related": list(w.related), "message": w.message}
            for w in response.memory_warnings
        ],
        "next_cursor": response.next_cursor or None,
    }
