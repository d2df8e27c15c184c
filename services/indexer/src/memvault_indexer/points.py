"""What the vector store holds, whichever backend: collection names, points and their payloads, search
filters and hits, and the small conversions both backends share (store.py has the `VectorStore`
protocol; edge_store.py and server_store.py the backends)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from memvault_core.errors import Conflict, InvalidArgument
from memvault_indexer.embedder import model_slug

VECTOR_NAME = "dense"
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
