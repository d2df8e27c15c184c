"""Who may use which vault: the access check every call makes, and the accounts the gateway manages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memvault_core.errors import InvalidArgument, NotFound, PermissionDenied
from memvault_core.identity import Identity
from memvault_vault.accounts.records import AccountMember
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import VaultAccess

DELETION_GRACE = timedelta(days=7)
"""How long a vault marked for deletion stays (read-only) before the retention runner deletes it."""


def when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def pending_deletion(vault: VaultAccess) -> PermissionDenied:
    """The refusal of a write to a vault that is pending deletion: when, and how to cancel."""
    assert vault.delete_after is not None
    return PermissionDenied(
        f"vault '{vault.name}' is pending deletion: it is read-only until it is deleted on {when(vault.delete_after)}; "
        "reads still work. An owner can cancel the deletion on the dashboard (Settings, Cancel the deletion) "
        f"or with DELETE /api/v1/vaults/{vault.name}/deletion, which makes it writable again",
        field="vault",
    )


class AccountService:
    def __init__(self, store: AccountStore) -> None:
        self._store = store

    async def vaults(self, identity: Identity) -> list[VaultAccess]:
        identity.require("read")
        return [v for v in await self._store.vaults_of(identity.subject) if identity.allows_vault(v.name)]

    async def access(self, identity: Identity, name: str, *, write: bool = False) -> VaultAccess:
        """The vault `name` as this identity may use it; unknown and forbidden vaults look the same."""
        identity.require("write" if write else "read")
        name = name.strip()
        if not name:
            usable = await self.vaults(identity)
            by_name = {v.name: v for v in usable}
            if "default" in by_name:
                vault: VaultAccess | None = by_name["default"]
            elif len(usable) == 1:
                vault = usable[0]
            else:
                raise InvalidArgument(
                    "vault is required here; choose one of: " + (", ".join(by_name) or "(none)"),
                    field="vault",
                )
        else:
            vault = await self._store.vault_of(identity.subject, name) if identity.allows_vault(name) else None
        if vault is None:
            names = ", ".join(v.name for v in await self.vaults(identity)) or "(none)"
            raise NotFound(f"no vault named {name[:64]!r} is open to you; your vaults: {names}", field="vault")
        if write and not vault.writable:
            raise PermissionDenied(f"you can read vault '{vault.name}' but not write to it (role: {vault.role})")
        if write and vault.delete_after is not None:
            raise pending_deletion(vault)
        return vault

    async def reviewer(self, identity: Identity, vault_name: str) -> VaultAccess:
        """Reviewing (approve, reject, confirm, undo an import) is for the vault's owners and editors, with the
        admin scope: agents propose, people decide."""
        vault = await self.access(identity, vault_name, write=True)
        identity.require("admin")
        return vault

    async def owner(self, identity: Identity, vault_name: str, *, write: bool) -> VaultAccess:
        vault = await self.access(identity, vault_name, write=write)
        identity.require("admin")
        if vault.role != "owner":
            raise PermissionDenied(f"only an owner of vault '{vault.name}' can do this (your role: {vault.role})")
        return vault

    # --- for the gateway's AccountService (an owner's own session) ---------------------------------

    async def session_vault(self, identity: Identity, name: str, *, owner: bool = False) -> VaultAccess:
        """The vault `name` as the owner's session may use it; with `owner`, only if it owns it."""
        vault = await self._store.vault_of(identity.subject, name) if identity.allows_vault(name) else None
        if vault is None:
            raise NotFound(f"no vault named {name[:64]!r} is open to you", field="vault")
        if owner and vault.role != "owner":
            raise PermissionDenied(f"only an owner of vault '{vault.name}' can change who may use it")
        return vault

    async def ensure_account(self, subject: str, display_name: str) -> bool:
        """Create the account for `subject` if missing (and update its display name); True when created."""
        return await self._store.ensure_account(subject, display_name)

    async def ensure_owner(self, subject: str, vault_name: str) -> bool:
        """Create the account, the vault and the owner membership; False when another account owns the vault."""
        return await self._store.ensure_owner(subject, vault_name)

    async def members(self, vault: VaultAccess) -> list[AccountMember]:
        return await self._store.members(vault)

    async def set_membership(self, vault: VaultAccess, subject: str, role: str, actor: str) -> AccountMember | None:
        """Give `subject` `role` in the vault; None (and nothing changed) if that would leave it without an owner."""
        return await self._store.set_membership(vault, subject, role, actor)

    async def remove_membership(self, vault: VaultAccess, subject: str, actor: str) -> bool | None:
        """Take `subject`'s role away: True if removed, False if it had none, None if it is the last owner."""
        return await self._store.remove_membership(vault, subject, actor)

    async def schedule_deletion(
        self, identity: Identity, name: str, confirm: str
    ) -> tuple[VaultAccess, datetime, bool]:
        """Mark a vault the caller owns for deletion after DELETION_GRACE (audited); `confirm` repeats its name."""
        identity.require("admin")
        vault = await self.session_vault(identity, name)
        if vault.role != "owner":
            raise PermissionDenied(f"only an owner of vault '{vault.name}' can delete it (your role: {vault.role})")
        if confirm.strip() != vault.name:
            raise InvalidArgument(
                f"confirm must repeat the vault's name ({vault.name!r}) exactly; nothing was changed", field="confirm"
            )
        delete_after, scheduled = await self._store.schedule_deletion(vault, identity.actor, DELETION_GRACE)
        return vault, delete_after, scheduled

    async def cancel_deletion(self, identity: Identity, name: str) -> tuple[VaultAccess, bool]:
        """Cancel the pending deletion of a vault the caller owns (audited); False when none was pending."""
        identity.require("admin")
        vault = await self.session_vault(identity, name)
        if vault.role != "owner":
            raise PermissionDenied(
                f"only an owner of vault '{vault.name}' can cancel its deletion (your role: {vault.role})"
            )
        return vault, await self._store.cancel_deletion(vault, identity.actor)
