"""What the capabilities answer reports beside the memory limits (`memvault_core.limits`): the
archive's limits, each the very constant the archive checks, and which features this vault has."""

from __future__ import annotations

from types import ModuleType
from typing import Final

from memvault_core import limits
from memvault_vault.domain import archive, archive_reads, archive_writes, context_pack

CAPABILITIES_VERSION: Final = "2026-12-06"
"""Changes whenever a limit or a feature is added, removed or renamed."""


REPORTED: Final[dict[str, tuple[ModuleType, str]]] = {
    "max_write_request_bytes": (archive_writes, "MAX_WRITE_REQUEST_BYTES"),
    "max_receipt_bytes": (archive_writes, "MAX_RECEIPT_BYTES"),
    "receipt_readback_bytes": (archive_writes, "READBACK_BYTES"),
    "receipt_readback_field_bytes": (archive_writes, "READBACK_FIELD_BYTES"),
    "max_messages_per_write": (archive, "MAX_MESSAGES_PER_WRITE"),
    "max_message_chars": (archive, "MAX_MESSAGE_CHARS"),
    "max_keyed_messages": (archive_writes, "MAX_KEYED_MESSAGES"),
    "max_message_key_chars": (archive_writes, "MAX_MESSAGE_KEY_CHARS"),
    "max_copy_conversations": (archive_writes, "MAX_COPY_CONVERSATIONS"),
    "max_batch_writes": (archive_writes, "MAX_BATCH_WRITES"),
    "empty_step_conversations": (archive_writes, "EMPTY_STEP_CONVERSATIONS"),
    "empty_step_imports": (archive_writes, "EMPTY_STEP_IMPORTS"),
    "max_conversation_tags": (archive, "MAX_TAGS"),
    "max_conversation_tag_chars": (archive, "MAX_TAG_CHARS"),
    "max_title_chars": (archive, "MAX_TITLE_CHARS"),
    "max_idempotency_key_chars": (archive, "MAX_IDEMPOTENCY_KEY_CHARS"),
    "max_archive_list_results": (archive, "MAX_LIST_RESULTS"),
    "default_archive_list_results": (archive, "DEFAULT_LIST_RESULTS"),
    "max_archive_page_messages": (archive, "MAX_PAGE_MESSAGES"),
    "default_archive_page_messages": (archive, "DEFAULT_PAGE_MESSAGES"),
    "max_archive_search_results": (archive, "MAX_SEARCH_RESULTS"),
    "default_archive_search_results": (archive, "DEFAULT_SEARCH_RESULTS"),
    "max_archive_query_chars": (archive, "MAX_QUERY_CHARS"),
    "max_import_bytes": (archive, "MAX_IMPORT_BYTES"),
    "max_import_part_bytes": (archive, "MAX_IMPORT_PART_BYTES"),
    "import_checkpoint_conversations": (archive, "IMPORT_CHECKPOINT_CONVERSATIONS"),
    "default_read_budget_bytes": (archive_reads, "DEFAULT_BUDGET_BYTES"),
    "min_read_budget_bytes": (archive_reads, "MIN_BUDGET_BYTES"),
    "max_read_budget_bytes": (archive_reads, "MAX_BUDGET_BYTES"),
    "read_envelope_bytes": (archive_reads, "ENVELOPE_BYTES"),
    "max_context_messages": (archive_reads, "MAX_CONTEXT_MESSAGES"),
    "default_context_messages": (archive_reads, "DEFAULT_CONTEXT_MESSAGES"),
    "max_batch_conversations": (archive_reads, "MAX_BATCH_CONVERSATIONS"),
    "max_resolve_titles": (archive_reads, "MAX_RESOLVE_TITLES"),
    "max_resolve_per_title": (archive_reads, "RESOLVE_PER_TITLE"),
    "batch_fetch_messages": (archive_reads, "BATCH_FETCH"),
    "max_search_depth": (archive_reads, "SEARCH_CANDIDATES"),
    "max_message_lookups": (archive_reads, "MAX_MESSAGE_LOOKUPS"),
    "max_node_id_chars": (archive_reads, "MAX_NODE_ID_CHARS"),
    "max_messages_answer_bytes": (archive_reads, "MAX_MESSAGES_ANSWER_BYTES"),
    "message_envelope_bytes": (archive_reads, "MESSAGE_ENVELOPE_BYTES"),
    "max_pack_conversations": (context_pack, "MAX_PACK_CONVERSATIONS"),
    "max_pack_searches": (context_pack, "MAX_PACK_SEARCHES"),
    "max_pack_search_results": (context_pack, "MAX_PACK_SEARCH_RESULTS"),
    "default_pack_search_results": (context_pack, "DEFAULT_PACK_SEARCH_RESULTS"),
    "max_pack_tail": (context_pack, "MAX_PACK_TAIL"),
    "default_pack_bytes": (context_pack, "DEFAULT_PACK_BYTES"),
    "min_pack_bytes": (context_pack, "MIN_PACK_BYTES"),
    "max_pack_bytes": (context_pack, "MAX_PACK_BYTES"),
    "default_pack_tokens": (context_pack, "DEFAULT_PACK_TOKENS"),
    "min_pack_tokens": (context_pack, "MIN_PACK_TOKENS"),
    "max_pack_tokens": (context_pack, "MAX_PACK_TOKENS"),
    "pack_bytes_per_token": (context_pack, "BYTES_PER_TOKEN"),
    "pack_message_tokens": (context_pack, "MESSAGE_TOKENS"),
    "pack_message_field_bytes": (context_pack, "MESSAGE_FIELD_BYTES"),
    "pack_envelope_bytes": (context_pack, "PACK_ENVELOPE_BYTES"),
}
"""Every limit of the archive's rule modules by the name the capabilities answer gives it: the module and
the constant's name, read when asked, so the answer is always the very number the archive checks (a test
fails when one of these modules has an upper-case int constant this table leaves out)."""

LIMIT_MODULES: Final = (archive, archive_reads, archive_writes, context_pack)


def archive_limits() -> dict[str, int]:
    """The archive's limits by name, as the capabilities call reports them."""
    return {name: int(getattr(module, constant)) for name, (module, constant) in REPORTED.items()}


def more_limits() -> dict[str, int]:
    """What the capabilities answer's `more_limits` holds: the archive's limits, and the memory limits the
    `Limits` message has no field for (each under its constant's name in lower case)."""
    reported = set(limits.as_dict())
    core = {
        name.lower(): value
        for name, value in vars(limits).items()
        if name.isupper() and type(value) is int and name.lower() not in reported
    }
    return core | archive_limits()


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
