"""What the capabilities answer reports beside the memory limits (`memvault_core.limits`): the
archive's limits, each the very constant the archive checks, and which features this vault has."""

from __future__ import annotations

from typing import Final

from memvault_vault.domain import archive, archive_writes, context_pack

CAPABILITIES_VERSION: Final = "2026-12-02"
"""Changes whenever a limit or a feature is added, removed or renamed."""


def archive_limits() -> dict[str, int]:
    return {
        "max_write_request_bytes": archive_writes.MAX_WRITE_REQUEST_BYTES,
        "max_receipt_bytes": archive_writes.MAX_RECEIPT_BYTES,
        "max_messages_per_write": archive.MAX_MESSAGES_PER_WRITE,
        "max_message_chars": archive.MAX_MESSAGE_CHARS,
        "max_keyed_messages": archive_writes.MAX_KEYED_MESSAGES,
        "max_message_key_chars": archive_writes.MAX_MESSAGE_KEY_CHARS,
        "max_copy_conversations": archive_writes.MAX_COPY_CONVERSATIONS,
        "max_batch_writes": archive_writes.MAX_BATCH_WRITES,
        "empty_step_conversations": archive_writes.EMPTY_STEP_CONVERSATIONS,
        "max_conversation_tags": archive.MAX_TAGS,
        "max_title_chars": archive.MAX_TITLE_CHARS,
        "max_idempotency_key_chars": archive.MAX_IDEMPOTENCY_KEY_CHARS,
        "max_archive_page_messages": archive.MAX_PAGE_MESSAGES,
        "max_archive_search_results": archive.MAX_SEARCH_RESULTS,
        "max_import_bytes": archive.MAX_IMPORT_BYTES,
        "max_import_part_bytes": archive.MAX_IMPORT_PART_BYTES,
        "import_checkpoint_conversations": archive.IMPORT_CHECKPOINT_CONVERSATIONS,
        "max_pack_conversations": context_pack.MAX_PACK_CONVERSATIONS,
        "max_pack_searches": context_pack.MAX_PACK_SEARCHES,
        "max_pack_search_results": context_pack.MAX_PACK_SEARCH_RESULTS,
        "max_pack_tail": context_pack.MAX_PACK_TAIL,
        "default_pack_bytes": context_pack.DEFAULT_PACK_BYTES,
        "min_pack_bytes": context_pack.MIN_PACK_BYTES,
        "max_pack_bytes": context_pack.MAX_PACK_BYTES,
        "default_pack_tokens": context_pack.DEFAULT_PACK_TOKENS,
        "min_pack_tokens": context_pack.MIN_PACK_TOKENS,
        "max_pack_tokens": context_pack.MAX_PACK_TOKENS,
    }


def features() -> dict[str, bool]:
    return {
        "conversation_archive": True,
        "message_keys": True,
        "in_place_edits": True,
        "atomic_multi_conversation_commit": True,
        "cross_vault_copy": True,
        "resumable_archive_empty": True,
        "context_packs": True,
        "write_receipts_with_readback": True,
    }
