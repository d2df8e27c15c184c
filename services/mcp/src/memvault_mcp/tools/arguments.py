"""The arguments tools share, as the agent sees them in the input schemas, and their translation into
the vault's request messages (a memory draft, dates as Timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from memvault.vault.v1 import memory_pb2 as pb
from memvault_core import limits, wire
from memvault_core.validation import Between
from memvault_core.wire import MemoryTypeName

VaultArg = Annotated[
    str,
    Field(
        description="Vault name; empty for your default (get_operating_guide lists yours).",
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
        description="ISO 8601 date or time, e.g. '2027-01-31'; empty to leave out.",
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
CursorArg = Annotated[str, Field(description="next_cursor from the previous page, to get the next one.")]


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


def parse_time(value: str, field: str) -> Timestamp | None:
    """An ISO 8601 date or time as a Timestamp (UTC when no offset is given); None for empty."""
    try:
        # A lower-case 'z' is read as UTC too: agents write it, and the tools have always taken it.
        return wire.to_timestamp(wire.parse_iso(value.replace("Z", "+00:00").replace("z", "+00:00")))
    except ValueError:
        raise ToolError(
            f"{field} {value.strip()[:40]!r} is not a date; write it as ISO 8601, e.g. '2027-01-31' or "
            "'2027-01-31T09:00:00Z'"
        ) from None


def source_date(value: str, field: str) -> str:
    """`value` checked as the date something was stated: ISO 8601 and not in the future."""
    stamp = parse_time(value, field)
    if stamp is not None and stamp.ToDatetime(tzinfo=UTC) > datetime.now(UTC) + SOURCE_DATE_SLACK:
        raise ToolError(f"{field} {value[:40]!r} is in the future; it is the date the memory was stated")
    return value


def draft(
    content: str,
    type: str,
    key: str,
    scope: str,
    tags: list[str],
    source: str,
    trust: Literal["", "stated", "inferred"] = "",
    *,
    confidence: float = 0.0,
    valid_from: str = "",
    valid_to: str = "",
    review_after: str | None = "",
    expires_at: str = "",
    depends_on: list[str] | None = None,
) -> pb.MemoryDraft:
    """The memory an agent described, as the vault's draft; dates checked, 'never' review meaning none."""
    never = review_after is None or review_after.strip().lower() == "never"
    return pb.MemoryDraft(
        content=content,
        type=wire.MEMORY_TYPES.value(type),
        key=key,
        scope=scope,
        tags=tags,
        source=source,
        trust=wire.TRUSTS.value(trust) if trust else pb.TRUST_UNSPECIFIED,
        confidence=confidence,
        valid_from=parse_time(valid_from, "valid_from"),
        valid_to=parse_time(valid_to, "valid_to"),
        review_after=None if never else parse_time(review_after or "", "review_after"),
        no_review=never,
        expires_at=parse_time(expires_at, "expires_at"),
        depends_on=depends_on or [],
    )
