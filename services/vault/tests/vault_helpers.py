"""Helpers the vault's tests share."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg
import grpc

from memvault.events.v1 import memory_events_pb2 as events_pb2
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_core.pg_statistics import REFRESH_INTERVAL, SETTLE_SECONDS, STALE_FRACTION, STALE_ROWS
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database, VaultAccess

SECRET = "test-secret-" + "x" * 32


@dataclass
class Caller:
    """One account with one vault of its own, and a way to call the vault as it."""

    stub: vault_pb2_grpc.VaultServiceStub
    signer: IdentitySigner
    subject: str
    vault: str

    def metadata(self, **overrides: object) -> tuple[tuple[str, str], ...]:
        identity = Identity(subject=self.subject, scopes=frozenset(SCOPES))
        if overrides:
            identity = Identity(**{**identity.__dict__, **overrides})  # type: ignore[arg-type]
        return ((GRPC_METADATA_KEY, self.signer.sign(identity)),)


async def outbox_created(pool: asyncpg.Pool) -> list[str]:
    """Memory ids that `memory.created` and `memories.created` events in the outbox send to the indexer,
    oldest first, repeats kept."""
    rows = await pool.fetch(
        "SELECT subject, payload FROM outbox WHERE subject LIKE '%.memory.created' OR subject LIKE '%.memories.created'"
        " ORDER BY created_at, id"
    )
    ids: list[str] = []
    for row in rows:
        if row["subject"].endswith(".memories.created"):
            ids += [m.memory_id for m in events_pb2.MemoriesCreated.FromString(row["payload"]).memories]
        else:
            ids.append(events_pb2.MemoryCreated.FromString(row["payload"]).memory_id)
    return ids


def rpc_error_kind(error: grpc.aio.AioRpcError) -> str:
    return dict(error.trailing_metadata() or ()).get("memvault-error-kind", "")


async def filled_vault(database: Database, rows: list[tuple[str, int]]) -> VaultAccess:
    """A vault holding `count` memories '<words> <n>' for each (words, count), inserted in one statement."""
    subject, name = f"user-{uuid.uuid4().hex[:10]}", f"vault-{uuid.uuid4().hex[:10]}"
    assert await AccountStore(database).ensure_owner(subject, name)
    vault = await AccountStore(database).vault_of(subject, name)
    assert vault is not None
    await database.pool.execute(
        """
        INSERT INTO memory (vault_id, content, content_hash, type, trust, status)
        SELECT $1, g.words || ' item' || n, md5(g.words || n), 'fact', 'imported', 'active'
        FROM unnest($2::text[], $3::int[]) AS g (words, count), generate_series(1, g.count) AS n
        """,
        vault.id,
        [words for words, _ in rows],
        [count for _, count in rows],
    )
    return vault


@asynccontextmanager
async def every_table_stale(database: Database) -> AsyncIterator[list[str]]:
    """While inside, any table a write names has its statistics taken again at once (and looked at once
    more straight after); yields the tables analyzed meanwhile, filled in on the way out."""
    statistics = database.statistics
    await statistics.close()  # what writes before asked for is not checked, nor counted
    before, analyzed = len(statistics.analyzed), []
    statistics.stale_rows, statistics.stale_fraction = -1, 0.0  # more than -1 rows changed: always
    statistics.interval, statistics.settle = 0.0, 0.0
    try:
        yield analyzed
        await statistics.idle()
    finally:
        statistics.stale_rows, statistics.stale_fraction = STALE_ROWS, STALE_FRACTION
        statistics.interval, statistics.settle = REFRESH_INTERVAL, SETTLE_SECONDS
    analyzed += statistics.analyzed[before:]
