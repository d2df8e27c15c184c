"""Maintenance jobs: a rebuild or re-embed runs in the background, one at a time, with progress;
searches are refused while a rebuild fills the collection; another model's collection can be dropped."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from memvault_core.errors import Conflict, InvalidArgument, NotFound
from memvault_indexer.feed import Document
from memvault_indexer.indexing import Indexer
from memvault_indexer.jobs import JobRunner
from memvault_indexer.store import EdgeVectorStore


class HashEmbedder:
    """Deterministic vectors from a text's hash; refuses texts containing "poison", slowly enough to watch."""

    def __init__(self, name: str, dimension: int = 8, delay: float = 0.0) -> None:
        self.name = name
        self.dimension = dimension
        self.delay = delay

    def embed(self, texts: list[str]) -> np.ndarray:
        import time

        time.sleep(self.delay)
        if any("poison" in t for t in texts):
            raise ValueError("the model refused a text")
        rows = [
            np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(self.dimension)
            for t in texts
        ]
        return np.asarray(rows, dtype=np.float32)


class VaultFeedDouble:
    """The vault's documents held in memory, recording what the indexer reports back."""

    def __init__(self, texts: Sequence[str], page_size: int = 10) -> None:
        self.documents = [
            Document(str(uuid.UUID(int=i + 1)), "vault-1", text, hashlib.sha256(text.encode()).hexdigest(), "", "")
            for i, text in enumerate(texts)
        ]
        self.page_size = page_size
        self.indexed: list[str] = []
        self.failed: list[tuple[str, str]] = []

    async def count(self) -> int:
        return len(self.documents)

    async def all_documents(self, page_size: int = 500) -> AsyncIterator[list[Document]]:
        for start in range(0, len(self.documents), self.page_size):
            await asyncio.sleep(0)
            yield self.documents[start : start + self.page_size]

    async def report(
        self,
        indexed: Sequence[Document],
        model: str,
        failed: Sequence[tuple[str, str]] = (),
        failed_messages: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.indexed.extend(d.memory_id for d in indexed)
        self.failed.extend([*failed, *failed_messages])


async def open_indexer(path: Path, model: str, feed: VaultFeedDouble, delay: float = 0.0) -> Indexer:
    store = EdgeVectorStore(path, model=model, dimension=8)
    await store.ensure_collection()
    return Indexer(HashEmbedder(model, delay=delay), store, feed)  # type: ignore[arg-type]


@pytest.mark.integration
async def test_a_rebuild_reports_progress_refuses_a_second_job_and_counts_failed_memories(tmp_path: Path) -> None:
    texts = [f"memory number {i}" for i in range(45)] + ["a poison text"]
    feed = VaultFeedDouble(texts)
    indexer = await open_indexer(tmp_path, "model-a", feed, delay=0.05)
    jobs = JobRunner(indexer)

    started = jobs.start("rebuild", "indexer")
    assert started.state == "running" and started.finished_at is None
    with pytest.raises(Conflict, match="already running"):
        jobs.start("reembed", "vault")
    await asyncio.sleep(0.1)
    assert jobs.filling  # searches are refused: recall answers keyword-only meanwhile

    status = await jobs.wait()
    assert status.state == "finished", status.error
    assert (status.done, status.total, status.failed) == (46, 46, 6)  # the poisoned page of 10 failed whole
    assert status.finished_at is not None and status.finished_at >= status.started_at
    assert not jobs.filling
    assert await indexer.store.count() == 40
    assert {memory_id for memory_id, _ in feed.failed} == {d.memory_id for d in feed.documents[40:]}
    assert all(error == "ValueError" for _, error in feed.failed)  # the kind of error, never the text

    again = jobs.start("rebuild", "vault")  # one at a time, not one ever
    assert again.started_by == "vault"
    assert (await jobs.wait()).state == "finished"
    await indexer.store.close()


@pytest.mark.integration
async def test_after_a_model_change_reembed_fills_the_new_collection_and_the_old_one_can_be_dropped(
    tmp_path: Path,
) -> None:
    feed = VaultFeedDouble([f"fact {i}" for i in range(25)])
    old = await open_indexer(tmp_path, "model-a", feed)
    runner = JobRunner(old)
    runner.start("rebuild", "indexer")
    await runner.wait()
    assert await old.store.count() == 25
    await old.store.close()

    new = await open_indexer(tmp_path, "model-b", feed)
    assert await new.store.count() == 0
    runner = JobRunner(new)
    runner.start("reembed", "indexer")
    status = await runner.wait()
    assert (status.state, status.done, status.total, status.failed) == ("finished", 25, 25, 0)
    assert await new.store.count() == 25
    # A second re-embed finds nothing stale and embeds nothing.
    feed.indexed.clear()
    runner.start("reembed", "indexer")
    await runner.wait()
    assert feed.indexed == []

    old_name, new_name = "memvault_model-a_8", "memvault_model-b_8"
    assert await new.store.collections() == [old_name, new_name]
    with pytest.raises(Conflict, match="active collection"):
        await new.store.drop_other_collection(new_name)
    with pytest.raises(InvalidArgument):
        await new.store.drop_other_collection("../etc")
    with pytest.raises(NotFound):
        await new.store.drop_other_collection("memvault_model-c_8")
    await new.store.drop_other_collection(old_name)
    assert await new.store.collections() == [new_name]
    assert not (tmp_path / old_name).exists()
    assert await new.store.count() == 25
    await new.store.close()
