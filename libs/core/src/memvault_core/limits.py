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
    }
