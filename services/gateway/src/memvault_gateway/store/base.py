"""The pool every part of the gateway's store shares (`memvault_core.postgres.create_pool`)."""

from __future__ import annotations

import asyncpg


class StoreBase:
    """The connection pool; each part of `Store` (people, sign-in, OAuth) adds its own queries."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @property
    def pool(self) -> asyncpg.Pool:
        """The pool itself, for its use counters (`memvault_core.metrics.track_pool`)."""
        return self._pool

    async def close(self) -> None:
        await self._pool.close()

    async def migrated(self) -> bool:
        """True when the gateway's schema exists (`memvault-gateway migrate` has run)."""
        return bool(await self._pool.fetchval("SELECT to_regclass('gateway.token') IS NOT NULL"))
