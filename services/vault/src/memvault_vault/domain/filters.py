"""The narrowing filters list and recall share beyond status, type and tag: key, scope, source
(a prefix), client and when a memory was created. Checked here, before any SQL runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memvault_core import limits
from memvault_core.errors import InvalidArgument

MAX_CLIENT_CHARS = 200


@dataclass(frozen=True)
class MemoryFilter:
    """None (or empty) leaves a filter out. `source` matches as a prefix (`import:` finds every
    import); `created_to` is exclusive."""

    key: str | None = None
    scope: str | None = None
    source: str | None = None
    client: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None

    def fingerprint(self) -> list[str]:
        """What a cursor must remember: a page asked for with other filters is refused."""
        return [
            self.key or "",
            self.scope or "",
            self.source or "",
            self.client or "",
            self.created_from.isoformat() if self.created_from else "",
            self.created_to.isoformat() if self.created_to else "",
        ]

    def sql_args(self) -> tuple[str | None, str | None, str | None, str | None, datetime | None, datetime | None]:
        """The six parameters of `sql(first)`, in order."""
        return (self.key, self.scope, self.source, self.client, self.created_from, self.created_to)


def sql(first: int) -> str:
    """The filter's SQL over `m` (a memory row), reading parameters $first to $first+5 (`sql_args`)."""
    k, s, src, c, f, t = (f"${first + i}" for i in range(6))
    return f"""
          AND ({k}::text IS NULL OR m.key = {k}::text)
          AND ({s}::text IS NULL OR m.scope = {s}::text)
          AND ({src}::text IS NULL OR starts_with(m.source, {src}::text))
          AND ({c}::text IS NULL OR m.client = {c}::text)
          AND ({f}::timestamptz IS NULL OR m.created_at >= {f}::timestamptz)
          AND ({t}::timestamptz IS NULL OR m.created_at < {t}::timestamptz)
    """


def memory_filter(
    *,
    key: str = "",
    scope: str = "",
    source: str = "",
    client: str = "",
    created_from: datetime | None = None,
    created_to: datetime | None = None,
) -> MemoryFilter:
    """A filter from what a caller sent (empty: not filtered), or InvalidArgument naming the field."""
    for field, value, most in (
        ("key", key, limits.MAX_KEY_CHARS),
        ("scope", scope, limits.MAX_KEY_CHARS),
        ("source", source, limits.MAX_SOURCE_CHARS),
        ("client", client, MAX_CLIENT_CHARS),
    ):
        if len(value) > most:
            raise InvalidArgument(f"{field} is longer than {most} characters", field=field)
    if created_from and created_to and created_from >= created_to:
        raise InvalidArgument(
            "created_from must be before created_to (created_to is exclusive: the first moment left out)",
            field="created_to",
        )
    return MemoryFilter(
        key=key.strip() or None,
        scope=scope.strip() or None,
        source=source.strip() or None,
        client=client.strip() or None,
        created_from=created_from,
        created_to=created_to,
    )
