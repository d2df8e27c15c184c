"""The indexer's search, as recall uses it: a short deadline, and Unavailable instead of a hang.

Each call carries the vault's service identity; the indexer answers nobody else's searches.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from memvault.index.v1 import index_pb2, index_pb2_grpc
from memvault_core.errors import Unavailable
from memvault_core.grpc import client_channel, error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY, IdentitySigner


def _unavailable(error: grpc.aio.AioRpcError) -> Unavailable:
    if error.code() == grpc.StatusCode.UNAUTHENTICATED:
        return Unavailable(
            "the indexer refused the vault's service identity: "
            "give vault and indexer the same MEMVAULT_IDENTITY__SECRET"
        )
    return Unavailable(f"the indexer did not answer ({error.code().name})")


class IndexClient:
    def __init__(self, address: str, timeout_seconds: float, signer: IdentitySigner) -> None:
        self._channel = client_channel(address)
        self._stub = index_pb2_grpc.IndexServiceStub(self._channel)
        self._timeout = timeout_seconds
        self._signer = signer

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return ((GRPC_METADATA_KEY, self._signer.sign_service("vault")),)

    async def close(self) -> None:
        await self._channel.close()

    async def search(
        self,
        vault_id: str,
        query: str,
        *,
        limit: int,
        score_ids: Sequence[str],
        pending: Sequence[tuple[str, str]],
        messages: bool = False,
    ) -> dict[str, float]:
        """Cosine similarity by memory id: nearest memories plus the ones asked to be scored (with
        `messages`: archived messages by message id instead)."""
        if limit <= 0 and not score_ids and not pending:
            return {}  # nothing asked: no call
        request = index_pb2.SearchRequest(
            vault_id=vault_id,
            query=query,
            limit=limit,
            score_ids=list(score_ids),
            pending=[index_pb2.PendingText(memory_id=i, text=t) for i, t in pending],
            messages=messages,
        )
        try:
            response = await self._stub.Search(request, timeout=self._timeout, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return {hit.memory_id: hit.cosine for hit in response.hits}

    async def similar(
        self,
        vault_id: str,
        texts: Sequence[str],
        *,
        limit: int,
        min_cosine: float,
        pending: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[dict[str, float], dict[int, float]]]:
        """Per text: cosine by similar memory id, and cosine by the position of a similar earlier text."""
        request = index_pb2.SimilarRequest(
            vault_id=vault_id,
            texts=list(texts),
            limit=limit,
            min_cosine=min_cosine,
            pending=[index_pb2.PendingText(memory_id=i, text=t) for i, t in pending],
        )
        try:
            response = await self._stub.Similar(request, timeout=self._timeout * 10, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return [
            ({m.memory_id: m.cosine for m in result.memories}, {e.index: e.cosine for e in result.earlier})
            for result in response.results
        ]

    async def embed_ahead(self, vault_id: str, texts: Sequence[str]) -> None:
        """Have the indexer embed texts and keep their vectors for a Similar call to come (nothing searched)."""
        request = index_pb2.SimilarRequest(vault_id=vault_id, texts=list(texts), embed_only=True)
        try:
            await self._stub.Similar(request, timeout=self._timeout * 10, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None

    async def searchable(self) -> tuple[str, str]:
        """(the embedding model, why searches are refused now: empty when they are answered)."""
        try:
            info = await self._stub.GetIndexInfo(
                index_pb2.GetIndexInfoRequest(skip_points=True), timeout=self._timeout, metadata=self._metadata()
            )
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return info.model, "" if info.searchable else info.not_searchable_reason

    # --- backup and restore (memvault_vault.backup) ---------------------------------------------------
    # Longer deadlines than recall's: these move vectors in bulk, and nobody waits on them for an answer.

    async def model(self) -> tuple[str, int]:
        """The indexer's embedding model and its dimension."""
        try:
            info = await self._stub.GetIndexInfo(
                index_pb2.GetIndexInfoRequest(), timeout=self._timeout * 10, metadata=self._metadata()
            )
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return info.model, info.dimension

    async def vectors(self, vault_id: str, memory_ids: Sequence[str]) -> tuple[str, int, list[index_pb2.StoredVector]]:
        """(model, dimension, the stored vectors of those of these memories the index holds)."""
        request = index_pb2.GetVectorsRequest(vault_id=vault_id, memory_ids=list(memory_ids))
        try:
            response = await self._stub.GetVectors(request, timeout=self._timeout * 20, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return response.model, response.dimension, list(response.vectors)

    async def put_vectors(self, vault_id: str, model: str, vectors: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        """Store (memory id, hash of the indexed text, vector) made by `model` as the index's points."""
        request = index_pb2.PutVectorsRequest(
            vault_id=vault_id,
            model=model,
            vectors=[index_pb2.StoredVector(memory_id=i, content_hash=h, vector=v) for i, h, v in vectors],
        )
        try:
            await self._stub.PutVectors(request, timeout=self._timeout * 20, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None

    async def start_job(self, kind: index_pb2.IndexJobKind.ValueType) -> index_pb2.IndexJob:
        """Start the indexer's rebuild or re-embed job; Conflict while one runs."""
        try:
            response = await self._stub.StartIndexJob(
                index_pb2.StartIndexJobRequest(kind=kind), timeout=self._timeout, metadata=self._metadata()
            )
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) if _transport(error) else error_from_rpc(error, "indexer") from None
        job: index_pb2.IndexJob = response.job
        return job

    async def get_job(self) -> index_pb2.IndexJob | None:
        """The indexer's running or last maintenance job."""
        try:
            response = await self._stub.GetIndexJob(
                index_pb2.GetIndexJobRequest(), timeout=self._timeout, metadata=self._metadata()
            )
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return response.job if response.HasField("job") else None


def _transport(error: grpc.aio.AioRpcError) -> bool:
    return error.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.UNIMPLEMENTED,
    )
