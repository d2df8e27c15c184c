"""The guide's and the settings' SQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memvault_core.errors import Conflict
from memvault_vault.audit.store import append_audit
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain import guide
from memvault_vault.guide.records import GuideRecord


class GuideStore:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def settings(self, vault: VaultAccess) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            "SELECT approval_mode, superseded_retention_days, rejected_retention_days, audit_retention_days"
            " FROM vault_settings WHERE vault_id = $1",
            vault.id,
        )
        if row is None:
            return {
                "approval_mode": "review",
                "superseded_retention_days": 365,
                "rejected_retention_days": 30,
                "audit_retention_days": 365,
            }
        return dict(row)

    async def update_settings(self, vault: VaultAccess, changes: dict[str, Any], actor: str) -> dict[str, Any]:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("INSERT INTO vault_settings (vault_id) VALUES ($1) ON CONFLICT DO NOTHING", vault.id)
            before = dict(
                await conn.fetchrow(
                    "SELECT approval_mode, superseded_retention_days, rejected_retention_days, audit_retention_days"
                    " FROM vault_settings WHERE vault_id = $1 FOR UPDATE",
                    vault.id,
                )
            )
            after = {**before, **changes}
            await conn.execute(
                "UPDATE vault_settings SET approval_mode = $2, superseded_retention_days = $3,"
                " rejected_retention_days = $4, audit_retention_days = $5, updated_at = now() WHERE vault_id = $1",
                vault.id,
                after["approval_mode"],
                after["superseded_retention_days"],
                after["rejected_retention_days"],
                after["audit_retention_days"],
            )
            changed = {k: {"from": before[k], "to": v} for k, v in after.items() if before[k] != v}
            await append_audit(conn, vault.id, actor, "settings.update", vault.name, changed)
            return after

    async def owner_name(self, vault: VaultAccess) -> str:
        """The display name of the vault's (first) owner; empty when it has none."""
        name = await self._pool.fetchval(
            "SELECT a.display_name FROM membership m JOIN account a ON a.id = m.account_id"
            " WHERE m.vault_id = $1 AND m.role = 'owner' ORDER BY m.created_at LIMIT 1",
            vault.id,
        )
        return str(name or "")

    async def guide_record(self, vault: VaultAccess) -> GuideRecord:
        row = await self._pool.fetchrow(
            "SELECT text, version, default_revision, updated_by, updated_at FROM operating_guide WHERE vault_id = $1",
            vault.id,
        )
        if row is None:
            return GuideRecord(guide.default_text(), 0, guide.default_revision(), "system", None)
        return GuideRecord(row["text"], row["version"], row["default_revision"], row["updated_by"], row["updated_at"])

    async def update_guide(
        self, vault: VaultAccess, text: str, *, expected_version: int, adopted_default: bool, actor: str
    ) -> int:
        """Save a new version of the guide; the owner has now seen the current default, so its notice stops."""
        async with self._pool.acquire() as conn, conn.transaction():
            current = await conn.fetchrow(
                "SELECT version FROM operating_guide WHERE vault_id = $1 FOR UPDATE", vault.id
            )
            version = current["version"] if current else 0
            if expected_version and expected_version != version:
                raise Conflict(
                    f"the guide is at version {version}, not {expected_version}: someone saved it since you read it. "
                    "Read it again and reapply your edit",
                    field="expected_version",
                )
            new_version = version + 1
            await conn.execute(
                "INSERT INTO operating_guide (vault_id, text, version, default_revision, updated_by)"
                " VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT (vault_id) DO UPDATE SET text = EXCLUDED.text, version = EXCLUDED.version,"
                " default_revision = EXCLUDED.default_revision, updated_by = EXCLUDED.updated_by, updated_at = now()",
                vault.id,
                text,
                new_version,
                guide.default_revision(),
                actor,
            )
            await conn.execute(
                "INSERT INTO operating_guide_history (vault_id, version, text, updated_by) VALUES ($1, $2, $3, $4)",
                vault.id,
                new_version,
                text,
                actor,
            )
            action = "guide.adopt_default" if adopted_default else "guide.update"
            await append_audit(conn, vault.id, actor, action, vault.name, {"version": new_version, "chars": len(text)})
            return int(new_version)

    async def guide_versions(
        self, vault: VaultAccess, limit: int, before_version: int
    ) -> list[tuple[int, str, datetime, str]]:
        rows = await self._pool.fetch(
            "SELECT version, updated_by, updated_at, text FROM operating_guide_history"
            " WHERE vault_id = $1 AND ($2::bigint = 0 OR version < $2) ORDER BY version DESC LIMIT $3",
            vault.id,
            before_version,
            limit,
        )
        return [(r["version"], r["updated_by"], r["updated_at"], r["text"]) for r in rows]
