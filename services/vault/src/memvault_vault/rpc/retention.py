"""RetentionService over gRPC: check the caller's identity, translate, delegate to retention.service."""

from __future__ import annotations

import grpc

from memvault.vault.v1 import retention_pb2 as pb
from memvault.vault.v1 import retention_pb2_grpc
from memvault_core.grpc import identity_token
from memvault_core.identity import IdentitySigner
from memvault_vault.retention.service import RetentionService


class RetentionServicer(retention_pb2_grpc.RetentionServiceServicer):
    def __init__(self, service: RetentionService, signer: IdentitySigner) -> None:
        self._service = service
        self._signer = signer

    async def PurgeVault(
        self, request: pb.PurgeVaultRequest, context: grpc.aio.ServicerContext
    ) -> pb.PurgeVaultResponse:
        identity = self._signer.verify(identity_token(context))
        purged = await self._service.purge_vault(identity, request.vault, dry_run=request.dry_run)
        return pb.PurgeVaultResponse(
            vault=purged.vault,
            rejected=purged.rejected,
            superseded=purged.superseded,
            invalidated=purged.invalidated,
            audit_entries=purged.audit_entries,
        )
