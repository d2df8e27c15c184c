"""The vault's gRPC API as the gateway uses it: acting as a signed-in person, errors translated."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import grpc

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import accounts_pb2_grpc, archive_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.grpc import client_channel, error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner

ResponseT = TypeVar("ResponseT")

ROLES = {"owner": apb.ROLE_OWNER, "editor": apb.ROLE_EDITOR, "viewer": apb.ROLE_VIEWER}
ROLE_NAMES = {value: name for name, value in ROLES.items()}


class VaultClient:
    """Calls the vault as a person (`subject`), with every scope and every vault they hold a role in."""

    def __init__(self, address: str, signer: IdentitySigner, timeout_seconds: float = 10.0) -> None:
        self.channel = client_channel(address)
        self._vaults = vault_pb2_grpc.VaultServiceStub(self.channel)
        self._accounts = accounts_pb2_grpc.AccountServiceStub(self.channel)
        self._archive = archive_pb2_grpc.ArchiveServiceStub(self.channel)
        self._signer = signer
        self._timeout = timeout_seconds

    async def close(self) -> None:
        await self.channel.close()

    async def _call(self, method: Callable[..., Awaitable[ResponseT]], request: object, subject: str) -> ResponseT:
        identity = self._signer.sign(Identity(subject=subject, scopes=frozenset(SCOPES)))
        try:
            return await method(request, metadata=((GRPC_METADATA_KEY, identity),), timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None

    async def ensure_account(self, subject: str, display_name: str = "") -> bool:
        reply = await self._call(
            self._accounts.EnsureAccount, apb.EnsureAccountRequest(display_name=display_name), subject
        )
        return bool(reply.created)

    async def vaults(self, subject: str) -> list[vpb.VaultInfo]:
        reply = await self._call(self._vaults.ListVaults, vpb.ListVaultsRequest(), subject)
        return list(reply.vaults)

    async def vaults_as(self, identity: Identity) -> list[vpb.VaultInfo]:
        """The vaults a caller with this identity (perhaps limited to some vaults and scopes) can see."""
        try:
            reply = await self._vaults.ListVaults(
                vpb.ListVaultsRequest(),
                metadata=((GRPC_METADATA_KEY, self._signer.sign(identity)),),
                timeout=self._timeout,
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None
        return list(reply.vaults)

    async def create_vault(self, subject: str, name: str) -> str:
        reply = await self._call(self._accounts.CreateVault, apb.CreateVaultRequest(name=name), subject)
        return str(reply.name)

    async def members(self, subject: str, vault: str) -> list[apb.Member]:
        reply = await self._call(self._accounts.ListMembers, apb.ListMembersRequest(vault=vault), subject)
        return list(reply.members)

    async def set_membership(self, subject: str, vault: str, member: str, role: str) -> apb.Member:
        request = apb.SetMembershipRequest(vault=vault, subject=member, role=ROLES[role])
        reply = await self._call(self._accounts.SetMembership, request, subject)
        added: apb.Member = reply.member
        return added

    async def remove_membership(self, subject: str, vault: str, member: str) -> None:
        request = apb.RemoveMembershipRequest(vault=vault, subject=member)
        await self._call(self._accounts.RemoveMembership, request, subject)

    async def audit(
        self, subject: str, action: str, target: str = "", details: Mapping[str, str] | None = None, vault: str = ""
    ) -> None:
        request = apb.AppendAuditRequest(vault=vault, action=action, target=target, details=dict(details or {}))
        await self._call(self._accounts.AppendAudit, request, subject)

    async def audit_entries(self, subject: str, limit: int, before_id: int) -> list[apb.AuditEntry]:
        reply = await self._call(
            self._accounts.ListAudit, apb.ListAuditRequest(limit=limit, before_id=before_id), subject
        )
        return list(reply.entries)

    # --- memories, review, imports, settings, guide and vault audit (api/memories.py) -------------------
    # Each call acts as the caller's own identity (a session's owner, or a token limited to some vaults
    # and scopes), so the vault applies the same rules as for an agent.

    async def archive_call(self, method: str, request: object, identity: Identity) -> Any:
        """Call ArchiveService.<method> as `identity` (uploads of parts get the longer deadline)."""
        try:
            return await getattr(self._archive, method)(
                request, metadata=((GRPC_METADATA_KEY, self._signer.sign(identity)),), timeout=self._timeout * 5
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None

    async def memories_call(self, method: str, request: object, identity: Identity, *, slow: bool = False) -> Any:
        """Call VaultService.<method> as `identity`; imports get a longer deadline."""
        try:
            return await getattr(self._vaults, method)(
                request,
                metadata=((GRPC_METADATA_KEY, self._signer.sign(identity)),),
                timeout=self._timeout * (5 if slow else 1),
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None
