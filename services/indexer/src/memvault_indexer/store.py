"""The vector store: the only module that speaks Qdrant.

One collection per embedding model, named after the model and its dimension
(`memvault_all-minilm-l6-v2_384`), so switching models is a reindex into a new
collection, never a dimension mismatch. Point id = memory id (a UUID); the payload
carries what reconcile and filtering need: memory_id, vault_id, content_hash, model,
and optionally status and type.

Two backends implement `VectorStore`:

- `EdgeVectorStore`: Qdrant Edge (`qdrant-edge-py`), Qdrant's engine in-process, data
  under a directory. The embedded default. Its calls are blocking, so they run in a
  worker thread.
- `QdrantServerStore`: a Qdrant server through `qdrant-client`'s `AsyncQdrantClient`
  (also its local mode, `:memory:` or a path, which the tests use).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field, SecretStr

from memvault_core.errors import Conflict, InvalidArgument, NotFound, Unavailable
from memvault_indexer import sparse_copy
from memvault_indexer.embedder import model_slug

VECTOR_NAME = "dense"
REOPEN_WAIT_SECONDS = 10.0
"""How long a search waits while an embedded shard is closed to be copied or swapped."""
KEYWORD_FIELDS = ("vault_id", "status", "type", "kind", "conversation_id")
MESSAGE = "message"
"""`kind` of an archived message's point; a memory's point has no `kind` (older collections hold none)."""


def collection_name(model: str, dimension: int) -> str:
    """`memvault_<model slug>_<dimension>`, e.g. `memvault_all-minilm-l6-v2_384`."""
    if dimension < 1:
        raise InvalidArgument(f"embedding dimension must be positive, got {dimension}")
    return f"memvault_{model_slug(model)}_{dimension}"


def _check_other(name: str, active: str) -> None:
    if not name.startswith("memvault_") or "/" in name or name.startswith("."):
        raise InvalidArgument(
            f"{name!r} is not a memvault collection name (memvault_<model>_<dimension>)", field="name"
        )
    if name == active:
        raise Conflict(f"{name} is the active collection (the configured model's); it cannot be dropped", field="name")


def _point_id(memory_id: str | uuid.UUID) -> str:
    try:
        return str(memory_id if isinstance(memory_id, uuid.UUID) else uuid.UUID(str(memory_id)))
    except ValueError:
        raise InvalidArgument(f"memory id {memory_id!r} is not a UUID") from None


@dataclass(frozen=True, slots=True)
class IndexedMemory:
    """One memory's vector and the payload stored beside it."""

    memory_id: str | uuid.UUID
    vault_id: str
    vector: NDArray[np.float32] | Sequence[float]
    content_hash: str
    status: str | None = None
    type: str | None = None
    kind: str = "memory"
    """memory, or message for a message of an archived conversation."""
    conversation_id: str = ""
    revision: int = 0

    def payload(self, model: str) -> dict[str, Any]:
        if self.kind == MESSAGE:
            return {
                "kind": MESSAGE,
                "message_id": _point_id(self.memory_id),
                "conversation_id": self.conversation_id,
                "revision": self.revision,
                "vault_id": self.vault_id,
                "content_hash": self.content_hash,
                "model": model,
            }
        payload: dict[str, Any] = {
            "memory_id": _point_id(self.memory_id),
            "vault_id": self.vault_id,
            "content_hash": self.content_hash,
            "model": model,
        }
        if self.status is not None:
            payload["status"] = self.status
        if self.type is not None:
            payload["type"] = self.type
        return payload


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Optional narrowing of a search beyond the vault.

    `memory_ids` restricts the search to those memories: recall uses it to get exact cosines
    for keyword-only candidates. A search finds memories, or with `messages` archived messages
    only (the two share the collection).
    """

    statuses: Sequence[str] = ()
    types: Sequence[str] = ()
    memory_ids: Sequence[str | uuid.UUID] = ()
    exclude_ids: Sequence[str | uuid.UUID] = ()
    messages: bool = False


class Hit(NamedTuple):
    memory_id: str
    score: float


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """What reconcile compares against Postgres."""

    memory_id: str
    vault_id: str
    content_hash: str
    model: str


@dataclass(frozen=True, slots=True)
class PointVector:
    """A point's vector with what identifies the text it was made from (a backup carries these)."""

    memory_id: str
    vault_id: str
    content_hash: str
    model: str
    vector: list[float]


def _named_vector(vector: Any) -> list[float]:
    """A point's vector as a plain list, whether the backend returns it named or not."""
    if isinstance(vector, dict):
        vector = vector.get(VECTOR_NAME, [])
    return [float(x) for x in (vector or [])]


def _point_vector(record: Any) -> PointVector:
    payload = record.payload or {}
    return PointVector(
        memory_id=str(record.id),
        vault_id=str(payload.get("vault_id", "")),
        content_hash=str(payload.get("content_hash", "")),
        model=str(payload.get("model", "")),
        vector=_named_vector(record.vector),
    )


@runtime_checkable
class VectorStore(Protocol):
    """A Qdrant collection of memory vectors, one per embedding model."""

    @property
    def collection(self) -> str: ...

    async def ensure_collection(self) -> None:
        """Create the collection and its payload indexes if missing; open it if present."""
        ...

    async def upsert(self, memories: Sequence[IndexedMemory]) -> None:
        """Insert or replace points (idempotent: the point id is the memory id)."""
        ...

    async def delete(self, memory_ids: Sequence[str | uuid.UUID]) -> None:
        """Remove points; unknown ids are ignored."""
        ...

    async def delete_vault(self, vault_id: str) -> None:
        """Remove every point of a vault."""
        ...

    async def delete_conversation(self, vault_id: str, conversation_id: str) -> None:
        """Remove the points of every message of an archived conversation."""
        ...

    async def search(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
    ) -> list[Hit]:
        """Nearest memories of one vault by cosine, best first."""
        ...

    async def search_many(
        self, vectors: Sequence[NDArray[np.float32] | Sequence[float]], vault_id: str, limit: int
    ) -> list[list[Hit]]:
        """`search` for several vectors in one request (an import's duplicate check): one list per vector."""
        ...

    async def count(self, vault_id: str | None = None) -> int:
        """Number of points, in one vault or in the whole collection."""
        ...

    def scan(self, vault_id: str | None = None, page_size: int = 1000) -> AsyncIterator[StoredPoint]:
        """Every point's id, vault, content hash and model (for reconcile), page by page."""
        ...

    async def vectors(self, memory_ids: Sequence[str | uuid.UUID]) -> list[PointVector]:
        """The stored points of these memories with their vectors; ids without a point are left out."""
        ...

    async def drop_collection(self) -> None:
        """Delete the whole collection (Postgres stays the truth; `reindex` rebuilds it)."""
        ...

    async def collections(self) -> list[str]:
        """Every memvault collection in the store: this model's and those other models left behind."""
        ...

    async def drop_other_collection(self, name: str) -> None:
        """Delete a collection another model left; this store's own (the active one) is refused."""
        ...

    async def close(self) -> None: ...


def _as_list(vector: NDArray[np.float32] | Sequence[float]) -> list[float]:
    values: list[float] = np.asarray(vector, dtype=np.float32).ravel().tolist()
    return values


def _hits(points: Sequence[Any]) -> list[Hit]:
    """Scored points of either backend as hits, in their order."""
    return [Hit(str(point.id), float(point.score)) for point in points]


def _check_dimension(vector: list[float], dimension: int) -> None:
    if len(vector) != dimension:
        raise InvalidArgument(
            f"vector has {len(vector)} dimensions, the collection expects {dimension}; "
            "the embedder and the collection do not match"
        )


# --------------------------------------------------------------------------- Qdrant Edge

_OPTIMIZE_IN_CHILD = (
    "import os, sys\n"
    "os.nice(10)\n"  # the build yields the CPU to the services' own work (imports, recall)
    "from qdrant_edge import EdgeShard\n"
    "shard = EdgeShard.load(sys.argv[1])\n"
    "changed = shard.optimize()\n"
    "shard.close()\n"
    "print(changed)\n"
)


OPTIMIZING_SUFFIX = ".optimizing"
"""The copy of an Edge shard that a child process is building the index in: `<collection>.optimizing`."""


class EdgeVectorStore:
    """Qdrant Edge shard under `<data_dir>/<collection>/` (in-process, the embedded default)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        model: str,
        dimension: int,
        hnsw_ef: int = 128,
        search_threads: int | None = 1,
    ) -> None:
        self._path = Path(data_dir) / collection_name(model, dimension)
        self._collection = collection_name(model, dimension)
        self._model = model_slug(model)
        self._dimension = dimension
        self._hnsw_ef = hnsw_ef
        self._search_threads = search_threads
        self._shard: Any = None
        self._reopened: asyncio.Event | None = None
        # Writes are serialised so a drop or close never races an update; reads run freely.
        self._write_lock = asyncio.Lock()
        self._optimize_lock = asyncio.Lock()
        # While a child process builds the index in a copy, every write is applied to the open shard and
        # remembered here, to be applied to the copy before it takes the shard's place.
        self._journal: list[Callable[[], Any]] | None = None
        self._generation = 0
        """Counts drops: a copy taken before a drop is thrown away instead of swapped in."""

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def path(self) -> Path:
        return self._path

    def _config(self) -> Any:
        from qdrant_edge import Distance, EdgeConfig, EdgeVectorParams

        return EdgeConfig(
            vectors={VECTOR_NAME: EdgeVectorParams(size=self._dimension, distance=Distance.Cosine)},
            max_search_threads=self._search_threads,
        )

    def _open(self) -> Any:
        from qdrant_edge import EdgeShard, KeywordIndexParams, PayloadSchemaType, UpdateOperation

        if (self._path / "edge_config.json").exists():
            return EdgeShard.load(str(self._path))
        self._path.parent.mkdir(parents=True, exist_ok=True)
        shard = EdgeShard.create(str(self._path), self._config())
        shard.update(UpdateOperation.create_field_index("vault_id", KeywordIndexParams(is_tenant=True)))
        for name in KEYWORD_FIELDS[1:]:
            shard.update(UpdateOperation.create_field_index(name, PayloadSchemaType.Keyword))
        return shard

    async def ensure_collection(self) -> None:
        async with self._write_lock:
            if self._shard is None:
                try:
                    self._shard = await asyncio.to_thread(self._open)
                except Exception as error:  # qdrant-edge raises plain Exception
                    raise Unavailable(
                        f"cannot open the vector store at {self._path}: {error}. It holds only vectors derived from "
                        f"Postgres, so it is safe to move it away (mv {self._path} {self._path}.broken) and start the "
                        "indexer again: it rebuilds an empty store from the vault"
                    ) from error

    def _require(self) -> Any:
        if self._shard is None:
            raise Unavailable(
                "the vector store is not open (not yet opened, or closed while it is optimized); "
                "retry shortly or answer keyword-only"
            )
        return self._shard

    async def _read(self, method: str, request: Any) -> Any:
        # Reads do not wait for the write lock. While the shard is briefly closed to be copied or
        # swapped (optimize), they wait for it to reopen; a close they cannot wait out (drop)
        # makes them fail with Unavailable instead of an engine error.
        for attempt in (1, 2):
            if self._shard is None and self._reopened is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._reopened.wait(), REOPEN_WAIT_SECONDS)
            shard = self._require()
            try:
                return await asyncio.to_thread(getattr(shard, method), request)
            except Exception as error:
                if self._shard is shard:
                    raise
                if attempt == 2:
                    raise Unavailable("the vector store was closed during the request; retry") from error
        raise AssertionError("unreachable")

    async def upsert(self, memories: Sequence[IndexedMemory]) -> None:
        from qdrant_edge import Point, UpdateOperation

        if not memories:
            return
        points = []
        for memory in memories:
            vector = _as_list(memory.vector)
            _check_dimension(vector, self._dimension)
            points.append(
                Point(id=_point_id(memory.memory_id), vector={VECTOR_NAME: vector}, payload=memory.payload(self._model))
            )
        await self._update(lambda: UpdateOperation.upsert_points(points))

    async def delete(self, memory_ids: Sequence[str | uuid.UUID]) -> None:
        from qdrant_edge import UpdateOperation

        if not memory_ids:
            return
        ids: list[Any] = [_point_id(i) for i in memory_ids]
        await self._update(lambda: UpdateOperation.delete_points(ids))

    async def delete_vault(self, vault_id: str) -> None:
        from qdrant_edge import UpdateOperation

        await self._update(lambda: UpdateOperation.delete_points_by_filter(self._filter(vault_id)))

    async def delete_conversation(self, vault_id: str, conversation_id: str) -> None:
        from qdrant_edge import FieldCondition, Filter, MatchValue, UpdateOperation

        def operation() -> Any:
            conditions: list[Any] = [
                FieldCondition("vault_id", match=MatchValue(vault_id)),
                FieldCondition("conversation_id", match=MatchValue(conversation_id)),
            ]
            return UpdateOperation.delete_points_by_filter(Filter(must=conditions))

        await self._update(operation)

    async def _update(self, operation: Callable[[], Any]) -> None:
        """Apply one update to the shard (and remember it while a copy is being optimized).

        `operation` builds the engine's update each time it is called: once now, and once more
        for the copy if one is being built."""
        async with self._write_lock:
            shard = self._require()
            await asyncio.to_thread(shard.update, operation())
            if self._journal is not None:
                self._journal.append(operation)

    @staticmethod
    def _filter(vault_id: str | None, filters: SearchFilters | None = None) -> Any:
        from qdrant_edge import FieldCondition, Filter, HasIdCondition, MatchAny, MatchValue

        must: list[Any] = []
        must_not: list[Any] = []
        if vault_id is not None:
            must.append(FieldCondition("vault_id", match=MatchValue(vault_id)))
        if filters is not None:
            if filters.statuses:
                must.append(FieldCondition("status", match=MatchAny(list(filters.statuses))))
            if filters.types:
                must.append(FieldCondition("type", match=MatchAny(list(filters.types))))
            if filters.memory_ids:
                must.append(HasIdCondition({_point_id(i) for i in filters.memory_ids}))
            if filters.exclude_ids:
                must_not.append(HasIdCondition({_point_id(i) for i in filters.exclude_ids}))
            (must if filters.messages else must_not).append(FieldCondition("kind", match=MatchValue(MESSAGE)))
        return Filter(must=must or None, must_not=must_not or None)

    async def search(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
    ) -> list[Hit]:
        if limit < 1:
            return []
        points = await self._read("query", self._query(vector, vault_id, limit, filters))
        return _hits(points)

    async def search_many(
        self, vectors: Sequence[NDArray[np.float32] | Sequence[float]], vault_id: str, limit: int
    ) -> list[list[Hit]]:
        from qdrant_edge import QueryBatchRequest

        if limit < 1 or len(vectors) == 0:
            return [[] for _ in vectors]
        batch = QueryBatchRequest([self._query(vector, vault_id, limit) for vector in vectors])
        results = await self._read("query_batch", batch)
        return [_hits(points) for points in results]

    def _query(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
    ) -> Any:
        from qdrant_edge import Query, QueryRequest, SearchParams

        query = _as_list(vector)
        _check_dimension(query, self._dimension)
        return QueryRequest(
            limit=limit,
            query=Query.Nearest(query, using=VECTOR_NAME),
            filter=self._filter(vault_id, filters or SearchFilters()),
            params=SearchParams(hnsw_ef=max(self._hnsw_ef, limit)),
            with_payload=False,
            with_vector=False,
        )

    async def count(self, vault_id: str | None = None) -> int:
        from qdrant_edge import CountRequest

        request = CountRequest(exact=True, filter=self._filter(vault_id) if vault_id is not None else None)
        return int(await self._read("count", request))

    async def scan(self, vault_id: str | None = None, page_size: int = 1000) -> AsyncIterator[StoredPoint]:
        from qdrant_edge import PayloadSelector, ScrollRequest

        offset: Any = None
        while True:
            request = ScrollRequest(
                offset=offset,
                limit=page_size,
                filter=self._filter(vault_id) if vault_id is not None else None,
                with_payload=PayloadSelector.Include(["vault_id", "content_hash", "model"]),
                with_vector=False,
            )
            records, offset = await self._read("scroll", request)
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
        shard = self._require()
        records = await asyncio.to_thread(
            shard.retrieve, [_point_id(i) for i in memory_ids], with_payload=True, with_vector=True
        )
        return [_point_vector(record) for record in records]

    async def optimize(self) -> bool:
        """Build HNSW indexes and merge segments (Qdrant Edge runs no background optimizer).

        `EdgeShard.optimize()` holds the GIL for its whole run (8 s at 20,000 points, ~3 min at
        100,000 on 2 cores), which would freeze this process. So a copy of the shard is optimized
        by a child process (at a lower CPU priority) while this one keeps answering searches and
        taking writes on the original; then the writes made meanwhile are applied to the copy, and
        the copy takes the original's place. Reads and writes wait only for the moments the shard is
        closed to be copied and swapped. Returns whether anything was optimized.
        """
        async with self._optimize_lock:
            staging = self._path.with_name(self._path.name + OPTIMIZING_SUFFIX)
            retired = self._path.with_name(self._path.name + ".retired")
            async with self._write_lock:
                generation = self._generation
                for leftover in (staging, retired):
                    await asyncio.to_thread(shutil.rmtree, leftover, True)
                await self._reopen_after(lambda: sparse_copy.copy_tree(self._path, staging))
                self._journal = []
            try:
                child = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-c",
                    _OPTIMIZE_IN_CHILD,
                    str(staging),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                out, err = await child.communicate()
                async with self._write_lock:
                    journal, self._journal = self._journal or [], None
                    if child.returncode != 0 or generation != self._generation or self._shard is None:
                        await asyncio.to_thread(shutil.rmtree, staging, True)
                        if child.returncode != 0:
                            raise Unavailable(f"optimizing {self._path} failed: {err.decode(errors='replace')[-500:]}")
                        return False

                    def swap() -> None:
                        if journal:
                            from qdrant_edge import EdgeShard

                            copy = EdgeShard.load(str(staging))
                            try:
                                for operation in journal:
                                    copy.update(operation())
                            finally:
                                copy.close()
                        self._path.rename(retired)
                        staging.rename(self._path)

                    await self._reopen_after(swap)
            finally:
                self._journal = None
            await asyncio.to_thread(shutil.rmtree, retired, True)
            return out.strip() == b"True"

    async def _reopen_after(self, change: Callable[[], object]) -> None:
        """Close the shard, apply a change to its files, open it again (reads wait in between)."""
        shard = self._require()
        self._reopened = asyncio.Event()
        self._shard = None
        await asyncio.to_thread(shard.close)
        try:
            await asyncio.to_thread(change)
        finally:
            self._shard = await asyncio.to_thread(self._open)
            self._reopened.set()

    async def drop_collection(self) -> None:
        async with self._write_lock:
            self._generation += 1
            if self._shard is not None:
                await asyncio.to_thread(self._shard.close)
                self._shard = None
            await asyncio.to_thread(shutil.rmtree, self._path, True)

    async def collections(self) -> list[str]:
        def names() -> list[str]:
            root = self._path.parent
            if not root.is_dir():
                return []
            return sorted(
                p.name
                for p in root.iterdir()
                if p.name.startswith("memvault_")
                and not p.name.endswith(OPTIMIZING_SUFFIX)
                and (p / "edge_config.json").exists()
            )

        return await asyncio.to_thread(names)

    async def drop_other_collection(self, name: str) -> None:
        _check_other(name, self._collection)
        if name not in await self.collections():
            raise NotFound(f"no collection {name!r} in {self._path.parent}")
        await asyncio.to_thread(shutil.rmtree, self._path.parent / name)
        await asyncio.to_thread(shutil.rmtree, self._path.parent / f"{name}{OPTIMIZING_SUFFIX}", True)

    async def close(self) -> None:
        async with self._write_lock:
            if self._shard is not None:
                await asyncio.to_thread(self._shard.close)
                self._shard = None


# --------------------------------------------------------------------------- Qdrant server


class QdrantServerStore:
    """A collection on a Qdrant server (or in qdrant-client's local mode) via `AsyncQdrantClient`."""

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        dimension: int,
        hnsw_ef: int = 128,
        local: bool = False,
    ) -> None:
        self._client = client
        self._collection = collection_name(model, dimension)
        self._model = model_slug(model)
        self._dimension = dimension
        self._hnsw_ef = hnsw_ef
        # Local mode searches exhaustively and has no payload indexes; it warns when given either.
        self._local = local

    @classmethod
    def connect(
        cls, url: str, *, model: str, dimension: int, api_key: str | None = None, timeout_seconds: int = 10
    ) -> QdrantServerStore:
        """A store on the Qdrant server at `url` (http(s)://host:6333)."""
        from qdrant_client import AsyncQdrantClient

        client = AsyncQdrantClient(url=url, api_key=api_key, timeout=timeout_seconds)
        return cls(client, model=model, dimension=dimension)

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
        return await self._query_batch([self._query(vector, vault_id, limit) for vector in vectors])

    def _query(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
    ) -> Any:
        from qdrant_client import models

        query = _as_list(vector)
        _check_dimension(query, self._dimension)
        return models.QueryRequest(
            query=query,
            using=VECTOR_NAME,
            filter=self._filter(vault_id, filters or SearchFilters()),
            params=None if self._local else models.SearchParams(hnsw_ef=max(self._hnsw_ef, limit)),
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


# --------------------------------------------------------------------------- configuration


class VectorStoreSettings(BaseModel):
    """Where vectors live; a settings group (`MEMVAULT_QDRANT__*` in the service settings).

    `url` empty → Qdrant Edge under `data_dir` (embedded); `url` set → that Qdrant server;
    `url=":memory:"` → qdrant-client's in-memory local mode (tests only).
    """

    url: str = ""
    api_key: SecretStr | None = None
    data_dir: Path = Path(".data/qdrant")
    hnsw_ef: int = Field(default=128, ge=1)
    search_threads: int = Field(default=1, ge=1)


def open_store(settings: VectorStoreSettings, *, model: str, dimension: int) -> VectorStore:
    """The configured backend for one embedding model; call `ensure_collection()` before use."""
    if not settings.url:
        return EdgeVectorStore(
            settings.data_dir,
            model=model,
            dimension=dimension,
            hnsw_ef=settings.hnsw_ef,
            search_threads=settings.search_threads,
        )
    if settings.url == ":memory:":
        return QdrantServerStore.local(":memory:", model=model, dimension=dimension)
    return QdrantServerStore.connect(
        settings.url,
        model=model,
        dimension=dimension,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
    )


__all__ = [
    "EdgeVectorStore",
    "Hit",
    "IndexedMemory",
    "PointVector",
    "QdrantServerStore",
    "SearchFilters",
    "StoredPoint",
    "VectorStore",
    "VectorStoreSettings",
    "collection_name",
    "open_store",
]
