"""Who may use which vault: the access check every call makes, and the accounts the gateway manages."""

from __future__ import annotations

from memvault_core.errors import InvalidArgument, NotFound, PermissionDenied
from memvault_core.identity import Identity
from memvault_vault.accounts.records import AccountMember
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import VaultAccess


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
