"""The audit log as owners read it, and as the gateway appends to it for accounts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.audit.records import AuditRecord
from memvault_vault.audit.store import AuditStore
from memvault_vault.database import VaultAccess
from memvault_vault.domain.inputs import validate_page_size


class AuditService:
    def __init__(self, store: AuditStore, accounts: AccountService) -> None:
        self._store = store
        self._accounts = accounts

    async def vault_audit(
        self,
        identity: Identity,
        vault_name: str,
        *,
        actor: str = "",
        action: str = "",
        target: str = "",
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 0,
        before_id: int = 0,
    ) -> tuple[VaultAccess, list[AuditRecord], int]:
        for name, value in (("actor", actor), ("action", action), ("target", target)):
            if len(value) > limits.MAX_KEY_CHARS:
                raise LimitExceeded(
                    f"{name} is {len(value)} characters; the limit is {limits.MAX_KEY_CHARS}",
                    field=name,
                    limit=limits.MAX_KEY_CHARS,
                )
        if since and until and until <= since:
            raise InvalidArgument("until must be after since", field="until")
        limit = validate_page_size(limit, 50, limits.MAX_AUDIT_RESULTS)
        vault = await self._accounts.owner(identity, vault_name, write=False)
        entries = await self._store.vault_audit(
            vault,
            actor=actor.strip(),
            action=action.strip(),
            target=target.strip(),
            since=since,
            until=until,
            limit=limit,
            before_id=max(before_id, 0),
        )
        return vault, entries, entries[-1].id if len(entries) == limit else 0

    async def append_account_entry(
        self, subject: str, vault: VaultAccess | None, actor: str, action: str, target: str, details: dict[str, Any]
    ) -> None:
        """An audit entry about `subject`'s account (and, if given, one of its vaults)."""
        await self._store.append_account_audit(subject, vault, actor, action, target, details)

    async def account_entries(self, subject: str, limit: int, before_id: int) -> list[AuditRecord]:
        """Entries about `subject`'s account or about vaults it owns, newest first."""
        return await self._store.account_audit(subject, limit, before_id)
