"""The only gateway module that speaks SQL: schema `gateway` (people, sessions, clients, grants, tokens).

Callers hand in hashes, never raw credentials; see credentials.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import asyncpg

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA = "gateway"

SetupLinkState = Literal["usable", "used", "replaced", "expired", "unknown"]


class NewerDatabaseError(Exception):
    """The database holds gateway migrations this code does not know: a newer memvault migrated it."""

    def __init__(self, unknown: Sequence[str]) -> None:
        super().__init__(
            f"this database was migrated by a newer memvault: {', '.join(unknown)}; "
            "run that version or restore a backup"
        )


def migration_backend(dsn: str) -> Any:
    """yoyo's backend for the gateway's schema, created if missing: yoyo's own bookkeeping tables
    live in schema `gateway` too, apart from the vault's."""
    import psycopg
    from yoyo import get_backend

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    url = dsn.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://", 1)
    url += ("&" if "?" in url else "?") + f"schema={SCHEMA}"
    return get_backend(url)


def apply_migrations(dsn: str) -> list[str]:
    """Apply the gateway's pending migrations; return the ids applied.

    Raises NewerDatabaseError, applying nothing, when the schema has migrations this code does not know.
    """
    from yoyo import read_migrations

    backend = migration_backend(dsn)
    migrations = read_migrations(str(MIGRATIONS))
    with backend.lock():
        pending = backend.to_apply(migrations)
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - {migration.id for migration in migrations})
        if unknown:
            raise NewerDatabaseError(unknown)
        backend.apply_migrations(pending)
    return [migration.id for migration in pending]


class UnknownMigrationError(Exception):
    """A gateway migration id this code does not have."""

    def __init__(self, migration_id: str, known: Sequence[str]) -> None:
        super().__init__(f"no gateway migration {migration_id!r} in this memvault; its migrations: {', '.join(known)}")


def rollback_migrations(dsn: str, to: str) -> list[str]:
    """Roll back, newest first and under the migration lock, every applied gateway migration after `to`
    in the order `migrate` applies them; return the ids rolled back (for going back to an older
    release, which refuses the newer schema: the rollback files are in this code)."""
    from yoyo import read_migrations
    from yoyo.migrations import MigrationList, topological_sort

    backend = migration_backend(dsn)
    migrations = read_migrations(str(MIGRATIONS))
    order = [migration.id for migration in topological_sort(migrations)]
    if to not in order:
        raise UnknownMigrationError(to, order)
    later = set(order[order.index(to) + 1 :])
    with backend.lock():
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - set(order))
        if unknown:
            raise NewerDatabaseError(unknown)
        chosen = MigrationList([m for m in backend.to_rollback(migrations) if m.id in later])
        backend.rollback_migrations(chosen)
    return [migration.id for migration in chosen]


class EmailTaken(Exception):
    """Another account already has this sign-in address."""


@dataclass(frozen=True)
class User:
    id: str
    subject: str
    username: str | None
    display_name: str
    is_admin: bool
    password_hash: str | None
    disabled: bool


@dataclass(frozen=True)
class Session:
    user: User
    csrf_token: str
    method: str
    expires_at: datetime


@dataclass(frozen=True)
class Client:
    client_id: str
    kind: str
    client_name: str
    redirect_uris: tuple[str, ...]
    token_endpoint_auth_method: str
    secret_hash: str | None
    metadata: dict[str, Any]
    created_at: datetime
    refreshed_at: datetime


@dataclass(frozen=True)
class Grant:
    id: str
    user_id: str
    kind: str
    client_id: str | None
    name: str
    scopes: tuple[str, ...]
    vaults: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class AuthorizationCode:
    grant: Grant
    client_id: str
    redirect_uri: str
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]
    expired: bool
    used: bool


@dataclass(frozen=True)
class NewToken:
    token_hash: str
    kind: str
    resource: str
    scopes: tuple[str, ...]
    valid_for: timedelta | None


@dataclass(frozen=True)
class TokenRecord:
    """A token together with what it grants and to whom; `usable` folds in expiry and revocation."""

    kind: str
    resource: str
    scopes: tuple[str, ...]
    grant: Grant
    subject: str
    usable: bool
    used: bool


def _user(row: asyncpg.Record) -> User:
    return User(
        id=str(row["id"]),
        subject=row["subject"],
        username=row["username"],
        display_name=row["display_name"],
        is_admin=row["is_admin"],
        password_hash=row["password_hash"],
        disabled=row["disabled_at"] is not None,
    )


def _client(row: asyncpg.Record) -> Client:
    return Client(
        client_id=row["client_id"],
        kind=row["kind"],
        client_name=row["client_name"],
        redirect_uris=tuple(row["redirect_uris"]),
        token_endpoint_auth_method=row["token_endpoint_auth_method"],
        secret_hash=row["secret_hash"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        refreshed_at=row["refreshed_at"],
    )


def _grant(row: asyncpg.Record) -> Grant:
    client_id = row["client_id"]
    return Grant(
        id=str(row["id"]),
        user_id=str(row["user_id"]),
        kind=row["kind"],
        client_id=client_id,
        name=row["name"],
        scopes=tuple(row["scopes"]),
        vaults=tuple(row["vaults"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


def _grant_from_json(text: str) -> Grant:
    """A grant from `row_to_json(g)`, for queries that join it to other tables."""
    data = json.loads(text)

    def when(key: str) -> datetime | None:
        return datetime.fromisoformat(data[key]) if data.get(key) else None

    created_at = when("created_at")
    assert created_at is not None
    return Grant(
        id=str(data["id"]),
        user_id=str(data["user_id"]),
        kind=data["kind"],
        client_id=data["client_id"],
        name=data["name"],
        scopes=tuple(data["scopes"]),
        vaults=tuple(data["vaults"]),
        created_at=created_at,
        last_used_at=when("last_used_at"),
        expires_at=when("expires_at"),
        revoked_at=when("revoked_at"),
    )


class _PooledConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg's classes are untyped
    """A pool connection handed back without asyncpg's reset query (a round trip on every release,
    so two on a bearer-token /mcp call). The reset undoes session state: session advisory locks,
    cursors, LISTEN, SET. The gateway's queries leave none behind (migrations run on a connection
    of their own); an open transaction is still rolled back."""

    def get_reset_query(self) -> str:
        return ""


GRANT_TOUCH_SECONDS = 60.0
"""How often a grant's last use is written (per gateway process)."""


class Store:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._touched: dict[str, float] = {}

    @classmethod
    async def connect(cls, dsn: str, min_size: int = 1, max_size: int = 10) -> Store:
        return cls(
            await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, connection_class=_PooledConnection)
        )

    async def close(self) -> None:
        await self._pool.close()

    async def migrated(self) -> bool:
        """True when the gateway's schema exists (`memvault-gateway migrate` has run)."""
        return bool(await self._pool.fetchval("SELECT to_regclass('gateway.token') IS NOT NULL"))

    # --- people --------------------------------------------------------------------------------

    async def user_by_id(self, user_id: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u WHERE u.id = $1",
            user_id,
        )
        return None if row is None else _user(row)

    async def user_by_username(self, username: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u WHERE u.username = $1",
            username,
        )
        return None if row is None else _user(row)

    async def user_by_subject(self, subject: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u WHERE u.subject = $1",
            subject,
        )
        return None if row is None else _user(row)

    async def has_admin(self) -> bool:
        return bool(await self._pool.fetchval("SELECT EXISTS (SELECT 1 FROM gateway.user_account WHERE is_admin)"))

    async def list_users(self) -> list[User]:
        rows = await self._pool.fetch(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u ORDER BY u.created_at"
        )
        return [_user(row) for row in rows]

    async def create_user(
        self, subject: str, *, username: str | None, display_name: str = "", is_admin: bool = False
    ) -> User | None:
        """A new person; None when the subject or username is taken."""
        row = await self._pool.fetchrow(
            "INSERT INTO gateway.user_account (subject, username, display_name, is_admin) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT DO NOTHING"
            " RETURNING id, subject, username, display_name, is_admin, password_hash, disabled_at",
            subject,
            username,
            display_name,
            is_admin,
        )
        return None if row is None else _user(row)

    async def set_password(self, user_id: str, password_hash: str) -> None:
        await self._pool.execute(
            "UPDATE gateway.user_account SET password_hash = $2 WHERE id = $1", user_id, password_hash
        )

    async def user_by_external(self, provider: str, external_subject: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.external_identity e JOIN gateway.user_account u ON u.id = e.user_id"
            " WHERE e.provider = $1 AND e.external_subject = $2",
            provider,
            external_subject,
        )
        return None if row is None else _user(row)

    async def link_external(self, provider: str, external_subject: str, user_id: str) -> None:
        await self._pool.execute(
            "INSERT INTO gateway.external_identity (provider, external_subject, user_id) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            provider,
            external_subject,
            user_id,
        )

    # --- setup links ---------------------------------------------------------------------------

    async def create_setup_link(self, user_id: str, token_hash: str, valid_for: timedelta) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            # One live link per person: a new one replaces any earlier unused link, which is kept
            # (marked) so that opening it can say it was replaced rather than that it is unknown.
            await conn.execute(
                "UPDATE gateway.setup_link SET replaced_at = now()"
                " WHERE user_id = $1 AND used_at IS NULL AND replaced_at IS NULL",
                user_id,
            )
            await conn.execute(
                "INSERT INTO gateway.setup_link (token_hash, user_id, expires_at) VALUES ($1, $2, now() + $3)",
                token_hash,
                user_id,
                valid_for,
            )

    async def setup_link_user(self, token_hash: str) -> User | None:
        """The person an unused, unexpired setup link is for."""
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.setup_link s JOIN gateway.user_account u ON u.id = s.user_id"
            " WHERE s.token_hash = $1 AND s.used_at IS NULL AND s.replaced_at IS NULL AND s.expires_at > now()"
            " AND u.disabled_at IS NULL",
            token_hash,
        )
        return None if row is None else _user(row)

    async def setup_link_state(self, token_hash: str) -> SetupLinkState:
        """Why a setup link is not (or is) good: `usable`, `used`, `replaced`, `expired` or `unknown`."""
        row = await self._pool.fetchrow(
            "SELECT s.used_at IS NOT NULL AS used, s.replaced_at IS NOT NULL AS replaced,"
            " s.expires_at <= now() AS expired, u.disabled_at IS NOT NULL AS disabled"
            " FROM gateway.setup_link s JOIN gateway.user_account u ON u.id = s.user_id WHERE s.token_hash = $1",
            token_hash,
        )
        if row is None or row["disabled"]:
            return "unknown"
        if row["used"]:
            return "used"
        if row["replaced"]:
            return "replaced"
        return "expired" if row["expired"] else "usable"

    async def use_setup_link(self, token_hash: str, password_hash: str) -> User | None:
        """Set the password and spend the link, once; None if the link is no longer good."""
        async with self._pool.acquire() as conn, conn.transaction():
            user_id = await conn.fetchval(
                "UPDATE gateway.setup_link SET used_at = now()"
                " WHERE token_hash = $1 AND used_at IS NULL AND replaced_at IS NULL AND expires_at > now()"
                " RETURNING user_id",
                token_hash,
            )
            if user_id is None:
                return None
            row = await conn.fetchrow(
                "UPDATE gateway.user_account SET password_hash = $2 WHERE id = $1 AND disabled_at IS NULL"
                " RETURNING id, subject, username, display_name, is_admin, password_hash, disabled_at",
                user_id,
                password_hash,
            )
            if row is not None:
                # A new password ends every session the old one opened.
                await conn.execute("DELETE FROM gateway.session WHERE user_id = $1", user_id)
            return None if row is None else _user(row)

    # --- sessions ------------------------------------------------------------------------------

    async def create_session(
        self, id_hash: str, user_id: str, csrf_token: str, method: str, valid_for: timedelta
    ) -> None:
        await self._pool.execute(
            "INSERT INTO gateway.session (id_hash, user_id, csrf_token, method, expires_at)"
            " VALUES ($1, $2, $3, $4, now() + $5)",
            id_hash,
            user_id,
            csrf_token,
            method,
            valid_for,
        )

    async def session(self, id_hash: str) -> Session | None:
        row = await self._pool.fetchrow(
            "UPDATE gateway.session s SET last_seen_at = now() FROM gateway.user_account u"
            " WHERE s.id_hash = $1 AND u.id = s.user_id AND s.expires_at > now() AND u.disabled_at IS NULL"
            " RETURNING s.csrf_token, s.method, s.expires_at, u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at",
            id_hash,
        )
        if row is None:
            return None
        return Session(_user(row), row["csrf_token"], row["method"], row["expires_at"])

    async def delete_session(self, id_hash: str) -> None:
        await self._pool.execute("DELETE FROM gateway.session WHERE id_hash = $1", id_hash)

    async def create_login_state(
        self, state_hash: str, nonce: str, code_verifier: str, next_path: str, valid_for: timedelta
    ) -> None:
        await self._pool.execute(
            "INSERT INTO gateway.login_state (state_hash, nonce, code_verifier, next_path, expires_at)"
            " VALUES ($1, $2, $3, $4, now() + $5)",
            state_hash,
            nonce,
            code_verifier,
            next_path,
            valid_for,
        )

    async def take_login_state(self, state_hash: str) -> tuple[str, str, str] | None:
        """(nonce, code_verifier, next_path) of an unexpired sign-in, spent on first use."""
        row = await self._pool.fetchrow(
            "DELETE FROM gateway.login_state WHERE state_hash = $1 RETURNING nonce, code_verifier, next_path,"
            " expires_at > now() AS live",
            state_hash,
        )
        if row is None or not row["live"]:
            return None
        return row["nonce"], row["code_verifier"], row["next_path"]

    # --- email sign-in -------------------------------------------------------------------------

    async def user_by_email(self, email: str) -> User | None:
        """The person whose sign-in address `email` (lower-cased) is."""
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at"
            " FROM gateway.user_account u WHERE u.email = $1",
            email,
        )
        return None if row is None else _user(row)

    async def email_of(self, user_id: str) -> str | None:
        value: str | None = await self._pool.fetchval("SELECT email FROM gateway.user_account WHERE id = $1", user_id)
        return value

    async def set_email(self, user_id: str, email: str | None) -> bool:
        """Set (or with None clear) a person's sign-in address; False when another account has it."""
        try:
            await self._pool.execute("UPDATE gateway.user_account SET email = $2 WHERE id = $1", user_id, email)
        except asyncpg.UniqueViolationError:
            return False
        return True

    async def create_email_link(self, user_id: str, token_hash: str, next_path: str, valid_for: timedelta) -> None:
        """A sign-in link; a newer one replaces any earlier unused sign-in link of the person."""
        await self._replace_link(user_id, token_hash, "sign_in", next_path, None, valid_for)

    async def create_email_confirmation(self, user_id: str, token_hash: str, email: str, valid_for: timedelta) -> None:
        """A link that makes `email` the person's address once it is used (it goes to that address)."""
        await self._replace_link(user_id, token_hash, "confirm", "", email, valid_for)

    async def _replace_link(
        self, user_id: str, token_hash: str, purpose: str, next_path: str, email: str | None, valid_for: timedelta
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            # One live link per person and purpose.
            await conn.execute(
                "DELETE FROM gateway.email_link WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL",
                user_id,
                purpose,
            )
            await conn.execute(
                "INSERT INTO gateway.email_link (token_hash, user_id, purpose, next_path, email, expires_at)"
                " VALUES ($1, $2, $3, $4, $5, now() + $6)",
                token_hash,
                user_id,
                purpose,
                next_path,
                email,
                valid_for,
            )

    async def email_link_user(self, token_hash: str, purpose: str = "sign_in") -> tuple[User, str | None] | None:
        """The person an unused, unexpired link is for, and the address a confirmation link would set."""
        row = await self._pool.fetchrow(
            "SELECT l.email AS link_email, u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash,"
            " u.disabled_at FROM gateway.email_link l JOIN gateway.user_account u ON u.id = l.user_id"
            " WHERE l.token_hash = $1 AND l.purpose = $2 AND l.used_at IS NULL AND l.expires_at > now()"
            " AND u.disabled_at IS NULL",
            token_hash,
            purpose,
        )
        return None if row is None else (_user(row), row["link_email"])

    async def use_email_link(self, token_hash: str) -> tuple[User, str] | None:
        """Spend a sign-in link, once: (person, next path); None if it is no longer good."""
        row = await self._pool.fetchrow(
            "WITH spent AS (UPDATE gateway.email_link SET used_at = now() WHERE token_hash = $1"
            "   AND purpose = 'sign_in' AND used_at IS NULL AND expires_at > now() RETURNING user_id, next_path)"
            " SELECT s.next_path, u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash,"
            " u.disabled_at FROM spent s JOIN gateway.user_account u ON u.id = s.user_id WHERE u.disabled_at IS NULL",
            token_hash,
        )
        return None if row is None else (_user(row), row["next_path"])

    async def use_email_confirmation(self, token_hash: str) -> tuple[User, str] | None:
        """Spend a confirmation link and set its address: (person, address); None if the link is no
        longer good. EmailTaken (nothing spent) when another account has the address by now."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    "UPDATE gateway.email_link SET used_at = now() WHERE token_hash = $1 AND purpose = 'confirm'"
                    " AND used_at IS NULL AND expires_at > now() RETURNING user_id, email",
                    token_hash,
                )
                if row is None:
                    return None
                user = await conn.fetchrow(
                    "UPDATE gateway.user_account SET email = $2 WHERE id = $1 AND disabled_at IS NULL"
                    " RETURNING id, subject, username, display_name, is_admin, password_hash, disabled_at",
                    row["user_id"],
                    row["email"],
                )
                return None if user is None else (_user(user), row["email"])
        except asyncpg.UniqueViolationError:
            raise EmailTaken(row["email"]) from None

    # --- clients -------------------------------------------------------------------------------

    async def create_client(
        self,
        client_id: str,
        *,
        kind: str,
        client_name: str,
        redirect_uris: Sequence[str],
        token_endpoint_auth_method: str,
        secret_hash: str | None,
        metadata: dict[str, Any],
    ) -> Client:
        row = await self._pool.fetchrow(
            "INSERT INTO gateway.oauth_client (client_id, kind, client_name, redirect_uris,"
            " token_endpoint_auth_method, secret_hash, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)"
            " ON CONFLICT (client_id) DO UPDATE SET client_name = EXCLUDED.client_name,"
            "   redirect_uris = EXCLUDED.redirect_uris, metadata = EXCLUDED.metadata, refreshed_at = now()"
            "   WHERE gateway.oauth_client.kind = 'metadata_document'"
            " RETURNING *",
            client_id,
            kind,
            client_name,
            list(redirect_uris),
            token_endpoint_auth_method,
            secret_hash,
            json.dumps(metadata),
        )
        return _client(row)

    async def client(self, client_id: str) -> Client | None:
        row = await self._pool.fetchrow("SELECT * FROM gateway.oauth_client WHERE client_id = $1", client_id)
        return None if row is None else _client(row)

    # --- grants --------------------------------------------------------------------------------

    async def create_grant(
        self,
        user_id: str,
        *,
        kind: str,
        client_id: str | None,
        name: str,
        scopes: Sequence[str],
        vaults: Sequence[str],
        expires_at: datetime | None = None,
    ) -> Grant:
        row = await self._pool.fetchrow(
            "INSERT INTO gateway.access_grant (user_id, kind, client_id, name, scopes, vaults, expires_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
            user_id,
            kind,
            client_id,
            name,
            list(scopes),
            list(vaults),
            expires_at,
        )
        return _grant(row)

    async def grants_of(self, user_id: str, *, include_revoked: bool = False) -> list[Grant]:
        rows = await self._pool.fetch(
            "SELECT * FROM gateway.access_grant WHERE user_id = $1 AND ($2 OR revoked_at IS NULL)"
            " ORDER BY created_at DESC",
            user_id,
            include_revoked,
        )
        return [_grant(row) for row in rows]

    async def grant(self, grant_id: str) -> Grant | None:
        row = await self._pool.fetchrow("SELECT * FROM gateway.access_grant WHERE id = $1", grant_id)
        return None if row is None else _grant(row)

    async def revoke_grant(self, grant_id: str, reason: str, user_id: str | None = None) -> Grant | None:
        """Revoke a grant and every token under it at once; None if there was no live grant to revoke."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "UPDATE gateway.access_grant SET revoked_at = now(), revoked_reason = $2"
                " WHERE id = $1 AND revoked_at IS NULL AND ($3::uuid IS NULL OR user_id = $3) RETURNING *",
                grant_id,
                reason,
                user_id,
            )
            if row is None:
                return None
            await conn.execute(
                "UPDATE gateway.token SET revoked_at = now() WHERE grant_id = $1 AND revoked_at IS NULL", grant_id
            )
            await conn.execute(
                "UPDATE gateway.authorization_code SET used_at = coalesce(used_at, now()) WHERE grant_id = $1",
                grant_id,
            )
            return _grant(row)

    async def create_tokens(
        self, grant: Grant, tokens: Sequence[NewToken], *, replace_reason: str | None = None
    ) -> list[Grant] | None:
        """Store `tokens` under `grant`; with `replace_reason`, revoke the user's other grants to the same app.

        One transaction, so an app is never left with both its old and new access, or with neither.
        None (and nothing stored) when `grant` is no longer live; otherwise the grants revoked.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            live = await conn.fetchval(
                "SELECT 1 FROM gateway.access_grant WHERE id = $1 AND revoked_at IS NULL FOR UPDATE", grant.id
            )
            if live is None:
                return None
            for new in tokens:
                await conn.execute(
                    "INSERT INTO gateway.token (token_hash, grant_id, kind, resource, scopes, expires_at)"
                    " VALUES ($1, $2, $3, $4, $5, now() + $6)",
                    new.token_hash,
                    grant.id,
                    new.kind,
                    new.resource,
                    list(new.scopes),
                    new.valid_for,
                )
            if replace_reason is None or grant.client_id is None:
                return []
            return await self._replace_client_grants(conn, grant.user_id, grant.client_id, grant.id, replace_reason)

    @staticmethod
    async def _replace_client_grants(
        conn: asyncpg.Connection, user_id: str, client_id: str, keep: str, reason: str
    ) -> list[Grant]:
        """Revoke the user's other live grants to this app, and every token under them; the ones revoked."""
        rows = await conn.fetch(
            "UPDATE gateway.access_grant SET revoked_at = now(), revoked_reason = $4"
            " WHERE user_id = $1 AND client_id = $2 AND kind = 'oauth' AND id <> $3 AND revoked_at IS NULL"
            " RETURNING *",
            user_id,
            client_id,
            keep,
            reason,
        )
        ids = [row["id"] for row in rows]
        if ids:
            await conn.execute(
                "UPDATE gateway.token SET revoked_at = now() WHERE grant_id = ANY($1) AND revoked_at IS NULL", ids
            )
            await conn.execute(
                "UPDATE gateway.authorization_code SET used_at = coalesce(used_at, now()) WHERE grant_id = ANY($1)",
                ids,
            )
        return [_grant(row) for row in rows]

    async def touch_grant(self, grant_id: str) -> None:
        """Record use, at most once a minute, so every /mcp call is neither a write nor a round trip."""
        now = time.monotonic()
        if now - self._touched.get(grant_id, -GRANT_TOUCH_SECONDS) < GRANT_TOUCH_SECONDS:
            return
        self._touched[grant_id] = now
        await self._pool.execute(
            "UPDATE gateway.access_grant SET last_used_at = now() WHERE id = $1"
            " AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
            grant_id,
        )

    # --- codes and tokens ----------------------------------------------------------------------

    async def create_code(
        self,
        code_hash: str,
        grant_id: str,
        *,
        client_id: str,
        redirect_uri: str,
        code_challenge: str,
        resource: str,
        scopes: Sequence[str],
        valid_for: timedelta,
    ) -> None:
        await self._pool.execute(
            "INSERT INTO gateway.authorization_code (code_hash, grant_id, client_id, redirect_uri, code_challenge,"
            " resource, scopes, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8)",
            code_hash,
            grant_id,
            client_id,
            redirect_uri,
            code_challenge,
            resource,
            list(scopes),
            valid_for,
        )

    async def take_code(self, code_hash: str) -> AuthorizationCode | None:
        """The code, marked used in the same statement so two exchanges cannot both win."""
        row = await self._pool.fetchrow(
            """
            WITH previous AS (
                SELECT code_hash, used_at FROM gateway.authorization_code WHERE code_hash = $1 FOR UPDATE
            ), spent AS (
                UPDATE gateway.authorization_code c SET used_at = coalesce(c.used_at, now())
                FROM previous p WHERE c.code_hash = p.code_hash
                RETURNING c.*, p.used_at AS previously_used_at
            )
            SELECT s.client_id, s.redirect_uri, s.code_challenge, s.resource, s.scopes,
                   s.expires_at <= now() AS expired, s.previously_used_at IS NOT NULL AS used,
                   row_to_json(g)::text AS grant_json
            FROM spent s JOIN gateway.access_grant g ON g.id = s.grant_id
            """,
            code_hash,
        )
        if row is None:
            return None
        return AuthorizationCode(
            grant=_grant_from_json(row["grant_json"]),
            client_id=row["client_id"],
            redirect_uri=row["redirect_uri"],
            code_challenge=row["code_challenge"],
            resource=row["resource"],
            scopes=tuple(row["scopes"]),
            expired=row["expired"],
            used=row["used"],
        )

    async def create_token(
        self,
        token_hash: str,
        grant_id: str,
        *,
        kind: str,
        resource: str,
        scopes: Sequence[str],
        valid_for: timedelta | None,
    ) -> None:
        await self._pool.execute(
            "INSERT INTO gateway.token (token_hash, grant_id, kind, resource, scopes, expires_at)"
            " VALUES ($1, $2, $3, $4, $5, now() + $6)",
            token_hash,
            grant_id,
            kind,
            resource,
            list(scopes),
            valid_for,
        )

    async def token(self, token_hash: str) -> TokenRecord | None:
        row = await self._pool.fetchrow(
            """
            SELECT t.kind AS t_kind, t.resource, t.scopes AS t_scopes, t.used_at IS NOT NULL AS used,
                   (t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
                    AND g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > now())
                    AND u.disabled_at IS NULL) AS usable,
                   u.subject, row_to_json(g)::text AS grant_json
            FROM gateway.token t
            JOIN gateway.access_grant g ON g.id = t.grant_id
            JOIN gateway.user_account u ON u.id = g.user_id
            WHERE t.token_hash = $1
            """,
            token_hash,
        )
        if row is None:
            return None
        return TokenRecord(
            kind=row["t_kind"],
            resource=row["resource"],
            scopes=tuple(row["t_scopes"]),
            grant=_grant_from_json(row["grant_json"]),
            subject=row["subject"],
            usable=row["usable"],
            used=row["used"],
        )

    async def use_refresh_token(self, token_hash: str) -> bool:
        """Spend a refresh token; False if it was spent already (a replay)."""
        spent = await self._pool.fetchval(
            "UPDATE gateway.token SET used_at = now() WHERE token_hash = $1 AND kind = 'refresh' AND used_at IS NULL"
            " RETURNING 1",
            token_hash,
        )
        return spent is not None

    async def revoke_token(self, token_hash: str) -> None:
        await self._pool.execute(
            "UPDATE gateway.token SET revoked_at = now() WHERE token_hash = $1 AND revoked_at IS NULL", token_hash
        )

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
