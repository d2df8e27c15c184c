"""The event consumer against a real NATS JetStream server: batches, retries and the dead letter."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from memvault.events.v1 import archive_events_pb2 as archive_events_pb
from memvault.events.v1 import memory_events_pb2 as events_pb
from memvault_core.events import ensure_streams
from memvault_core.settings import NatsSettings
from memvault_devstack.ports import free_port
from memvault_indexer.consumer import EventConsumer
from memvault_indexer.embedder import OnnxMiniLMEmbedder
from memvault_indexer.feed import Document
from memvault_indexer.indexing import Indexer
from memvault_indexer.store import EdgeVectorStore, SearchFilters

pytestmark = pytest.mark.integration


async def stopped(task: asyncio.Task[None]) -> None:
    """Cancel the consumer and wait for it to end: a consumer that swallowed the cancellation fails the test."""
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=30)
    assert done, "the consumer did not stop when cancelled"


def batch(ids: list[str]) -> bytes:
    memories = [events_pb.CreatedMemory(memory_id=i, content_hash=f"hash-{i}") for i in ids]
    event = events_pb.MemoriesCreated(event_id=str(uuid.uuid4()), vault_id="vault-1", memories=memories)
    return event.SerializeToString()


class VaultFeedStandIn:
    """Answers like the vault's IndexFeedService, except that one memory can never be read."""

    def __init__(self, documents: dict[str, str], unreadable: str) -> None:
        self.documents_by_id = documents
        self.unreadable = unreadable
        self.indexed: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.failed_messages: list[tuple[str, str]] = []
        self.messages: dict[str, tuple[str, str]] = {}
        """Archived messages: id -> (conversation id, text)."""
        self.calls: list[list[str]] = []
        """The ids of each `documents` call."""

    async def documents(self, memory_ids: Sequence[str], message_ids: Sequence[str] = ()) -> list[Document]:
        self.calls.append([*memory_ids, *message_ids])
        if self.unreadable in [*memory_ids, *message_ids]:
            raise RuntimeError("this memory's row cannot be read")
        return [
            Document(i, "vault-1", self.documents_by_id[i], f"hash-{i}", "", "")
            for i in memory_ids
            if i in self.documents_by_id
        ] + [
            Document(i, "vault-1", self.messages[i][1], f"hash-{i}", "", "", "message", self.messages[i][0], 1)
            for i in message_ids
            if i in self.messages
        ]

    async def report(
        self,
        indexed: Sequence[Document],
        model: str,
        failed: Sequence[tuple[str, str]] = (),
        failed_messages: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.indexed += [d.memory_id for d in indexed]
        self.failed += list(failed)
        self.failed_messages += list(failed_messages)


@dataclass
class Rig:
    """A consumer's world: its NATS namespace, the vault stand-in, a real Edge store, the indexer."""

    settings: NatsSettings
    feed: VaultFeedStandIn
    store: EdgeVectorStore
    indexer: Indexer
    js: JetStreamContext

    @property
    def events(self) -> str:
        return f"{self.settings.subject_root}.events.v1"


@asynccontextmanager
async def rig(nats_url: str, tmp_path: Path, documents: dict[str, str], unreadable: str = "none") -> AsyncIterator[Rig]:
    settings = NatsSettings(url=nats_url, namespace=f"t{uuid.uuid4().hex[:8]}")
    feed = VaultFeedStandIn(documents, unreadable)
    store = EdgeVectorStore(tmp_path, model="all-minilm-l6-v2", dimension=384)
    await store.ensure_collection()
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_streams(js, settings)
        yield Rig(settings, feed, store, Indexer(OnnxMiniLMEmbedder(), store, feed), js)  # type: ignore[arg-type]
    finally:
        await nc.close()
        await store.close()


@asynccontextmanager
async def consuming(world: Rig, *, batch_size: int) -> AsyncIterator[None]:
    """An EventConsumer (two attempts per event) running for the block."""
    consumer = EventConsumer(world.settings, world.indexer, batch_size=batch_size, max_attempts=2)
    task = asyncio.create_task(consumer.run())
    try:
        yield
    finally:
        await stopped(task)


async def until(done: Callable[[], Awaitable[bool]], seconds: float = 60) -> None:
    """Wait until `done()`, or `seconds` (the test's own assertions then say what is missing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not await done():  # noqa: ASYNC110
        await asyncio.sleep(0.2)


async def test_a_poison_event_goes_to_the_dead_letter_and_is_reported_while_the_rest_is_indexed(
    nats_url: str, tmp_path: Path
) -> None:
    good = [str(uuid.uuid4()) for _ in range(3)]
    poison = str(uuid.uuid4())
    texts = ["The NAS has four drives.", "Backups run at night.", "The router runs OpenWrt."]
    async with rig(nats_url, tmp_path, dict(zip(good, texts, strict=True)), poison) as world:
        feed, store, js = world.feed, world.store, world.js
        for memory_id in (good[0], poison, good[1], good[2]):
            event = events_pb.MemoryCreated(event_id=str(uuid.uuid4()), memory_id=memory_id, vault_id="vault-1")
            await js.publish(f"{world.events}.memory.created", event.SerializeToString())

        async def done() -> bool:
            return bool(feed.failed) and await store.count() == 3

        async with consuming(world, batch_size=10):
            await until(done)

        assert sorted(feed.indexed) == sorted(good)  # the rest of the batch was not held back
        assert await store.count() == 3
        assert [memory_id for memory_id, _ in feed.failed] == [poison]  # a failed index job, with its error
        assert "cannot be read" in feed.failed[0][1]
        dead = await js.subscribe(f"{world.settings.subject_root}.deadletter.>", ordered_consumer=True)
        message = await dead.next_msg(timeout=5)
        assert events_pb.MemoryCreated.FromString(message.data).memory_id == poison
        assert "cannot be read" in (message.headers or {}).get("Memvault-Error", "")
        with pytest.raises(nats.errors.TimeoutError):
            await dead.next_msg(timeout=1)  # only the poison event
        info = await js.consumer_info(world.settings.stream, "indexer")
        assert info.num_ack_pending == 0
        assert info.num_pending == 0


async def test_a_batch_event_is_indexed_whole_and_split_when_one_of_its_memories_fails(
    nats_url: str, tmp_path: Path
) -> None:
    texts = ["The NAS has four drives.", "Backups run at night.", "The router runs OpenWrt.", "The UPS lasts an hour."]
    good = [str(uuid.uuid4()) for _ in texts]
    poison = str(uuid.uuid4())
    async with rig(nats_url, tmp_path, dict(zip(good, texts, strict=True)), poison) as world:
        feed, store, js = world.feed, world.store, world.js
        await js.publish(f"{world.events}.memories.created", batch(good[:2]))
        await js.publish(f"{world.events}.memories.created", batch([good[2], poison, good[3]]))

        async def done() -> bool:
            return bool(feed.failed) and await store.count() == 4

        async with consuming(world, batch_size=1):
            await until(done)

        assert feed.calls[0] == good[:2]  # the first event in one go, though it names more than batch_size
        assert sorted(feed.indexed) == sorted(good)
        assert [memory_id for memory_id, _ in feed.failed] == [poison]  # only the failing memory is a failed job
        dead = await js.subscribe(f"{world.settings.subject_root}.deadletter.>", ordered_consumer=True)
        message = await dead.next_msg(timeout=5)
        assert message.subject.endswith(".memory.created")
        assert events_pb.MemoryCreated.FromString(message.data).memory_id == poison
        with pytest.raises(nats.errors.TimeoutError):
            await dead.next_msg(timeout=1)
        info = await js.consumer_info(world.settings.stream, "indexer")
        assert info.num_ack_pending == 0 and info.num_pending == 0


async def test_a_fetch_is_indexed_in_chunks_of_at_most_batch_size_memories_never_cutting_an_event(
    nats_url: str, tmp_path: Path
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(26)]
    async with rig(
        nats_url, tmp_path, {i: f"Shelf {n} of the rack holds box {n}." for n, i in enumerate(ids)}
    ) as world:
        feed, store, js = world.feed, world.store, world.js
        events = [ids[0:5], ids[5:6], ids[6:7], ids[7:13], ids[13:14], ids[14:26]]
        for named in events:
            if len(named) == 1:
                single = events_pb.MemoryCreated(event_id=str(uuid.uuid4()), memory_id=named[0], vault_id="vault-1")
                await js.publish(f"{world.events}.memory.created", single.SerializeToString())
            else:
                await js.publish(f"{world.events}.memories.created", batch(named))

        async def done() -> bool:
            return await store.count() >= len(ids)

        async with consuming(world, batch_size=8):
            await until(done)

        assert sorted(feed.indexed) == sorted(ids) and not feed.failed
        assert sorted(i for call in feed.calls for i in call) == sorted(ids)  # each asked for once: no split, no retry
        for call in feed.calls:  # whole events only, in order, and more than 8 only as one event alone
            touched = [e for e in events if set(e) & set(call)]
            assert call == [i for e in touched for i in e]
            assert len(call) <= 8 or len(touched) == 1
        assert [len(c) for c in feed.calls if len(c) > 8] == [12]
        info = await js.stream_info(world.settings.stream)
        assert info.state.messages == len(events)  # nothing was put back split
        consumer_info = await js.consumer_info(world.settings.stream, "indexer")
        assert consumer_info.num_ack_pending == 0 and consumer_info.num_pending == 0


async def test_a_fetch_keeps_bulk_events_for_twice_batch_size_memories_and_puts_the_rest_back(
    nats_url: str, tmp_path: Path
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(40)]
    async with rig(nats_url, tmp_path, {i: f"Drawer {n} holds cable kit {n}." for n, i in enumerate(ids)}) as world:
        feed, store, js = world.feed, world.store, world.js
        events = [ids[n : n + 8] for n in range(0, 40, 8)]
        for named in events:
            await js.publish(f"{world.events}.memories.created", batch(named))

        async def done() -> bool:
            return await store.count() >= len(ids)

        async with consuming(world, batch_size=8):  # the first fetch asks for 8 events
            await until(done)

        assert sorted(feed.indexed) == sorted(ids) and not feed.failed
        assert sorted(map(tuple, feed.calls)) == sorted(map(tuple, events))  # one event per call, each once
        info = await js.consumer_info(world.settings.stream, "indexer")
        assert info.num_ack_pending == 0 and info.num_pending == 0
        # The first fetch took all five and kept two (16 memories): three were delivered again.
        assert info.delivered.consumer_seq == len(events) + 3


async def test_nats_refusing_connections_is_logged_in_one_line_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    consumer = EventConsumer(
        NatsSettings(url=f"nats://indexer:s3cret@127.0.0.1:{port}"),
        None,  # type: ignore[arg-type]  # never reached: there is no NATS to consume from
        batch_size=10,
        max_attempts=3,
    )
    caplog.set_level(logging.INFO)
    task = asyncio.create_task(consumer.run())
    try:
        deadline = time.monotonic() + 20
        while not any("cannot reach NATS" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "no warning before the deadline"
            await asyncio.sleep(0.1)
    finally:
        await stopped(task)
    # That nats-py's retries (every 2 s) add no line is tested once, on a clock, in libs/core.
    warnings = [r for r in caplog.records if "cannot reach NATS" in r.getMessage()]
    assert len(warnings) == 1
    assert "new memories are indexed once it is back" in warnings[0].getMessage()
    assert warnings[0].__dict__["nats"] == f"nats://127.0.0.1:{port}"
    assert not any(r.exc_info for r in caplog.records)
    assert "Traceback" not in caplog.text and "s3cret" not in caplog.text


async def test_archived_messages_are_indexed_as_messages_apart_from_memories_and_go_with_their_conversation(
    nats_url: str, tmp_path: Path
) -> None:
    memory = str(uuid.uuid4())
    conversation, other = str(uuid.uuid4()), str(uuid.uuid4())
    kept, gone, poison = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    async with rig(nats_url, tmp_path, {memory: "The boat is moored in Harbor Nine."}, poison) as world:
        feed, store, js, indexer, settings = world.feed, world.store, world.js, world.indexer, world.settings
        feed.messages = {
            gone: (conversation, "We moored the sailboat at the harbor on Friday."),
            kept: (other, "My sister adopted a grey kitten named Pebble."),
        }
        # A consumer made before the archive's events existed listened to memory events only: it is widened.
        await js.add_consumer(
            settings.stream,
            config=ConsumerConfig(
                durable_name="indexer", filter_subject=f"{world.events}.memory.>", ack_policy="explicit"
            ),
        )
        created = events_pb.MemoryCreated(event_id=str(uuid.uuid4()), memory_id=memory, vault_id="vault-1")
        await js.publish(f"{world.events}.memory.created", created.SerializeToString())
        for message_id, (conversation_id, _) in [*feed.messages.items(), (poison, (other, ""))]:
            event = archive_events_pb.MessageArchived(
                event_id=str(uuid.uuid4()),
                message_id=message_id,
                vault_id="vault-1",
                conversation_id=conversation_id,
                revision=1,
                content_hash=f"hash-{message_id}",
            )
            await js.publish(f"{world.events}.message.archived", event.SerializeToString())

        async def indexed() -> bool:
            return bool(feed.failed_messages) and await store.count() == 3

        async def two_left() -> bool:
            return await store.count() == 2

        async with consuming(world, batch_size=10):
            await until(indexed)
            query = await indexer.embed_query("where is the sailboat moored")
            memories = await store.search(query, "vault-1", 10)
            messages = await store.search(query, "vault-1", 10, SearchFilters(messages=True))
            # A memory search never sees a message, and a message search only messages, best first.
            assert [h.memory_id for h in memories] == [memory]
            assert [h.memory_id for h in messages] == [gone, kept]
            (point,) = await store.vectors([gone])
            assert point.content_hash == f"hash-{gone}"
            scored = await indexer.search("vault-1", "a grey kitten", 0, [kept], messages=True)
            assert list(scored) == [kept]

            deleted = archive_events_pb.ConversationDeleted(
                event_id=str(uuid.uuid4()), conversation_id=conversation, vault_id="vault-1"
            )
            await js.publish(f"{world.events}.conversation.deleted", deleted.SerializeToString())
            await until(two_left)

        assert await store.count() == 2  # the deleted conversation's message went; the other stayed
        assert {h.memory_id for h in await store.search(query, "vault-1", 10, SearchFilters(messages=True))} == {kept}
        assert [message_id for message_id, _ in feed.failed_messages] == [poison]  # a failed message index job
        assert feed.failed == []
        info = await js.consumer_info(settings.stream, "indexer")
        assert info.config.filter_subject == f"{settings.subject_root}.events.v1.>"
        assert info.num_pending == 0
