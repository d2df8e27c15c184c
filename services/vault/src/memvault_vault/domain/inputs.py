"""What callers send about memories, checked before anything is written: drafts against every limit,
secrets in any free text, bulk sizes, queries, page sizes, memory ids, the approval mode, reasons and
metadata. Each error names the field and says what would work."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_vault.domain.memory import ApprovalMode, Draft
from memvault_vault.domain.secrets import SecretFinding, find_secret


def _prefix(index: int | None) -> str:
    return "" if index is None else f"items[{index}]."


def validate_draft(draft: Draft, index: int | None = None) -> Draft:
    """Check a draft against every rule and limit; return it tidied (trimmed text, lower-case tags).

    `index` names the item of a bulk call in error messages.
    """
    at = _prefix(index)
    content = draft.content.strip()
    if not content:
        raise InvalidArgument(f"{at}content is empty; write the memory as one or more sentences", field=f"{at}content")
    if len(content) > limits.MAX_CONTENT_CHARS:
        parts = -(-len(content) // limits.MAX_CONTENT_CHARS)
        raise LimitExceeded(
            f"{at}content is {len(content)} characters; the limit is {limits.MAX_CONTENT_CHARS} "
            f"(max_content_chars). Split it into {parts} or more memories of at most "
            f"{limits.MAX_CONTENT_CHARS} characters, one idea each",
            field=f"{at}content",
            limit=limits.MAX_CONTENT_CHARS,
        )
    tags = tuple(dict.fromkeys(tag.strip().lower() for tag in draft.tags))
    if len(tags) > limits.MAX_TAGS:
        raise LimitExceeded(
            f"{at}tags has {len(tags)} tags; the limit is {limits.MAX_TAGS} (max_tags). Keep the most specific ones",
            field=f"{at}tags",
            limit=limits.MAX_TAGS,
        )
    for tag in tags:
        if not tag or len(tag) > limits.MAX_TAG_CHARS or any(ch.isspace() for ch in tag):
            raise InvalidArgument(
                f"{at}tags contains {tag[: limits.MAX_TAG_CHARS]!r}; a tag is 1 to {limits.MAX_TAG_CHARS} characters "
                "without spaces, such as 'homelab' or 'project:memvault'",
                field=f"{at}tags",
            )
    for name, value, limit in (
        ("key", draft.key, limits.MAX_KEY_CHARS),
        ("scope", draft.scope, limits.MAX_KEY_CHARS),
        ("source", draft.source, limits.MAX_SOURCE_CHARS),
    ):
        if value is not None and len(value) > limit:
            raise LimitExceeded(
                f"{at}{name} is {len(value)} characters; the limit is {limit}. Shorten it",
                field=f"{at}{name}",
                limit=limit,
            )
    if draft.confidence is not None and not limits.MIN_CONFIDENCE <= draft.confidence <= 1:
        raise InvalidArgument(
            f"{at}confidence must be between {limits.MIN_CONFIDENCE} and 1 (got {draft.confidence:.3g}), such as "
            "0.8; leave it out when unknown",
            field=f"{at}confidence",
        )
    key = (draft.key or "").strip() or None
    scope = (draft.scope or "").strip() or None
    if scope and not key:
        raise InvalidArgument(
            f"{at}scope needs a key; a scope narrows where a keyed memory applies", field=f"{at}scope"
        )
    if draft.valid_from and draft.valid_to and draft.valid_to <= draft.valid_from:
        raise InvalidArgument(
            f"{at}valid_to must be after valid_from; leave valid_to out if it is still true", field=f"{at}valid_to"
        )
    now = datetime.now(UTC)
    if draft.expires_at is not None and draft.expires_at <= now:
        raise InvalidArgument(
            f"{at}expires_at is in the past, so the memory would never be recalled; give a future date "
            "(e.g. '2027-01-31') or leave it out",
            field=f"{at}expires_at",
        )
    if draft.no_review and draft.review_after is not None:
        raise InvalidArgument(
            f"{at}review_after is set and no review was asked for; send one or the other", field=f"{at}review_after"
        )
    if len(draft.depends_on) > limits.MAX_DEPENDS_ON:
        raise LimitExceeded(
            f"{at}depends_on has {len(draft.depends_on)} ids; the limit is {limits.MAX_DEPENDS_ON} "
            "(max_depends_on). Name the memories this one most directly relies on",
            field=f"{at}depends_on",
            limit=limits.MAX_DEPENDS_ON,
        )
    depends_on = tuple(
        dict.fromkeys(parse_memory_id(value, f"{at}depends_on[{i}]") for i, value in enumerate(draft.depends_on))
    )
    return Draft(
        content=content,
        type=draft.type,
        key=key,
        scope=scope,
        tags=tags,
        source=draft.source.strip(),
        trust=draft.trust,
        confidence=draft.confidence,
        valid_from=draft.valid_from,
        valid_to=draft.valid_to,
        review_after=draft.review_after,
        no_review=draft.no_review,
        expires_at=draft.expires_at,
        depends_on=depends_on,
        metadata=draft.metadata or None,
    )


def check_secret(text: str, index: int | None = None, field_name: str = "content") -> None:
    """Refuse text that looks like it holds a secret; the error names the kind and place, never the value."""
    finding = find_secret(text)
    if finding is not None:
        at = _prefix(index)
        raise SecretFound(
            f"{at}{field_name} looks like it contains a secret ({finding.describe()}); secrets are never stored. "
            "Remove it and, if useful, save where the secret lives instead, e.g. 'The NAS admin password is "
            "in 1Password under Homelab'",
            finding=finding,
            field=f"{at}{field_name}",
        )


def check_draft_secrets(draft: Draft, index: int | None = None) -> None:
    """Every free-text field of a draft, checked for secrets."""
    check_secret(draft.content, index)
    for name, value in (("source", draft.source), ("key", draft.key), ("scope", draft.scope)):
        if value:
            check_secret(value, index, name)
    if draft.tags:
        check_secret(" ".join(draft.tags), index, "tags")


class SecretFound(InvalidArgument):
    """Content that looks like a secret; nothing of it is stored or logged."""

    def __init__(self, message: str, *, finding: SecretFinding, field: str) -> None:
        super().__init__(message, field=field)
        self.finding = finding


def check_bulk_size(count: int) -> None:
    """A bulk call holds at least one item and at most max_bulk_items."""
    if not count:
        raise InvalidArgument("items is empty; send at least one memory", field="items")
    if count > limits.MAX_BULK_ITEMS:
        raise LimitExceeded(
            f"items has {count} memories; the limit is {limits.MAX_BULK_ITEMS} per call (max_bulk_items). "
            f"Send them in {-(-count // limits.MAX_BULK_ITEMS)} calls of at most {limits.MAX_BULK_ITEMS}",
            field="items",
            limit=limits.MAX_BULK_ITEMS,
        )


def validate_bulk(drafts: list[Draft]) -> list[Draft]:
    """Validate every item of a bulk call before any is written; the first bad item is an error."""
    check_bulk_size(len(drafts))
    return [validate_draft(draft, index) for index, draft in enumerate(drafts)]


def validate_items(drafts: list[Draft]) -> list[Draft | InvalidArgument]:
    """Each item of an import tidied, or the error that makes it invalid (secrets included)."""
    check_bulk_size(len(drafts))
    checked: list[Draft | InvalidArgument] = []
    for index, draft in enumerate(drafts):
        try:
            tidy = validate_draft(draft, index)
            check_draft_secrets(tidy, index)
            checked.append(tidy)
        except InvalidArgument as error:
            checked.append(error)
        except LimitExceeded as error:
            checked.append(InvalidArgument(error.message, field=error.field))
    return checked


def validate_query(query: str) -> str:
    query = query.strip()
    if not query:
        raise InvalidArgument("query is empty; describe what you want to find, in words", field="query")
    if len(query) > limits.MAX_QUERY_CHARS:
        raise LimitExceeded(
            f"query is {len(query)} characters; the limit is {limits.MAX_QUERY_CHARS} (max_query_chars). "
            "Ask about one thing at a time",
            field="query",
            limit=limits.MAX_QUERY_CHARS,
        )
    return query


def validate_page_size(limit: int, default: int, maximum: int, field_name: str = "limit") -> int:
    if limit == 0:
        return default
    if limit < 0:
        raise InvalidArgument(f"{field_name} must be positive, at most {maximum}", field=field_name)
    if limit > maximum:
        raise LimitExceeded(
            f"{field_name} is {limit}; at most {maximum} per page. Ask for {maximum} and follow next_cursor",
            field=field_name,
            limit=maximum,
        )
    return limit


def parse_memory_id(value: str, field_name: str = "memory_id") -> str:
    """A memory id in canonical form, or InvalidArgument naming the field."""
    try:
        return str(uuid.UUID(value.strip()))
    except (ValueError, AttributeError):
        raise InvalidArgument(
            f"{field_name} {value[:60]!r} is not a memory id; ids look like "
            "'3f2b8c4e-9a1d-4e5f-8b7c-2d1e0f9a8b7c' and come from recall or list_memories",
            field=field_name,
        ) from None


def parse_approval_mode(value: str) -> ApprovalMode:
    try:
        return ApprovalMode(value.strip().lower())
    except ValueError:
        raise InvalidArgument(
            f"approval_mode {value[:20]!r} is not one of: review (agent writes wait for the owner), "
            "auto (agent writes are active at once)",
            field="approval_mode",
        ) from None


def check_reason(reason: str) -> str:
    reason = reason.strip()
    if len(reason) > limits.MAX_REASON_CHARS:
        raise LimitExceeded(
            f"reason is {len(reason)} characters; the limit is {limits.MAX_REASON_CHARS} (max_reason_chars). "
            "Say it in a sentence",
            field="reason",
            limit=limits.MAX_REASON_CHARS,
        )
    if reason:
        check_secret(reason)
    return reason


def parse_metadata(text: str) -> dict[str, Any] | None:
    """A memory's metadata from compact JSON: an object of at most max_metadata_bytes, or None for ""."""
    if not text.strip():
        return None
    if len(text.encode()) > limits.MAX_METADATA_BYTES:
        raise InvalidArgument(f"metadata is larger than {limits.MAX_METADATA_BYTES} bytes of JSON", field="metadata")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        raise InvalidArgument("metadata is not valid JSON", field="metadata") from None
    if not isinstance(value, dict):
        raise InvalidArgument("metadata must be a JSON object", field="metadata")
    if _holds_nul(value):
        # Postgres's jsonb cannot hold \u0000 (the insert would fail after the checks).
        raise InvalidArgument("metadata must not contain NUL characters (\\u0000); remove them", field="metadata")
    return value


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON (Python's reader takes them; Postgres's jsonb does not)."""
    raise ValueError(name)


def _holds_nul(value: Any) -> bool:
    """Whether a key or string anywhere in a parsed JSON value contains NUL."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            pending.extend(node.keys())
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
