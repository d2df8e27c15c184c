"""A person's display name as text agents read: the /connect page and the default guide."""

from __future__ import annotations

MAX_NAME_CHARS = 100


def owner_label(display_name: str, fallback: str) -> str:
    """One line of printable text without markdown markup, or `fallback` when nothing is left.

    Names also come from sign-in providers and agents read these texts as instructions, so a
    name cannot add lines, headings or code of its own.
    """
    name = "".join(c if c.isprintable() else " " for c in display_name)
    name = name.replace("`", "'").replace("*", "").replace("#", "")
    return " ".join(name.split())[:MAX_NAME_CHARS].strip() or fallback
