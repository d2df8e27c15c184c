"""Turning pasted markdown or plain text into memories for an import.

The text is cut into sections at separator lines (`---`, `***` or `___`). Within a section
each bullet or numbered item is one memory (lines indented under it belong to it), and every
other run of lines up to a blank line is one memory (a paragraph). Headings only organise the
text and are not memories; checkboxes and bullet marks are dropped.
"""

from __future__ import annotations

import re

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded

_SEPARATOR = re.compile(r"^\s{0,3}(?:-{3,}|\*{3,}|_{3,})\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_BULLET = re.compile(r"^(?P<indent>\s*)(?:[-*+•‣▪◦]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?(?P<text>.*)$")


def split_text(text: str) -> list[str]:
    """The memories in `text`, in order."""
    if len(text) > limits.MAX_IMPORT_TEXT_CHARS:
        raise LimitExceeded(
            f"text is {len(text):,} characters; the limit is {limits.MAX_IMPORT_TEXT_CHARS:,} per import "
            f"(max_import_text_chars). Split it into {-(-len(text) // limits.MAX_IMPORT_TEXT_CHARS)} imports",
            field="text",
            limit=limits.MAX_IMPORT_TEXT_CHARS,
        )
    items: list[str] = []
    current: list[str] = []
    in_bullet = False

    def flush() -> None:
        nonlocal in_bullet
        joined = " ".join(part.strip() for part in current if part.strip())
        if joined:
            items.append(joined)
        current.clear()
        in_bullet = False

    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip() or _SEPARATOR.match(line):
            flush()
            continue
        if _HEADING.match(line):
            flush()
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            current.append(bullet.group("text"))
            in_bullet = True
            continue
        if in_bullet and not line[:1].isspace():
            # A line flush with the margin after a bullet starts a new paragraph.
            flush()
        current.append(line)
    flush()
    if not items:
        raise InvalidArgument(
            "text holds no memories; write one per paragraph, bullet line or section between '---' lines",
            field="text",
        )
    if len(items) > limits.MAX_BULK_ITEMS:
        raise LimitExceeded(
            f"text splits into {len(items)} memories; the limit is {limits.MAX_BULK_ITEMS} per import "
            f"(max_bulk_items). Send it in {-(-len(items) // limits.MAX_BULK_ITEMS)} parts",
            field="text",
            limit=limits.MAX_BULK_ITEMS,
        )
    return items
