"""What an agent should be told about a memory before relying on it: warnings, audit findings, explanations."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from memvault_vault.domain.memory import Memory, MemoryWarning, RecallHit, Status

AUDIT_KINDS = ("expired", "conflict", "may_conflict", "past_review", "flagged")
REPLACED_RECENTLY = timedelta(days=30)
"""How long recall warns that a memory replaced others (an agent may still hold what they said)."""

_KEY_FIELDS = (
    "content", "type", "key", "scope", "tags", "source", "trust", "confidence", "status", "valid_from", "valid_to",
    "review_after", "expires_at", "depends_on", "supersedes", "superseded_by", "similar_to", "pinned",
    "status_reason", "flagged_reason", "reviewed_at",
)  # fmt: skip


def _day(value: datetime | None) -> str:
    return value.date().isoformat() if value else "?"


def _key(memory: Memory) -> str:
    return f"key '{memory.key}'" + (f" in scope '{memory.scope}'" if memory.scope else "")


def replaced_warning(memory_id: str, replaced: Sequence[tuple[str, datetime]]) -> MemoryWarning:
    """A recall hit superseded these memories (id, when) within REPLACED_RECENTLY."""
    old = ", ".join(i for i, _ in replaced)
    return MemoryWarning(
        "replaces",
        memory_id,
        tuple(i for i, _ in replaced),
        f"{memory_id} replaced {old} on {_day(replaced[-1][1])}: what {old} said is no longer true, so stop relying "
        "on it if you read it before",
    )


def warnings_for(hit: RecallHit, now: datetime, as_of: datetime | None) -> list[MemoryWarning]:
    """The warnings one recall hit carries."""
    memory = hit.memory
    found: list[MemoryWarning] = []

    def warn(kind: str, message: str, related: Sequence[str] = ()) -> None:
        found.append(MemoryWarning(kind, memory.id, tuple(related), message))

    if hit.conflicts_with:
        warn(
            "conflict",
            f"{memory.id} and {', '.join(hit.conflicts_with)} are all active with {_key(memory)}: they conflict. "
            "Ask the owner which is current, then supersede the others",
            hit.conflicts_with,
        )
    if hit.may_conflict_with:
        warn(
            "may_conflict",
            f"{memory.id} is similar to active {', '.join(hit.may_conflict_with)} and may contradict it; check both "
            "before relying on either, and supersede the one that is out of date",
            hit.may_conflict_with,
        )
    if memory.status is Status.SUPERSEDED:
        since = f" on {_day(memory.valid_to)}" if memory.valid_to else ""
        when = f"valid at {as_of.isoformat()}, but " if as_of else ""
        warn(
            "superseded",
            f"{memory.id} was {when}superseded{since} by {memory.superseded_by}; use that one for what is true now",
            [memory.superseded_by] if memory.superseded_by else [],
        )
    if memory.status is Status.INVALIDATED:
        reason = f" ({memory.status_reason})" if memory.status_reason else ""
        warn("invalidated", f"{memory.id} was invalidated on {_day(memory.valid_to)}{reason}; it is no longer true")
    if memory.status in (Status.ACTIVE, Status.PROPOSED) and memory.review_after and memory.review_after <= now:
        warn(
            "past_review",
            f"{memory.id} was due for review on {_day(memory.review_after)}; it may be stale, so confirm it with the "
            "owner before relying on it",
        )
    if memory.expired(now):
        warn("expired", f"{memory.id} expired on {_day(memory.expires_at)}; it is returned only because you asked")
    if memory.flagged_reason and memory.status in (Status.ACTIVE, Status.PROPOSED):
        warn(
            "dependency_changed" if memory.depends_on else "flagged",
            f"{memory.id} needs review: {memory.flagged_reason}",
        )
    return found


def finding_message(memory: Memory, kinds: Sequence[str], related: Sequence[str], now: datetime) -> str:
    parts: list[str] = []
    for kind in kinds:
        if kind == "expired":
            parts.append(f"expired on {_day(memory.expires_at)}: forget it or write what holds now")
        elif kind == "conflict":
            parts.append(f"active with {_key(memory)} like {', '.join(related)}: supersede the out-of-date one")
        elif kind == "may_conflict":
            parts.append("similar to another active memory and may contradict it: supersede or invalidate one")
        elif kind == "past_review":
            days = (now - memory.review_after).days if memory.review_after else 0
            parts.append(f"review was due {days} days ago: confirm it is still true (or invalidate it)")
        elif kind == "flagged":
            parts.append(f"flagged: {memory.flagged_reason}")
    return "; ".join(parts)


def changed_fields(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """The fields of a memory that differ between two history snapshots."""
    if before is None:
        return []
    return [name for name in _KEY_FIELDS if before.get(name) != after.get(name)]


def notes(memory: Memory, now: datetime) -> list[str]:
    """Plain words on whether recall returns this memory now, and what is pending on it."""
    said: list[str] = []
    if memory.status is Status.ACTIVE:
        said.append("active: recall returns it")
    elif memory.status is Status.PROPOSED:
        said.append("proposed: recall returns it, marked as not yet reviewed by the owner")
    elif memory.status is Status.SUPERSEDED:
        said.append(
            f"superseded by {memory.superseded_by} on {_day(memory.valid_to)}: recall returns it only when asked for "
            "superseded memories or for a time before then (as_of)"
        )
    elif memory.status is Status.REJECTED:
        said.append("rejected by the owner: never recalled; the same text is not stored again")
    else:
        said.append(
            f"invalidated on {_day(memory.valid_to)}: recall returns it only when asked for invalidated memories or "
            "for a time before then (as_of)"
        )
    if memory.status_reason:
        said.append(f"reason given: {memory.status_reason}")
    if memory.expires_at:
        said.append(
            f"expired on {_day(memory.expires_at)}: excluded from recall unless include_expired"
            if memory.expired(now)
            else f"expires on {_day(memory.expires_at)}"
        )
    if memory.review_after:
        said.append(
            f"review was due on {_day(memory.review_after)}"
            if memory.review_after <= now
            else f"next review on {_day(memory.review_after)}"
        )
    else:
        said.append("no review date")
    if memory.flagged_reason:
        said.append(f"needs review: {memory.flagged_reason}")
    if memory.batch_id:
        said.append(f"imported in batch {memory.batch_id} (undoing that import removes it)")
    return said
