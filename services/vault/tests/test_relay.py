"""The outbox relay against real Postgres and a real NATS JetStream server."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from vault_helpers import Caller

from memvault.events.v1 import memory_events_pb2 as events_pb
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.settings import NatsSettings
from memvault_devstack.nats import EmbeddedNats
from memvault_devstack.ports import free_port
from memvault_vault.database import Database
from memvault_vault.outbox import store
from memvault_vault.outbox.events import OutboxEvent
from memvault_vault.outbox.relay import OutboxRelay

pytestmark = pytest.mark.integration


async def until(condition: object, deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if await condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met before the deadline")


@pytest_asyncio.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[EmbeddedNats]:
    server = EmbeddedNats(tmp_path / "nats", port=free_port())
    server.start()
    yield server
    server.stop()


async def remember_many(caller: Caller, prefix: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        response = await caller.stub.Remember(
            vpb.RememberRequest(vault=caller.vault, memory=pb.MemoryDraft(content=f"{prefix} {i}")),
            metadata=caller.metadata(),
        )
        ids.append(response.result.memory_id)
    return ids


async def published_ids(settings: NatsSettings, vault_id: str) -> list[str]:
    nc = await nats.connect(settings.url)
    try:
        js = nc.jetstream()
        sub = await js.subscribe(f"{settings.subject_root}.events.v1.memory.created", ordered_consumer=True)
        seen: list[str] = []
        with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
            while True:
                message = await sub.next_msg(timeout=1.0)
                event = events_pb.MemoryCreated.FromString(message.data)
                if event.vault_id == vault_id:
                    seen.append(event.memory_id)
        return seen
    finally:
        await nc.close()


async def test_writes_survive_nats_outage_and_drain_once_it_returns(
    caller: Caller, database: Database, vault_dsn: str, nats_server: EmbeddedNats
) -> None:
    url = nats_server.url
    vault_id = await database.pool.fetchval("SELECT id::text FROM vault WHERE name = $1", caller.vault)
    settings = NatsSettings(url=url, namespace=f"t{uuid.uuid4().hex[:8]}")
    relay = OutboxRelay(vault_dsn, settings, poll_seconds=0.2)
    task = asyncio.create_task(relay.run())
    try:
        before = await remember_many(caller, "Written while NATS is up", 5)
        await until(lambda: _published(database, before))

        nats_server.stop()
        during = await remember_many(caller, "Written while NATS is down", 20)  # writes still succeed
        assert not await _published(database, during)

        nats_server.start()  # same port, same JetStream store
        await until(lambda: _published(database, during), deadline=60)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    seen = await published_ids(settings, vault_id)
    assert sorted(seen) == sorted(before + during)  # each exactly once, in the stream
    nc = await nats.connect(url)
    info = await nc.jetstream().stream_info(settings.stream)
    await nc.close()
    assert info.config.duplicate_window and info.config.duplicate_window >= 60


async def _published(database: Database, ids: list[str]) -> bool:
    """Whether every one of these memories' created events has been published."""
    count = await database.pool.fetchval(
        "SELECT count(*) FROM outbox o WHERE o.published_at IS NOT NULL AND EXISTS ("
        " SELECT 1 FROM unnest($1::text[]) AS m(id) WHERE position(convert_to(m.id, 'UTF8') in o.payload) > 0)",
        ids,
    )
    return int(count) == len(ids)


async def test_nats_refusing_connections_is_logged_in_one_line_without_credentials(
    vault_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    relay = OutboxRelay(vault_dsn, NatsSettings(url=f"nats://relay:s3cret@127.0.0.1:{port}"), poll_seconds=0.2)
    caplog.set_level(logging.INFO)
    task = asyncio.create_task(relay.run())
    try:
        await until(lambda: _logged(caplog, "cannot reach NATS"))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    warnings = [r for r in caplog.records if "cannot reach NATS" in r.getMessage()]
    assert len(warnings) == 1
    assert "events wait in the outbox" in warnings[0].getMessage()
    assert warnings[0].__dict__["nats"] == f"nats://127.0.0.1:{port}"
    assert not any(r.exc_info for r in caplog.records)
    assert "Traceback" not in caplog.text and "s3cret" not in caplog.text


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)


async def test_a_nats_outage_and_recovery_log_no_error(
    caller: Caller, database: Database, vault_dsn: str, nats_server: EmbeddedNats, caplog: pytest.LogCaptureFixture
) -> None:
    """NATS goes away while the relay is idle, a write's event fails to publish, NATS comes back:
    warnings tell the outage, and nothing is logged as an error (before, closing the NATS client
    while it reconnected failed half-way and asyncio reported its abandoned task as 'Task was
    destroyed but it is pending!' at ERROR)."""
    caplog.set_level(logging.INFO)
    settings = NatsSettings(url=nats_server.url, namespace=f"t{uuid.uuid4().hex[:8]}")
    relay = OutboxRelay(vault_dsn, settings, poll_seconds=0.2)
    task = asyncio.create_task(relay.run())
    try:
        before = await remember_many(caller, "Written while NATS is up", 2)
        await until(lambda: _published(database, before))

        nats_server.stop()
        await until(lambda: _logged(caplog, "disconnected from NATS"))
        during = await remember_many(caller, "Written while NATS is down", 2)
        await until(lambda: _failed_once(database, during), deadline=30)

        nats_server.start()
        await until(lambda: _published(database, during), deadline=60)
        gc.collect()  # asyncio reports an abandoned task when it is collected
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    gc.collect()
    assert any("cannot reach NATS" in r.getMessage() for r in caplog.records)
    assert [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR] == []


async def _failed_once(database: Database, ids: list[str]) -> bool:
    """Whether the relay has tried, and failed, to publish one of these memories' events."""
    count = await database.pool.fetchval(
        "SELECT count(*) FROM outbox o WHERE o.published_at IS NULL AND o.attempts > 0 AND EXISTS ("
        " SELECT 1 FROM unnest($1::text[]) AS m(id) WHERE position(convert_to(m.id, 'UTF8') in o.payload) > 0)",
        ids,
    )
    return int(count) > 0


async def test_published_events_are_deleted_once_older_than_kept(
    caller: Caller, database: Database, vault_dsn: str, nats_server: EmbeddedNats
) -> None:
    """The outbox does not grow with every write: published rows go once `keep_published_seconds`
    old; younger ones stay."""
    settings = NatsSettings(url=nats_server.url, namespace=f"t{uuid.uuid4().hex[:8]}")
    written = await remember_many(caller, "Pruned once published", 3)
    relay = OutboxRelay(vault_dsn, settings, poll_seconds=0.2, keep_published_seconds=2.0, prune_every_seconds=0.2)
    task = asyncio.create_task(relay.run())
    try:
        await until(lambda: _published(database, written))
        assert not await _gone(database, written)  # published, not yet 2 s old: kept
        async with database.pool.acquire() as conn:
            assert await store.prune_published(conn, 3600.0) == 0
        await until(lambda: _gone(database, written), deadline=30)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _gone(database: Database, ids: list[str]) -> bool:
    count = await database.pool.fetchval(
        "SELECT count(*) FROM outbox o WHERE EXISTS ("
        " SELECT 1 FROM unnest($1::text[]) AS m(id) WHERE position(convert_to(m.id, 'UTF8') in o.payload) > 0)",
        ids,
    )
    return int(count) == 0


async def test_the_relay_reads_about_a_megabyte_of_events_at_a_time(database: Database) -> None:
    async with database.pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute("DELETE FROM outbox WHERE published_at IS NULL")  # undone below
            sizes = [600_000, 600_000, 10, 10]
            for n, size in enumerate(sizes):
                await conn.execute(
                    "INSERT INTO outbox (id, subject, payload, created_at)"
                    " VALUES ($1, 'events.v1.memories.created', $2, now() + make_interval(secs => $3))",
                    uuid.uuid4(),
                    b"x" * size,
                    n,
                )
            first = await store.unpublished(conn, 200)
            assert [len(r["payload"]) for r in first] == [600_000, 600_000]  # the second starts under the limit
            await store.mark_published(conn, [r["id"] for r in first])
            assert [len(r["payload"]) for r in await store.unpublished(conn, 200)] == [10, 10]
            assert [len(r["payload"]) for r in await store.unpublished(conn, 1)] == [10]
        finally:
            await transaction.rollback()


async def test_the_relay_publishes_past_a_reads_byte_limit_without_waiting_for_its_poll(
    database: Database, vault_dsn: str, nats_server: EmbeddedNats
) -> None:
    settings = NatsSettings(url=nats_server.url, namespace=f"t{uuid.uuid4().hex[:8]}")
    relay = OutboxRelay(vault_dsn, settings, poll_seconds=60.0)  # only a notification or the loop can wake it
    task = asyncio.create_task(relay.run())
    try:
        await until(lambda: _none_unpublished(database), deadline=30)  # what other tests left, first
        big = [OutboxEvent(str(uuid.uuid4()), "events.v1.test.sized", b"x" * 600_000, {}) for _ in range(3)]
        async with database.pool.acquire() as conn, conn.transaction():
            await store.enqueue(conn, big)
        sent = [e.id for e in big]
        await until(lambda: _all_published(database, sent), deadline=15)  # three reads: two events, then one, then none
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _none_unpublished(database: Database) -> bool:
    return not await database.pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")


async def _all_published(database: Database, ids: list[str]) -> bool:
    count = await database.pool.fetchval(
        "SELECT count(*) FROM outbox WHERE id = ANY($1::uuid[]) AND published_at IS NOT NULL", ids
    )
    return int(count) == len(ids)
