"""One translation between the vault's protobuf messages and what the edges show: enum names,
timestamps, and the memory as JSON.

Enum names come from the protobuf descriptors: a value's name without its enum's prefix, in lower
case (`MEMORY_TYPE_FACT` -> "fact"), so a value added to a .proto file is named everywhere at once.

The two edges show a memory in two shapes on purpose, and each is kept exactly as its clients
know it:

- `*_for_agent` (the MCP tools): compact, because every token an agent reads costs context. Empty
  fields are left out; times are naive UTC ISO 8601 ending in "Z"; an unknown trust reads "synced".
- `*_for_api` (the JSON API, `/api/v1`): every field present, empty ones null, so a program can rely
  on the keys; times end in "+00:00"; an unknown trust reads "stated".
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Generic, Literal, Protocol, TypeVar, cast

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import vault_pb2 as vpb

ValueT = TypeVar("ValueT", bound=int)
ValueT_co = TypeVar("ValueT_co", bound=int, covariant=True)


class _Enum(Protocol[ValueT_co]):
    """A generated protobuf enum (its `EnumTypeWrapper`)."""

    @property
    def DESCRIPTOR(self) -> EnumDescriptor: ...

    def Value(self, name: str | bytes) -> ValueT_co: ...


class EnumNames(Generic[ValueT]):
    """The names of one protobuf enum as the edges spell them.

    The prefix is the enum's own name in upper snake case (buf's ENUM_VALUE_PREFIX rule); the zero
    value (`*_UNSPECIFIED`) has no name. `separator` joins the words of a name: "_" for all but
    DuplicateCheck, whose "exact-only" has been published with a hyphen.
    """

    def __init__(self, enum: _Enum[ValueT], separator: str = "_") -> None:
        descriptor = enum.DESCRIPTOR
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", descriptor.name).upper() + "_"
        self._names: dict[int, str] = {}
        for value in descriptor.values:
            if value.number == 0:
                continue
            if not value.name.startswith(prefix):
                raise ValueError(f"{descriptor.full_name}.{value.name} does not start with {prefix}")
            self._names[value.number] = value.name.removeprefix(prefix).lower().replace("_", separator)
        self._values: dict[str, ValueT] = {name: cast(ValueT, number) for number, name in self._names.items()}

    @property
    def names(self) -> tuple[str, ...]:
        """Every name, in the order the .proto file declares the values."""
        return tuple(self._names.values())

    def name(self, value: int) -> str | None:
        """The name of `value`; None for the zero value or one this code does not know."""
        return self._names.get(value)

    def name_or(self, value: int, default: str) -> str:
        """The name of `value`, or `default` for the zero value or an unknown one."""
        return self._names.get(value, default)

    def value(self, name: str) -> ValueT:
        """The enum value called `name`; KeyError for a name that is not one of `names`."""
        return self._values[name]


MEMORY_TYPES = EnumNames(pb.MemoryType)
MEMORY_STATUSES = EnumNames(pb.MemoryStatus)
TRUSTS = EnumNames(pb.Trust)
WRITE_OUTCOMES = EnumNames(vpb.WriteOutcome)
DUPLICATE_CHECKS = EnumNames(vpb.DuplicateCheck, separator="-")
ROLES = EnumNames(apb.Role)
SOURCE_KINDS = EnumNames(spb.SourceKind)
SOURCE_MODES = EnumNames(spb.SourceMode)
SOURCE_CHANGE_STATUSES = EnumNames(spb.SourceChangeStatus)

# The same names as types, for input schemas (JSON Schema enums need them spelt out); the unit
# tests hold them equal to the descriptors' names, in the same order.
MemoryTypeName = Literal["fact", "preference", "decision", "constraint", "assumption", "observation", "instruction"]
StatusName = Literal["proposed", "active", "superseded", "rejected", "invalidated"]
RoleName = Literal["owner", "editor", "viewer"]
SourceKindName = Literal["json_file", "json_url", "text_file", "text_url"]
SourceModeName = Literal["auto", "review"]
# Audit finding kinds are strings on the wire (AuditFinding.kinds), not a protobuf enum.
AuditKindName = Literal["expired", "conflict", "may_conflict", "past_review", "flagged"]
AUDIT_KINDS: tuple[str, ...] = ("expired", "conflict", "may_conflict", "past_review", "flagged")

# Outcomes whose result names a stored memory, so its status means something.
_OUTCOMES_WITH_STATUS = ("stored", "similar", "duplicate")


# --- timestamps --------------------------------------------------------------------------------------


def parse_iso(text: str) -> datetime | None:
    """ISO 8601 text as an aware UTC datetime (UTC when it names no offset); None for blank text.

    ValueError when it is not a date or time, or when it names one that cannot be moved to UTC
    (year 1 at +14:00)."""
    text = text.strip()
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text[:40]!r} cannot be moved to UTC") from None


def to_timestamp(value: datetime | None) -> Timestamp | None:
    """A datetime as a Timestamp (a naive one read as UTC); None stays None (the field is left unset)."""
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime((value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC))
    return stamp


def from_timestamp(message: Message, field: str) -> datetime | None:
    """The Timestamp field `field` of `message` as an aware UTC datetime, or None when it is unset."""
    if not message.HasField(field):
        return None
    value: datetime = getattr(message, field).ToDatetime(tzinfo=UTC)
    return value


def iso_for_agent(message: Message, field: str) -> str | None:
    """A Timestamp field as the MCP tools show it, e.g. '2027-01-31T09:00:00Z'; None when unset."""
    return getattr(message, field).ToDatetime().isoformat() + "Z" if message.HasField(field) else None


def iso_for_api(message: Message, field: str) -> str | None:
    """A Timestamp field as the JSON API shows it, e.g. '2027-01-31T09:00:00+00:00'; None when unset."""
    value = from_timestamp(message, field)
    return value.isoformat() if value is not None else None


# --- the memory, as each edge shows it ----------------------------------------------------------------


def memory_for_agent(memory: pb.Memory, score: float | None = None) -> dict[str, Any]:
    """A compact memory for an agent: empty fields left out."""
    view: dict[str, Any] = {
        "id": memory.id,
        "content": memory.content,
        "type": MEMORY_TYPES.name_or(memory.type, "fact"),
        "status": MEMORY_STATUSES.name_or(memory.status, "active"),
    }
    if score is not None:
        view["score"] = round(score, 4)
    for name in ("key", "scope", "source"):
        if value := getattr(memory, name):
            view[name] = value
    if memory.tags:
        view["tags"] = list(memory.tags)
    view["created_at"] = iso_for_agent(memory, "created_at")
    for name in ("valid_to", "review_after", "expires_at"):
        if (value := iso_for_agent(memory, name)) is not None:
            view[name] = value
    for name in ("depends_on", "similar_to"):
        if values := list(getattr(memory, name)):
            view[name] = values
    for name in ("supersedes", "superseded_by", "flagged_reason", "status_reason"):
        if value := getattr(memory, name):
            view[name] = value
    if memory.confidence:
        view["confidence"] = round(memory.confidence, 3)
    return view


def memory_in_full_for_agent(memory: pb.Memory) -> dict[str, Any]:
    """The compact memory plus every field an explanation needs (explain_memory)."""
    view = memory_for_agent(memory)
    view["version"] = memory.version
    view["trust"] = TRUSTS.name_or(memory.trust, "synced")
    if memory.client:
        view["client"] = memory.client
    if memory.batch_id:
        view["batch_id"] = memory.batch_id
    view["valid_from"] = iso_for_agent(memory, "valid_from")
    view["updated_at"] = iso_for_agent(memory, "updated_at")
    if (reviewed_at := iso_for_agent(memory, "reviewed_at")) is not None:
        view["reviewed_at"] = reviewed_at
    if memory.metadata_json:
        view["metadata"] = json.loads(memory.metadata_json)
    return view


def memory_for_api(memory: pb.Memory) -> dict[str, Any]:
    """A memory with every field; empty optional ones are null."""
    return {
        "id": memory.id,
        "vault": memory.vault,
        "content": memory.content,
        "type": MEMORY_TYPES.name_or(memory.type, "fact"),
        "status": MEMORY_STATUSES.name_or(memory.status, "active"),
        "key": memory.key or None,
        "scope": memory.scope or None,
        "tags": list(memory.tags),
        "source": memory.source,
        "client": memory.client,
        "trust": TRUSTS.name_or(memory.trust, "stated"),
        "confidence": round(memory.confidence, 3) if memory.confidence else None,
        "valid_from": iso_for_api(memory, "valid_from"),
        "valid_to": iso_for_api(memory, "valid_to"),
        "review_after": iso_for_api(memory, "review_after"),
        "expires_at": iso_for_api(memory, "expires_at"),
        "depends_on": list(memory.depends_on),
        "supersedes": memory.supersedes or None,
        "superseded_by": memory.superseded_by or None,
        "similar_to": list(memory.similar_to),
        "batch_id": memory.batch_id or None,
        "version": memory.version,
        "status_reason": memory.status_reason or None,
        "flagged_reason": memory.flagged_reason or None,
        "flagged_at": iso_for_api(memory, "flagged_at"),
        "reviewed_at": iso_for_api(memory, "reviewed_at"),
        "created_at": iso_for_api(memory, "created_at"),
        "updated_at": iso_for_api(memory, "updated_at"),
    }


# --- a write's result ----------------------------------------------------------------------------------


def write_result_for_agent(result: vpb.WriteResult) -> dict[str, Any]:
    """One write's outcome for an agent: empty fields left out."""
    outcome = WRITE_OUTCOMES.name_or(result.outcome, "stored")
    view: dict[str, Any] = {"outcome": outcome}
    if result.memory_id:
        view["id"] = result.memory_id
    if result.outcome in (vpb.WRITE_OUTCOME_STORED, vpb.WRITE_OUTCOME_SIMILAR, vpb.WRITE_OUTCOME_DUPLICATE):
        view["status"] = MEMORY_STATUSES.name_or(result.status, "active")
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


def duplicate_check_for_agent(check: vpb.DuplicateCheck.ValueType, notices: Any) -> dict[str, Any]:
    """How duplicates were looked for, with the write's notices when there are any."""
    view: dict[str, Any] = {"duplicate_check": DUPLICATE_CHECKS.name_or(check, "semantic")}
    if notices:
        view["notices"] = list(notices)
    return view


def write_result_for_api(result: vpb.WriteResult) -> dict[str, Any]:
    """One write's outcome with every field; empty optional ones are null."""
    outcome = WRITE_OUTCOMES.name_or(result.outcome, "stored")
    return {
        "index": result.index,
        "outcome": outcome,
        "id": result.memory_id or None,
        "status": MEMORY_STATUSES.name(result.status) if outcome in _OUTCOMES_WITH_STATUS else None,
        "match": result.match or None,
        "cosine": round(result.cosine, 3) if result.cosine else None,
        "similar_to": list(result.similar_to),
        "conflicts_with": list(result.conflicts_with),
        "message": result.message,
    }
