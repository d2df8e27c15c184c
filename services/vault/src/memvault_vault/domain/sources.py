"""Rules for tracked sources, with no I/O: what a source is, what its content says (a JSON value at a
JSON Pointer, or the hash of a text), the statement a template renders, and what a check decides.

memvault never interprets prose: a text source only tells that it changed; a person or agent reads it
and says what the memory should now be. Only an exact JSON value is rendered into a statement.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jsonpointer

from memvault_core import limits
from memvault_core.errors import InvalidArgument


class SourceKind(StrEnum):
    JSON_FILE = "json_file"
    JSON_URL = "json_url"
    TEXT_FILE = "text_file"
    TEXT_URL = "text_url"

    @property
    def is_json(self) -> bool:
        return self in (SourceKind.JSON_FILE, SourceKind.JSON_URL)

    @property
    def is_url(self) -> bool:
        return self in (SourceKind.JSON_URL, SourceKind.TEXT_URL)


class SourceMode(StrEnum):
    AUTO = "auto"
    REVIEW = "review"


class ChangeStatus(StrEnum):
    PENDING = "pending"
    APPLIED = "applied"  # superseded automatically (auto mode)
    ACCEPTED = "accepted"  # superseded by a person or agent resolving it
    DISMISSED = "dismissed"
    REVERTED = "reverted"  # the source went back to its baseline before anyone resolved it
    REPLACED = "replaced"  # a newer change of the same source took its place


class SourceError(Exception):
    """The source cannot be read or does not hold what the tracking expects; the memory stays as it is."""


PLACEHOLDER = "{{value}}"
_PLACEHOLDER_RE = re.compile(r"\{\{\s*value\s*\}\}")


@dataclass(frozen=True)
class SourceSpec:
    """What track_source asks for, validated."""

    kind: SourceKind
    location: str
    selector: str
    template: str
    mode: SourceMode
    interval_seconds: int


@dataclass(frozen=True)
class Reading:
    """What a source says now: a hash, and for JSON the value at the selector."""

    hash: str
    value: Any = None
    has_value: bool = False


def parse_kind(kind: str) -> SourceKind:
    try:
        return SourceKind(kind.strip().lower())
    except ValueError:
        raise InvalidArgument(f"kind must be one of {', '.join(k.value for k in SourceKind)}", field="kind") from None


def validate_spec(
    kind: str, location: str, selector: str, template: str, mode: str, interval_seconds: int
) -> SourceSpec:
    """Check a track_source request; text sources are always reviewed and never have a selector or template."""
    source_kind = parse_kind(kind)
    location = location.strip()
    if not location:
        raise InvalidArgument("location is required: a file path or an http(s) URL", field="location")
    if len(location) > limits.MAX_SOURCE_LOCATION_CHARS:
        raise InvalidArgument(
            f"location is longer than {limits.MAX_SOURCE_LOCATION_CHARS} characters", field="location"
        )
    if interval_seconds == 0:
        interval_seconds = limits.DEFAULT_SOURCE_INTERVAL_SECONDS
    if not limits.MIN_SOURCE_INTERVAL_SECONDS <= interval_seconds <= limits.MAX_SOURCE_INTERVAL_SECONDS:
        raise InvalidArgument(
            f"interval_seconds must be between {limits.MIN_SOURCE_INTERVAL_SECONDS} and "
            f"{limits.MAX_SOURCE_INTERVAL_SECONDS}",
            field="interval_seconds",
        )
    mode = mode.strip().lower() or (SourceMode.AUTO.value if source_kind.is_json else SourceMode.REVIEW.value)
    try:
        source_mode = SourceMode(mode)
    except ValueError:
        raise InvalidArgument("mode must be auto or review", field="mode") from None
    if not source_kind.is_json:
        if selector or template:
            raise InvalidArgument(
                "text sources have no selector or statement_template: memvault cannot read prose, so a change "
                "waits for someone to review it",
                field="selector" if selector else "statement_template",
            )
        if source_mode is SourceMode.AUTO:
            raise InvalidArgument(
                "text sources are always in review mode: memvault never interprets prose", field="mode"
            )
        return SourceSpec(source_kind, location, "", "", SourceMode.REVIEW, interval_seconds)
    try:
        jsonpointer.JsonPointer(selector)
    except jsonpointer.JsonPointerException as error:
        raise InvalidArgument(
            f"selector must be a JSON Pointer (RFC 6901) such as /campaign/budget: {error}", field="selector"
        ) from None
    if len(selector) > limits.MAX_SOURCE_LOCATION_CHARS:
        raise InvalidArgument("selector is too long", field="selector")
    if not _PLACEHOLDER_RE.search(template):
        raise InvalidArgument(
            f"statement_template must contain {PLACEHOLDER}, e.g. 'The campaign budget is {PLACEHOLDER}.'",
            field="statement_template",
        )
    if len(template) > limits.MAX_CONTENT_CHARS // 2:
        raise InvalidArgument("statement_template is too long", field="statement_template")
    return SourceSpec(source_kind, location, selector, template, source_mode, interval_seconds)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def read_json(body: bytes, selector: str) -> Reading:
    """The value at `selector` in a JSON document; SourceError if it is not JSON or the value is missing."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise SourceError("the source is not valid JSON") from None
    try:
        value = jsonpointer.resolve_pointer(document, selector)
    except jsonpointer.JsonPointerException:
        raise SourceError(f"the source has no value at {selector!r}") from None
    encoded = canonical(value)
    if len(encoded) > limits.MAX_SOURCE_VALUE_CHARS:
        raise SourceError(f"the value at {selector!r} is larger than {limits.MAX_SOURCE_VALUE_CHARS} characters")
    return Reading(hashlib.sha256(encoded.encode()).hexdigest(), value, True)


def read_text(body: bytes) -> Reading:
    """A text source is only its hash (after decoding, so a byte-order mark or line ends do not count)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError("the source is not UTF-8 text") from None
    normalised = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip()
    return Reading(hashlib.sha256(normalised.encode()).hexdigest())


def render(template: str, value: Any) -> str:
    """The statement for a JSON value: a string as it is, anything else as compact JSON."""
    shown = value if isinstance(value, str) else canonical(value)
    return _PLACEHOLDER_RE.sub(lambda _: shown, template).strip()


class Verdict(StrEnum):
    UNCHANGED = "unchanged"
    REVERTED = "reverted"  # back to the baseline: a pending change is dismissed by itself
    ALREADY_PENDING = "already_pending"
    SUPERSEDE = "supersede"
    PENDING = "pending"


def decide(
    reading: Reading,
    baseline_hash: str,
    pending_hash: str | None,
    *,
    kind: SourceKind,
    mode: SourceMode,
    vault_auto: bool,
) -> Verdict:
    """What a check of one source does. An exact JSON value in auto mode is applied (in a vault whose
    approval mode is auto; in a review vault it waits like any agent's change); everything else waits."""
    if reading.hash == baseline_hash:
        return Verdict.REVERTED if pending_hash is not None else Verdict.UNCHANGED
    if pending_hash == reading.hash:
        return Verdict.ALREADY_PENDING
    if kind.is_json and mode is SourceMode.AUTO and vault_auto:
        return Verdict.SUPERSEDE
    return Verdict.PENDING
