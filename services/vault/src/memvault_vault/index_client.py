"""The indexer's search, as recall uses it: a short deadline, and Unavailable instead of a hang."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from memvault.index.v1 import index_pb2, index_pb2_grpc
from memvault_core.errors import Unavailable
from memvault_core.grpc import client_channel


class IndexClient:
    def __init__(self, address: str, timeout_seconds: float) -> None:
        self._channel = client_channel(address)
        self._stub = index_pb2_grpc.IndexServiceStub(self._channel)
        self._timeout = timeout_seconds

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
    ) -> dict[str, float]:
        """Cosine similarity by memory id: nearest memories plus the ones asked to be scored."""
        if limit <= 0 and not score_ids and not pending:
            return {}  # nothing asked: no call
        request = index_pb2.SearchRequest(
            vault_id=vault_id,
            query=query,
            limit=limit,
            score_ids=list(score_ids),
            pending=[index_pb2.PendingText(memory_id=i, text=t) for i, t in pending],
        )
        try:
            response = await self._stub.Search(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise Unavailable(f"the indexer did not answer ({error.code().name})") from None
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
            response = await self._stub.Similar(request, timeout=self._timeout * 10)
        except grpc.aio.AioRpcError as error:
            raise Unavailable(f"the indexer did not answer ({error.code().name})") from None
        return [
            ({m.memory_id: m.cosine for m in result.memories}, {e.index: e.cosine for e in result.earlier})
            for result in response.results
        ]
