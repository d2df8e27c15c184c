"""Accounts' SQL: accounts, vaults and memberships."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg

from memvault_core.errors import Conflict
from memvault_vault.accounts.records import AccountMember
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain import guide

_VAULTS_OF = """
    SELECT v.id::text AS id, v.name, m.role, coalesce(s.approval_mode, 'review') AS approval_mode, v.delete_after
    FROM vault v
    JOIN membership m ON m.vault_id = v.id
    JOIN account a ON a.id = m.account_id
    LEFT JOIN vault_settings s ON s.vault_id = v.id
    WHERE a.subject = $1
"""


class AccountStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def vaults_of(self, subject: str) -> list[VaultAccess]:
        rows = await self._pool.fetch(_VAULTS_OF + " ORDER BY v.name", subject)
        return [VaultAccess(**dict(row)) for row in rows]

    async def vault_of(self, subject: str, name: str) -> VaultAccess | None:
        row = await self._pool.fetchrow(_VAULTS_OF + " AND v.name = $2", subject, name)
        return None if row is None else VaultAccess(**dict(row))

    async def ensure_owner(self, subject: str, vault_name: str) -> bool:
        """Create the account, the vault with its settings and guide, and the owner membership.

        Vault names are unique per account: returns True when this account now owns a vault of this
        name (made now, or already), False (and changes nothing) when a vault of this name is
        shared with it by another account.
        """
        try:
            return await self._ensure_owner(subject, vault_name)
        except asyncpg.UniqueViolationError:  # the same account made the same name at the same moment
            return await self._ensure_owner(subject, vault_name)

    async def _ensure_owner(self, subject: str, vault_name: str) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            account = await conn.fetchrow(
                "INSERT INTO account (subject) VALUES ($1) ON CONFLICT (subject) DO UPDATE SET subject = EXCLUDED.subject"
                " RETURNING id, display_name",
                subject,
            )
            account_id = account["id"]
            role = await conn.fetchval(
                "SELECT role FROM membership WHERE account_id = $1 AND vault_name = $2", account_id, vault_name
            )
            if role is not None:
                return bool(role == "owner")
            vault_id = await conn.fetchval("INSERT INTO vault (name) VALUES ($1) RETURNING id", vault_name)
            await conn.execute(
                "INSERT INTO membership (vault_id, account_id, role) VALUES ($1, $2, 'owner')",
                vault_id,
                account_id,
            )
            await conn.execute("INSERT INTO vault_settings (vault_id) VALUES ($1)", vault_id)
            text = guide.default_text(account["display_name"])
            await conn.execute(
                "INSERT INTO operating_guide (vault_id, text, default_revision, updated_by) VALUES ($1, $2, $3, 'system')",
                vault_id,
                text,
                guide.default_revision(),
            )
            await conn.execute(
                "INSERT INTO operating_guide_history (vault_id, version, text, updated_by) VALUES ($1, 1, $2, 'system')",
                vault_id,
                text,
            )
            await append_audit(conn, vault_id, f"user:{subject}", "vault.create", vault_name, {})
            return True

    # For the gateway's AccountService: each method acts for one subject; the service checks its role.

    async def ensure_account(self, subject: str, display_name: str) -> bool:
        """Create the account for `subject` if missing (and update its display name); True when created."""
        row = await self._pool.fetchrow(
            "INSERT INTO account (subject, display_name) VALUES ($1, $2)"
            " ON CONFLICT (subject) DO UPDATE SET display_name ="
            "   CASE WHEN EXCLUDED.display_name = '' THEN account.display_name ELSE EXCLUDED.display_name END"
            " RETURNING (xmax = 0) AS created",
            subject,
            display_name,
        )
        return bool(row["created"])

    async def members(self, vault: VaultAccess) -> list[AccountMember]:
        rows = await self._pool.fetch(
            "SELECT a.subject, a.display_name, m.role, m.created_at FROM membership m"
            " JOIN account a ON a.id = m.account_id WHERE m.vault_id = $1 ORDER BY m.created_at, a.subject",
            vault.id,
        )
        return [AccountMember(r["subject"], r["display_name"], r["role"], r["created_at"]) for r in rows]

    async def set_membership(self, vault: VaultAccess, subject: str, role: str, actor: str) -> AccountMember | None:
        """Give `subject` `role` in the vault; None (and nothing changed) if that would leave it without an owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT id FROM vault WHERE id = $1 FOR UPDATE", vault.id)
            account = await conn.fetchrow(
                "INSERT INTO account (subject) VALUES ($1) ON CONFLICT (subject) DO UPDATE SET subject = EXCLUDED.subject"
                " RETURNING id, display_name",
                subject,
            )
            account_id = account["id"]
            if role != "owner" and not await _other_owner_exists(conn, vault.id, account_id):
                return None
            taken = await conn.fetchval(
                "SELECT 1 FROM membership WHERE account_id = $1 AND vault_name = $2 AND vault_id <> $3",
                account_id,
                vault.name,
                vault.id,
            )
            if taken:
                raise Conflict(
                    f"{subject} already has a vault named '{vault.name}'; vault names are unique per account, "
                    "so it cannot also be a member of this one",
                    field="subject",
                )
            row = await conn.fetchrow(
                "INSERT INTO membership (vault_id, account_id, role) VALUES ($1, $2, $3)"
                " ON CONFLICT (vault_id, account_id) DO UPDATE SET role = EXCLUDED.role"
                " RETURNING created_at",
                vault.id,
                account_id,
                role,
            )
            display_name = await conn.fetchval("SELECT display_name FROM account WHERE id = $1", account_id)
            await append_audit(conn, vault.id, actor, "membership.set", subject, {"role": role})
            return AccountMember(subject, display_name, role, row["created_at"])

    async def remove_membership(self, vault: VaultAccess, subject: str, actor: str) -> bool | None:
        """Take `subject`'s role away: True if removed, False if it had none, None if it is the last owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT id FROM vault WHERE id = $1 FOR UPDATE", vault.id)
            account_id = await conn.fetchval("SELECT id FROM account WHERE subject = $1", subject)
            if account_id is None:
                return False
            if not await _other_owner_exists(conn, vault.id, account_id):
                return None
            removed = await conn.fetchval(
                "DELETE FROM membership WHERE vault_id = $1 AND account_id = $2 RETURNING role", vault.id, account_id
            )
            if removed is None:
                return False
            await append_audit(conn, vault.id, actor, "membership.remove", subject, {"role": removed})
            return True

    async def schedule_deletion(self, vault: VaultAccess, actor: str, grace: timedelta) -> tuple[datetime, bool]:
        """Mark the vault for deletion `grace` from now; (when it will be deleted, whether this call marked it:
        False when it was pending already, its date unchanged)."""
        async with self._pool.acquire() as conn, conn.transaction():
            marked = await conn.fetchval(
                "UPDATE vault SET delete_after = now() + $2::interval, deletion_requested_by = $3"
                " WHERE id = $1 AND delete_after IS NULL RETURNING delete_after",
                vault.id,
                grace,
                actor,
            )
            if marked is None:
                return await conn.fetchval("SELECT delete_after FROM vault WHERE id = $1", vault.id), False
            await append_audit(
                conn, vault.id, actor, "vault.deletion_scheduled", vault.name, {"delete_after": marked.isoformat()}
            )
            return marked, True

    async def cancel_deletion(self, vault: VaultAccess, actor: str) -> bool:
        """Clear the vault's pending deletion; False when none was pending."""
        async with self._pool.acquire() as conn, conn.transaction():
            was = await conn.fetchval(
                "UPDATE vault v SET delete_after = NULL, deletion_requested_by = NULL FROM vault old"
                " WHERE v.id = $1 AND old.id = v.id AND v.delete_after IS NOT NULL RETURNING old.delete_after",
                vault.id,
            )
            if was is None:
                return False
            await append_audit(conn, vault.id, actor, "vault.deletion_cancelled", vault.name, {"was": was.isoformat()})
            return True


async def _other_owner_exists(conn: asyncpg.Connection, vault_id: str, account_id: Any) -> bool:
    count = await conn.fetchval(
        "SELECT count(*) FROM membership WHERE vault_id = $1 AND role = 'owner' AND account_id <> $2",
        vault_id,
        account_id,
    )
    return bool(count)
