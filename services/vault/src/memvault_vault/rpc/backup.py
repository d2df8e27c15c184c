"""BackupService over gRPC: check the caller's identity, translate, delegate to backup.service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from memvault.vault.v1 import backup_pb2 as pb
from memvault.vault.v1 import backup_pb2_grpc
from memvault_core.errors import InvalidArgument
from memvault_core.grpc import identity_token
from memvault_core.identity import IdentitySigner
from memvault_vault.backup.service import BackupService

IDLE_SECONDS = 120.0
"""A restore whose client sends nothing for this long is abandoned (rolled back): a client that died
without closing its connection must not hold the vault's write lock."""

_FORMATS = {pb.EXPORT_FORMAT_MARKDOWN: "md", pb.EXPORT_FORMAT_JSON: "json", pb.EXPORT_FORMAT_JSONL: "jsonl"}


class BackupServicer(backup_pb2_grpc.BackupServiceServicer):
    def __init__(self, service: BackupService, signer: IdentitySigner) -> None:
        self._service = service
        self._signer = signer

    async def Backup(  # type: ignore[override]  # an async generator, as grpc.aio serves streams
        self, request: pb.BackupRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.BackupResponse]:
        identity = self._signer.verify(identity_token(context))
        chunks = self._service.backup(
            identity, request.vault, embeddings=not request.omit_embeddings, archive_only=request.archive_only
        )
        async for chunk in chunks:
            yield pb.BackupResponse(
                data=chunk.data, memories_done=chunk.memories_done, memories_total=chunk.memories_total
            )

    async def Restore(
        self, request_iterator: AsyncIterator[pb.RestoreRequest], context: grpc.aio.ServicerContext
    ) -> pb.RestoreResponse:
        identity = self._signer.verify(identity_token(context))
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("part") != "options":
            raise InvalidArgument("the first message of a restore holds its options (vault, replace)", field="options")

        async def data() -> AsyncIterator[bytes]:
            messages = aiter(request_iterator)
            while True:
                message = await _next(messages)
                if message is None:
                    return
                if message.WhichOneof("part") != "data":
                    raise InvalidArgument("only the first message of a restore holds options", field="options")
                yield message.data

        report = await self._service.restore(identity, first.options.vault, data(), replace=first.options.replace)
        return pb.RestoreResponse(
            vault=report.vault,
            counts=[pb.RestoredCount(kind=k, count=v) for k, v in report.counts.items()],
            embeddings_kept=report.embeddings_kept,
            reembedding=report.reembedding,
            notices=report.notices,
        )

    async def Export(  # type: ignore[override]
        self, request: pb.ExportRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ExportResponse]:
        identity = self._signer.verify(identity_token(context))
        export_format = _FORMATS.get(request.format)
        if export_format is None:
            raise InvalidArgument("format is required: markdown, JSON or JSON Lines", field="format")
        async for data in self._service.export(identity, request.vault, export_format):
            yield pb.ExportResponse(data=data)


async def _next(messages: AsyncIterator[pb.RestoreRequest]) -> pb.RestoreRequest | None:
    """The next message, None at the end (a client that goes away ends the stream early: refused as
    truncated); refused when the client stays silent for IDLE_SECONDS."""
    try:
        return await asyncio.wait_for(anext(messages, None), IDLE_SECONDS)
    except TimeoutError:
        raise InvalidArgument(
            f"the restore received nothing for {IDLE_SECONDS:.0f} seconds and was abandoned; nothing was restored"
        ) from None
