"""The /api/v1 memory routes' vocabulary: request bodies validated with the vault's own limits, enum
names, and the JSON views of the vault's replies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Query
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt
from pydantic_core import PydanticCustomError

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core import vault_client as rpc
from memvault_core.validation import Between
from memvault_gateway.auth.bearer import Principal
from memvault_gateway.context import Gateway

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# The names the vault's enums have on the wire (`memvault_core.wire`, read from the descriptors).
MemoryType = wire.MemoryTypeName
StatusName = wire.StatusName
AuditKind = wire.AuditKindName


def iso_time(value: object) -> object:
    """ISO 8601 text only: pydantic alone would also read a number, even the text '0.5', as seconds since 1970."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = wire.parse_iso(value)  # also refuses one that cannot be moved to UTC (year 1 at +14:00)
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed
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
            type=wire.MEMORY_TYPES.value(self.type),
            key=self.key,
            scope=self.scope,
            tags=self.tags,
            source=self.source,
            trust=pb.TRUST_STATED,
            confidence=self.confidence or 0.0,
            valid_from=wire.to_timestamp(self.valid_from),
            valid_to=wire.to_timestamp(self.valid_to),
            review_after=wire.to_timestamp(self.review_after),
            no_review=no_review,
            expires_at=wire.to_timestamp(self.expires_at),
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


class LiftIn(Body):
    """Lift the exclusion of this text (the text is hashed, never stored)."""

    text: str = Field(min_length=1, max_length=limits.MAX_CONTENT_CHARS)


class EditIn(Body):
    """A fix in place: the corrected text, the new tags, or both (what is left out stays)."""

    content: str | None = Field(default=None, min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    tags: list[Annotated[str, Field(max_length=limits.MAX_TAG_CHARS)]] | None = Field(
        default=None, max_length=limits.MAX_TAGS
    )
    expected_version: Version = 0

    def request(self, vault: str, memory_id: str) -> vpb.EditMemoryRequest:
        request = vpb.EditMemoryRequest(
            vault=vault,
            memory_id=memory_id,
            replace_tags=self.tags is not None,
            tags=self.tags or [],
            expected_version=self.expected_version,
        )
        if self.content is not None:
            request.content = self.content
        return request


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


def batch_json(batch: vpb.ImportBatch) -> dict[str, Any]:
    return {
        "id": batch.id,
        "source": batch.source,
        "actor": batch.actor,
        "item_count": batch.item_count,
        "stored_count": batch.stored_count,
        "outcomes": dict(batch.outcomes),
        "created_at": wire.iso_for_api(batch, "created_at"),
        "undone_at": wire.iso_for_api(batch, "undone_at"),
    }


def related_json(related: Any) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in related:
        grouped.setdefault(item.relation, []).append(wire.memory_for_api(item.memory))
    return grouped


async def vault_call(
    gw: Gateway,
    method: Callable[[rpc.VaultClient, str, RequestT], Awaitable[ResponseT]],
    request: RequestT,
    caller: Principal,
) -> ResponseT:
    """One vault RPC (`rpc.VaultClient.<method>`) as the caller; imports get the longer deadline."""
    return await gw.vault.call(method, request, caller.identity())
