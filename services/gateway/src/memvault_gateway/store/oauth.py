"""SQL for the authorization server: registered clients, grants, authorization codes and tokens."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from memvault_gateway.store.base import StoreBase
from memvault_gateway.store.records import (
    AuthorizationCode,
    Client,
    ClientUse,
    Grant,
    NewToken,
    TokenRecord,
    client_of_row,
    grant_of_json,
    grant_of_row,
)


class ClientInUse(Exception):
    """Another account holds a live grant for the client: only an administrator may delete it."""

    def __init__(self, use: ClientUse) -> None:
        super().__init__(use.client.client_id)
        self.use = use


GRANT_TOUCH_SECONDS = 60.0
"""How often a grant's last use is written (per gateway process)."""


class OAuthStore(StoreBase):
    _touched: dict[str, float]

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
        return client_of_row(row)

    async def client(self, client_id: str) -> Client | None:
        row = await self._pool.fetchrow("SELECT * FROM gateway.oauth_client WHERE client_id = $1", client_id)
        return None if row is None else client_of_row(row)

    async def clients_of(self, user_id: str, *, every: bool = False) -> list[ClientUse]:
        """Registered clients this account has (or had) a grant for; with `every`, all of the
        installation's (an administrator's view). Newest first."""
        rows = await self._pool.fetch(
            """
            SELECT c.*,
                   (SELECT count(*) FROM gateway.access_grant g
                    WHERE g.client_id = c.client_id AND g.user_id = $1 AND g.revoked_at IS NULL) AS mine,
                   (SELECT count(DISTINCT g.user_id) FROM gateway.access_grant g
                    WHERE g.client_id = c.client_id AND g.user_id <> $1 AND g.revoked_at IS NULL) AS others
            FROM gateway.oauth_client c
            WHERE $2 OR EXISTS (SELECT 1 FROM gateway.access_grant g WHERE g.client_id = c.client_id AND g.user_id = $1)
            ORDER BY c.created_at DESC, c.client_id
            LIMIT 500
            """,
            user_id,
            every,
        )
        return [ClientUse(client_of_row(row), row["mine"], row["others"]) for row in rows]

    async def delete_client(self, client_id: str, user_id: str, *, admin: bool) -> ClientUse | None:
        """Delete a registered client with every grant, code and token under it, at once (its tokens
        stop working on their next use). None if there is no such client visible to this account
        (administrators see every client). Refused (ClientInUse) unless `admin` when another account
        holds a live grant for it; the check and the delete are one transaction with the client
        locked, so no grant can be given for it in between."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                """
                SELECT c.*,
                       (SELECT count(*) FROM gateway.access_grant g
                        WHERE g.client_id = c.client_id AND g.user_id = $2 AND g.revoked_at IS NULL) AS mine,
                       (SELECT count(DISTINCT g.user_id) FROM gateway.access_grant g
                        WHERE g.client_id = c.client_id AND g.user_id <> $2 AND g.revoked_at IS NULL) AS others
                FROM gateway.oauth_client c
                WHERE c.client_id = $1
                  AND ($3 OR EXISTS (SELECT 1 FROM gateway.access_grant g
                                     WHERE g.client_id = c.client_id AND g.user_id = $2))
                FOR UPDATE OF c
                """,
                client_id,
                user_id,
                admin,
            )
            if row is None:
                return None
            use = ClientUse(client_of_row(row), row["mine"], row["others"])
            if use.other_accounts and not admin:
                raise ClientInUse(use)
            await conn.execute("DELETE FROM gateway.oauth_client WHERE client_id = $1", client_id)
            return use

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
        return grant_of_row(row)

    async def grants_of(self, user_id: str, *, include_revoked: bool = False) -> list[Grant]:
        rows = await self._pool.fetch(
            "SELECT * FROM gateway.access_grant WHERE user_id = $1 AND ($2 OR revoked_at IS NULL)"
            " ORDER BY created_at DESC",
            user_id,
            include_revoked,
        )
        return [grant_of_row(row) for row in rows]

    async def grant(self, grant_id: str) -> Grant | None:
        row = await self._pool.fetchrow("SELECT * FROM gateway.access_grant WHERE id = $1", grant_id)
        return None if row is None else grant_of_row(row)

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
            return grant_of_row(row)

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
        return [grant_of_row(row) for row in rows]

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
            grant=grant_of_json(row["grant_json"]),
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
            grant=grant_of_json(row["grant_json"]),
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
