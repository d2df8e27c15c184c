"""AccountService over gRPC: what the gateway needs to sign people in and let them share vaults.

Only an owner's own session may call it (an identity without a client); agents and service
tokens reach memories through VaultService and nothing else.
"""

from __future__ import annotations

import re

import grpc

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import accounts_pb2_grpc
from memvault_core import wire
from memvault_core.errors import Conflict, InvalidArgument, NotFound, PermissionDenied
from memvault_core.grpc import identity_token
from memvault_core.identity import Identity, IdentitySigner
from memvault_vault.accounts.records import AccountMember
from memvault_vault.accounts.service import AccountService
from memvault_vault.audit.service import AuditService

VAULT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MAX_SUBJECT_CHARS = 200
MAX_AUDIT_PAGE = 200
MAX_AUDIT_DETAIL_CHARS = 500


def _member(member: AccountMember) -> apb.Member:
    return apb.Member(
        subject=member.subject,
        display_name=member.display_name,
        role=wire.ROLES.value(member.role),
        since=wire.to_timestamp(member.since),
    )


def _subject(value: str) -> str:
    value = value.strip()
    if not value or len(value) > MAX_SUBJECT_CHARS:
        raise InvalidArgument(f"subject must be 1 to {MAX_SUBJECT_CHARS} characters", field="subject")
    return value


class AccountServicer(accounts_pb2_grpc.AccountServiceServicer):
    def __init__(self, accounts: AccountService, audit: AuditService, signer: IdentitySigner) -> None:
        self._accounts = accounts
        self._audit = audit
        self._signer = signer

    def _identity(self, context: grpc.aio.ServicerContext) -> Identity:
        identity = self._signer.verify(identity_token(context))
        if identity.client:
            raise PermissionDenied(
                "accounts and memberships are managed by the owner through the JSON API, not by agents"
            )
        return identity

    async def EnsureAccount(
        self, request: apb.EnsureAccountRequest, context: grpc.aio.ServicerContext
    ) -> apb.EnsureAccountResponse:
        identity = self._identity(context)
        created = await self._accounts.ensure_account(identity.subject, request.display_name.strip()[:200])
        return apb.EnsureAccountResponse(subject=identity.subject, created=created)

    async def CreateVault(
        self, request: apb.CreateVaultRequest, context: grpc.aio.ServicerContext
    ) -> apb.CreateVaultResponse:
        identity = self._identity(context)
        identity.require("admin")
        name = request.name.strip()
        if not VAULT_NAME.match(name):
            raise InvalidArgument(
                "a vault name is 1 to 63 lower-case letters, digits and dashes, starting with a letter or digit",
                field="name",
            )
        if not await self._accounts.ensure_owner(identity.subject, name):
            raise Conflict(
                f"another account shares a vault named '{name}' with you (names are unique among your vaults); "
                "choose another name",
                field="name",
            )
        return apb.CreateVaultResponse(name=name)

    async def ListMembers(
        self, request: apb.ListMembersRequest, context: grpc.aio.ServicerContext
    ) -> apb.ListMembersResponse:
        identity = self._identity(context)
        identity.require("read")
        vault = await self._accounts.session_vault(identity, request.vault)
        members = await self._accounts.members(vault)
        return apb.ListMembersResponse(vault=vault.name, members=[_member(m) for m in members])

    async def SetMembership(
        self, request: apb.SetMembershipRequest, context: grpc.aio.ServicerContext
    ) -> apb.SetMembershipResponse:
        identity = self._identity(context)
        identity.require("admin")
        role = wire.ROLES.name(request.role)
        if role is None:
            raise InvalidArgument("role must be owner, editor or viewer", field="role")
        vault = await self._accounts.session_vault(identity, request.vault, owner=True)
        member = await self._accounts.set_membership(vault, _subject(request.subject), role, identity.actor)
        if member is None:
            raise Conflict(f"vault '{vault.name}' needs at least one owner; make someone else owner first")
        return apb.SetMembershipResponse(vault=vault.name, member=_member(member))

    async def RemoveMembership(
        self, request: apb.RemoveMembershipRequest, context: grpc.aio.ServicerContext
    ) -> apb.RemoveMembershipResponse:
        identity = self._identity(context)
        identity.require("admin")
        vault = await self._accounts.session_vault(identity, request.vault, owner=True)
        subject = _subject(request.subject)
        removed = await self._accounts.remove_membership(vault, subject, identity.actor)
        if removed is None:
            raise Conflict(f"vault '{vault.name}' needs at least one owner; make someone else owner first")
        if not removed:
            raise NotFound(f"{subject[:64]!r} has no role in vault '{vault.name}'", field="subject")
        return apb.RemoveMembershipResponse(vault=vault.name, subject=subject)

    async def AppendAudit(
        self, request: apb.AppendAuditRequest, context: grpc.aio.ServicerContext
    ) -> apb.AppendAuditResponse:
        identity = self._identity(context)
        action = request.action.strip()
        if not re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", action):
            raise InvalidArgument("action is a dotted lower-case verb such as 'grant.create'", field="action")
        vault = await self._accounts.session_vault(identity, request.vault) if request.vault else None
        details = {key[:64]: value[:MAX_AUDIT_DETAIL_CHARS] for key, value in list(request.details.items())[:32]}
        await self._audit.append_account_entry(
            identity.subject, vault, identity.actor, action, request.target[:200], details
        )
        return apb.AppendAuditResponse()

    async def ListAudit(
        self, request: apb.ListAuditRequest, context: grpc.aio.ServicerContext
    ) -> apb.ListAuditResponse:
        identity = self._identity(context)
        identity.require("read")
        limit = request.limit if 0 < request.limit <= MAX_AUDIT_PAGE else 50
        records = await self._audit.account_entries(identity.subject, limit, max(request.before_id, 0))
        return apb.ListAuditResponse(
            entries=[
                apb.AuditEntry(
                    id=r.id,
                    vault=r.vault,
                    actor=r.actor,
                    action=r.action,
                    target=r.target,
                    details_json=r.details_json,
                    at=wire.to_timestamp(r.at),
                )
                for r in records
            ]
        )

    async def ScheduleVaultDeletion(
        self, request: apb.ScheduleVaultDeletionRequest, context: grpc.aio.ServicerContext
    ) -> apb.ScheduleVaultDeletionResponse:
        identity = self._identity(context)
        vault, delete_after, scheduled = await self._accounts.schedule_deletion(
            identity, request.vault, request.confirm
        )
        return apb.ScheduleVaultDeletionResponse(
            vault=vault.name, delete_after=wire.to_timestamp(delete_after), scheduled=scheduled
        )

    async def CancelVaultDeletion(
        self, request: apb.CancelVaultDeletionRequest, context: grpc.aio.ServicerContext
    ) -> apb.CancelVaultDeletionResponse:
        identity = self._identity(context)
        vault, cancelled = await self._accounts.cancel_deletion(identity, request.vault)
        return apb.CancelVaultDeletionResponse(vault=vault.name, cancelled=cancelled)
