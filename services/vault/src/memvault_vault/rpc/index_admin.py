"""IndexAdminService over gRPC: check the caller's identity, translate, delegate to index_admin.service."""

from __future__ import annotations

import grpc

from memvault.vault.v1 import index_admin_pb2 as pb
from memvault.vault.v1 import index_admin_pb2_grpc
from memvault_core.grpc import identity_token
from memvault_core.identity import IdentitySigner
from memvault_vault.index_admin.service import IndexAdminService


class IndexAdminServicer(index_admin_pb2_grpc.IndexAdminServiceServicer):
    def __init__(self, service: IndexAdminService, signer: IdentitySigner) -> None:
        self._service = service
        self._signer = signer

    async def ListIndexFailures(
        self, request: pb.ListIndexFailuresRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListIndexFailuresResponse:
        identity = self._signer.verify(identity_token(context))
        failures, total = await self._service.failures(identity, request.vault, request.limit)
        response = pb.ListIndexFailuresResponse(total=total)
        for failure in failures:
            entry = response.failures.add(memory_id=failure.memory_id, error=failure.error, attempts=failure.attempts)
            entry.failed_at.FromDatetime(failure.failed_at)
        return response

    async def RetryIndexFailures(
        self, request: pb.RetryIndexFailuresRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetryIndexFailuresResponse:
        identity = self._signer.verify(identity_token(context))
        retried = await self._service.retry(identity, request.vault, list(request.memory_ids))
        return pb.RetryIndexFailuresResponse(retried=retried)

    async def StartIndexJob(
        self, request: pb.StartIndexJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.StartIndexJobResponse:
        identity = self._signer.verify(identity_token(context))
        return pb.StartIndexJobResponse(job=await self._service.start_job(identity, request.vault, request.kind))

    async def GetIndexJob(
        self, request: pb.GetIndexJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetIndexJobResponse:
        identity = self._signer.verify(identity_token(context))
        job = await self._service.job(identity, request.vault)
        return pb.GetIndexJobResponse(job=job) if job is not None else pb.GetIndexJobResponse()
