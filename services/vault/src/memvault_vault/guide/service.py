"""What the guide and settings calls do: read and save the guide, read and change the settings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import InvalidArgument
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.domain import guide as guide_rules
from memvault_vault.domain.inputs import parse_approval_mode, validate_page_size
from memvault_vault.guide.records import GuideView
from memvault_vault.guide.store import GuideStore


class GuideService:
    def __init__(self, store: GuideStore, accounts: AccountService) -> None:
        self._store = store
        self._accounts = accounts

    async def settings(self, identity: Identity, vault_name: str) -> tuple[VaultAccess, dict[str, Any]]:
        vault = await self._accounts.access(identity, vault_name)
        return vault, await self._store.settings(vault)

    async def update_settings(
        self, identity: Identity, vault_name: str, changes: dict[str, object]
    ) -> tuple[VaultAccess, dict[str, Any]]:
        tidy: dict[str, Any] = {}
        if changes.get("approval_mode"):
            tidy["approval_mode"] = parse_approval_mode(str(changes["approval_mode"])).value
        for name in ("superseded_retention_days", "rejected_retention_days", "audit_retention_days"):
            value = changes.get(name)
            if value is None:
                continue
            if not isinstance(value, int) or not 0 <= value <= limits.MAX_RETENTION_DAYS:
                raise InvalidArgument(
                    f"{name} must be a whole number of days from 0 (keep forever) to {limits.MAX_RETENTION_DAYS}",
                    field=name,
                )
            tidy[name] = value
        vault = await self._accounts.owner(identity, vault_name, write=True)
        return vault, await self._store.update_settings(vault, tidy, identity.actor)

    async def guide_view(self, identity: Identity, vault_name: str, *, include_default: bool = False) -> GuideView:
        vault = await self._accounts.access(identity, vault_name)
        record = await self._store.guide_record(vault)
        current_default = guide_rules.default_revision()
        return GuideView(
            vault=vault.name,
            text=record.text,
            version=record.version,
            newer_default_available=record.default_revision != current_default,
            default_revision=current_default,
            default_text=guide_rules.default_text(await self._store.owner_name(vault)) if include_default else "",
            updated_at=record.updated_at,
            updated_by=record.updated_by,
        )

    async def update_guide(
        self, identity: Identity, vault_name: str, text: str, *, expected_version: int = 0, adopt_default: bool = False
    ) -> tuple[VaultAccess, int]:
        vault = await self._accounts.owner(identity, vault_name, write=True)
        if adopt_default:
            if text.strip():
                raise InvalidArgument("text must be empty when adopting the default guide", field="text")
            text = guide_rules.default_text(await self._store.owner_name(vault))
        text = guide_rules.validate_text(text)
        version = await self._store.update_guide(
            vault, text, expected_version=expected_version, adopted_default=adopt_default, actor=identity.actor
        )
        return vault, version

    async def guide_versions(
        self, identity: Identity, vault_name: str, *, limit: int = 0, before_version: int = 0
    ) -> tuple[VaultAccess, list[tuple[int, str, datetime, str]]]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        return vault, await self._store.guide_versions(vault, limit, max(before_version, 0))
