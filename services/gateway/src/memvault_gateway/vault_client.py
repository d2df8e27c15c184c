"""The vault as the gateway uses it: acting as a signed-in person, or as a caller's own identity.

Every call goes through the typed client shared with mcp (`memvault_core.vault_client`), which sets
the deadline and turns the vault's errors back into MemvaultError.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import archive_pb2_grpc
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import vault_client as rpc
from memvault_core import wire
from memvault_core.identity import SCOPES, Identity, IdentitySigner

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


class VaultClient:
    """Calls the vault as a person (`subject`), with every scope and every vault they hold a role in, or
    (`call`) as a caller's own identity."""

    def __init__(self, address: str, signer: IdentitySigner, timeout_seconds: float = 10.0) -> None:
        self.rpc = rpc.VaultClient(address, timeout_seconds)
        self.channel = self.rpc.channel
        self._signer = signer
        self._archive = archive_pb2_grpc.ArchiveServiceStub(self.channel)

    async def close(self) -> None:
        await self.rpc.close()

    def _person(self, subject: str) -> str:
        return self._signer.sign(Identity(subject=subject, scopes=frozenset(SCOPES)))

    async def call(
        self,
        method: Callable[[rpc.VaultClient, str, RequestT], Awaitable[ResponseT]],
        request: RequestT,
        identity: Identity,
    ) -> ResponseT:
        """One vault RPC (`rpc.VaultClient.<method>`) as `identity`: a session's owner, or a token limited to
        some vaults and scopes, so the vault applies the same rules as for an agent."""
        return await method(self.rpc, self._signer.sign(identity), request)

    async def archive_call(self, method: str, request: object, identity: Identity) -> Any:
        """ArchiveService.<method> as `identity`, with the deadline of a slow call (uploads of parts)."""
        return await self.rpc._call(getattr(self._archive, method), request, self._signer.sign(identity), slow=True)

    async def ensure_account(self, subject: str, display_name: str = "") -> bool:
        request = apb.EnsureAccountRequest(display_name=display_name)
        reply = await self.rpc.ensure_account(self._person(subject), request)
        return bool(reply.created)

    async def vaults(self, subject: str) -> list[vpb.VaultInfo]:
        reply = await self.rpc.list_vaults(self._person(subject))
        return list(reply.vaults)

    async def vaults_as(self, identity: Identity) -> list[vpb.VaultInfo]:
        """The vaults a caller with this identity (perhaps limited to some vaults and scopes) can see."""
        reply = await self.call(rpc.VaultClient.list_vaults, vpb.ListVaultsRequest(), identity)
        return list(reply.vaults)

    async def create_vault(self, subject: str, name: str) -> str:
        reply = await self.rpc.create_vault(self._person(subject), apb.CreateVaultRequest(name=name))
        return str(reply.name)

    async def members(self, subject: str, vault: str) -> list[apb.Member]:
        reply = await self.rpc.list_members(self._person(subject), apb.ListMembersRequest(vault=vault))
        return list(reply.members)

    async def set_membership(self, subject: str, vault: str, member: str, role: str) -> apb.Member:
        request = apb.SetMembershipRequest(vault=vault, subject=member, role=wire.ROLES.value(role))
        reply = await self.rpc.set_membership(self._person(subject), request)
        added: apb.Member = reply.member
        return added

    async def remove_membership(self, subject: str, vault: str, member: str) -> None:
        request = apb.RemoveMembershipRequest(vault=vault, subject=member)
        await self.rpc.remove_membership(self._person(subject), request)

    async def schedule_deletion(self, subject: str, vault: str, confirm: str) -> apb.ScheduleVaultDeletionResponse:
        """Mark a vault the person owns for deletion after the grace period (read-only until then)."""
        request = apb.ScheduleVaultDeletionRequest(vault=vault, confirm=confirm)
        return await self.rpc.schedule_vault_deletion(self._person(subject), request)

    async def cancel_deletion(self, subject: str, vault: str) -> apb.CancelVaultDeletionResponse:
        request = apb.CancelVaultDeletionRequest(vault=vault)
        return await self.rpc.cancel_vault_deletion(self._person(subject), request)

    async def audit(
        self, subject: str, action: str, target: str = "", details: Mapping[str, str] | None = None, vault: str = ""
    ) -> None:
        request = apb.AppendAuditRequest(vault=vault, action=action, target=target, details=dict(details or {}))
        await self.rpc.append_audit(self._person(subject), request)

    async def audit_entries(self, subject: str, limit: int, before_id: int) -> list[apb.AuditEntry]:
        request = apb.ListAuditRequest(limit=limit, before_id=before_id)
        reply = await self.rpc.list_audit(self._person(subject), request)
        return list(reply.entries)
