"""The pool every part of the gateway's store shares."""

from __future__ import annotations

import asyncpg


class PooledConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg's classes are untyped
    """A pool connection handed back without asyncpg's reset query (a round trip on every release,
    so two on a bearer-token /mcp call). The reset undoes session state: session advisory locks,
    cursors, LISTEN, SET. The gateway's queries leave none behind (migrations run on a connection
    of their own); an open transaction is still rolled back."""

    def get_reset_query(self) -> str:
        return ""


class StoreBase:
    """The connection pool; each part of `Store` (people, sign-in, OAuth) adds its own queries."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def close(self) -> None:
        await self._pool.close()

    async def migrated(self) -> bool:
        """True when the gateway's schema exists (`memvault-gateway migrate` has run)."""
        return bool(await self._pool.fetchval("SELECT to_regclass('gateway.token') IS NOT NULL"))
