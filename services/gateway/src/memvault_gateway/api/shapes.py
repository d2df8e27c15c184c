"""The /api/v1 memory routes' vocabulary: request bodies validated with the vault's own limits, enum
names, and the JSON views of the vault's replies."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import Query
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt
from pydantic_core import PydanticCustomError

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits
from memvault_core.validation import Between
from memvault_gateway.auth.bearer import Principal
from memvault_gateway.context import Gateway

MemoryType = Literal["fact", "preference", "decision", "constraint", "assumption", "observation", "instruction"]
StatusName = Literal["proposed", "active", "superseded", "rejected", "invalidated"]
AuditKind = Literal["expired", "conflict", "may_conflict", "past_review", "flagged"]

TYPES = {name: getattr(pb, f"MEMORY_TYPE_{name.upper()}") for name in MemoryType.__args__}  # type: ignore[attr-defined]
STATUSES = {name: getattr(pb, f"MEMORY_STATUS_{name.upper()}") for name in StatusName.__args__}  # type: ignore[attr-defined]
TYPE_NAMES = {v: k for k, v in TYPES.items()}
STATUS_NAMES = {v: k for k, v in STATUSES.items()}
TRUST_NAMES = {
    pb.TRUST_STATED: "stated",
    pb.TRUST_INFERRED: "inferred",
    pb.TRUST_IMPORTED: "imported",
    pb.TRUST_SYNCED: "synced",
}
OUTCOMES = {
    vpb.WRITE_OUTCOME_STORED: "stored",
    vpb.WRITE_OUTCOME_SIMILAR: "similar",
    vpb.WRITE_OUTCOME_DUPLICATE: "duplicate",
    vpb.WRITE_OUTCOME_EXCLUDED: "excluded",
    vpb.WRITE_OUTCOME_SECRET: "secret",
    vpb.WRITE_OUTCOME_INVALID: "invalid",
}
CHECKS = {vpb.DUPLICATE_CHECK_SEMANTIC: "semantic", vpb.DUPLICATE_CHECK_EXACT_ONLY: "exact-only"}


def iso_time(value: object) -> object:
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
Time = Annotated[datetime, BeforeValidator(iso_time)]
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
            type=TYPES[self.type],
            key=self.key,
            scope=self.scope,
            tags=self.tags,
            source=self.source,
            trust=pb.TRUST_STATED,
            confidence=self.confidence or 0.0,
            valid_from=timestamp_of(self.valid_from),
            valid_to=timestamp_of(self.valid_to),
            review_after=timestamp_of(self.review_after),
            no_review=no_review,
            expires_at=timestamp_of(self.expires_at),
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


def timestamp_of(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime((value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC))
    return stamp


def time_of(message: Any, name: str) -> str | None:
    return getattr(message, name).ToDatetime(tzinfo=UTC).isoformat() if message.HasField(name) else None


def memory_json(memory: pb.Memory) -> dict[str, Any]:
    """A memory with every field; empty optional ones are null."""
    return {
        "id": memory.id,
        "vault": memory.vault,
        "content": memory.content,
        "type": TYPE_NAMES.get(memory.type, "fact"),
        "status": STATUS_NAMES.get(memory.status, "active"),
        "key": memory.key or None,
        "scope": memory.scope or None,
        "tags": list(memory.tags),
        "source": memory.source,
        "client": memory.client,
        "trust": TRUST_NAMES.get(memory.trust, "stated"),
        "confidence": round(memory.confidence, 3) if memory.confidence else None,
        "valid_from": time_of(memory, "valid_from"),
        "valid_to": time_of(memory, "valid_to"),
        "review_after": time_of(memory, "review_after"),
        "expires_at": time_of(memory, "expires_at"),
        "depends_on": list(memory.depends_on),
        "supersedes": memory.supersedes or None,
        "superseded_by": memory.superseded_by or None,
        "similar_to": list(memory.similar_to),
        "batch_id": memory.batch_id or None,
        "version": memory.version,
        "status_reason": memory.status_reason or None,
        "flagged_reason": memory.flagged_reason or None,
        "flagged_at": time_of(memory, "flagged_at"),
        "reviewed_at": time_of(memory, "reviewed_at"),
        "created_at": time_of(memory, "created_at"),
        "updated_at": time_of(memory, "updated_at"),
    }


def result_json(result: vpb.WriteResult) -> dict[str, Any]:
    outcome = OUTCOMES.get(result.outcome, "stored")
    return {
        "index": result.index,
        "outcome": outcome,
        "id": result.memory_id or None,
        "status": STATUS_NAMES.get(result.status) if outcome in ("stored", "similar", "duplicate") else None,
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
        "created_at": time_of(batch, "created_at"),
        "undone_at": time_of(batch, "undone_at"),
    }


def related_json(related: Any) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in related:
        grouped.setdefault(item.relation, []).append(memory_json(item.memory))
    return grouped


async def vault_call(gw: Gateway, method: str, request: object, caller: Principal, *, slow: bool = False) -> Any:
    return await gw.vault.memories_call(method, request, caller.identity(), slow=slow)
