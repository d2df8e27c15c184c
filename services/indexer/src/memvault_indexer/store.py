"""The vector store: the only part of the indexer that speaks Qdrant. Here the `VectorStore` protocol,
its settings and `open_store`; what it holds (points, payloads, filters, hits) is in points.py, and
each backend in a module of its own.

One collection per embedding model, named after the model and its dimension
(`memvault_all-minilm-l6-v2_384`), so switching models is a reindex into a new
collection, never a dimension mismatch. Point id = memory id (a UUID); the payload
carries what reconcile and filtering need: memory_id, vault_id, content_hash, model,
and optionally status and type.

Two backends implement `VectorStore`:

- `EdgeVectorStore` (edge_store.py): Qdrant Edge (`qdrant-edge-py`), Qdrant's engine in-process, data
  under a directory. The embedded default. Its calls are blocking, so they run in a
  worker thread.
- `QdrantServerStore` (server_store.py): a Qdrant server through `qdrant-client`'s `AsyncQdrantClient`
  (also its local mode, `:memory:` or a path, which the tests use).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field, SecretStr

from memvault_indexer.edge_store import OPTIMIZING_SUFFIX, EdgeVectorStore
from memvault_indexer.points import (
    MESSAGE,
    Hit,
    IndexedMemory,
    PointVector,
    SearchFilters,
    StoredPoint,
    collection_name,
)
from memvault_indexer.server_store import QdrantServerStore


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
        """`search` for several vectors at once (a write's duplicate check, with the narrower
        `duplicate_hnsw_ef`): one list per vector, in order."""
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


class VectorStoreSettings(BaseModel):
    """Where vectors live; a settings group (`MEMVAULT_QDRANT__*` in the service settings).

    `url` empty → Qdrant Edge under `data_dir` (embedded); `url` set → that Qdrant server;
    `url=":memory:"` → qdrant-client's in-memory local mode (tests only).
    """

    url: str = ""
    api_key: SecretStr | None = None
    data_dir: Path = Path(".data/qdrant")
    hnsw_ef: int = Field(default=128, ge=1)
    """Candidates an HNSW search keeps (recall's and archive search's nearest)."""
    duplicate_hnsw_ef: int = Field(default=64, ge=1)
    """The same for the duplicate check of every write (`search_many`): a quarter to half less search than
    the default at 9,000 to 20,000 points of a vault, with nothing missed at the cosines that make a
    duplicate or a similar memory (0.80 and up) and up to 8 in about 5,000 neighbours between 0.70 and
    0.80 (docs/benchmarks.md, bench:duplicate-ef). Below about 6,600 points a vault is searched exactly."""
    search_threads: int = Field(default=1, ge=1)


def open_store(settings: VectorStoreSettings, *, model: str, dimension: int) -> VectorStore:
    """The configured backend for one embedding model; call `ensure_collection()` before use."""
    if not settings.url:
        return EdgeVectorStore(
            settings.data_dir,
            model=model,
            dimension=dimension,
            hnsw_ef=settings.hnsw_ef,
            duplicate_hnsw_ef=settings.duplicate_hnsw_ef,
            search_threads=settings.search_threads,
        )
    if settings.url == ":memory:":
        return QdrantServerStore.local(":memory:", model=model, dimension=dimension)
    return QdrantServerStore.connect(
        settings.url,
        model=model,
        dimension=dimension,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        hnsw_ef=settings.hnsw_ef,
        duplicate_hnsw_ef=settings.duplicate_hnsw_ef,
    )


__all__ = [
    "MESSAGE",
    "OPTIMIZING_SUFFIX",
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
