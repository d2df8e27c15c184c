"""ArchiveService over gRPC: check the caller's identity, translate, delegate to the archive service."""

from __future__ import annotations

import grpc

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core import wire
from memvault_core.grpc import identity_token
from memvault_core.identity import Identity, IdentitySigner
from memvault_vault.archive.service import ArchiveService
from memvault_vault.domain.archive import snippet
from memvault_vault.domain.archive_reads import DEFAULT_CONTEXT_MESSAGES
from memvault_vault.domain.archive_writes import check_request_size
from memvault_vault.rpc.archive_convert import (
    archived,
    drafts,
    import_status,
    receipt,
    summary,
    unkeyed,
    vault_map_message,
)


class ArchiveServicer(archive_pb2_grpc.ArchiveServiceServicer):
    def __init__(self, archive: ArchiveService, signer: IdentitySigner) -> None:
        self._archive = archive
        self._signer = signer

    def _identity(self, context: grpc.aio.ServicerContext) -> Identity:
        return self._signer.verify(identity_token(context))

    async def CreateConversation(
        self, request: pb.CreateConversationRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateConversationResponse:
        check_request_size(request.ByteSize(), len(request.messages), "messages")
        record = await self._archive.create(
            self._identity(context),
            request.vault,
            title=request.title,
            tags=list(request.tags),
            drafts=drafts(request.messages),
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.CreateConversationResponse(receipt=receipt(record))

    async def AppendMessages(
        self, request: pb.AppendMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendMessagesResponse:
        check_request_size(request.ByteSize(), len(request.messages), "messages")
        record = await self._archive.revise(
            self._identity(context),
            request.vault,
            request.conversation_id,
            kind="append",
            base_revision=request.base_revision,
            drafts=drafts(request.messages),
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.AppendMessagesResponse(receipt=receipt(record))

    async def ReplaceTranscript(
        self, request: pb.ReplaceTranscriptRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReplaceTranscriptResponse:
        check_request_size(request.ByteSize(), len(request.messages), "messages")
        record = await self._archive.revise(
            self._identity(context),
            request.vault,
            request.conversation_id,
            kind="replace",
            base_revision=request.base_revision,
            drafts=drafts(request.messages),
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.ReplaceTranscriptResponse(receipt=receipt(record))

    async def RestoreRevision(
        self, request: pb.RestoreRevisionRequest, context: grpc.aio.ServicerContext
    ) -> pb.RestoreRevisionResponse:
        record = await self._archive.restore(
            self._identity(context),
            request.vault,
            request.conversation_id,
            revision=request.revision,
            base_revision=request.base_revision,
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.RestoreRevisionResponse(receipt=receipt(record))

    async def ListRevisions(
        self, request: pb.ListRevisionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRevisionsResponse:
        rows, more = await self._archive.revisions(
            self._identity(context), request.vault, request.conversation_id, limit=request.limit, page=request.cursor
        )
        return pb.ListRevisionsResponse(
            revisions=[
                pb.RevisionInfo(
                    number=r.number,
                    parent=r.parent or 0,
                    kind=r.kind,
                    message_count=r.message_count,
                    content_sha256=r.content_sha256,
                    created_at=wire.to_timestamp(r.created_at),
                    created_by=r.created_by,
                    head=r.head,
                )
                for r in rows
            ],
            next_cursor=more,
        )

    async def GetVaultMap(
        self, request: pb.GetVaultMapRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetVaultMapResponse:
        found = await self._archive.vault_map(
            self._identity(context), request.vault, request.max_tags, request.items_per_tag
        )
        return vault_map_message(found)

    async def SetTags(self, request: pb.SetTagsRequest, context: grpc.aio.ServicerContext) -> pb.SetTagsResponse:
        tags, version = await self._archive.set_tags(
            self._identity(context),
            request.vault,
            request.conversation_id,
            list(request.tags),
            request.expected_tags_version,
        )
        return pb.SetTagsResponse(tags=tags, tags_version=version)

    async def DeleteConversation(
        self, request: pb.DeleteConversationRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteConversationResponse:
        revisions, messages = await self._archive.delete(
            self._identity(context), request.vault, request.conversation_id, request.confirm
        )
        return pb.DeleteConversationResponse(revisions_deleted=revisions, messages_deleted=messages)

    async def ListConversations(
        self, request: pb.ListConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListConversationsResponse:
        rows, more = await self._archive.conversations(
            self._identity(context),
            request.vault,
            tags_all=list(request.tags_all),
            tags_any=list(request.tags_any),
            limit=request.limit,
            page=request.cursor,
        )
        return pb.ListConversationsResponse(conversations=[summary(r) for r in rows], next_cursor=more)

    async def GetConversation(
        self, request: pb.GetConversationRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetConversationResponse:
        record, revision, messages, more = await self._archive.conversation(
            self._identity(context),
            request.vault,
            request.conversation_id,
            revision=request.revision,
            graph=request.view == pb.CONVERSATION_VIEW_GRAPH,
            limit=request.limit,
            page=request.cursor,
            start=request.start_position,
        )
        return pb.GetConversationResponse(
            conversation=summary(record),
            revision=revision,
            messages=[archived(m) for m in messages],
            next_cursor=more,
        )

    async def SearchMessages(
        self, request: pb.SearchMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.SearchMessagesResponse:
        found = await self._archive.reads.search(
            self._identity(context),
            request.vault,
            request.query,
            tags_all=list(request.tags_all),
            tags_any=list(request.tags_any),
            limit=request.limit,
            max_bytes=request.max_bytes,
            page=request.cursor,
        )
        query = found.query
        return pb.SearchMessagesResponse(
            hits=[
                pb.MessageHit(
                    conversation_id=h.conversation_id,
                    revision=h.revision,
                    message_id=h.message_id,
                    title=h.title or "",
                    role=h.role,
                    snippet=snippet(h.text, query),
                    score=h.score,
                    position=h.position,
                )
                for h in found.hits
            ],
            next_cursor=found.next_cursor,
            mode=found.mode,
            warnings=found.warnings,
            used_bytes=found.used_bytes,
            max_bytes=found.max_bytes,
        )

    async def StartImport(
        self, request: pb.StartImportRequest, context: grpc.aio.ServicerContext
    ) -> pb.StartImportResponse:
        record = await self._archive.start_import(
            self._identity(context),
            request.vault,
            fmt=request.format.strip().lower(),
            filename=request.filename,
            size=request.size,
            sha256=request.sha256,
            data=request.data,
        )
        return pb.StartImportResponse(**{"import": import_status(record)})

    async def UploadImportPart(
        self, request: pb.UploadImportPartRequest, context: grpc.aio.ServicerContext
    ) -> pb.UploadImportPartResponse:
        received = await self._archive.upload_part(
            self._identity(context), request.vault, request.import_id, request.part, request.data
        )
        return pb.UploadImportPartResponse(received=received)

    async def FinishImport(
        self, request: pb.FinishImportRequest, context: grpc.aio.ServicerContext
    ) -> pb.FinishImportResponse:
        record = await self._archive.finish_import(self._identity(context), request.vault, request.import_id)
        return pb.FinishImportResponse(**{"import": import_status(record)})

    async def GetImport(self, request: pb.GetImportRequest, context: grpc.aio.ServicerContext) -> pb.GetImportResponse:
        record = await self._archive.get_import(self._identity(context), request.vault, request.import_id)
        return pb.GetImportResponse(**{"import": import_status(record)})

    async def ListImports(
        self, request: pb.ListImportsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListImportsResponse:
        records = await self._archive.list_imports(self._identity(context), request.vault, request.limit)
        return pb.ListImportsResponse(imports=[import_status(r) for r in records])

    async def RetryImport(
        self, request: pb.RetryImportRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetryImportResponse:
        record = await self._archive.operations.retry_import(self._identity(context), request.vault, request.import_id)
        return pb.RetryImportResponse(**{"import": import_status(record)})

    async def ListMessageIndexFailures(
        self, request: pb.ListMessageIndexFailuresRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListMessageIndexFailuresResponse:
        failures, total = await self._archive.operations.message_failures(
            self._identity(context), request.vault, request.limit
        )
        return pb.ListMessageIndexFailuresResponse(
            failures=[
                pb.MessageIndexFailure(
                    message_id=f.message_id,
                    conversation_id=f.conversation_id,
                    error=f.error,
                    attempts=f.attempts,
                    failed_at=wire.to_timestamp(f.failed_at),
                )
                for f in failures
            ],
            total=total,
        )

    async def RetryMessageIndex(
        self, request: pb.RetryMessageIndexRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetryMessageIndexResponse:
        retried = await self._archive.operations.retry_messages(
            self._identity(context), request.vault, list(request.message_ids)
        )
        return pb.RetryMessageIndexResponse(retried=retried)

    async def GetMessageContext(
        self, request: pb.GetMessageContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetMessageContextResponse:
        record, revision, position, messages = await self._archive.reads.context(
            self._identity(context),
            request.vault,
            request.message_id,
            conversation_id=request.conversation_id,
            revision=request.revision,
            before=request.before if request.HasField("before") else DEFAULT_CONTEXT_MESSAGES,
            after=request.after if request.HasField("after") else DEFAULT_CONTEXT_MESSAGES,
        )
        return pb.GetMessageContextResponse(
            conversation=summary(record), revision=revision, messages=[unkeyed(m) for m in messages], position=position
        )

    async def GetMessages(
        self, request: pb.GetMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetMessagesResponse:
        record, revision, messages, nodes, keys, ids, not_read = await self._archive.reads.messages(
            self._identity(context),
            request.vault,
            request.conversation_id,
            request.revision,
            [*request.node_ids],
            [*request.keys],
            [*request.message_ids],
        )
        return pb.GetMessagesResponse(
            conversation=summary(record),
            revision=revision,
            messages=[archived(m) for m in messages],
            missing_node_ids=nodes,
            missing_keys=keys,
            missing_message_ids=ids,
            not_read_message_ids=not_read,
        )

    async def ReadConversations(
        self, request: pb.ReadConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReadConversationsResponse:
        page = await self._archive.reads.batch(
            self._identity(context),
            request.vault,
            [(r.conversation_id, r.revision, r.graph) for r in request.requests],
            max_bytes=request.max_bytes,
            page=request.cursor,
        )
        return pb.ReadConversationsResponse(
            results=[
                pb.ConversationReadResult(
                    request_index=r.request_index,
                    conversation_id=r.conversation_id,
                    revision=r.revision,
                    title=r.title or "",
                    has_title=r.title is not None,
                    messages=[unkeyed(m) for m in r.messages],
                    oversized=[
                        pb.OversizedMessage(message_id=o.message_id, position=o.position, bytes=o.bytes)
                        for o in r.oversized
                    ],
                    complete=r.complete,
                    error=r.error,
                    message_count=r.message_count,
                )
                for r in page.results
            ],
            next_cursor=page.next_cursor,
            used_bytes=page.used_bytes,
            max_bytes=page.max_bytes,
            completed=page.completed,
            remaining=page.remaining,
        )

    async def ResolveConversations(
        self, request: pb.ResolveConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResolveConversationsResponse:
        found = await self._archive.reads.resolve(self._identity(context), request.vault, list(request.titles))
        return pb.ResolveConversationsResponse(
            resolved=[
                pb.ResolvedTitle(title=title, conversations=[summary(r) for r in records])
                for title, records in found.items()
            ]
        )

    async def GetArchiveStats(
        self, request: pb.GetArchiveStatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetArchiveStatsResponse:
        stats = await self._archive.reads.stats(self._identity(context), request.vault)
        return pb.GetArchiveStatsResponse(
            conversations=stats.conversations,
            revisions=stats.revisions,
            messages=stats.messages,
            indexed=stats.indexed,
            pending=stats.pending,
            failed=stats.failed,
            imports=stats.imports,
            imports_running=stats.imports_running,
            index_model=stats.index_model,
            last_errors=stats.last_errors,
            tags=stats.tags,
            by_source=stats.by_source,
            imports_by_state=stats.imports_by_state,
            raw_bytes=stats.raw_bytes,
        )

    async def UpsertMessages(
        self, request: pb.UpsertMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpsertMessagesResponse:
        check_request_size(request.ByteSize(), len(request.messages), "messages")
        record = await self._archive.writes.upsert(
            self._identity(context),
            request.vault,
            request.conversation_id,
            base_revision=request.base_revision,
            messages=[(m.key, m.role.strip().lower(), m.text, m.content_type.strip()) for m in request.messages],
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        no_change = not record.changes.get("added") and not record.changes.get("updated")
        return pb.UpsertMessagesResponse(receipt=receipt(record), no_change=no_change)

    async def EditMessages(
        self, request: pb.EditMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.EditMessagesResponse:
        check_request_size(request.ByteSize(), len(request.edits), "edits")
        record = await self._archive.writes.edit(
            self._identity(context),
            request.vault,
            request.conversation_id,
            base_revision=request.base_revision,
            edits=[(e.node_id, e.text) for e in request.edits],
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.EditMessagesResponse(receipt=receipt(record), no_change=not record.changes.get("updated"))

    async def CopyConversations(
        self, request: pb.CopyConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CopyConversationsResponse:
        records = await self._archive.writes.copy(
            self._identity(context),
            request.vault,
            request.target_vault,
            list(request.conversation_ids),
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.CopyConversationsResponse(receipts=[receipt(r) for r in records])

    async def CommitBatch(
        self, request: pb.CommitBatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.CommitBatchResponse:
        check_request_size(request.ByteSize(), len(request.writes), "writes")
        records = await self._archive.writes.commit(
            self._identity(context),
            request.vault,
            [(w.conversation_id, w.kind.strip().lower(), w.base_revision, drafts(w.messages)) for w in request.writes],
            idempotency_key=request.idempotency_key,
            verify=request.verify,
        )
        return pb.CommitBatchResponse(receipts=[receipt(r) for r in records])

    async def EmptyArchive(
        self, request: pb.EmptyArchiveRequest, context: grpc.aio.ServicerContext
    ) -> pb.EmptyArchiveResponse:
        step = await self._archive.writes.empty(self._identity(context), request.vault, request.confirm)
        return pb.EmptyArchiveResponse(
            deleted_conversations=step["deleted_conversations"],
            deleted_imports=step["deleted_imports"],
            remaining_conversations=step["remaining_conversations"],
            remaining_imports=step["remaining_imports"],
            done=step["done"],
        )

    async def BuildContextPack(
        self, request: pb.BuildContextPackRequest, context: grpc.aio.ServicerContext
    ) -> pb.BuildContextPackResponse:
        pack = await self._archive.packs.build(
            self._identity(context),
            request.vault,
            required=[(c.conversation_id, c.revision, c.tail) for c in request.conversations],
            searches=[(s.query, s.limit) for s in request.searches],
            max_tokens=request.max_tokens,
            max_bytes=request.max_bytes,
        )
        return pb.BuildContextPackResponse(
            pack_id=pack.pack_id,
            fits=pack.fits,
            max_tokens=pack.max_tokens,
            max_bytes=pack.max_bytes,
            pins=[pb.PackPin(conversation_id=c, revision=r) for c, r in pack.pins],
            tokens=pack.tokens,
            bytes=pack.bytes,
            messages=[
                pb.PackedMessage(
                    conversation_id=m.conversation_id,
                    revision=m.revision,
                    message_id=m.message_id,
                    position=m.position,
                    role=m.role,
                    authority=m.authority,
                    text=m.text,
                    score=m.score,
                    node_id=m.node_id,
                    key=m.key,
                    query_index=m.query_index,
                )
                for m in pack.messages
            ],
            left_out=pack.left_out,
            duplicates=pack.duplicates,
            min_max_tokens=pack.min_max_tokens,
            min_max_bytes=pack.min_max_bytes,
            shortfall=[pb.PackShortfall(**s) for s in pack.shortfall],
        )
