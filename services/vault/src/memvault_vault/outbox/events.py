"""Outbox events: protobuf messages on `memvault.events.v1.<entity>.<verb>`.

They carry ids and hashes only, never memory text. A write of many memories sends one
`memories.created` per MAX_PER_EVENT of them: one event each cost a bulk write about a third of a
millisecond per memory (the relay's publish and its acknowledgement, JetStream storing it, the
indexer acknowledging it), a twentieth of what embedding the memory costs.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from opentelemetry import propagate

from memvault.events.v1 import archive_events_pb2 as archive_pb
from memvault.events.v1 import memory_events_pb2 as pb

MAX_PER_EVENT = 256
"""Memories per `memories.created` event (about 28 KB): the indexer's default batch, so that indexing one
event takes no longer than a batch of single events did (its acknowledgement wait is 60 s)."""

EVENTS = "events.v1."
"""Subjects are `<subject root>.events.v1.memory.<verb>`; the root is `memvault` unless a NATS
namespace is configured (see memvault_core.settings.NatsSettings)."""


@dataclass(frozen=True)
class OutboxEvent:
    id: str
    subject: str
    payload: bytes
    headers: dict[str, str]


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime.now(UTC))
    return stamp


def _event(verb: str, message: Message, event_id: str, entity: str = "memory") -> OutboxEvent:
    headers: dict[str, str] = {}
    propagate.inject(headers)  # trace context travels with the event
    # The outbox stores the subject without its root; the relay adds the configured one.
    return OutboxEvent(event_id, f"{EVENTS}{entity}.{verb}", message.SerializeToString(), headers)


def memory_created(memory_id: str, vault_id: str, content_hash: str) -> OutboxEvent:
    event_id = str(uuid.uuid4())
    message = pb.MemoryCreated(
        event_id=event_id,
        memory_id=memory_id,
        vault_id=vault_id,
        content_hash=content_hash,
        occurred_at=_now(),
    )
    return _event("created", message, event_id)


def memories_created(vault_id: str, memories: Sequence[tuple[str, str]]) -> list[OutboxEvent]:
    """Events for new memories of one vault, given as (memory id, content hash): `memory.created` for one,
    else one `memories.created` per MAX_PER_EVENT of them."""
    if len(memories) == 1:
        return [memory_created(memories[0][0], vault_id, memories[0][1])]
    events: list[OutboxEvent] = []
    for start in range(0, len(memories), MAX_PER_EVENT):
        event_id = str(uuid.uuid4())
        message = pb.MemoriesCreated(
            event_id=event_id,
            vault_id=vault_id,
            memories=[
                pb.CreatedMemory(memory_id=i, content_hash=h) for i, h in memories[start : start + MAX_PER_EVENT]
            ],
            occurred_at=_now(),
        )
        events.append(_event("created", message, event_id, "memories"))
    return events


def memory_forgotten(memory_id: str, vault_id: str) -> OutboxEvent:
    event_id = str(uuid.uuid4())
    message = pb.MemoryForgotten(event_id=event_id, memory_id=memory_id, vault_id=vault_id, occurred_at=_now())
    return _event("forgotten", message, event_id)


def message_archived(
    message_id: str, vault_id: str, conversation_id: str, revision: int, content_hash: str
) -> OutboxEvent:
    """`message.archived`: a message of an archived conversation was written (the indexer embeds it)."""
    event_id = str(uuid.uuid4())
    message = archive_pb.MessageArchived(
        event_id=event_id,
        message_id=message_id,
        vault_id=vault_id,
        conversation_id=conversation_id,
        revision=revision,
        content_hash=content_hash,
        occurred_at=_now(),
    )
    return _event("archived", message, event_id, "message")


def conversation_deleted(conversation_id: str, vault_id: str) -> OutboxEvent:
    """`conversation.deleted`: the indexer removes the points of every message of the conversation."""
    event_id = str(uuid.uuid4())
    message = archive_pb.ConversationDeleted(
        event_id=event_id, conversation_id=conversation_id, vault_id=vault_id, occurred_at=_now()
    )
    return _event("deleted", message, event_id, "conversation")
