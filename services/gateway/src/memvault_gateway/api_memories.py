"""/api/v1 for memories: list, write, review (approve, reject), supersede, invalidate, explain, audit,
imports and their undo, settings, the operating guide and the vault's audit log.

Every route acts as the caller (`api.principal`: the owner's session with its CSRF token for
changes, or a bearer token for the API) and is one VaultService call; the vault checks roles and
scopes. Bodies are validated here with the same limits the vault enforces, so a bad request is
refused before anything is sent, with the field and the limit named.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt
from pydantic_core import PydanticCustomError

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits
from memvault_core.errors import InvalidArgument, NotFound
from memvault_core.validation import Between
from memvault_gateway.api import principal
from memvault_gateway.bearer import Principal
from memvault_gateway.context import Gateway, gateway

router = APIRouter(prefix="/api/v1")

Caller = Annotated[Principal, Depends(principal)]
GatewayDep = Annotated[Gateway, Depends(gateway)]


async def visible_vault(vault: str, caller: Caller, gw: GatewayDep) -> str:
    """The vault in the path, if the caller can use it; checked before the body, so a vault that is not
    theirs gets the same 404 as one that does not exist, whatever they sent."""
    usable = [v.name for v in await gw.vault.vaults_as(caller.identity())]
    if vault not in usable:
        raise NotFound(
            f"no vault named {vault[:64]!r} is open to you; your vaults: {', '.join(usable) or '(none)'}", field="vault"
        )
    return vault


Vault = Annotated[str, Depends(visible_vault)]

MemoryType = Literal["fact", "preference", "decision", "constraint", "assumption", "observation", "instruction"]
StatusName = Literal["proposed", "active", "superseded", "rejected", "invalidated"]
AuditKind = Literal["expired", "conflict", "may_conflict", "past_review", "flagged"]

_TYPES = {name: getattr(pb, f"MEMORY_TYPE_{name.upper()}") for name in MemoryType.__args__}  # type: ignore[attr-defined]
_STATUSES = {name: getattr(pb, f"MEMORY_STATUS_{name.upper()}") for name in StatusName.__args__}  # type: ignore[attr-defined]
_TYPE_NAMES = {v: k for k, v in _TYPES.items()}
_STATUS_NAMES = {v: k for k, v in _STATUSES.items()}
_TRUST_NAMES = {
    pb.TRUST_STATED: "stated",
    pb.TRUST_INFERRED: "inferred",
    pb.TRUST_IMPORTED: "imported",
    pb.TRUST_SYNCED: "synced",
}
_OUTCOMES = {
    vpb.WRITE_OUTCOME_STORED: "stored",
    vpb.WRITE_OUTCOME_SIMILAR: "similar",
    vpb.WRITE_OUTCOME_DUPLICATE: "duplicate",
    vpb.WRITE_OUTCOME_EXCLUDED: "excluded",
    vpb.WRITE_OUTCOME_SECRET: "secret",
    vpb.WRITE_OUTCOME_INVALID: "invalid",
}
_CHECKS = {vpb.DUPLICATE_CHECK_SEMANTIC: "semantic", vpb.DUPLICATE_CHECK_EXACT_ONLY: "exact-only"}


def _iso_time(value: object) -> object:
    """ISO 8601 text only: pydantic alone would also read a number, even the text '0.5', as seconds since 1970."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
            (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)  # year 1 at +14:00
            return parsed
        except (ValueError, OverflowError):
            pass
    raise PydanticCustomError(
        "iso_datetime", "must be an ISO 8601 date or time, such as '2027-01-31' or '2027-01-31T09:00:00Z'"
    )


# Numbers are bounded here, before they reach a protobuf field that cannot hold them, and never read
# from true/false or a fraction.
Reason = Annotated[str, Field(max_length=limits.MAX_REASON_CHARS)]
Version = Annotated[
    StrictInt,
    Between(0, limits.MAX_INT64),
    Field(description="The version you read; refused if it changed. 0 skips the check."),
]
Time = Annotated[datetime, BeforeValidator(_iso_time)]
RetentionDays = Annotated[StrictInt, Between(0, limits.MAX_RETENTION_DAYS)]
ListLimit = Annotated[int, Query(), Between(1, limits.MAX_LIST_RESULTS)]
AuditLimit = Annotated[int, Query(), Between(1, limits.MAX_AUDIT_RESULTS)]
Before = Annotated[int, Query(), Between(0, limits.MAX_INT64)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoryIn(Body):
    content: str = Field(min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    type: MemoryType = "fact"
    key: str = Field(default="", max_length=limits.MAX_KEY_CHARS)
    scope: str = Field(default="", max_length=limits.MAX_KEY_CHARS)
    tags: list[Annotated[str, Field(max_length=limits.MAX_TAG_CHARS)]] = Field(
        default_factory=list, max_length=limits.MAX_TAGS
    )
    source: str = Field(default="", max_length=limits.MAX_SOURCE_CHARS)
    confidence: Annotated[StrictFloat, Between(limits.MIN_CONFIDENCE, 1)] | None = None
    valid_from: Time | None = None
    valid_to: Time | None = None
    review_after: Time | None = Field(
        default=None, description="Leave out for the type's default; null for no review date."
    )
    expires_at: Time | None = None
    depends_on: list[str] = Field(default_factory=list, max_length=limits.MAX_DEPENDS_ON)

    def draft(self) -> pb.MemoryDraft:
        no_review = "review_after" in self.model_fields_set and self.review_after is None
        return pb.MemoryDraft(
            content=self.content,
            type=_TYPES[self.type],
            key=self.key,
            scope=self.scope,
            tags=self.tags,
            source=self.source,
            trust=pb.TRUST_STATED,
            confidence=self.confidence or 0.0,
            valid_from=_stamp(self.valid_from),
            valid_to=_stamp(self.valid_to),
            review_after=_stamp(self.review_after),
            no_review=no_review,
            expires_at=_stamp(self.expires_at),
            depends_on=self.depends_on,
        )


class RememberIn(MemoryIn):
    propose: bool = False


class BulkIn(Body):
    vault: str = Field(default="", max_length=63)
    items: list[MemoryIn] = Field(default_factory=list, max_length=limits.MAX_BULK_ITEMS)
    text: str = Field(default="", max_length=limits.MAX_IMPORT_TEXT_CHARS)
    type: MemoryType = Field(default="fact", description="With text: the type of every memory.")
    source: str = Field(default="", max_length=limits.MAX_SOURCE_CHARS)


class ApproveIn(Body):
    replace_similar: bool = False
    replace_ids: list[str] = Field(default_factory=list, max_length=limits.MAX_LIST_RESULTS)
    expected_version: Version = 0


class ReasonIn(Body):
    reason: Reason = ""
    expected_version: Version = 0


class VersionIn(Body):
    expected_version: Version = 0


class SupersedeIn(Body):
    replacement: MemoryIn
    expected_version: Version = 0


class SettingsIn(Body):
    approval_mode: Literal["review", "auto"] | None = None
    superseded_retention_days: RetentionDays | None = None
    rejected_retention_days: RetentionDays | None = None
    audit_retention_days: RetentionDays | None = None


class GuideIn(Body):
    text: str = Field(min_length=1, max_length=limits.MAX_GUIDE_CHARS)
    expected_version: Version = 0


def _stamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime((value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC))
    return stamp


def _time(message: Any, name: str) -> str | None:
    return getattr(message, name).ToDatetime(tzinfo=UTC).isoformat() if message.HasField(name) else None


def memory_json(memory: pb.Memory) -> dict[str, Any]:
    """A memory with every field; empty optional ones are null."""
    return {
        "id": memory.id,
        "vault": memory.vault,
        "content": memory.content,
        "type": _TYPE_NAMES.get(memory.type, "fact"),
        "status": _STATUS_NAMES.get(memory.status, "active"),
        "key": memory.key or None,
        "scope": memory.scope or None,
        "tags": list(memory.tags),
        "source": memory.source,
        "client": memory.client,
        "trust": _TRUST_NAMES.get(memory.trust, "stated"),
        "confidence": round(memory.confidence, 3) if memory.confidence else None,
        "valid_from": _time(memory, "valid_from"),
        "valid_to": _time(memory, "valid_to"),
        "review_after": _time(memory, "review_after"),
        "expires_at": _time(memory, "expires_at"),
        "depends_on": list(memory.depends_on),
        "supersedes": memory.supersedes or None,
        "superseded_by": memory.superseded_by or None,
        "similar_to": list(memory.similar_to),
        "batch_id": memory.batch_id or None,
        "version": memory.version,
        "status_reason": memory.status_reason or None,
        "flagged_reason": memory.flagged_reason or None,
        "flagged_at": _time(memory, "flagged_at"),
        "reviewed_at": _time(memory, "reviewed_at"),
        "created_at": _time(memory, "created_at"),
        "updated_at": _time(memory, "updated_at"),
    }


def result_json(result: vpb.WriteResult) -> dict[str, Any]:
    outcome = _OUTCOMES.get(result.outcome, "stored")
    return {
        "index": result.index,
        "outcome": outcome,
        "id": result.memory_id or None,
        "status": _STATUS_NAMES.get(result.status) if outcome in ("stored", "similar", "duplicate") else None,
        "match": result.match or None,
        "cosine": round(result.cosine, 3) if result.cosine else None,
        "similar_to": list(result.similar_to),
        "conflicts_with": list(result.conflicts_with),
        "message": result.message,
    }


def batch_json(batch: vpb.ImportBatch) -> dict[str, Any]:
    return {
        "id": batch.id,
        "source": batch.source,
        "actor": batch.actor,
        "item_count": batch.item_count,
        "stored_count": batch.stored_count,
        "outcomes": dict(batch.outcomes),
        "created_at": _time(batch, "created_at"),
        "undone_at": _time(batch, "undone_at"),
    }


def related_json(related: Any) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in related:
        grouped.setdefault(item.relation, []).append(memory_json(item.memory))
    return grouped


async def _vault(gw: Gateway, method: str, request: object, caller: Principal, *, slow: bool = False) -> Any:
    return await gw.vault.memories_call(method, request, caller.identity(), slow=slow)


# --- memories --------------------------------------------------------------------------------------


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
) -> dict[str, Any]:
    """Memories newest first, by status, type and tag; follow next_cursor."""
    request = vpb.ListMemoriesRequest(
        vault=vault,
        statuses=[_STATUSES[s] for s in status],
        types=[_TYPES[t] for t in type],
        tags=tag,
        limit=limit,
        cursor=cursor,
    )
    response = await _vault(gw, "ListMemories", request, caller)
    return {
        "vault": response.vault,
        "memories": [memory_json(m) for m in response.memories],
        "next_cursor": response.next_cursor or None,
    }


@router.post("/vaults/{vault}/memories", status_code=201)
async def remember(vault: Vault, body: RememberIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Store one memory (proposed or active by the vault's approval mode; `propose` always queues)."""
    request = vpb.RememberRequest(vault=vault, memory=body.draft(), propose=body.propose)
    response = await _vault(gw, "Remember", request, caller)
    return {
        "vault": response.vault,
        **result_json(response.result),
        "duplicate_check": _CHECKS.get(response.duplicate_check, "semantic"),
        "notices": list(response.notices),
    }


@router.get("/vaults/{vault}/memories/{memory_id}")
async def explain(vault: Vault, memory_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """One memory with its state, full history, dependencies, dependents and similar memories."""
    response = await _vault(gw, "ExplainMemory", vpb.ExplainMemoryRequest(vault=vault, memory_id=memory_id), caller)
    return {
        "vault": response.vault,
        "memory": memory_json(response.memory),
        "state": list(response.notes),
        "history": [
            {
                "version": h.version,
                "change": h.change,
                "actor": h.actor,
                "at": _time(h, "at"),
                "status": _STATUS_NAMES.get(h.status),
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
    response = await _vault(gw, "Forget", vpb.ForgetRequest(vault=vault, memory_id=memory_id), caller)
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
    response = await _vault(gw, "ApproveMemory", request, caller)
    return {
        "vault": response.vault,
        "memory": memory_json(response.memory),
        "superseded": list(response.superseded),
        "flagged_dependents": list(response.flagged_dependents),
    }


@router.post("/vaults/{vault}/memories/{memory_id}/reject")
async def reject(vault: Vault, memory_id: str, body: ReasonIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    request = vpb.RejectMemoryRequest(
        vault=vault, memory_id=memory_id, reason=body.reason, expected_version=body.expected_version
    )
    response = await _vault(gw, "RejectMemory", request, caller)
    return {"vault": response.vault, "memory": memory_json(response.memory)}


@router.post("/vaults/{vault}/memories/{memory_id}/supersede")
async def supersede(vault: Vault, memory_id: str, body: SupersedeIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replace a memory; the old one is kept as history and its dependents are flagged."""
    request = vpb.SupersedeMemoryRequest(
        vault=vault, memory_id=memory_id, replacement=body.replacement.draft(), expected_version=body.expected_version
    )
    response = await _vault(gw, "SupersedeMemory", request, caller)
    return {
        "vault": response.vault,
        "applied": response.applied,
        **result_json(response.result),
        "flagged_dependents": list(response.flagged_dependents),
    }


@router.post("/vaults/{vault}/memories/{memory_id}/invalidate")
async def invalidate(vault: Vault, memory_id: str, body: ReasonIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    request = vpb.InvalidateMemoryRequest(
        vault=vault, memory_id=memory_id, reason=body.reason, expected_version=body.expected_version
    )
    response = await _vault(gw, "InvalidateMemory", request, caller)
    return {
        "vault": response.vault,
        "applied": response.applied,
        "memory": memory_json(response.memory),
        "flagged_dependents": list(response.flagged_dependents),
    }


@router.post("/vaults/{vault}/memories/{memory_id}/reviewed")
async def mark_reviewed(
    vault: Vault, memory_id: str, body: VersionIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """The owner checked it and it still holds: clears its flag and sets the next review date."""
    request = vpb.MarkReviewedRequest(vault=vault, memory_id=memory_id, expected_version=body.expected_version)
    response = await _vault(gw, "MarkReviewed", request, caller)
    return {"vault": response.vault, "memory": memory_json(response.memory)}


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
    response = await _vault(gw, "ListReviewQueue", request, caller)
    return {
        "vault": response.vault,
        "total": response.total,
        "items": [{"memory": memory_json(i.memory), "related": related_json(i.related)} for i in response.items],
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
    response = await _vault(gw, "AuditMemories", request, caller)
    return {
        "vault": response.vault,
        "counts": dict(response.counts),
        "findings": [
            {"memory": memory_json(f.memory), "kinds": list(f.kinds), "related": list(f.related), "advice": f.message}
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
) -> dict[str, Any]:
    """Hybrid recall with warnings; `as_of` answers with what was valid then."""
    request = vpb.RecallRequest(
        vault=vault,
        query=q,
        limit=limit,
        cursor=cursor,
        statuses=[_STATUSES[s] for s in status],
        types=[_TYPES[t] for t in type],
        tags=tag,
        as_of=_stamp(as_of),
        include_expired=include_expired,
    )
    response = await _vault(gw, "Recall", request, caller)
    return {
        "vault": response.vault,
        "mode": response.mode,
        "results": [
            {
                **memory_json(h.memory),
                "score": round(h.score, 4),
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


# --- imports ---------------------------------------------------------------------------------------


@router.post("/bulk")
async def bulk(body: BulkIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Import `items`, or markdown / plain `text` split into memories, as one undoable batch."""
    if bool(body.items) == bool(body.text.strip()):
        raise InvalidArgument(
            "send items (a list of memories) or text (markdown or plain text), not both", field="text"
        )
    request = vpb.BulkRememberRequest(
        vault=body.vault,
        items=[item.draft() for item in body.items],
        text=body.text,
        text_type=_TYPES[body.type],
        source=body.source,
    )
    response = await _vault(gw, "BulkRemember", request, caller, slow=True)
    results = [result_json(r) for r in response.results]
    summary: dict[str, int] = {}
    for result in results:
        summary[result["outcome"]] = summary.get(result["outcome"], 0) + 1
    return {
        "vault": response.vault,
        "batch_id": response.batch_id,
        "summary": summary,
        "duplicate_check": _CHECKS.get(response.duplicate_check, "semantic"),
        "notices": list(response.notices),
        "items": results,
    }


@router.get("/vaults/{vault}/batches")
async def batches(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    cursor: Annotated[str, Query(max_length=2000)] = "",
) -> dict[str, Any]:
    request = vpb.ListImportBatchesRequest(vault=vault, limit=limit, cursor=cursor)
    response = await _vault(gw, "ListImportBatches", request, caller)
    return {
        "vault": response.vault,
        "batches": [batch_json(b) for b in response.batches],
        "next_cursor": response.next_cursor or None,
    }


@router.post("/vaults/{vault}/batches/{batch_id}/undo")
async def undo(vault: Vault, batch_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Remove an import's memories and put back every memory it changed."""
    request = vpb.UndoImportBatchRequest(vault=vault, batch_id=batch_id)
    response = await _vault(gw, "UndoImportBatch", request, caller, slow=True)
    return {
        "vault": response.vault,
        "batch": batch_json(response.batch),
        "removed": response.removed,
        "restored": response.restored,
        "kept_changes": list(response.kept_changes),
    }


# --- settings, guide, audit log ----------------------------------------------------------------------


def _settings_json(settings: vpb.VaultSettings) -> dict[str, Any]:
    return {
        "approval_mode": settings.approval_mode,
        "superseded_retention_days": settings.superseded_retention_days,
        "rejected_retention_days": settings.rejected_retention_days,
        "audit_retention_days": settings.audit_retention_days,
    }


@router.get("/vaults/{vault}/settings")
async def get_settings(vault: Vault, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    response = await _vault(gw, "GetSettings", vpb.GetSettingsRequest(vault=vault), caller)
    return {"vault": response.vault, **_settings_json(response.settings)}


@router.put("/vaults/{vault}/settings")
async def put_settings(vault: Vault, body: SettingsIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Change the approval mode (review or auto) and retention periods; fields left out stay as they are."""
    request = vpb.UpdateSettingsRequest(vault=vault, approval_mode=body.approval_mode or "")
    for name in ("superseded_retention_days", "rejected_retention_days", "audit_retention_days"):
        if (value := getattr(body, name)) is not None:
            setattr(request, name, value)
    response = await _vault(gw, "UpdateSettings", request, caller)
    return {"vault": response.vault, **_settings_json(response.settings)}


def _guide_json(response: vpb.GetOperatingGuideResponse) -> dict[str, Any]:
    return {
        "vault": response.vault,
        "text": response.text,
        "version": response.version,
        "updated_by": response.updated_by,
        "updated_at": _time(response, "updated_at"),
        "newer_default_available": response.newer_default_available,
        "default_revision": response.default_revision,
        "default_text": response.default_text or None,
    }


@router.get("/vaults/{vault}/guide")
async def get_guide(vault: Vault, caller: Caller, gw: GatewayDep, include_default: bool = False) -> dict[str, Any]:
    """The guide agents read first; `include_default` adds the bundled default to compare with."""
    request = vpb.GetOperatingGuideRequest(vault=vault, include_default=include_default)
    return _guide_json(await _vault(gw, "GetOperatingGuide", request, caller))


@router.put("/vaults/{vault}/guide")
async def put_guide(vault: Vault, body: GuideIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Save a new version of the guide (send the version you edited as expected_version)."""
    request = vpb.UpdateOperatingGuideRequest(vault=vault, text=body.text, expected_version=body.expected_version)
    response = await _vault(gw, "UpdateOperatingGuide", request, caller)
    return {"vault": response.vault, "version": response.version}


@router.post("/vaults/{vault}/guide/adopt-default")
async def adopt_default_guide(vault: Vault, body: VersionIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replace the guide with the default this deployment ships (a new version; the old ones are kept)."""
    request = vpb.UpdateOperatingGuideRequest(vault=vault, adopt_default=True, expected_version=body.expected_version)
    response = await _vault(gw, "UpdateOperatingGuide", request, caller)
    return {"vault": response.vault, "version": response.version}


@router.get("/vaults/{vault}/guide/versions")
async def guide_versions(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    before_version: Before = 0,
    include_text: bool = False,
) -> dict[str, Any]:
    request = vpb.ListGuideVersionsRequest(
        vault=vault, limit=limit, before_version=before_version, include_text=include_text
    )
    response = await _vault(gw, "ListGuideVersions", request, caller)
    return {
        "vault": response.vault,
        "versions": [
            {
                "version": v.version,
                "updated_by": v.updated_by,
                "updated_at": _time(v, "updated_at"),
                "chars": v.chars,
                **({"text": v.text} if include_text else {}),
            }
            for v in response.versions
        ],
    }


@router.get("/vaults/{vault}/audit")
async def vault_audit(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    actor: Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)] = "",
    action: Annotated[
        str, Query(max_length=limits.MAX_KEY_CHARS, description="An action, or a prefix ending in '.'")
    ] = "",
    target: Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)] = "",
    since: Time | None = None,
    until: Time | None = None,
    limit: AuditLimit = 50,
    before: Before = 0,
) -> dict[str, Any]:
    """Who did what in this vault, newest first (owners only): filter by actor, action, target and time."""
    request = vpb.ListVaultAuditRequest(
        vault=vault,
        actor=actor,
        action=action,
        target=target,
        since=_stamp(since),
        until=_stamp(until),
        limit=limit,
        before_id=before,
    )
    response = await _vault(gw, "ListVaultAudit", request, caller)
    return {
        "vault": response.vault,
        "entries": [
            {
                "id": e.id,
                "actor": e.actor,
                "action": e.action,
                "target": e.target,
                "details": json.loads(e.details_json or "{}"),
                "at": _time(e, "at"),
            }
            for e in response.entries
        ],
        "next_before": response.next_before_id or None,
    }
