"""The durable JetStream consumer that keeps the index in step with the vault.

All indexer replicas pull from one durable consumer, so they share the work like a queue
group. Events are fetched in batches; a batch is acknowledged only after the vector store
holds its points. A transient failure (vault, store or NATS unavailable) puts the batch back
with a delay; any other failure is retried event by event, and an event that has failed
`max_attempts` deliveries goes to the dead-letter stream and is reported to the vault as a
failed index job, so nothing fails silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import nats
import nats.errors
import nats.js.errors
from google.protobuf.message import DecodeError
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from opentelemetry import propagate, trace

from memvault.events.v1 import archive_events_pb2 as archive_events_pb
from memvault.events.v1 import memory_events_pb2 as events_pb
from memvault_core.errors import Unavailable
from memvault_core.events import ensure_streams
from memvault_core.nats_callbacks import NatsCallbacks
from memvault_core.settings import NatsSettings
from memvault_core.supervise import run_forever
from memvault_indexer import metrics
from memvault_indexer.indexing import Indexer

log = logging.getLogger(__name__)
tracer = trace.get_tracer("memvault_indexer")

DURABLE = "indexer"
ACK_WAIT_SECONDS = 60.0
"""How long JetStream waits for an event's acknowledgement before it delivers the event again."""
_MESSAGES: dict[str, Any] = {
    "memory.created": events_pb.MemoryCreated,
    "memory.updated": events_pb.MemoryUpdated,
    "memory.forgotten": events_pb.MemoryForgotten,
}


def _parse(message: Msg) -> tuple[str, list[str]]:
    """(verb, memory ids) of an event message: one id, or many for `memories.created`; for the archive's events
    ("archived", [message id]) and ("deleted", ["<vault id>/<conversation id>"])."""
    entity_verb = ".".join(message.subject.rsplit(".", 2)[-2:])
    if entity_verb == "memories.created":
        return "created", [m.memory_id for m in events_pb.MemoriesCreated.FromString(message.data).memories]
    if entity_verb == "message.archived":
        return "archived", [str(archive_events_pb.MessageArchived.FromString(message.data).message_id)]
    if entity_verb == "conversation.deleted":
        deleted = archive_events_pb.ConversationDeleted.FromString(message.data)
        return "deleted", [f"{deleted.vault_id}/{deleted.conversation_id}"]
    kind = _MESSAGES.get(entity_verb)
    if kind is None:
        raise ValueError(f"unknown event subject {message.subject}")
    return entity_verb.split(".", 1)[1], [str(kind.FromString(message.data).memory_id)]


def _is_bulk(message: Msg) -> bool:
    """A `memories.created`: the one event of a bulk write for many new memories."""
    return message.subject.endswith(".memories.created")


def _size(message: Msg) -> int:
    """Memories an event names: those of a `memories.created`, one for every other event (and for one that
    cannot be read, which then fails on its own)."""
    if _is_bulk(message):
        with contextlib.suppress(DecodeError):
            return max(1, len(events_pb.MemoriesCreated.FromString(message.data).memories))
    return 1


class EventConsumer:
    def __init__(
        self,
        settings: NatsSettings,
        indexer: Indexer,
        *,
        batch_size: int,
        max_attempts: int,
        sample_seconds: float | None = None,
    ) -> None:
        self._settings = settings
        self._sample_seconds = sample_seconds
        self._indexer = indexer
        self._batch = batch_size
        self._max_attempts = max_attempts
        self._fetch_size = batch_size
        """Events the next fetch asks for: `batch_size`, or fewer after a fetch of events naming many memories."""
        self.processed = 0
        self._callbacks = NatsCallbacks(settings.url, "new memories are indexed once it is back")

    async def run(self) -> None:
        """Consume until cancelled, reconnecting with backoff; nothing is acknowledged early."""
        await run_forever(self._run_once, "event consumer")

    async def _run_once(self) -> None:
        nc = await nats.connect(
            self._settings.servers, connect_timeout=2, max_reconnect_attempts=0, **self._callbacks.options()
        )
        try:
            js = nc.jetstream(timeout=5.0)
            await ensure_streams(js, self._settings)
            subject = f"{self._settings.subject_root}.events.v1.>"
            config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_SECONDS, max_ack_pending=10_000)
            await self._widen(js, subject, config)
            subscription = await js.pull_subscribe(
                subject, durable=DURABLE, stream=self._settings.stream, config=config
            )
            log.info("consuming events", extra={"stream": self._settings.stream})
            last_message = time.monotonic()
            last_sample = float("-inf")
            while True:
                if self._sample_seconds is not None and time.monotonic() - last_sample >= self._sample_seconds:
                    await self._sample(js)
                    last_sample = time.monotonic()
                try:
                    messages = await subscription.fetch(self._fetch_size, timeout=1.0)
                except (nats.errors.TimeoutError, TimeoutError):
                    messages = []
                if not messages:
                    await self._indexer.optimize_if_due(idle_seconds=time.monotonic() - last_message)
                    continue
                await self._handle(js, messages)
                last_message = time.monotonic()
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    async def _sample(self, js: JetStreamContext) -> None:
        """Set the gauges of what JetStream holds for the indexer; a failed look is tried next time."""
        try:
            consumer = await js.consumer_info(self._settings.stream, DURABLE)
            metrics.EVENTS_PENDING.set((consumer.num_pending or 0) + (consumer.num_ack_pending or 0))
            dead = await js.stream_info(self._settings.dead_letter_stream)
            metrics.DEAD_LETTERS.set(dead.state.messages)
        except (nats.errors.Error, TimeoutError) as error:
            log.debug("metrics sample failed", extra={"error": type(error).__name__})

    async def _widen(self, js: JetStreamContext, subject: str, config: ConsumerConfig) -> None:
        """A durable consumer made before the archive's events existed listens to memory events only;
        move it to every event (JetStream updates a durable's filter in place, keeping its position)."""
        try:
            info = await js.consumer_info(self._settings.stream, DURABLE)
        except nats.js.errors.NotFoundError:
            return
        if info.config.filter_subject != subject and not info.config.filter_subjects:
            widened = ConsumerConfig(
                durable_name=DURABLE,
                name=DURABLE,
                filter_subject=subject,
                ack_policy=config.ack_policy,
                ack_wait=config.ack_wait,
                max_ack_pending=config.max_ack_pending,
            )
            await js.add_consumer(self._settings.stream, config=widened)
            log.info("event consumer now listens to every event", extra={"subject": subject})

    async def _handle(self, js: JetStreamContext, messages: Sequence[Msg]) -> None:
        """Index a fetch in chunks of at most `batch_size` memories and messages (an event of a bulk write is
        never cut), acknowledging each chunk once it is stored. A fetch keeps bulk events for at most twice
        `batch_size` memories and puts the rest back at once for any replica to take, and the next fetch asks
        for about `batch_size` memories' worth of events; until a fetch is done, its events are marked in
        progress every quarter of the acknowledgement wait, so JetStream hands none of them to another replica."""
        sizes = [_size(m) for m in messages]
        self._fetch_size = max(1, min(self._batch, self._batch * len(messages) // max(1, sum(sizes))))
        kept: list[tuple[Msg, int]] = []
        held = 0
        for message, size in zip(messages, sizes, strict=True):
            if kept and held + size > 2 * self._batch and _is_bulk(message):
                await message.nak()  # a bulk event is split whenever it fails, so a redelivery costs it nothing
                continue
            kept.append((message, size))
            held += size
        unfinished = [message for message, _ in kept]
        heartbeat = asyncio.create_task(self._keep_in_progress(unfinished))
        try:
            chunk: list[Msg] = []
            held = 0
            for message, size in kept:
                if chunk and held + size > self._batch:
                    if not await self._handle_chunk(js, chunk):
                        break
                    del unfinished[: len(chunk)]
                    chunk, held = [], 0
                chunk.append(message)
                held += size
            else:
                if chunk:
                    await self._handle_chunk(js, chunk)
                return
            # A chunk was postponed (the vault, the store or NATS is away): so is the rest, without trying it.
            for message in unfinished[len(chunk) :]:
                await message.nak(delay=5.0)
        finally:
            # Not awaited: suppressing its CancelledError there would also swallow a cancellation of this task.
            heartbeat.cancel()

    async def _keep_in_progress(self, unfinished: list[Msg]) -> None:
        while True:
            await asyncio.sleep(ACK_WAIT_SECONDS / 4)
            for message in list(unfinished):
                with contextlib.suppress(nats.errors.Error):
                    await message.in_progress()

    async def _handle_chunk(self, js: JetStreamContext, messages: Sequence[Msg]) -> bool:
        """Index one chunk and acknowledge it; False when it was put back because something it needs is away."""
        spans = [
            tracer.start_span(f"index {m.subject.rsplit('.', 1)[-1]}", context=propagate.extract(m.headers or {}))
            for m in messages
        ]
        try:
            try:
                await self._apply(messages)
            except Unavailable as error:
                log.warning("index batch postponed", extra={"reason": error.message, "events": len(messages)})
                for message in messages:
                    await message.nak(delay=5.0)
                return False
            except Exception as error:
                if len(messages) == 1:  # nothing to tell apart: applying it again alone would fail the same way
                    await self._failed(js, messages[0], error)
                    return True
                log.exception("index batch failed; retrying its events one by one")
                for message in messages:
                    await self._one_by_one(js, message)
                return True
            for message in messages:
                await message.ack()
            self.processed += len(messages)
            return True
        finally:
            for span in spans:
                span.end()

    async def _apply(self, messages: Sequence[Msg]) -> None:
        created: list[str] = []
        forgotten: list[str] = []
        archived: list[str] = []
        deleted: list[tuple[str, str]] = []
        for message in messages:
            verb, ids = _parse(message)
            if verb == "archived":
                archived += ids
            elif verb == "deleted":
                deleted += [(vault_id, conversation_id) for vault_id, conversation_id in (i.split("/", 1) for i in ids)]
            else:
                (forgotten if verb == "forgotten" else created).extend(ids)
        await self._indexer.forget(forgotten)
        gone = set(forgotten)
        # A message of a conversation deleted meanwhile is absent from the vault's answer, so never written.
        await self._indexer.index([i for i in created if i not in gone], message_ids=archived)
        await self._indexer.forget_conversations(deleted)

    async def _one_by_one(self, js: JetStreamContext, message: Msg) -> None:
        try:
            await self._apply([message])
        except Unavailable:
            await message.nak(delay=5.0)
            return
        except Exception as error:
            await self._failed(js, message, error)
            return
        await message.ack()
        self.processed += 1

    async def _failed(self, js: JetStreamContext, message: Msg, error: Exception) -> None:
        """An event that failed on its own: a bulk one is split; another is tried again later, or after
        `max_attempts` deliveries moved to the dead letters (and acknowledged)."""
        if _is_bulk(message) and await self._split(js, message):
            return
        log.warning("index event failed", extra={"subject": message.subject, "error": type(error).__name__})
        attempts = message.metadata.num_delivered
        if attempts < self._max_attempts:
            await message.nak(delay=min(2.0**attempts, 60.0))
            return
        await self._dead_letter(js, message, error)
        await message.ack()
        self.processed += 1

    async def _split(self, js: JetStreamContext, message: Msg) -> bool:
        """Put a `memories.created` that failed back on the stream as one `memory.created` per memory, so each
        is retried, and dead-lettered if it keeps failing, on its own; the batch is acknowledged once they are
        stored (a repeat after a crash in between is dropped by their message ids). False when the event
        cannot be read: it then goes the way of any failing event."""
        try:
            batch = events_pb.MemoriesCreated.FromString(message.data)
        except DecodeError:
            return False
        subject = f"{self._settings.subject_root}.events.v1.memory.created"
        for memory in batch.memories:
            event = events_pb.MemoryCreated(
                event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{batch.event_id}/{memory.memory_id}")),
                memory_id=memory.memory_id,
                vault_id=batch.vault_id,
                content_hash=memory.content_hash,
                occurred_at=batch.occurred_at,
            )
            headers = {**(message.headers or {}), "Nats-Msg-Id": event.event_id}
            try:
                await js.publish(subject, event.SerializeToString(), headers=headers)
            except (nats.errors.Error, TimeoutError):
                await message.nak(delay=5.0)  # NATS is away: split it once it is back (repeats are dropped)
                return True
        log.warning("index batch event split into one event per memory", extra={"events": len(batch.memories)})
        await message.ack()
        return True

    async def _dead_letter(self, js: JetStreamContext, message: Msg, error: Exception) -> None:
        reason = f"{type(error).__name__}: {str(error)[:200]}"
        log.error("event moved to dead letter", extra={"subject": message.subject, "error": type(error).__name__})
        suffix = message.subject.split(".events.", 1)[-1]
        headers = {**(message.headers or {}), "Memvault-Error": reason}
        await js.publish(f"{self._settings.subject_root}.deadletter.{suffix}", message.data, headers=headers)
        with contextlib.suppress(Exception):
            verb, ids = _parse(message)
            if verb == "archived":
                await self._indexer.feed.report([], self._indexer.model, failed_messages=[(i, reason) for i in ids])
            elif verb != "deleted":
                await self._indexer.feed.report([], self._indexer.model, failed=[(i, reason) for i in ids])
