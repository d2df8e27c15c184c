"""Domain dataclasses to and from protobuf messages.

Enum values are matched by name: each domain enum's values are the names `memvault_core.wire`
reads from the protobuf descriptors (MemoryType.FACT = "fact" <-> MEMORY_TYPE_FACT), so the edges,
the vault and the .proto files say the same thing; a value missing on either side fails at import.
"""

from __future__ import annotations

import json

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import wire
from memvault_core.errors import InvalidArgument
from memvault_vault.domain.duplicates import DuplicateCheck
from memvault_vault.domain.filters import MemoryFilter, memory_filter
from memvault_vault.domain.inputs import parse_metadata
from memvault_vault.domain.memory import Draft, Memory, MemoryType, MemoryWarning, Outcome, Status, Trust, WriteResult
from memvault_vault.imports.records import BatchInfo
from memvault_vault.retention.records import RetentionOutlook

_TYPES = {t: wire.MEMORY_TYPES.value(t.value) for t in MemoryType}
_TYPES_BACK: dict[int, MemoryType] = {v: k for k, v in _TYPES.items()}
_STATUSES = {s: wire.MEMORY_STATUSES.value(s.value) for s in Status}
_STATUSES_BACK: dict[int, Status] = {v: k for k, v in _STATUSES.items()}
_TRUSTS = {t: wire.TRUSTS.value(t.value) for t in Trust}
_TRUSTS_BACK: dict[int, Trust] = {v: k for k, v in _TRUSTS.items()}
_OUTCOMES = {o: wire.WRITE_OUTCOMES.value(o.value) for o in Outcome}
_CHECKS = {c: wire.DUPLICATE_CHECKS.value(c.value) for c in DuplicateCheck}


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
        valid_from=wire.to_timestamp(memory.valid_from),
        valid_to=wire.to_timestamp(memory.valid_to),
        review_after=wire.to_timestamp(memory.review_after),
        expires_at=wire.to_timestamp(memory.expires_at),
        depends_on=memory.depends_on,
        supersedes=memory.supersedes or "",
        superseded_by=memory.superseded_by or "",
        similar_to=memory.similar_to,
        batch_id=memory.batch_id or "",
        version=memory.version,
        pinned=memory.pinned,
        created_at=wire.to_timestamp(memory.created_at),
        updated_at=wire.to_timestamp(memory.updated_at),
        status_reason=memory.status_reason or "",
        flagged_reason=memory.flagged_reason or "",
        flagged_at=wire.to_timestamp(memory.flagged_at),
        reviewed_at=wire.to_timestamp(memory.reviewed_at),
        metadata_json=json.dumps(memory.metadata, separators=(",", ":"), ensure_ascii=False) if memory.metadata else "",
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
        valid_from=wire.from_timestamp(message, "valid_from"),
        valid_to=wire.from_timestamp(message, "valid_to"),
        review_after=wire.from_timestamp(message, "review_after"),
        no_review=message.no_review,
        expires_at=wire.from_timestamp(message, "expires_at"),
        depends_on=tuple(message.depends_on),
        metadata=parse_metadata(message.metadata_json),
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
        similar_to=result.similar_to,
        conflicts_with=result.conflicts_with,
        match=result.match,
        cosine=round(result.cosine, 4),
    )


def check_to_proto(check: DuplicateCheck) -> vpb.DuplicateCheck.ValueType:
    return _CHECKS[check]


def status_to_proto(status: Status) -> pb.MemoryStatus.ValueType:
    return _STATUSES[status]


def warning_to_proto(warning: MemoryWarning) -> vpb.MemoryWarning:
    return vpb.MemoryWarning(
        kind=warning.kind, memory_id=warning.memory_id, related=warning.related, message=warning.message
    )


def batch_to_proto(batch: BatchInfo) -> vpb.ImportBatch:
    return vpb.ImportBatch(
        id=batch.id,
        source=batch.source,
        actor=batch.actor,
        item_count=batch.item_count,
        stored_count=batch.stored_count,
        created_at=wire.to_timestamp(batch.created_at),
        undone_at=wire.to_timestamp(batch.undone_at),
        outcomes=batch.outcomes,
    )


def outlook_to_proto(outlook: RetentionOutlook) -> vpb.RetentionOutlook:
    return vpb.RetentionOutlook(
        runner=outlook.runner,
        interval_seconds=outlook.interval_seconds,
        schedule=outlook.schedule,
        last_run=wire.to_timestamp(outlook.last_run),
        next_run=wire.to_timestamp(outlook.next_run),
        due_rejected=outlook.due.rejected,
        due_superseded=outlook.due.superseded,
        due_invalidated=outlook.due.invalidated,
        due_audit_entries=outlook.due.audit_entries,
        due_audit_entries_capped=outlook.audit_entries_capped,
        next_due_at=wire.to_timestamp(outlook.next_due_at),
    )


def filter_from_proto(message: vpb.MemoryFilter) -> MemoryFilter:
    return memory_filter(
        key=message.key,
        scope=message.scope,
        source=message.source,
        client=message.client,
        created_from=wire.from_timestamp(message, "created_from"),
        created_to=wire.from_timestamp(message, "created_to"),
    )
