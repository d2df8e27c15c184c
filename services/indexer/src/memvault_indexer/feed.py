"""The vault's IndexFeedService as the indexer uses it, with its service identity on every call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc

from memvault.vault.v1 import index_feed_pb2 as pb
from memvault.vault.v1 import index_feed_pb2_grpc
from memvault_core.grpc import client_channel, error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY, IdentitySigner


@dataclass(frozen=True)
class Document:
    memory_id: str
    """The memory's id, or the archived message's (kind "message")."""
    vault_id: str
    content: str
    content_hash: str
    indexed_hash: str
    indexed_model: str
    kind: str = "memory"
    conversation_id: str = ""
    revision: int = 0


def _document(message: pb.IndexDocument) -> Document:
    return Document(
        message.memory_id,
        message.vault_id,
        message.content,
        message.content_hash,
        message.indexed_hash,
        message.indexed_model,
        "message" if message.kind == pb.DOCUMENT_KIND_MESSAGE else "memory",
        message.conversation_id,
        message.revision,
    )


class VaultFeed:
    def __init__(self, address: str, signer: IdentitySigner, timeout_seconds: float) -> None:
        self._channel = client_channel(address)
        self._stub = index_feed_pb2_grpc.IndexFeedServiceStub(self._channel)
        self._signer = signer
        self._timeout = timeout_seconds

    async def close(self) -> None:
        await self._channel.close()

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return ((GRPC_METADATA_KEY, self._signer.sign_service("indexer")),)

    async def documents(self, memory_ids: Sequence[str], message_ids: Sequence[str] = ()) -> list[Document]:
        """The current text of these memories and archived messages; forgotten or deleted ones are absent."""
        try:
            response = await self._stub.GetDocuments(
                pb.GetDocumentsRequest(memory_ids=list(memory_ids), message_ids=list(message_ids)),
                metadata=self._metadata(),
                timeout=self._timeout,
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None
        return [_document(d) for d in response.documents]

    async def all_documents(self, page_size: int = 500) -> AsyncIterator[list[Document]]:
        """Every memory in the vault service, then every archived message, page by page in id order."""
        for kind in (pb.DOCUMENT_KIND_MEMORY, pb.DOCUMENT_KIND_MESSAGE):
            after = ""
            while True:
                try:
                    response = await self._stub.ListDocuments(
                        pb.ListDocumentsRequest(after_id=after, limit=page_size, kind=kind),
                        metadata=self._metadata(),
                        timeout=self._timeout,
                    )
                except grpc.aio.AioRpcError as error:
                    raise error_from_rpc(error) from None
                yield [_document(d) for d in response.documents]
                after = response.next_after_id
                if not after:
                    break

    async def count(self) -> int:
        """How many memories and archived messages the vault holds in all (a full reindex's progress total)."""
        total = 0
        for kind in (pb.DOCUMENT_KIND_MEMORY, pb.DOCUMENT_KIND_MESSAGE):
            try:
                response = await self._stub.ListDocuments(
                    pb.ListDocumentsRequest(limit=1, kind=kind), metadata=self._metadata(), timeout=self._timeout
                )
            except grpc.aio.AioRpcError as error:
                raise error_from_rpc(error) from None
            total += int(response.total)
        return total

    async def report(
        self,
        indexed: Sequence[Document],
        model: str,
        failed: Sequence[tuple[str, str]] = (),
        failed_messages: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Tell the vault which texts the index now holds, and which memories (or messages) failed (id, error)."""
        reports = (
            [
                pb.IndexReport(
                    memory_id=d.memory_id,
                    content_hash=d.content_hash,
                    model=model,
                    state=pb.INDEX_STATE_INDEXED,
                    kind=pb.DOCUMENT_KIND_MESSAGE if d.kind == "message" else pb.DOCUMENT_KIND_MEMORY,
                )
                for d in indexed
            ]
            + [
                pb.IndexReport(memory_id=memory_id, model=model, state=pb.INDEX_STATE_FAILED, error=error)
                for memory_id, error in failed
            ]
            + [
                pb.IndexReport(
                    memory_id=message_id,
                    model=model,
                    state=pb.INDEX_STATE_FAILED,
                    error=error,
                    kind=pb.DOCUMENT_KIND_MESSAGE,
                )
                for message_id, error in failed_messages
            ]
        )
        if not reports:
            return
        try:
            await self._stub.ReportIndexed(
                pb.ReportIndexedRequest(reports=reports), metadata=self._metadata(), timeout=self._timeout
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None
