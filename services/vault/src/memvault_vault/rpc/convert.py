"""Domain dataclasses to and from protobuf messages."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.errors import InvalidArgument
from memvault_vault.domain.memory import Draft, Memory, MemoryType, Outcome, Status, Trust, WriteResult

_TYPES = {t: getattr(pb, f"MEMORY_TYPE_{t.name}") for t in MemoryType}
_TYPES_BACK = {v: k for k, v in _TYPES.items()}
_STATUSES = {s: getattr(pb, f"MEMORY_STATUS_{s.name}") for s in Status}
_STATUSES_BACK = {v: k for k, v in _STATUSES.items()}
_TRUSTS = {t: getattr(pb, f"TRUST_{t.name}") for t in Trust}
_TRUSTS_BACK = {v: k for k, v in _TRUSTS.items()}
_OUTCOMES = {o: getattr(vpb, f"WRITE_OUTCOME_{o.name}") for o in Outcome}


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp


def memory_to_proto(memory: Memory) -> pb.Memory:
    return pb.Memory(
        id=memory.id,
        vault=memory.vault,
        content=memory.content,
        content_hash=memory.content_hash,
        type=_TYPES[memory.type],
        key=memory.key or "",
        scope=memory.scope or "",
        tags=memory.tags,
        source=memory.source,
        client=memory.client,
        trust=_TRUSTS[memory.trust],
        confidence=memory.confidence or 0.0,
        status=_STATUSES[memory.status],
        valid_from=_timestamp(memory.valid_from),
        valid_to=_timestamp(memory.valid_to),
        review_after=_timestamp(memory.review_after),
        expires_at=_timestamp(memory.expires_at),
        depends_on=memory.depends_on,
        supersedes=memory.supersedes or "",
        superseded_by=memory.superseded_by or "",
        similar_to=memory.similar_to,
        batch_id=memory.batch_id or "",
        version=memory.version,
        pinned=memory.pinned,
        created_at=_timestamp(memory.created_at),
        updated_at=_timestamp(memory.updated_at),
    )


def draft_from_proto(message: pb.MemoryDraft) -> Draft:
    if message.type not in _TYPES_BACK and message.type != pb.MEMORY_TYPE_UNSPECIFIED:
        raise InvalidArgument(f"unknown memory type {message.type}", field="type")
    return Draft(
        content=message.content,
        type=_TYPES_BACK.get(message.type, MemoryType.FACT),
        key=message.key or None,
        scope=message.scope or None,
        tags=tuple(message.tags),
        source=message.source,
        trust=_TRUSTS_BACK.get(message.trust),
        confidence=message.confidence or None,
        valid_from=message.valid_from.ToDatetime(UTC) if message.HasField("valid_from") else None,
    )


def types_from_proto(values: list[int]) -> list[MemoryType]:
    return [_TYPES_BACK[v] for v in values if v in _TYPES_BACK]


def statuses_from_proto(values: list[int]) -> list[Status]:
    return [_STATUSES_BACK[v] for v in values if v in _STATUSES_BACK]


def result_to_proto(result: WriteResult) -> vpb.WriteResult:
    return vpb.WriteResult(
        outcome=_OUTCOMES[result.outcome],
        memory_id=result.memory_id,
        status=_STATUSES[result.status],
        message=result.message,
        index=result.index,
    )
