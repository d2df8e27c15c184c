"""IndexFeedService: the indexer reads memory text and reports what it indexed. Only the indexer may call it."""

from __future__ import annotations

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memvault.vault.v1 import index_feed_pb2 as pb
from memvault.vault.v1 import index_feed_pb2_grpc
from memvault_core.errors import InvalidArgument
from memvault_core.grpc import identity_token
from memvault_core.identity import IdentitySigner
from memvault_vault.domain.inputs import parse_memory_id
from memvault_vault.index_feed.records import Document, IndexReport
from memvault_vault.index_feed.service import IndexFeedService

MAX_DOCUMENTS = 1000
_STATES = {pb.INDEX_STATE_INDEXED: "indexed", pb.INDEX_STATE_FAILED: "failed"}


def _document(document: Document) -> pb.IndexDocument:
    created = Timestamp()
    created.FromDatetime(document.created_at)
    return pb.IndexDocument(
        memory_id=document.memory_id,
        vault_id=document.vault_id,
        content=document.content,
        content_hash=document.content_hash,
        created_at=created,
        indexed_hash=document.indexed_hash,
        indexed_model=document.indexed_model,
        kind=pb.DOCUMENT_KIND_MESSAGE if document.kind == "message" else pb.DOCUMENT_KIND_MEMORY,
        conversation_id=document.conversation_id,
        revision=document.revision,
    )


class IndexFeedServicer(index_feed_pb2_grpc.IndexFeedServiceServicer):
    def __init__(self, feed: IndexFeedService, signer: IdentitySigner) -> None:
        self._feed = feed
        self._signer = signer

    def _check(self, context: grpc.aio.ServicerContext) -> None:
        self._signer.verify_service(identity_token(context), "indexer")

    async def GetDocuments(
        self, request: pb.GetDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetDocumentsResponse:
        self._check(context)
        if len(request.memory_ids) + len(request.message_ids) > MAX_DOCUMENTS:
            raise InvalidArgument(f"at most {MAX_DOCUMENTS} memory_ids and message_ids per call", field="memory_ids")
        ids = [parse_memory_id(i, "memory_ids") for i in request.memory_ids]
        message_ids = [parse_memory_id(i, "message_ids") for i in request.message_ids]
        rows = (await self._feed.documents(ids) if ids else []) + (
            await self._feed.message_documents(message_ids) if message_ids else []
        )
        return pb.GetDocumentsResponse(documents=[_document(row) for row in rows])

    async def ListDocuments(
        self, request: pb.ListDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDocumentsResponse:
        self._check(context)
        limit = min(request.limit or 500, MAX_DOCUMENTS)
        after = parse_memory_id(request.after_id, "after_id") if request.after_id else None
        if request.kind == pb.DOCUMENT_KIND_MESSAGE:
            rows = await self._feed.message_documents_after(after, limit)
            total = await self._feed.count_messages() if after is None else 0
        else:
            rows = await self._feed.documents_after(after, limit)
            total = await self._feed.count_documents() if after is None else 0
        next_after = rows[-1].memory_id if len(rows) == limit else ""
        return pb.ListDocumentsResponse(
            documents=[_document(row) for row in rows], next_after_id=next_after, total=total
        )

    async def ReportIndexed(
        self, request: pb.ReportIndexedRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportIndexedResponse:
        self._check(context)
        reports = []
        for report in request.reports:
            if report.state not in _STATES:
                raise InvalidArgument("state must be INDEXED or FAILED", field="reports.state")
            reports.append(
                IndexReport(
                    parse_memory_id(report.memory_id),
                    report.content_hash,
                    report.model,
                    _STATES[report.state],
                    report.error[:500],
                    "message" if report.kind == pb.DOCUMENT_KIND_MESSAGE else "memory",
                )
            )
        await self._feed.report_indexed(reports)
        return pb.ReportIndexedResponse()
