"""What the indexer does: embed memory text into the vector store, search it, rebuild and repair it.

Postgres (through the vault) is the truth; this is derived. Indexing is idempotent on
(memory id, content hash, model): a memory whose current text the vault says is already
indexed with this model is skipped, and a point's id is its memory id, so a repeat
overwrites rather than duplicates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memvault_core.errors import Unavailable
from memvault_indexer.embedder import Embedder
from memvault_indexer.feed import Document, VaultFeed
from memvault_indexer.metrics import timed_embedding
from memvault_indexer.store import EdgeVectorStore, IndexedMemory, SearchFilters, VectorStore

log = logging.getLogger(__name__)

EMBEDDING_CACHE_SIZE = 20_000
"""Texts whose embeddings are kept: those of duplicate checks, searches and similarity questions, not those
embedded to be indexed (at most about 40 MiB with texts of 450 characters at 384 dimensions)."""
OPTIMIZE_AFTER_POINTS = 500
OPTIMIZE_DURING_BURST_POINTS = 5_000
OPTIMIZE_AFTER_SHARE = 0.2
OPTIMIZE_WHEN_IDLE_SECONDS = 30.0
"""Qdrant Edge builds its HNSW index only when asked, and optimizing copies the whole shard first
(see `EdgeVectorStore.optimize`). Once writes have paused for OPTIMIZE_WHEN_IDLE_SECONDS, the new
points are indexed as soon as there are OPTIMIZE_AFTER_POINTS. While writes keep coming (a bulk
import), only once they are both OPTIMIZE_DURING_BURST_POINTS and OPTIMIZE_AFTER_SHARE of the
collection: each build in a burst copies the shard and swaps the copy in (writes wait while it
is copied, searches too while it is swapped), and below Qdrant's indexing threshold (about 6,600
vectors of 384 dimensions in one segment) it builds no HNSW graph at all, so a build every few hundred points cost an import time
and bought nothing. Until a build the new points are searched exactly: fast while they are few (a
search reads every one of them, about 2 ms per 10,000 on these machines; an import's duplicate
check of 500 texts against 5,000 of them about 0.1 s of CPU)."""


@dataclass
class ReconcileReport:
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    repaired: int = 0


class Indexer:
    def __init__(self, embedder: Embedder, store: VectorStore, feed: VaultFeed) -> None:
        self.embedder = embedder
        self.store = store
        self.feed = feed
        self._since_optimize = 0
        self._recent: dict[str, np.ndarray] = {}
        self._running: dict[str, tuple[asyncio.Future[np.ndarray], int]] = {}
        """Texts being embedded now: the embedding that computes them and their row in its result."""
        self.filling = False
        """True while the collection is being filled from scratch (a rebuild, a new model's empty collection):
        searches are refused meanwhile, so recall answers keyword-only rather than from a partial index."""

    @property
    def model(self) -> str:
        return self.embedder.name

    async def embed(self, texts: Sequence[str], *, keep: bool = True) -> np.ndarray:
        """Embeddings of texts, computed off the event loop; recently embedded texts come from a cache.

        The same text is often embedded twice in a row: a write's duplicate check embeds it, then
        indexing does; recall embeds a query, then scores keyword hits against it. And a call whose
        caller gave up (a deadline on a busy machine) is often sent again at once: the texts still
        being embedded for the first are awaited, not embedded a second time, and an embedding
        finishes (and with `keep` is cached) even when the call that started it is cancelled.
        `keep=False` (indexing: nothing asks for a text again once its point is stored) leaves the
        cache as it was, so an import of any size holds no more than it did before.
        """
        found = {t: self._recent[t] for t in texts if t in self._recent}
        running = {t: self._running[t] for t in texts if t not in found and t in self._running}
        missing = list(dict.fromkeys(t for t in texts if t not in found and t not in running))
        if missing:
            work = asyncio.ensure_future(asyncio.to_thread(timed_embedding, self.embedder.embed, missing))
            for position, text in enumerate(missing):
                self._running[text] = (work, position)
            work.add_done_callback(lambda done, batch=missing: self._done(batch, done, keep))  # type: ignore[misc]
            running.update((text, (work, position)) for position, text in enumerate(missing))
        for embedding in dict.fromkeys(future for future, _ in running.values()):
            await asyncio.shield(embedding)
        for text, (embedding, row) in running.items():
            found[text] = embedding.result()[row]
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def _done(self, texts: list[str], work: asyncio.Future[np.ndarray], keep: bool) -> None:
        for text in texts:
            if self._running.get(text, (None, 0))[0] is work:
                del self._running[text]
        if not keep or work.cancelled() or work.exception() is not None:
            return  # whoever awaits it gets the error
        for text, vector in zip(texts, work.result(), strict=True):
            self._recent.pop(text, None)
            self._recent[text] = vector
        while len(self._recent) > EMBEDDING_CACHE_SIZE:
            self._recent.pop(next(iter(self._recent)))

    async def embed_query(self, query: str) -> np.ndarray:
        vectors = await self.embed([query])
        return np.asarray(vectors[0])

    async def index(
        self, memory_ids: Sequence[str], *, force: bool = False, message_ids: Sequence[str] = ()
    ) -> list[Document]:
        """Bring these memories' (and archived messages') points up to date; forgotten or deleted ones are
        removed. Returns what was embedded."""
        ids = list(dict.fromkeys(memory_ids))
        messages = list(dict.fromkeys(message_ids))
        if not ids and not messages:
            return []
        documents = await self.feed.documents(ids, messages)
        present = {d.memory_id for d in documents}
        gone = [i for i in [*ids, *messages] if i not in present]
        if gone:
            await self.store.delete(gone)
        todo = [
            d for d in documents if force or not (d.indexed_hash == d.content_hash and d.indexed_model == self.model)
        ]
        await self._write(todo)
        return todo

    async def _write(self, documents: Sequence[Document]) -> None:
        if not documents:
            return
        vectors = await self.embed([d.content for d in documents], keep=False)
        await self.store.upsert(
            [
                IndexedMemory(
                    d.memory_id,
                    d.vault_id,
                    vector,
                    d.content_hash,
                    kind=d.kind,
                    conversation_id=d.conversation_id,
                    revision=d.revision,
                )
                for d, vector in zip(documents, vectors, strict=True)
            ]
        )
        await self.feed.report(documents, self.model)
        self._since_optimize += len(documents)

    async def write_documents(self, documents: Sequence[Document]) -> None:
        """Embed and store these documents and report them indexed (a maintenance job's page)."""
        await self._write(documents)

    async def put_vectors(self, vault_id: str, vectors: Sequence[tuple[str, str, list[float]]]) -> None:
        """Store vectors made elsewhere by this model (memory id, content hash, vector), as a restore does."""
        await self.store.upsert(
            [IndexedMemory(memory_id, vault_id, vector, digest) for memory_id, digest, vector in vectors]
        )

    async def forget(self, memory_ids: Sequence[str]) -> None:
        if memory_ids:
            await self.store.delete(list(memory_ids))

    async def forget_conversations(self, conversations: Sequence[tuple[str, str]]) -> None:
        """Remove the points of every message of these deleted conversations (vault id, conversation id)."""
        for vault_id, conversation_id in dict.fromkeys(conversations):
            await self.store.delete_conversation(vault_id, conversation_id)

    async def optimize_if_due(self, idle_seconds: float = 0.0) -> None:
        """Let an embedded Qdrant Edge build its index after a burst of writes (a server does this
        itself); `idle_seconds`: how long no write has come."""
        if self._since_optimize < OPTIMIZE_AFTER_POINTS or not isinstance(self.store, EdgeVectorStore):
            return
        if idle_seconds >= OPTIMIZE_WHEN_IDLE_SECONDS or (
            self._since_optimize >= OPTIMIZE_DURING_BURST_POINTS
            and self._since_optimize >= OPTIMIZE_AFTER_SHARE * await self.store.count()
        ):
            new_points, self._since_optimize = self._since_optimize, 0
            started = time.monotonic()
            await self.store.optimize()
            log.info(
                "vector index built", extra={"new_points": new_points, "seconds": round(time.monotonic() - started, 1)}
            )

    async def search(
        self,
        vault_id: str,
        query: str,
        limit: int,
        score_ids: Sequence[str] = (),
        pending: Sequence[tuple[str, str]] = (),
        *,
        messages: bool = False,
    ) -> dict[str, float]:
        """Cosine by memory id: the nearest memories of the vault, plus the ids and texts asked about
        (with `messages`: the vault's archived messages instead, by message id)."""
        query_vector = await self.embed_query(query)
        pending_vectors: Any = await self.embed([text for _, text in pending]) if pending else []
        cosines: dict[str, float] = {}
        if limit > 0:
            for hit in await self.store.search(query_vector, vault_id, limit, SearchFilters(messages=messages)):
                cosines[hit.memory_id] = hit.score
        wanted = [i for i in dict.fromkeys(score_ids) if i not in cosines]
        if wanted:
            only = SearchFilters(memory_ids=wanted, messages=messages)
            for hit in await self.store.search(query_vector, vault_id, len(wanted), only):
                cosines[hit.memory_id] = hit.score
        for (memory_id, _), vector in zip(pending, pending_vectors, strict=True):
            cosines.setdefault(memory_id, float(np.dot(query_vector, vector)))
        return cosines

    async def similar(
        self,
        vault_id: str,
        texts: Sequence[str],
        limit: int,
        min_cosine: float,
        pending: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[list[tuple[str, float]], list[tuple[int, float]]]]:
        """Per text: (similar memories of the vault, similar earlier texts by position), nearest first."""
        vectors = await self.embed([*texts, *(text for _, text in pending)])
        text_vectors, pending_vectors = vectors[: len(texts)], vectors[len(texts) :]
        # One batched search for all the texts; the cosines among the texts and with the pending ones
        # are two matrix products.
        found = await self.store.search_many(list(text_vectors), vault_id, limit)
        among_texts = text_vectors @ text_vectors.T
        to_pending = text_vectors @ pending_vectors.T if pending else np.zeros((len(texts), 0), dtype=np.float32)
        results: list[tuple[list[tuple[str, float]], list[tuple[int, float]]]] = []
        for position, hits in enumerate(found):
            memories = {hit.memory_id: hit.score for hit in hits if hit.score >= min_cosine}
            for column in np.flatnonzero(to_pending[position] >= min_cosine):
                memory_id, cosine = pending[int(column)][0], float(to_pending[position, column])
                memories[memory_id] = max(cosine, memories.get(memory_id, -1.0))
            before = among_texts[position, :position]
            earlier = [(int(index), float(before[index])) for index in np.flatnonzero(before >= min_cosine)]
            results.append(
                (
                    sorted(memories.items(), key=lambda item: item[1], reverse=True)[:limit],
                    sorted(earlier, key=lambda item: item[1], reverse=True),
                )
            )
        return results

    async def reindex(self, page_size: int = 256) -> int:
        """Drop the collection and embed every memory again from the vault."""
        await self.store.drop_collection()
        await self.store.ensure_collection()
        count = 0
        async for page in self.feed.all_documents(page_size):
            await self._write(page)
            count += len(page)
        self._since_optimize = max(self._since_optimize, OPTIMIZE_AFTER_POINTS)
        await self.optimize_if_due(idle_seconds=OPTIMIZE_WHEN_IDLE_SECONDS)  # the burst is over
        log.info("reindexed", extra={"memories": count})
        return count

    async def rebuild_if_empty(self, retry_seconds: float = 30.0) -> int:
        """At start: an empty store is a new installation or a lost one (a deleted Qdrant directory
        or collection). Either way, index whatever the vault holds (nothing, for a new one), waiting
        for the vault when it is not up yet. Returns the memories indexed."""
        if await self.store.count() > 0:
            return 0
        delay = 1.0
        self.filling = True
        try:
            while True:
                try:
                    report = await self.reconcile(repair=True)
                    break
                except Unavailable as error:
                    log.info("vector store empty; waiting for the vault to rebuild it", extra={"reason": error.message})
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, retry_seconds)
        finally:
            self.filling = False
        if report.repaired:
            log.warning("vector store was empty: rebuilt it from the vault", extra={"memories": report.repaired})
        return report.repaired

    async def reconcile(self, *, repair: bool) -> ReconcileReport:
        """Find points that are missing, stale (old text or model) or orphaned, and optionally fix them."""
        points = {p.memory_id: p async for p in self.store.scan()}
        report = ReconcileReport()
        seen: set[str] = set()
        async for page in self.feed.all_documents():
            stale_or_missing: list[Document] = []
            for document in page:
                seen.add(document.memory_id)
                point = points.get(document.memory_id)
                if point is None:
                    report.missing.append(document.memory_id)
                    stale_or_missing.append(document)
                elif point.content_hash != document.content_hash or point.model != self.model:
                    report.stale.append(document.memory_id)
                    stale_or_missing.append(document)
            if repair:
                await self._write(stale_or_missing)
                report.repaired += len(stale_or_missing)
        report.orphans = [memory_id for memory_id in points if memory_id not in seen]
        if repair and report.orphans:
            await self.store.delete(report.orphans)
            report.repaired += len(report.orphans)
        await self.optimize_if_due()
        return report
