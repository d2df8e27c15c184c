"""The MCP tools. Each is a thin call to the vault: validate the shape, call, shape the answer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, get_args

from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits
from memvault_core.errors import MemvaultError
from memvault_core.identity import HTTP_HEADER
from memvault_core.validation import Between
from memvault_mcp.vault_client import VaultClient

MemoryTypeName = Literal["fact", "preference", "decision", "constraint", "assumption", "observation", "instruction"]
StatusName = Literal["proposed", "active", "superseded", "rejected", "invalidated"]
TrustName = Literal["stated", "inferred"]

VaultArg = Annotated[
    str,
    Field(
        description="Vault name. Leave empty for your default vault; get_operating_guide lists the vaults you can use.",
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


MemoryIdArg = Annotated[
    str,
    Field(description="A memory id, from recall or list_memories.", json_schema_extra={"format": "uuid"}),
]
DateArg = Annotated[
    str,
    Field(
        description="A date or time in ISO 8601, e.g. '2027-01-31' or '2027-01-31T09:00:00Z'; empty to leave out.",
        json_schema_extra={"maxLength": 40},
    ),
]
ReviewAfterArg = Annotated[
    str | None,
    Field(
        description=(
            "When to check this memory again (ISO date). Leave it out for the type's default (assumption 30 "
            "days, constraint 90, fact and decision 180, preference 365, observation none); null or 'never' "
            "for no review date."
        ),
        json_schema_extra={"maxLength": 40},
    ),
]
DependsOnArg = Annotated[
    list[str],
    Field(
        description=(
            "Ids of memories this one relies on; if one of them is superseded or invalidated, this one is "
            f"flagged for review. At most {limits.MAX_DEPENDS_ON}."
        ),
        json_schema_extra={"maxItems": limits.MAX_DEPENDS_ON},
    ),
]
ConfidenceArg = Annotated[
    StrictFloat,
    Field(description=f"How sure you are, {limits.MIN_CONFIDENCE} to 1; 0 (the default) means not stated.", ge=0, le=1),
]
ExpectedVersionArg = Annotated[
    StrictInt,
    Between(0, limits.MAX_INT64),
    Field(
        description="The memory's version as you last read it (explain_memory); the call is refused if it changed. "
        "0 skips the check."
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
    source_date: Annotated[
        str,
        Field(
            description="Optional: when this was stated (ISO date or time); stored as valid_from.",
            json_schema_extra={"maxLength": 40},
        ),
    ] = ""


BulkEntry = Annotated[
    BulkItem | Annotated[str, Field(json_schema_extra={"minLength": 1, "maxLength": limits.MAX_CONTENT_CHARS})],
    Field(description="A memory, or just its content as a string."),
]
# A stated date a little ahead of the vault's clock is the sender's clock, not the future.
SOURCE_DATE_SLACK = timedelta(days=1)


def _source_date(value: str, field: str) -> str:
    """`value` checked as the date something was stated: ISO 8601 and not in the future."""
    stamp = parse_time(value, field)
    if stamp is not None and stamp.ToDatetime(tzinfo=UTC) > datetime.now(UTC) + SOURCE_DATE_SLACK:
        raise ToolError(f"{field} {value[:40]!r} is in the future; it is the date the memory was stated")
    return value


_TYPE_TO_PB = {name: getattr(pb, f"MEMORY_TYPE_{name.upper()}") for name in get_args(MemoryTypeName)}
_STATUS_TO_PB = {name: getattr(pb, f"MEMORY_STATUS_{name.upper()}") for name in get_args(StatusName)}
_TRUST_TO_PB = {"stated": pb.TRUST_STATED, "inferred": pb.TRUST_INFERRED}
_TYPE_NAME = {v: k for k, v in _TYPE_TO_PB.items()}
_STATUS_NAME = {v: k for k, v in _STATUS_TO_PB.items()}
_OUTCOME_NAME = {
    vpb.WRITE_OUTCOME_STORED: "stored",
    vpb.WRITE_OUTCOME_SIMILAR: "similar",
    vpb.WRITE_OUTCOME_DUPLICATE: "duplicate",
    vpb.WRITE_OUTCOME_EXCLUDED: "excluded",
    vpb.WRITE_OUTCOME_SECRET: "secret",
    vpb.WRITE_OUTCOME_INVALID: "invalid",
}
_CHECK_NAME = {vpb.DUPLICATE_CHECK_SEMANTIC: "semantic", vpb.DUPLICATE_CHECK_EXACT_ONLY: "exact-only"}
AUDIT_KINDS = ("expired", "conflict", "may_conflict", "past_review", "flagged")
AuditKindName = Literal["expired", "conflict", "may_conflict", "past_review", "flagged"]


def parse_time(value: str, field: str) -> Timestamp | None:
    """An ISO 8601 date or time as a Timestamp (UTC when no offset is given); None for empty."""
    value = value.strip()
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        in_utc = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):  # overflow: year 1 or 9999 moved past the calendar's ends
        raise ToolError(
            f"{field} {value[:40]!r} is not a date; write it as ISO 8601, e.g. '2027-01-31' or '2027-01-31T09:00:00Z'"
        ) from None
    stamp = Timestamp()
    stamp.FromDatetime(in_utc)
    return stamp


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
    for name, present in (
        ("valid_to", memory.HasField("valid_to")),
        ("review_after", memory.HasField("review_after")),
        ("expires_at", memory.HasField("expires_at")),
    ):
        if present:
            view[name] = _iso(getattr(memory, name), True)
    for name in ("depends_on", "similar_to"):
        if values := list(getattr(memory, name)):
            view[name] = values
    for name in ("supersedes", "superseded_by", "flagged_reason", "status_reason"):
        if value := getattr(memory, name):
            view[name] = value
    if memory.confidence:
        view["confidence"] = round(memory.confidence, 3)
    return view


def full_view(memory: pb.Memory) -> dict[str, Any]:
    """Every field an explanation needs."""
    view = memory_view(memory)
    view["version"] = memory.version
    view["trust"] = {pb.TRUST_STATED: "stated", pb.TRUST_INFERRED: "inferred", pb.TRUST_IMPORTED: "imported"}.get(
        memory.trust, "synced"
    )
    if memory.client:
        view["client"] = memory.client
    if memory.batch_id:
        view["batch_id"] = memory.batch_id
    view["valid_from"] = _iso(memory.valid_from, memory.HasField("valid_from"))
    view["updated_at"] = _iso(memory.updated_at, memory.HasField("updated_at"))
    if memory.HasField("reviewed_at"):
        view["reviewed_at"] = _iso(memory.reviewed_at, True)
    return view


def _write_view(result: vpb.WriteResult) -> dict[str, Any]:
    view: dict[str, Any] = {"outcome": _OUTCOME_NAME.get(result.outcome, "stored")}
    if result.memory_id:
        view["id"] = result.memory_id
    if result.outcome in (vpb.WRITE_OUTCOME_STORED, vpb.WRITE_OUTCOME_SIMILAR, vpb.WRITE_OUTCOME_DUPLICATE):
        view["status"] = _STATUS_NAME.get(result.status, "active")
    if result.match:
        view["match"] = result.match
    if result.similar_to:
        view["similar_to"] = list(result.similar_to)
    if result.conflicts_with:
        view["conflicts_with"] = list(result.conflicts_with)
    if result.cosine:
        view["cosine"] = round(result.cosine, 3)
    if result.message:
        view["message"] = result.message
    return view


def _check_view(check: vpb.DuplicateCheck.ValueType, notices: Any) -> dict[str, Any]:
    view: dict[str, Any] = {"duplicate_check": _CHECK_NAME.get(check, "semantic")}
    if notices:
        view["notices"] = list(notices)
    return view


def _draft(
    content: str,
    type: str,
    key: str,
    scope: str,
    tags: list[str],
    source: str,
    trust: str = "",
    *,
    confidence: float = 0.0,
    valid_from: str = "",
    valid_to: str = "",
    review_after: str | None = "",
    expires_at: str = "",
    depends_on: list[str] | None = None,
) -> pb.MemoryDraft:
    never = review_after is None or review_after.strip().lower() == "never"
    return pb.MemoryDraft(
        content=content,
        type=_TYPE_TO_PB[type],
        key=key,
        scope=scope,
        tags=tags,
        source=source,
        trust=_TRUST_TO_PB.get(trust, pb.TRUST_UNSPECIFIED),
        confidence=confidence,
        valid_from=parse_time(valid_from, "valid_from"),
        valid_to=parse_time(valid_to, "valid_to"),
        review_after=None if never else parse_time(review_after or "", "review_after"),
        no_review=never,
        expires_at=parse_time(expires_at, "expires_at"),
        depends_on=depends_on or [],
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
        answer: dict[str, Any] = {
            "vault": response.vault,
            "guide": response.text,
            "guide_version": response.version,
            "vaults": [{"name": v.name, "role": v.role, "approval_mode": v.approval_mode} for v in listing.vaults],
            "limits": {field.name: value for field, value in caps.limits.ListFields()},
        }
        if response.newer_default_available:
            answer["newer_default_guide"] = (
                "This memvault ships a newer default operating guide than the one this vault uses. Mention it "
                "to the owner once: they can compare and adopt it through the JSON API "
                "(POST /api/v1/vaults/<vault>/guide/adopt-default), or save their own guide to dismiss this notice."
            )
        return answer

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
        cursor: Annotated[str, Field(description="next_cursor from the previous page, to get the next one.")] = "",
        types: Annotated[list[MemoryTypeName], Field(description="Only these memory types.")] | None = None,
        tags: Annotated[list[str], Field(description="Only memories carrying all of these tags.")] | None = None,
        statuses: Annotated[
            list[StatusName],
            Field(
                description="Statuses to include; default proposed and active (with as_of: whatever was valid then)."
            ),
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
    ) -> dict[str, Any]:
        request = vpb.RecallRequest(
            vault=vault,
            query=query,
            limit=limit,
            cursor=cursor,
            types=[_TYPE_TO_PB[t] for t in types or ()],
            tags=tags or [],
            statuses=[_STATUS_TO_PB[s] for s in statuses or ()],
            as_of=parse_time(as_of, "as_of"),
            include_expired=include_expired,
        )
        response = await call(ctx, lambda who: client.recall(who, request))
        flags: dict[str, list[str]] = {}
        for warning in response.memory_warnings:
            flags.setdefault(warning.memory_id, []).append(warning.kind)
        results = []
        for hit in response.hits:
            view = memory_view(hit.memory, hit.score)
            if hit.may_conflict_with:
                view["may_conflict_with"] = list(hit.may_conflict_with)
            if hit.conflicts_with:
                view["conflicts_with"] = list(hit.conflicts_with)
            if hit.memory.id in flags:
                view["warnings"] = flags[hit.memory.id]
            results.append(view)
        return {
            "vault": response.vault,
            "mode": response.mode,
            "results": results,
            "warnings": [*response.warnings, *(w.message for w in response.memory_warnings)],
            "next_cursor": response.next_cursor or None,
        }

    async def write_one(ctx: Context, vault: str, draft: pb.MemoryDraft, propose: bool) -> dict[str, Any]:
        request = vpb.RememberRequest(vault=vault, memory=draft, propose=propose)
        response = await call(ctx, lambda who: client.remember(who, request))
        return {
            "vault": response.vault,
            **_write_view(response.result),
            **_check_view(response.duplicate_check, response.notices),
        }

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
    ) -> dict[str, Any]:
        draft = _draft(
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
        confidence: ConfidenceArg = 0.0,
        valid_from: DateArg = "",
        valid_to: DateArg = "",
        review_after: ReviewAfterArg = "",
        expires_at: DateArg = "",
        depends_on: DependsOnArg | None = None,
    ) -> dict[str, Any]:
        draft = _draft(
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
        return await write_one(ctx, vault, draft, propose=True)

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
            _draft(
                i.content,
                i.type,
                i.key,
                i.scope,
                i.tags,
                i.source,
                valid_from=_source_date(i.source_date, f"items[{n}].source_date"),
            )
            for n, i in enumerate(entries)
        ]
        request = vpb.BulkRememberRequest(
            vault=vault,
            source=source,
            items=drafts,
            text=text,
            text_type=_TYPE_TO_PB[type],
            sequence=sequence,
        )
        response = await call(ctx, lambda who: client.bulk_remember(who, request))
        # Each outcome names its item's position (in `items`, or among the pieces `text` was split into).
        outcomes = [{"index": r.index, **_write_view(r)} for r in response.results]
        summary: dict[str, int] = {}
        for outcome in outcomes:
            summary[outcome["outcome"]] = summary.get(outcome["outcome"], 0) + 1
        return {
            "vault": response.vault,
            "batch_id": response.batch_id,
            "summary": summary,
            **_check_view(response.duplicate_check, response.notices),
            "items": outcomes,
        }

    async def list_memories(
        ctx: Context,
        vault: VaultArg = "",
        statuses: Annotated[list[StatusName], Field(description="Only these statuses; default all.")] | None = None,
        types: Annotated[list[MemoryTypeName], Field(description="Only these memory types.")] | None = None,
        tags: Annotated[list[str], Field(description="Only memories carrying all of these tags.")] | None = None,
        limit: Annotated[
            StrictInt,
            Between(1, limits.MAX_LIST_RESULTS),
            Field(description=f"Memories per page; default {limits.DEFAULT_LIST_RESULTS}."),
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
        draft = _draft(
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
            vault=vault, memory_id=memory_id, replacement=draft, expected_version=expected_version
        )
        response = await call(ctx, lambda who: client.supersede(who, request))
        answer: dict[str, Any] = {
            "vault": response.vault,
            "replaced": memory_id,
            "applied": response.applied,
            **_write_view(response.result),
            **_check_view(response.duplicate_check, response.notices),
        }
        if response.flagged_dependents:
            answer["flagged_dependents"] = list(response.flagged_dependents)
        return answer

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
        response = await call(ctx, lambda who: client.invalidate(who, request))
        answer: dict[str, Any] = {
            "vault": response.vault,
            "applied": response.applied,
            "memory": memory_view(response.memory),
            "message": (
                "invalidated: recall no longer returns it (except as_of an earlier time)"
                if response.applied
                else "flagged for the owner, who decides; it stays as it is until then"
            ),
        }
        if response.flagged_dependents:
            answer["flagged_dependents"] = list(response.flagged_dependents)
        return answer

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
        cursor: Annotated[str, Field(description="next_cursor from the previous page, to get the next one.")] = "",
    ) -> dict[str, Any]:
        request = vpb.AuditMemoriesRequest(vault=vault, kinds=list(kinds or ()), limit=limit, cursor=cursor)
        response = await call(ctx, lambda who: client.audit_memories(who, request))
        return {
            "vault": response.vault,
            "counts": dict(response.counts),
            "findings": [
                {
                    "memory": memory_view(f.memory),
                    "problems": list(f.kinds),
                    **({"related": list(f.related)} if f.related else {}),
                    "advice": f.message,
                }
                for f in response.findings
            ],
            "next_cursor": response.next_cursor or None,
        }

    async def explain_memory(ctx: Context, memory_id: MemoryIdArg, vault: VaultArg = "") -> dict[str, Any]:
        request = vpb.ExplainMemoryRequest(vault=vault, memory_id=memory_id)
        response = await call(ctx, lambda who: client.explain(who, request))
        related: dict[str, list[dict[str, Any]]] = {}
        for item in response.related:
            related.setdefault(item.relation, []).append(memory_view(item.memory))
        return {
            "vault": response.vault,
            "memory": full_view(response.memory),
            "state": list(response.notes),
            "history": [
                {
                    "version": h.version,
                    "change": h.change,
                    "by": h.actor,
                    "at": _iso(h.at, h.HasField("at")),
                    "status": _STATUS_NAME.get(h.status, "active"),
                    **({"changed": list(h.changed_fields)} if h.changed_fields else {}),
                    **({"caused_by": h.cause} if h.cause else {}),
                    **({"content": h.content} if h.content else {}),
                }
                for h in response.history
            ],
            "related": related,
            **({"missing": list(response.missing)} if response.missing else {}),
        }

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
            "scores (0 to 1, higher is closer; compare them only within one answer) and status, and a `mode`: "
            "'hybrid' matches by meaning and by words; 'keyword-only' means semantic search is off or down, so "
            "only memories sharing words with the query are found: retry with the exact words you expect. "
            "Weigh `warnings` before relying on a result (conflicts, superseded or stale memories, past review); results carry "
            "`may_conflict_with` / `conflicts_with`. `as_of` answers with what was valid at a past time. "
            "Proposed memories are not yet reviewed by the owner; follow `next_cursor` for more.",
            read_only,
        ),
        (
            remember,
            "Remember",
            "Save something the owner stated that will matter in later conversations: one idea per call, as "
            "full sentences. Recall first. Never save secrets (they are refused). Depending on the vault's "
            "approval mode it is stored active or waits for review (see `status`). A repeat of a stored memory "
            "is skipped ('duplicate', with the `id` of the stored one); one that may update or contradict a stored memory "
            "is stored and linked ('similar', with `similar_to`). Give `key` (and `scope`) for a value that can "
            "change, `depends_on` for memories it relies on, `expires_at` for something temporary.",
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
            f"Import up to {limits.MAX_BULK_ITEMS} memories at once, e.g. an app's saved memories, as a list of "
            "items (objects, or plain strings of content; `source_date` per item says when it was stated) or as "
            "markdown/plain text to split. The import is one batch the owner can undo; each item "
            "(by its `index`) reports 'stored', 'similar' (stored, linked to `similar_to`), 'duplicate' (with the `id` it repeats), "
            "'excluded' (forgotten or rejected earlier), 'secret' (refused) or 'invalid' (with the reason). "
            "Split larger imports into several calls.",
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
        (
            supersede,
            "Supersede memory",
            "Replace a memory that is out of date with a new one, keeping the old as history (recall stops "
            "returning it). The replacement is a whole memory: give its type, key, scope and tags again, "
            "nothing is carried over. In review mode the replacement waits for the owner and the old one stays "
            "until it is approved. Memories that depend on the old one are flagged for review. A replacement "
            "that says the same as a stored memory is refused.",
            additive,
        ),
        (
            invalidate,
            "Invalidate memory",
            "Mark a memory as no longer true without replacing it (it is kept as history). Give the reason. In "
            "review mode this flags it for the owner instead. Memories that depend on it are flagged.",
            additive,
        ),
        (
            audit_memory,
            "Audit memories",
            "Find memories that need attention: expired, conflicting (same key and scope), possibly contradicting "
            "(similar and both active), past their review date, or flagged because something they depend on "
            "changed. Use it when the owner asks to tidy up, then supersede, invalidate or ask the owner.",
            read_only,
        ),
        (
            explain_memory,
            "Explain memory",
            "Everything about one memory: its state and whether recall returns it, every version with who changed "
            "what, what it depends on, what depends on it, similar memories, and what it replaced or was replaced by.",
            read_only,
        ),
    ]
    tools = []
    for fn, title, description, hints in specs:
        tool = Tool.from_function(fn, name=fn.__name__, title=title, description=description, annotations=hints)
        # A misspelt argument must fail loudly, not be dropped (see ArgumentsMiddleware).
        tool.parameters["additionalProperties"] = False
        tools.append(tool)
    return tools
