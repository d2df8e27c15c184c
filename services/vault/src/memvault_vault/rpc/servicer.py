"""VaultService over gRPC: check the caller's identity, translate, delegate."""

from __future__ import annotations

import grpc

from memvault.common.v1 import limits_pb2
from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core import limits
from memvault_core.identity import GRPC_METADATA_KEY, Identity, IdentitySigner
from memvault_vault.domain.memory import MemoryType
from memvault_vault.rpc import convert
from memvault_vault.service import MemoryService


class VaultServicer(vault_pb2_grpc.VaultServiceServicer):
    def __init__(self, service: MemoryService, signer: IdentitySigner) -> None:
        self._service = service
        self._signer = signer

    def _identity(self, context: grpc.aio.ServicerContext) -> Identity:
        metadata = dict(context.invocation_metadata() or ())
        token = metadata.get(GRPC_METADATA_KEY)
        return self._signer.verify(token if isinstance(token, str) else None)

    async def GetCapabilities(
        self, request: vpb.GetCapabilitiesRequest, context: grpc.aio.ServicerContext
    ) -> vpb.GetCapabilitiesResponse:
        self._identity(context)
        return vpb.GetCapabilitiesResponse(
            limits=limits_pb2.Limits(**limits.as_dict()), memory_types=[t.value for t in MemoryType]
        )

    async def ListVaults(
        self, request: vpb.ListVaultsRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListVaultsResponse:
        vaults = await self._service.vaults(self._identity(context))
        return vpb.ListVaultsResponse(
            vaults=[vpb.VaultInfo(name=v.name, role=v.role, approval_mode=v.approval_mode) for v in vaults]
        )

    async def GetOperatingGuide(
        self, request: vpb.GetOperatingGuideRequest, context: grpc.aio.ServicerContext
    ) -> vpb.GetOperatingGuideResponse:
        guide = await self._service.guide(self._identity(context), request.vault)
        return vpb.GetOperatingGuideResponse(vault=guide.vault, text=guide.text, version=guide.version)

    async def Remember(self, request: vpb.RememberRequest, context: grpc.aio.ServicerContext) -> vpb.RememberResponse:
        identity = self._identity(context)
        vault, result = await self._service.remember(
            identity, request.vault, convert.draft_from_proto(request.memory), propose=request.propose
        )
        return vpb.RememberResponse(vault=vault.name, result=convert.result_to_proto(result))

    async def BulkRemember(
        self, request: vpb.BulkRememberRequest, context: grpc.aio.ServicerContext
    ) -> vpb.BulkRememberResponse:
        drafts = [convert.draft_from_proto(item) for item in request.items]
        vault, batch_id, results = await self._service.bulk_remember(
            self._identity(context), request.vault, drafts, request.source
        )
        return vpb.BulkRememberResponse(
            vault=vault.name, batch_id=batch_id, results=[convert.result_to_proto(r) for r in results]
        )

    async def Recall(self, request: vpb.RecallRequest, context: grpc.aio.ServicerContext) -> vpb.RecallResponse:
        vault, page = await self._service.recall(
            self._identity(context),
            request.vault,
            request.query,
            limit=request.limit,
            page_cursor=request.cursor,
            types=convert.types_from_proto(list(request.types)),
            tags=list(request.tags),
            statuses=convert.statuses_from_proto(list(request.statuses)),
        )
        return vpb.RecallResponse(
            vault=vault.name,
            hits=[vpb.RecallHit(memory=convert.memory_to_proto(h.memory), score=h.score) for h in page.hits],
            mode=page.mode,
            warnings=page.warnings,
            next_cursor=page.next_cursor,
        )

    async def ListMemories(
        self, request: vpb.ListMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListMemoriesResponse:
        vault, memories, next_cursor = await self._service.list_memories(
            self._identity(context),
            request.vault,
            statuses=convert.statuses_from_proto(list(request.statuses)),
            types=convert.types_from_proto(list(request.types)),
            tags=list(request.tags),
            limit=request.limit,
            page_cursor=request.cursor,
        )
        return vpb.ListMemoriesResponse(
            vault=vault.name, memories=[convert.memory_to_proto(m) for m in memories], next_cursor=next_cursor
        )

    async def Forget(self, request: vpb.ForgetRequest, context: grpc.aio.ServicerContext) -> vpb.ForgetResponse:
        vault, memory_id = await self._service.forget(self._identity(context), request.vault, request.memory_id)
        return vpb.ForgetResponse(vault=vault.name, memory_id=memory_id)

    async def GetStats(self, request: vpb.GetStatsRequest, context: grpc.aio.ServicerContext) -> vpb.GetStatsResponse:
        vault, stats = await self._service.stats(self._identity(context), request.vault)
        return vpb.GetStatsResponse(
            vault=vault.name,
            memories=stats["memories"],
            indexed=stats["indexed"],
            index_pending=stats["index_pending"],
            index_failed=stats["index_failed"],
            recent_failures=[vpb.IndexFailure(**failure) for failure in stats["recent_failures"]],
            outbox_pending=stats["outbox_pending"],
        )
