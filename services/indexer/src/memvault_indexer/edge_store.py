"""`EdgeVectorStore`: Qdrant Edge (`qdrant-edge-py`), Qdrant's engine in-process, data under a directory;
the embedded default. Its calls are blocking, so they run in a worker thread. The HNSW index is built
when asked (`optimize`), in a child process on a copy of the shard."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memvault_core.errors import NotFound, Unavailable
from memvault_indexer import sparse_copy
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

REOPEN_WAIT_SECONDS = 10.0
"""How long a search waits while an embedded shard is closed to be swapped for its optimized copy."""

_OPTIMIZE_IN_CHILD = (
    "import os, sys\n"
    "os.nice(10)\n"  # the build yields the CPU to the services' own work (imports, recall)
    "from qdrant_edge import EdgeShard\n"
    "shard = EdgeShard.load(sys.argv[1])\n"
    "changed = shard.optimize()\n"
    "shard.close()\n"
    "print(changed)\n"
)


SEARCH_BATCH = 64
"""Queries per call into the shard in `search_many`. Qdrant Edge holds the GIL while it searches, so one call
for an import's 500 texts (about 0.2 s) would stall the model's thread, embedding the next import, for
all of it; between calls of this size the model's thread gets the GIL back."""

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
        duplicate_hnsw_ef: int = 64,
        search_threads: int | None = 1,
    ) -> None:
        self._path = Path(data_dir) / collection_name(model, dimension)
        self._collection = collection_name(model, dimension)
        self._model = model_slug(model)
        self._dimension = dimension
        self._hnsw_ef = hnsw_ef
        self._duplicate_hnsw_ef = duplicate_hnsw_ef
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
        # Reads do not wait for the write lock. While the shard is briefly closed to be swapped for its
        # optimized copy (optimize), they wait for it to reopen; a close they cannot wait out (drop)
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
        hits: list[list[Hit]] = []
        for start in range(0, len(vectors), SEARCH_BATCH):
            part = vectors[start : start + SEARCH_BATCH]
            results = await self._read(
                "query_batch",
                QueryBatchRequest([self._query(v, vault_id, limit, ef=self._duplicate_hnsw_ef) for v in part]),
            )
            hits.extend(_hits(points) for points in results)
        return hits

    def _query(
        self,
        vector: NDArray[np.float32] | Sequence[float],
        vault_id: str,
        limit: int,
        filters: SearchFilters | None = None,
        *,
        ef: int | None = None,
    ) -> Any:
        from qdrant_edge import Query, QueryRequest, SearchParams

        query = _as_list(vector)
        _check_dimension(query, self._dimension)
        return QueryRequest(
            limit=limit,
            query=Query.Nearest(query, using=VECTOR_NAME),
            filter=self._filter(vault_id, filters or SearchFilters()),
            params=SearchParams(hnsw_ef=max(ef or self._hnsw_ef, limit)),
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
        the copy takes the original's place. Writes wait while the shard is copied, reads and writes
        while it is swapped. Returns whether anything was optimized.
        """
        async with self._optimize_lock:
            staging = self._path.with_name(self._path.name + OPTIMIZING_SUFFIX)
            retired = self._path.with_name(self._path.name + ".retired")
            async with self._write_lock:
                generation = self._generation
                for leftover in (staging, retired):
                    await asyncio.to_thread(shutil.rmtree, leftover, True)
                # Copied while open, flushed, with writes held back: closing and loading it again would map
                # every page of its files into memory (vectors are memory-mapped and loaded whole), pages the
                # import never touched, on top of those the optimized copy brings in when it is swapped in.
                shard = self._require()
                await asyncio.to_thread(shard.flush)
                await asyncio.to_thread(sparse_copy.copy_tree, self._path, staging)
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
