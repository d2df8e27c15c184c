"""The vault's services, built once over one database and (optionally) the indexer, for rpc/ to call."""

from __future__ import annotations

import os
from dataclasses import dataclass

from memvault_vault.accounts.service import AccountService
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.reading_store import ArchiveReadStore
from memvault_vault.archive.reads import ArchiveReads
from memvault_vault.archive.search_snapshots import SearchSnapshots
from memvault_vault.archive.service import ArchiveService
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.audit.service import AuditService
from memvault_vault.audit.store import AuditStore
from memvault_vault.backup.service import BackupService
from memvault_vault.backup.store import BackupStore
from memvault_vault.database import Database
from memvault_vault.domain import duplicates
from memvault_vault.domain.signed_cursor import CursorSigner
from memvault_vault.guide.service import GuideService
from memvault_vault.guide.store import GuideStore
from memvault_vault.imports.service import ImportService
from memvault_vault.imports.store import ImportStore
from memvault_vault.index_admin.service import IndexAdminService
from memvault_vault.index_admin.store import IndexAdminStore
from memvault_vault.index_client import IndexClient
from memvault_vault.index_feed.progress import IndexProgress
from memvault_vault.index_feed.service import IndexFeedService
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.memories.service import MemoryService
from memvault_vault.memories.store import MemoryStore
from memvault_vault.memories.writes import Writer
from memvault_vault.recall.service import RecallService
from memvault_vault.recall.store import RecallStore
from memvault_vault.retention.records import RetentionPlan
from memvault_vault.retention.service import RetentionService
from memvault_vault.retention.store import RetentionStore
from memvault_vault.review.service import ReviewService
from memvault_vault.review.store import ReviewStore
from memvault_vault.sources.reader import SourceReader, SourceRules
from memvault_vault.sources.service import SourceService
from memvault_vault.sources.store import SourceStore


@dataclass(frozen=True)
class VaultServices:
    """One service per concept; rpc/ translates the wire and calls these, never a store."""

    accounts: AccountService
    memories: MemoryService
    imports: ImportService
    recall: RecallService
    review: ReviewService
    guide: GuideService
    audit: AuditService
    index_feed: IndexFeedService
    archive: ArchiveService
    sources: SourceService
    backup: BackupService
    retention: RetentionService
    index_admin: IndexAdminService

    @classmethod
    def build(
        cls,
        database: Database,
        index: IndexClient | None = None,
        *,
        index_catch_up_seconds: float = duplicates.INDEX_CATCH_UP_SECONDS,
        source_rules: SourceRules | None = None,
        retention_plan: RetentionPlan | None = None,
        cursor_secret: bytes | None = None,
    ) -> VaultServices:
        """Without an indexer, recall is keyword-only and the duplicate check exact-only. Without source
        rules, no file or URL may be tracked."""
        accounts = AccountService(AccountStore(database))
        memories = MemoryStore(database)
        feed = IndexFeedStore(database)
        audit = AuditStore(database)
        progress = IndexProgress()
        writer = Writer(
            memories, feed, audit, index, index_catch_up_seconds=index_catch_up_seconds, index_progress=progress
        )
        memory_service = MemoryService(memories, writer, accounts)
        # Without a configured secret (tests), archive cursors hold for this process only.
        cursors = CursorSigner(cursor_secret or os.urandom(32))
        return cls(
            accounts=accounts,
            memories=memory_service,
            imports=ImportService(ImportStore(database), writer, accounts),
            recall=RecallService(RecallStore(database), feed, accounts, index),
            review=ReviewService(ReviewStore(database), memories, accounts),
            guide=GuideService(GuideStore(database), accounts),
            audit=AuditService(audit, accounts),
            archive=ArchiveService(
                ArchiveStore(database),
                accounts,
                cursors=cursors,
                reads=ArchiveReads(ArchiveReadStore(database), accounts, index, cursors, SearchSnapshots(database)),
            ),
            index_feed=IndexFeedService(feed, progress),
            backup=BackupService(BackupStore(database), accounts, index),
            retention=RetentionService(RetentionStore(database), accounts, retention_plan),
            index_admin=IndexAdminService(IndexAdminStore(database), accounts, index),
            sources=SourceService(
                SourceStore(database),
                memory_service,
                memories,
                accounts,
                SourceReader(source_rules or SourceRules.none()),
            ),
        )
