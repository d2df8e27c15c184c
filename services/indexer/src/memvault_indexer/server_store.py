"""`QdrantServerStore`: a Qdrant server through `qdrant-client`'s `AsyncQdrantClient` (also its local
mode, `:memory:` or a path, which the tests use)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memvault_core.errors import NotFound, Unavailable
from memvault_indexer.embedder import model_slug
from memvault_indexer.points import (
    KEYWORD_FIELDS,
    MESSAGE,
    VECTOR_NAME,
    Hit,
    IndexedMemory,
    PointVector,
    SearchFilters,
    StoredPoint,
    _as_list,
    _check_dimension,
    _check_other,
    _hits,
    _point_id,
    _point_vector,
    collection_name,
)


class QdrantServerStore:
    """A collection on a Qdrant server (or in qdrant-client's local mode) via `AsyncQdrantClient`."""

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        dimension: int,
        hnsw_ef: int = 128,
        duplicate_hnsw_ef: int = 64,
        local: bool = False,
    ) -> None:
        self._client = client
        self._collection = collection_name(model, dimension)
        self._model = model_slug(model)
        self._dimension = dimension
        self._hnsw_ef = hnsw_ef
        self._duplicate_hnsw_ef = duplicate_hnsw_ef
        # Local mode searches exhaustively and has no payload indexes; it warns when given either.
        self._local = local

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        model: str,
        dimension: int,
        api_key: str | None = None,
        timeout_seconds: int = 10,
        hnsw_ef: int = 128,
        duplicate_hnsw_ef: int = 64,
    ) -> QdrantServerStore:
        """A store on the Qdrant server at `url` (http(s)://host:6333)."""
        from qdrant_client import AsyncQdrantClient

        client = AsyncQdrantClient(url=url, api_key=api_key, timeout=timeout_seconds)
        return cls(client, model=model, dimension=dimension, hnsw_ef=hnsw_ef, duplicate_hnsw_ef=duplicate_hnsw_ef)

    @classmethod
    def local(cls, location: str | Path, *, model: str, dimension: int) -> QdrantServerStore:
        """qdrant-client's local mode: `":memory:"` or a directory. For tests and small data."""
        from qdrant_client import AsyncQdrantClient

        client = (
            AsyncQdrantClient(location=":memory:")
            if str(location) == ":memory:"
            else AsyncQdrantClient(path=str(location))
        )
        return cls(client, model=model, dimension=dimension, local=True)

    @property
    def collection(self) -> str:
        return self._collection

    async def ensure_collection(self) -> None:
        from qdrant_client import models

        try:
            if await self._client.collection_exists(self._collection):
                return
            await self._client.create_collection(
                self._collection,
                vectors_config={
                    VECTOR_NAME: models.VectorParams(size=self._dimension, distance=models.Distance.COSINE)
                },
            )
            if not self._local:
                await self._client.create_payload_index(
                    self._collection,
                    "vault_id",
                    field_schema=models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
                )
                for name in KEYWORD_FIELDS[1:]:
                    await self._client.create_payload_index(
                        self._collection, name, field_schema=models.PayloadSchemaType.KEYWORD
                    )
        except Exception as error:
            raise Unavailable(f"cannot reach Qdrant to open collection {self._collection}: {error}") from error

    @staticmethod
    def _filter(vault_id: str | None, filters: SearchFilters | None = None) -> Any:
        from qdrant_client import models

        must: list[Any] = []
        must_not: list[Any] = []
        if vault_id is not None:
            must.append(models.FieldCondition(key="vault_id", match=models.MatchValue(value=vault_id)))
        if filters is not None:
            if filters.statuses:
                must.append(models.FieldCondition(key="status", match=models.MatchAny(any=list(filters.statuses))))
            if filters.types:
                must.append(models.FieldCondition(key="type", match=models.MatchAny(any=list(filters.types))))
            if filters.memory_ids:
                must.append(models.HasIdCondition(has_id=[_point_id(i) for i in filters.memory_ids]))
            if filters.exclude_ids:
                must_not.append(models.HasIdCondition(has_id=[_point_id(i) for i in filters.exclude_ids]))
            kind = models.FieldCondition(key="kind", match=models.MatchValue(value=MESSAGE))
            (must if filters.messages else must_not).append(kind)
        return models.Filter(must=must or None, must_not=must_not or None)

    async def upsert(self, memories: Sequence[IndexedMemory]) -> None:
        from qdrant_client import models

        if not memories:
            return
        points = []
        for memory in memories:
            vector = _as_list(memory.vector)
            _check_dimension(vector, self._dimension)
            points.append(
                models.PointStruct(
                    id=_point_id(memory.memory_id), vector={VECTOR_NAME: vector}, payload=memory.payload(self._model)
                )
            )
        await self._client.upsert(self._collection, points=points, wait=True)

    async def delete(self, memory_ids: Sequence[str | uuid.UUID]) -> None:
        from qdrant_client import models

        if not memory_ids:
            return
        selector = models.PointIdsList(points=[_point_id(i) for i in memory_ids])
        await self._client.delete(self._collection, points_selector=selector, wait=True)

    async def delete_vault(self, vault_id: str) -> None:
        from qdrant_client import models

        selector = models.FilterSelector(filter=self._filter(vault_id))
        await self._client.delete(self._collection, points_selector=selector, wait=True)

    async def delete_conversation(self, vault_id: str, conversation_id: str) -> None:
        from qdrant_client import models

        conditions: list[Any] = [
            models.FieldCondition(key="vault_id", match=models.MatchValue(value=vault_id)),
            models.FieldCondition(key="conversation_id", match=models.MatchValue(value=conversation_id)),
        ]
        selector = models.FilterSelector(filter=models.Filter(must=conditions))
        await self._client.delete(self._collection, points_selector=selector, wait=True)

    async def search(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
    ) -> list[Hit]:
        if limit < 1:
            return []
        (hits,) = await self._query_batch([self._query(vector, vault_id, limit, filters)])
        return hits

    async def search_many(
        self, vectors: Sequence[NDArray[np.float32] | Sequence[float]], vault_id: str, limit: int
    ) -> list[list[Hit]]:
        if limit < 1 or len(vectors) == 0:
            return [[] for _ in vectors]
        return await self._query_batch(
            [self._query(vector, vault_id, limit, ef=self._duplicate_hnsw_ef) for vector in vectors]
        )

    def _query(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
        *,
        ef: int | None = None,
    ) -> Any:
        from qdrant_client import models

        query = _as_list(vector)
        _check_dimension(query, self._dimension)
        return models.QueryRequest(
            query=query,
            using=VECTOR_NAME,
            filter=self._filter(vault_id, filters or SearchFilters()),
            params=None if self._local else models.SearchParams(hnsw_ef=max(ef or self._hnsw_ef, limit)),
            limit=limit,
            with_payload=False,
            with_vector=False,
        )

    async def _query_batch(self, requests: list[Any]) -> list[list[Hit]]:
        responses = await self._client.query_batch_points(self._collection, requests=requests)
        return [_hits(response.points) for response in responses]

    async def count(self, vault_id: str | None = None) -> int:
        result = await self._client.count(
            self._collection, count_filter=self._filter(vault_id) if vault_id is not None else None, exact=True
        )
        return int(result.count)

    async def scan(self, vault_id: str | None = None, page_size: int = 1000) -> AsyncIterator[StoredPoint]:
        offset: Any = None
        while True:
            records, offset = await self._client.scroll(
                self._collection,
                scroll_filter=self._filter(vault_id) if vault_id is not None else None,
                limit=page_size,
                offset=offset,
                with_payload=["vault_id", "content_hash", "model"],
                with_vectors=False,
            )
            for record in records:
                payload = record.payload or {}
                yield StoredPoint(
                    memory_id=str(record.id),
                    vault_id=str(payload.get("vault_id", "")),
                    content_hash=str(payload.get("content_hash", "")),
                    model=str(payload.get("model", "")),
                )
            if offset is None:
                return

    async def vectors(self, memory_ids: Sequence[str | uuid.UUID]) -> list[PointVector]:
        if not memory_ids:
            return []
        records = await self._client.retrieve(
            self._collection, ids=[_point_id(i) for i in memory_ids], with_payload=True, with_vectors=True
        )
        return [_point_vector(record) for record in records]

    async def drop_collection(self) -> None:
        if await self._client.collection_exists(self._collection):
            await self._client.delete_collection(self._collection)

    async def collections(self) -> list[str]:
        try:
            response = await self._client.get_collections()
        except Exception as error:
            raise Unavailable(f"cannot reach Qdrant to list collections: {error}") from error
        return sorted(c.name for c in response.collections if c.name.startswith("memvault_"))

    async def drop_other_collection(self, name: str) -> None:
        _check_other(name, self._collection)
        if name not in await self.collections():
            raise NotFound(f"no collection {name!r} on the Qdrant server")
        await self._client.delete_collection(name)

    async def close(self) -> None:
        await self._client.close()
