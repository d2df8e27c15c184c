"""The only part of the gateway that speaks SQL: schema `gateway` (people, sessions, clients, grants, tokens).

One module per wing's tables (`people`, `signin`, `oauth`), records in `records`; `Store` joins
them over one connection pool. Callers hand in hashes, never raw credentials; see
`memvault_gateway.auth.credentials`. The schema's migrations (`memvault_gateway/migrations`) are
`MIGRATIONS`, applied and rolled back with the Postgres plumbing the vault shares
(`memvault_core.postgres`).
"""

from __future__ import annotations

from pathlib import Path

import asyncpg

from memvault_core.postgres import Migrations, NewerDatabaseError, UnknownMigrationError, create_pool
from memvault_gateway.store.oauth import GRANT_TOUCH_SECONDS, ClientInUse, OAuthStore
from memvault_gateway.store.people import PeopleStore
from memvault_gateway.store.records import (
    AuthorizationCode,
    Client,
    ClientUse,
    EmailTaken,
    Grant,
    NewToken,
    Session,
    SetupLinkState,
    TokenRecord,
    User,
)
from memvault_gateway.store.signin import SignInStore

__all__ = [
    "GRANT_TOUCH_SECONDS",
    "MIGRATIONS",
    "AuthorizationCode",
    "Client",
    "ClientInUse",
    "ClientUse",
    "EmailTaken",
    "Grant",
    "NewToken",
    "NewerDatabaseError",
    "Session",
    "SetupLinkState",
    "Store",
    "TokenRecord",
    "UnknownMigrationError",
    "User",
]

MIGRATIONS = Migrations(
    Path(__file__).parent.parent / "migrations",
    command="memvault-gateway migrate",
    schema="gateway",
    label="gateway",
)
"""The gateway's tables and yoyo's bookkeeping live in schema `gateway`, apart from the vault's."""


class Store(PeopleStore, SignInStore, OAuthStore):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self._touched: dict[str, float] = {}

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Store:
        """A pool whose connections skip asyncpg's reset query (the gateway's queries leave no session
        state behind; migrations run on a connection of their own), every statement traced."""
        return cls(await create_pool(dsn, min_size, max_size))

    async def purge_expired(self) -> int:
        """Delete codes, tokens, sessions, sign-in states and registrations that can never be used again."""
        deleted = 0
        for statement in (
            "DELETE FROM gateway.authorization_code WHERE expires_at < now() - interval '1 day'",
            "DELETE FROM gateway.token WHERE expires_at < now() - interval '1 day'"
            " OR revoked_at < now() - interval '1 day' OR used_at < now() - interval '7 days'",
            "DELETE FROM gateway.session WHERE expires_at < now()",
            "DELETE FROM gateway.login_state WHERE expires_at < now()",
            "DELETE FROM gateway.setup_link WHERE expires_at < now() - interval '7 days'",
            "DELETE FROM gateway.email_link WHERE expires_at < now() - interval '1 day'",
            # Registrations nobody ever approved (anyone may register, so they must not pile up).
            "DELETE FROM gateway.oauth_client c WHERE c.created_at < now() - interval '30 days'"
            " AND NOT EXISTS (SELECT 1 FROM gateway.access_grant g WHERE g.client_id = c.client_id)",
        ):
            result = await self._pool.execute(statement)
            deleted += int(result.rsplit(" ", 1)[-1])
        return deleted
