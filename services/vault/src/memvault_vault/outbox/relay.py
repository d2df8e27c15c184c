"""Publishes outbox rows to NATS JetStream, in order, and marks them sent once acknowledged.

Writes never wait for NATS: they commit an outbox row with the change. This relay
drains the outbox whenever it is told a row arrived (LISTEN/NOTIFY) and at least
every `poll_seconds`. Each event is published with `Nats-Msg-Id` = its id, so a
retry after a lost acknowledgement is dropped by JetStream's duplicate window.
With several vault replicas, a Postgres advisory lock lets one relay run at a time.
Published rows are deleted once they are `keep_published_seconds` old (every minute at most):
kept forever they were the outbox's whole size on disk, and nothing reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import asyncpg
import nats
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from memvault_core.events import ensure_streams
from memvault_core.nats_callbacks import NatsCallbacks
from memvault_core.settings import NatsSettings
from memvault_core.supervise import run_forever
from memvault_vault.outbox import store
from memvault_vault.outbox.store import NOTIFY_CHANNEL

log = logging.getLogger(__name__)

BATCH = 200
PRUNE_EVERY_SECONDS = 60.0


class OutboxRelay:
    def __init__(
        self,
        dsn: str,
        nats_settings: NatsSettings,
        poll_seconds: float = 1.0,
        keep_published_seconds: float = 3600.0,
        prune_every_seconds: float = PRUNE_EVERY_SECONDS,
    ) -> None:
        self._dsn = dsn
        self._keep = keep_published_seconds
        self._prune_every = prune_every_seconds
        self._pruned_at = float("-inf")
        self._nats = nats_settings
        self._poll = poll_seconds
        self._wake = asyncio.Event()
        self._callbacks = NatsCallbacks(nats_settings.url, "events wait in the outbox until it is back")
        self._nc: NatsClient | None = None
        self.published = 0

    async def run(self) -> None:
        """Relay until cancelled, reconnecting to Postgres and NATS as needed; nothing is lost."""
        try:
            await run_forever(self._run_once, "outbox relay")
        finally:
            if self._nc is not None:
                with contextlib.suppress(Exception):  # shutting down: an unclean close loses nothing
                    await self._nc.close()

    async def _nats_client(self) -> NatsClient:
        """One NATS connection for the relay's life, which nats-py reconnects after an outage (a failed
        publish is retried on it). Closing it while it reconnects can fail half-way (writing what it
        buffered on a lost socket) and leave its subscription tasks pending, so it is not closed then."""
        if self._nc is None or self._nc.is_closed:
            # max_reconnect_attempts=0: once connected, nats-py never stops reconnecting.
            self._nc = await nats.connect(
                self._nats.servers, connect_timeout=2, max_reconnect_attempts=0, **self._callbacks.options()
            )
        return self._nc

    async def _run_once(self) -> None:
        conn: asyncpg.Connection = await asyncpg.connect(self._dsn)
        try:
            # Another replica may hold the relay lock; poll for it (Postgres cannot notify us).
            while not await store.try_relay_lock(conn):  # noqa: ASYNC110
                await asyncio.sleep(self._poll * 5)
            await conn.add_listener(NOTIFY_CHANNEL, lambda *_: self._wake.set())
            js = (await self._nats_client()).jetstream(timeout=5.0)
            await ensure_streams(js, self._nats)
            log.info("outbox relay running")
            while True:
                self._wake.clear()  # before reading: a row committed after this read wakes the wait below
                sent = await self._drain(conn, js)
                if time.monotonic() - self._pruned_at >= self._prune_every:
                    self._pruned_at = time.monotonic()
                    pruned = await store.prune_published(conn, self._keep)
                    if pruned:
                        log.debug("published outbox rows deleted", extra={"count": pruned})
                if not sent:  # a batch short of BATCH may have stopped at the read's byte limit
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self._poll)
        finally:
            await conn.close()

    async def _drain(self, conn: asyncpg.Connection, js: JetStreamContext) -> int:
        rows = await store.unpublished(conn, BATCH)
        done: list[str] = []
        try:
            for row in rows:
                headers: dict[str, Any] = json.loads(row["headers"]) if row["headers"] else {}
                headers["Nats-Msg-Id"] = row["id"]
                await js.publish(f"{self._nats.subject_root}.{row['subject']}", bytes(row["payload"]), headers=headers)
                done.append(row["id"])
        except Exception as error:
            if rows[len(done) :]:
                await store.mark_failed(conn, rows[len(done)]["id"], type(error).__name__)
            raise
        finally:
            if done:
                await store.mark_published(conn, done)
                self.published += len(done)
        return len(rows)
