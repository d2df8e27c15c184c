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

    async def message_documents(self, ids: Sequence[str]) -> list[Document]:
        """These archived messages as the indexer embeds them (deleted ones and empty texts are absent)."""
        return await self._store.message_documents(ids)

    async def message_documents_after(self, after_id: str | None, limit: int) -> list[Document]:
        """Every archived message with text after `after_id` in id order (for a full re-index)."""
        return await self._store.message_documents_after(after_id, limit)

    async def count_messages(self) -> int:
        return await self._store.count_messages()

    async def report_indexed(self, reports: Sequence[IndexReport]) -> None:
        """Record what the indexer indexed or failed to; a memory indexed at its current text is no longer pending."""
        memories = [r for r in reports if r.kind != "message"]
        messages = [r for r in reports if r.kind == "message"]
        if memories:
            await self._store.report_indexed(memories)
        if messages:
            await self._store.report_messages(messages)
        self._progress.reported()  # an import waiting for the index to catch up looks again
