"""The index feed as the indexer calls it (only the indexer may: rpc/index_feed.py checks)."""

from __future__ import annotations

from collections.abc import Sequence

from memvault_vault.index_feed.progress import IndexProgress
from memvault_vault.index_feed.records import Document, IndexReport
from memvault_vault.index_feed.store import IndexFeedStore


class IndexFeedService:
    def __init__(self, store: IndexFeedStore, progress: IndexProgress | None = None) -> None:
        self._store = store
        self._progress = progress or IndexProgress()

    async def documents(self, ids: Sequence[str]) -> list[Document]:
        """These memories as the indexer embeds them (any vault: the indexer serves them all)."""
        return await self._store.documents(ids)

    async def documents_after(self, after_id: str | None, limit: int) -> list[Document]:
        """Every memory after `after_id` in id order, `limit` at a time (for a full re-index)."""
        return await self._store.documents_after(after_id, limit)

    async def count_documents(self) -> int:
        """How many memories a full re-index goes through (its progress total)."""
        return await self._store.count_documents()

    async def report_indexed(self, reports: Sequence[IndexReport]) -> None:
        """Record what the indexer indexed or failed to; a memory indexed at its current text is no longer pending."""
        await self._store.report_indexed(reports)
        self._progress.reported()  # an import waiting for the index to catch up looks again
