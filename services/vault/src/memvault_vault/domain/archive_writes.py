"""Rules of the archive's bulk and keyed writes with no I/O: message keys, the limits of upserts,
edits, copies, batch commits and emptying, the size of a whole write request, and the bounded
readback a receipt carries. Every limit here is reported by the capabilities answer as it is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from memvault_core.errors import InvalidArgument, LimitExceeded

MAX_WRITE_REQUEST_BYTES: Final = 1024 * 1024
"""Bytes of one archive write request (its protobuf encoding, measured before anything is written)."""

MAX_KEYED_MESSAGES: Final = 100
"""Messages in one upsert by key, and edits in one in-place edit."""

MAX_MESSAGE_KEY_CHARS: Final = 128

MAX_COPY_CONVERSATIONS: Final = 20
"""Conversations in one copy to another vault."""

MAX_BATCH_WRITES: Final = 20
"""Conversations written by one atomic batch commit."""

EMPTY_STEP_CONVERSATIONS: Final = 200
"""Conversations one step of emptying a vault's archive deletes; call again until `done`."""

EMPTY_STEP_IMPORTS: Final = 5
"""Uploaded exports (with their raw bytes) one emptying step deletes once no conversation is left."""

MAX_RECEIPT_BYTES: Final = 48 * 1024
"""Bytes of one write answer (receipts with readback); what does not fit is named in `omitted`."""

READBACK_BYTES: Final = 40 * 1024
"""Of MAX_RECEIPT_BYTES, what readback messages may take; the rest is room for the receipts themselves."""

REQUEST_TOO_LARGE: Final = "REQUEST_TOO_LARGE"

_MESSAGE_KEY = re.compile(r"^[a-z0-9](?:[a-z0-9._/-]{0,126}[a-z0-9])?$")


def validate_message_key(key: str, index: int) -> str:
    if not _MESSAGE_KEY.match(key):
        raise InvalidArgument(
            f"messages[{index}].key must be 1-{MAX_MESSAGE_KEY_CHARS} of a-z, 0-9, '.', '_', '/', '-' "
            "starting and ending with a letter or digit",
            field="messages.key",
        )
    return key


def check_count(items: int, most: int, field: str, what: str) -> None:
    if items < 1:
        raise InvalidArgument(f"{field} must hold at least one {what}", field=field)
    if items > most:
        raise LimitExceeded(
            f"at most {most} {what}s per call; {items} given. Send {most} now and the rest after", field=field
        )


def check_request_size(size: int, items: int, field: str) -> None:
    """Refuse a write whose request is over MAX_WRITE_REQUEST_BYTES, before anything is written, with a
    conservative number of items that would fit (90 % of the proportional share, at least 1)."""
    if size <= MAX_WRITE_REQUEST_BYTES:
        return
    suggested = max(1, int(items * MAX_WRITE_REQUEST_BYTES / size * 0.9)) if items else 1
    raise LimitExceeded(
        f"{REQUEST_TOO_LARGE}: the write is {size} bytes, over max_write_request_bytes "
        f"({MAX_WRITE_REQUEST_BYTES}); nothing was written. suggested_max_items={suggested}: send at most "
        f"{suggested} of the {items} {field} per call",
        field=field,
        limit=MAX_WRITE_REQUEST_BYTES,
    )


READBACK_FIELD_BYTES: Final = 300
"""What a readback message's fields other than its text take in an answer, at most."""


def readback_bytes(text_bytes: int) -> int:
    """Bytes a readback message with this much text takes in an answer (the edge fits exactly)."""
    return text_bytes + READBACK_FIELD_BYTES


@dataclass(frozen=True)
class Shed:
    """Readback left out of a receipt: read it with a conversation read pinned to the revision."""

    conversation_id: str
    revision: int
    after_position: int
    count: int


def fit_readback(sizes: list[list[int]], budget: int = READBACK_BYTES) -> list[int]:
    """How many leading readback messages of each receipt fit a shared budget, in receipt order;
    a receipt whose next message does not fit keeps none after it, so each readback is a prefix."""
    kept: list[int] = []
    used = 0
    full = False
    for receipt in sizes:
        count = 0
        for size in receipt:
            if full or used + size > budget:
                full = True
                break
            used += size
            count += 1
        kept.append(count)
    return kept
