"""Archive records to and from protobuf messages (the memory's are in convert.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core import wire
from memvault_vault.archive.records import ConversationRecord, ImportRecord, MessageRecord, Receipt, VaultMap
from memvault_vault.archive.service import Draft


def drafts(messages: Sequence[pb.MessageDraft]) -> list[Draft]:
    return [
        (
            m.role.strip().lower(),
            m.text,
            m.content_type.strip(),
            m.created_at.ToDatetime(tzinfo=UTC) if m.HasField("created_at") else None,
        )
        for m in messages
    ]


def summary(record: ConversationRecord) -> pb.ConversationSummary:
    return pb.ConversationSummary(
        id=record.id,
        title=record.title or "",
        has_title=record.title is not None,
        tags=record.tags,
        tags_version=record.tags_version,
        head_revision=record.head_revision,
        message_count=record.message_count,
        source=record.source,
        external_id=record.external_id,
        created_at=wire.to_timestamp(record.created_at),
        updated_at=wire.to_timestamp(record.updated_at),
        content_sha256=record.content_sha256,
        derived_from=derived(record.derived_from),
    )


def derived(source: dict[str, Any] | None) -> pb.DerivedFrom | None:
    if not source:
        return None
    return pb.DerivedFrom(vault=source["vault"], conversation_id=source["conversation_id"], revision=source["revision"])


def vault_map_message(found: VaultMap) -> pb.GetVaultMapResponse:
    return pb.GetVaultMapResponse(
        groups=[
            pb.VaultMapGroup(
                tag=g.tag,
                memories=g.memories,
                conversations=g.conversations,
                own_memories=g.own_memories,
                own_conversations=g.own_conversations,
            )
            for g in found.groups
        ],
        items=[
            pb.VaultMapItem(
                kind=i.kind,
                id=i.id,
                label=i.label,
                group=i.group,
                tags=i.tags,
                sources=i.sources,
                derived_from=derived(i.derived_from),
            )
            for i in found.items
        ],
        links=[
            pb.VaultMapLink(kind=k.kind, from_id=k.from_id, to_id=k.to_id, to_label=k.to_label, to_drawn=k.to_drawn)
            for k in found.links
        ],
        memories=found.memories,
        conversations=found.conversations,
        other_tags=found.other_tags,
    )


def archived(m: MessageRecord, *, with_key: bool = True) -> pb.ArchivedMessage:
    """A message on the wire; without its key in the reads fitted to a byte budget, which count none
    (domain/archive_reads.py `message_item`)."""
    return pb.ArchivedMessage(
        id=m.id,
        node_id=m.node_id,
        parent_node_id=m.parent_node_id or "",
        role=m.role,
        content_type=m.content_type,
        text=m.text,
        content_json=m.content or "",
        created_at=wire.to_timestamp(m.created_at),
        active=m.active,
        position=m.position,
        key=(m.key or "") if with_key else "",
    )


def unkeyed(m: MessageRecord) -> pb.ArchivedMessage:
    """`archived` for the reads fitted to a byte budget."""
    return archived(m, with_key=False)


def receipt(record: Receipt) -> pb.WriteReceipt:
    return pb.WriteReceipt(
        conversation_id=record.conversation_id,
        revision=record.revision,
        durable=record.durable,
        indexing=record.indexing,
        indexing_pending=record.indexing_pending,
        replayed=record.replayed,
        content_sha256=record.content_sha256,
        message_count=record.message_count,
        verified=summary(record.verified) if record.verified else None,
        readback=[archived(m) for m in record.readback],
        omitted=[
            pb.OmittedRead(
                conversation_id=o.conversation_id, revision=o.revision, after_position=o.after_position, count=o.count
            )
            for o in record.omitted
        ],
        changes=record.changes,
        derived_from=derived(record.derived_from),
    )


def import_status(record: ImportRecord) -> pb.ImportStatus:
    return pb.ImportStatus(
        id=record.id,
        state=record.state,
        filename=record.filename,
        size=record.size,
        sha256=record.sha256,
        total=record.total,
        done=record.next_index,
        remaining=max(record.total - record.next_index, 0),
        duplicates=record.duplicates,
        failed=record.failed,
        imported=record.imported,
        updated=record.updated,
        failures=[pb.ImportFailure(conversation_id=ref, error=error) for ref, error in record.failures],
        duplicate_of=record.duplicate_of or "",
        error=record.error,
        parts=record.parts,
        format=record.format,
        created_at=wire.to_timestamp(record.created_at),
        retrying=record.retrying,
    )
