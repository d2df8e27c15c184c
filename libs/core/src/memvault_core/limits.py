"""Every size limit in memvault, in one place.

Each limit is checked before anything is written; going over one is a
`LimitExceeded` error that names the limit and a size that would fit. The
capabilities call reports these same numbers to agents.
"""

from __future__ import annotations

from typing import Final

MAX_CONTENT_CHARS: Final = 4_000
"""Characters in one memory. Longer text belongs in several memories."""

MAX_QUERY_CHARS: Final = 1_000
"""Characters in one recall query."""

MAX_BULK_ITEMS: Final = 500
"""Items in one bulk_remember call."""

MAX_RECALL_RESULTS: Final = 50
"""Results in one page of recall."""

MAX_LIST_RESULTS: Final = 100
"""Memories in one page of list_memories."""

MAX_TAGS: Final = 20
"""Tags on one memory."""

MAX_TAG_CHARS: Final = 64
"""Characters in one tag."""

MAX_SOURCE_CHARS: Final = 200
"""Characters in a memory's source."""

MAX_KEY_CHARS: Final = 200
"""Characters in a memory's key or scope."""

MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024
"""Bytes in one HTTP request body at the gateway, and in one gRPC message."""

MAX_RESULT_BYTES: Final = 64 * 1024
"""Bytes of memory text in one page of recall or list results; the page ends early rather than grow past it."""

MAX_DEPENDS_ON: Final = 20
"""Memories one memory can depend on."""

MAX_REASON_CHARS: Final = 500
"""Characters in the reason given for rejecting or invalidating a memory."""

MAX_IMPORT_TEXT_CHARS: Final = 1_000_000
"""Characters of markdown or plain text in one import; it is split into at most max_bulk_items memories."""

MAX_GUIDE_CHARS: Final = 20_000
"""Characters in the operating guide."""

MAX_AUDIT_RESULTS: Final = 200
"""Entries or findings in one page of an audit listing."""

MAX_HISTORY_ENTRIES: Final = 100
"""Versions of one memory that explain_memory shows (the newest)."""

MAX_RETENTION_DAYS: Final = 36_500
"""Longest retention period a vault setting accepts."""

MAX_INT64: Final = 2**63 - 1
"""Largest version, audit entry id or other 64-bit number a call accepts (int64 on the wire)."""

MAX_INT32: Final = 2**31 - 1
"""Largest revision, message position or other 32-bit number a call accepts (int32 on the wire)."""

MIN_CONFIDENCE: Final = 0.001
"""Smallest confidence a memory can state (1 is the largest; 0 or none means not stated). Answers show
confidence to three decimals, and the database keeps it as a 4-byte float."""

MAX_METADATA_BYTES: Final = 8 * 1024
"""Largest free-form JSON metadata a memory carries (UTF-8 bytes of its compact JSON)."""

MAX_SOURCE_BYTES: Final = 5 * 1024 * 1024
"""Largest tracked source (file or URL body) the vault reads."""
MAX_SOURCE_LOCATION_CHARS: Final = 2000
MAX_SOURCE_VALUE_CHARS: Final = 4000
"""Largest JSON value (compact JSON) a tracked source may hold at its selector."""
MIN_SOURCE_INTERVAL_SECONDS: Final = 10
MAX_SOURCE_INTERVAL_SECONDS: Final = 30 * 24 * 3600
DEFAULT_SOURCE_INTERVAL_SECONDS: Final = 300
MAX_SOURCES_LISTED: Final = 200
"""Most sources or changes one status or changes answer lists."""

DEFAULT_RECALL_RESULTS: Final = 10
DEFAULT_LIST_RESULTS: Final = 20


def as_dict() -> dict[str, int]:
    """The limits by name, as the capabilities call reports them."""
    return {
        "max_content_chars": MAX_CONTENT_CHARS,
        "max_query_chars": MAX_QUERY_CHARS,
        "max_bulk_items": MAX_BULK_ITEMS,
        "max_recall_results": MAX_RECALL_RESULTS,
        "max_list_results": MAX_LIST_RESULTS,
        "max_tags": MAX_TAGS,
        "max_tag_chars": MAX_TAG_CHARS,
        "max_source_chars": MAX_SOURCE_CHARS,
        "max_key_chars": MAX_KEY_CHARS,
        "max_request_bytes": MAX_REQUEST_BYTES,
        "max_result_bytes": MAX_RESULT_BYTES,
        "max_depends_on": MAX_DEPENDS_ON,
        "max_reason_chars": MAX_REASON_CHARS,
        "max_import_text_chars": MAX_IMPORT_TEXT_CHARS,
        "max_guide_chars": MAX_GUIDE_CHARS,
        "max_audit_results": MAX_AUDIT_RESULTS,
        "max_metadata_bytes": MAX_METADATA_BYTES,
        "max_source_bytes": MAX_SOURCE_BYTES,
    }
