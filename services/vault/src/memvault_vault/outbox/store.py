"""The outbox's SQL: events inserted in the writer's transaction, and what the relay reads and marks."""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from memvault_vault.outbox.events import OutboxEvent

NOTIFY_CHANNEL = "memvault_outbox"
RELAY_LOCK_KEY = 0x6D656D76  # "memv": one relay at a time across replicas


async def enqueue(conn: asyncpg.Connection, outbox: Sequence[OutboxEvent]) -> None:
    """Write events in the caller's transaction and wake the relay when it commits."""
    await conn.executemany(
        "INSERT INTO outbox (id, subject, payload, headers) VALUES ($1, $2, $3, $4::jsonb)",
        [(e.id, e.subject, e.payload, json.dumps(e.headers)) for e in outbox],
    )
    await conn.execute("SELECT pg_notify('memvault_outbox', '')")


async def try_relay_lock(conn: asyncpg.Connection) -> bool:
    """Take the session lock that lets one relay run at a time; False when another replica holds it."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", RELAY_LOCK_KEY))


READ_BYTES = 1 << 20
"""Payload bytes the relay reads at a time (at least one event; a `memories.created` is about 28 KB)."""


async def unpublished(conn: asyncpg.Connection, limit: int) -> list[asyncpg.Record]:
    """The oldest events not yet published, in the order they were written: at most `limit`, and no more
    than READ_BYTES of payload past the first."""
    return list(
        await conn.fetch(
            "SELECT id::text, subject, payload, headers FROM ("
            " SELECT *, sum(octet_length(payload)) OVER (ORDER BY created_at, id) - octet_length(payload) AS before"
            " FROM (SELECT id, subject, payload, headers, created_at FROM outbox WHERE published_at IS NULL"
            "  ORDER BY created_at, id LIMIT $1) oldest"
            ") o WHERE before < $2 ORDER BY created_at, id",
            limit,
            READ_BYTES,
        )
    )


async def mark_failed(conn: asyncpg.Connection, event_id: str, error: str) -> None:
    await conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1::uuid",
        event_id,
        error,
    )


async def mark_published(conn: asyncpg.Connection, event_ids: Sequence[str]) -> None:
    await conn.execute("UPDATE outbox SET published_at = now() WHERE id = ANY($1::uuid[])", list(event_ids))


async def backlog(pool: asyncpg.Pool) -> tuple[int, float]:
    """Events not yet published, and the age in seconds of the oldest (0 when there is none)."""
    row = await pool.fetchrow(
        "SELECT count(*) AS depth, coalesce(extract(epoch FROM now() - min(created_at)), 0) AS age"
        " FROM outbox WHERE published_at IS NULL"
    )
    return int(row["depth"]), float(row["age"])


async def prune_published(conn: asyncpg.Connection, keep_seconds: float, limit: int = 5000) -> int:
    """Delete up to `limit` events published more than `keep_seconds` ago (NATS has them; JetStream's
    duplicate window is minutes); how many went."""
    deleted = await conn.fetchval(
        "WITH gone AS (DELETE FROM outbox WHERE id IN ("
        " SELECT id FROM outbox WHERE published_at < now() - make_interval(secs => $1) LIMIT $2"
        ") RETURNING 1) SELECT count(*) FROM gone",
        keep_seconds,
        limit,
    )
    return int(deleted)
