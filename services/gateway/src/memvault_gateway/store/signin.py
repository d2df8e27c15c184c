"""SQL for owner sign-in: setup links, browser sessions, single sign-on states and email links."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from memvault_gateway.store.base import StoreBase
from memvault_gateway.store.records import EmailTaken, Session, SetupLinkState, User, user_of_row


class SignInStore(StoreBase):
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
        return None if row is None else user_of_row(row)

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
            return None if row is None else user_of_row(row)

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
        return Session(user_of_row(row), row["csrf_token"], row["method"], row["expires_at"])

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
        return None if row is None else (user_of_row(row), row["link_email"])

    async def use_email_link(self, token_hash: str) -> tuple[User, str] | None:
        """Spend a sign-in link, once: (person, next path); None if it is no longer good."""
        row = await self._pool.fetchrow(
            "WITH spent AS (UPDATE gateway.email_link SET used_at = now() WHERE token_hash = $1"
            "   AND purpose = 'sign_in' AND used_at IS NULL AND expires_at > now() RETURNING user_id, next_path)"
            " SELECT s.next_path, u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash,"
            " u.disabled_at FROM spent s JOIN gateway.user_account u ON u.id = s.user_id WHERE u.disabled_at IS NULL",
            token_hash,
        )
        return None if row is None else (user_of_row(row), row["next_path"])

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
                return None if user is None else (user_of_row(user), row["email"])
        except asyncpg.UniqueViolationError:
            raise EmailTaken(row["email"]) from None
