"""/api/v1 "clean up now": what retention removes from a vault now (GET, nothing deleted) and running
it for that vault (POST), for the vault's owners with the admin scope; the vault checks that and
audits the run with the caller as actor."""

from __future__ import annotations

import grpc
from fastapi import APIRouter
from pydantic import BaseModel

from memvault.vault.v1 import retention_pb2 as pb
from memvault.vault.v1 import retention_pb2_grpc
from memvault_core.grpc import error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY, Identity
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.context import Gateway

router = APIRouter(prefix="/api/v1")


class Retention(BaseModel):
    """What retention removes from the vault now (`dry_run`) or removed (a run)."""

    vault: str
    dry_run: bool
    rejected: int
    superseded: int
    invalidated: int
    audit_entries: int
    memories: int


async def purge(gw: Gateway, identity: Identity, vault: str, *, dry_run: bool) -> Retention:
    """The vault's retention now, counted or run; for any page of the gateway that offers the same."""
    stub = retention_pb2_grpc.RetentionServiceStub(gw.vault.channel)
    request = pb.PurgeVaultRequest(vault=vault, dry_run=dry_run)
    try:
        reply = await stub.PurgeVault(request, metadata=((GRPC_METADATA_KEY, gw.signer.sign(identity)),))
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None
    return Retention(
        vault=reply.vault,
        dry_run=dry_run,
        rejected=reply.rejected,
        superseded=reply.superseded,
        invalidated=reply.invalidated,
        audit_entries=reply.audit_entries,
        memories=reply.rejected + reply.superseded + reply.invalidated,
    )


@router.get("/vaults/{vault}/retention")
async def preview(vault: Vault, caller: Caller, gw: GatewayDep) -> Retention:
    """What retention would remove from the vault now, by kind; nothing is deleted."""
    return await purge(gw, caller.identity(), vault, dry_run=True)


@router.post("/vaults/{vault}/retention")
async def run(vault: Vault, caller: Caller, gw: GatewayDep) -> Retention:
    """Run retention for the vault now ("clean up now"): what it removed, by kind; audited."""
    return await purge(gw, caller.identity(), vault, dry_run=False)
