"""The JetStream streams memvault uses, created or updated by whichever service starts first."""

from __future__ import annotations

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from memvault_core.settings import NatsSettings

DUPLICATE_WINDOW_SECONDS = 300.0
"""A repeated Nats-Msg-Id within this window is dropped: relay retries never publish twice."""


async def _ensure(js: JetStreamContext, config: StreamConfig) -> None:
    try:
        await js.stream_info(config.name or "")
        await js.update_stream(config)
    except nats.js.errors.NotFoundError:
        await js.add_stream(config)


async def ensure_streams(js: JetStreamContext, settings: NatsSettings) -> None:
    """`MEMVAULT_EVENTS` for change events and `MEMVAULT_DEADLETTER` for events that kept failing."""
    await _ensure(
        js,
        StreamConfig(
            name=settings.stream,
            subjects=[f"{settings.subject_root}.events.>"],
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_SECONDS,
            num_replicas=settings.stream_replicas,
        ),
    )
    await _ensure(
        js,
        StreamConfig(
            name=settings.dead_letter_stream,
            subjects=[f"{settings.subject_root}.deadletter.>"],
            storage=StorageType.FILE,
            num_replicas=settings.stream_replicas,
        ),
    )
