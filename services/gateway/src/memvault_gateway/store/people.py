"""SQL about people: accounts, their links to identity providers and proxies, and their sign-in addresses."""

from __future__ import annotations

import asyncpg

from memvault_gateway.store.base import StoreBase
from memvault_gateway.store.records import User, user_of_row


class PeopleStore(StoreBase):
    async def user_by_id(self, user_id: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u WHERE u.id = $1",
            user_id,
        )
        return None if row is None else user_of_row(row)

    async def user_by_username(self, username: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u WHERE u.username = $1",
            username,
        )
        return None if row is None else user_of_row(row)

    async def user_by_subject(self, subject: str) -> User | None:
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u WHERE u.subject = $1",
            subject,
        )
        return None if row is None else user_of_row(row)

    async def has_admin(self) -> bool:
        return bool(await self._pool.fetchval("SELECT EXISTS (SELECT 1 FROM gateway.user_account WHERE is_admin)"))

    async def list_users(self) -> list[User]:
        rows = await self._pool.fetch(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at FROM gateway.user_account u ORDER BY u.created_at"
        )
        return [user_of_row(row) for row in rows]

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
        return None if row is None else user_of_row(row)

    async def set_display_name(self, user_id: str, display_name: str) -> None:
        await self._pool.execute(
            "UPDATE gateway.user_account SET display_name = $2 WHERE id = $1", user_id, display_name
        )

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
        return None if row is None else user_of_row(row)

    async def link_external(self, provider: str, external_subject: str, user_id: str) -> None:
        await self._pool.execute(
            "INSERT INTO gateway.external_identity (provider, external_subject, user_id) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            provider,
            external_subject,
            user_id,
        )

    async def user_by_email(self, email: str) -> User | None:
        """The person whose sign-in address `email` (lower-cased) is."""
        row = await self._pool.fetchrow(
            "SELECT u.id, u.subject, u.username, u.display_name, u.is_admin, u.password_hash, u.disabled_at"
            " FROM gateway.user_account u WHERE u.email = $1",
            email,
        )
        return None if row is None else user_of_row(row)

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
