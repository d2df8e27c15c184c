"""The one error hierarchy every service raises and every edge translates.

Messages are written for the caller, usually an agent: they say what was wrong
and what to do instead. They never contain memory text or secrets.
"""

from __future__ import annotations


class MemvaultError(Exception):
    """Base of every error memvault raises on purpose."""

    kind = "internal"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(MemvaultError):
    kind = "not_found"


class InvalidArgument(MemvaultError):
    kind = "invalid_argument"


class Conflict(MemvaultError):
    kind = "conflict"


class PermissionDenied(MemvaultError):
    kind = "permission_denied"


class Unauthenticated(MemvaultError):
    kind = "unauthenticated"


class Unavailable(MemvaultError):
    kind = "unavailable"


class LimitExceeded(MemvaultError):
    """A size limit was exceeded; the message names the limit and a size that fits."""

    kind = "limit_exceeded"

    def __init__(self, message: str, *, field: str | None = None, limit: int | None = None) -> None:
        super().__init__(message, field=field)
        self.limit = limit


ERROR_KINDS: dict[str, type[MemvaultError]] = {
    cls.kind: cls
    for cls in (
        MemvaultError,
        NotFound,
        InvalidArgument,
        Conflict,
        PermissionDenied,
        Unauthenticated,
        Unavailable,
        LimitExceeded,
    )
}
