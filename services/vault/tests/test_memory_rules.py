"""Rules a memory follows before it reaches the database."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_vault.domain import cursor
from memvault_vault.domain.filters import MemoryFilter, memory_filter
from memvault_vault.domain.inputs import (
    parse_memory_id,
    parse_metadata,
    validate_bulk,
    validate_draft,
    validate_page_size,
    validate_query,
)
from memvault_vault.domain.memory import Draft, MemoryType, Status, content_hash, initial_status, review_after
from memvault_vault.domain.signed_cursor import CursorSigner

pytestmark = pytest.mark.unit


def test_hash_ignores_case_and_whitespace() -> None:
    assert content_hash("The NAS  is a\tDS920+ ") == content_hash("the nas is a ds920+")
    assert content_hash("The NAS is a DS920+") != content_hash("The NAS is a DS923+")


def test_draft_is_tidied() -> None:
    draft = validate_draft(Draft(content="  Uses k3s.  ", tags=("Homelab", "homelab", " k8s ")))
    assert draft.content == "Uses k3s."
    assert draft.tags == ("homelab", "k8s")


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_empty_content_is_refused(content: str) -> None:
    with pytest.raises(InvalidArgument, match="content is empty") as error:
        validate_draft(Draft(content=content))
    assert error.value.field == "content"


def test_over_long_content_names_the_limit_and_a_size_that_fits() -> None:
    with pytest.raises(LimitExceeded) as error:
        validate_draft(Draft(content="x" * (limits.MAX_CONTENT_CHARS * 2 + 1)))
    assert "max_content_chars" in error.value.message
    assert "3 or more memories" in error.value.message
    assert error.value.limit == limits.MAX_CONTENT_CHARS


def test_content_at_the_limit_is_accepted() -> None:
    assert len(validate_draft(Draft(content="x" * limits.MAX_CONTENT_CHARS)).content) == limits.MAX_CONTENT_CHARS


def test_bulk_names_the_bad_item() -> None:
    with pytest.raises(InvalidArgument) as error:
        validate_bulk([Draft(content="fine"), Draft(content=" ")])
    assert error.value.field == "items[1].content"


def test_bulk_over_the_item_limit_says_how_to_split() -> None:
    with pytest.raises(LimitExceeded, match="2 calls of at most"):
        validate_bulk([Draft(content=f"m{i}") for i in range(limits.MAX_BULK_ITEMS + 1)])


def test_bulk_must_not_be_empty() -> None:
    with pytest.raises(InvalidArgument, match="items is empty"):
        validate_bulk([])


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        (Draft(content="a", tags=("has space",)), "tags"),
        (Draft(content="a", tags=tuple(f"t{i}" for i in range(limits.MAX_TAGS + 1))), "tags"),
        (Draft(content="a", key="k" * (limits.MAX_KEY_CHARS + 1)), "key"),
        (Draft(content="a", scope="project:x"), "scope"),
        (Draft(content="a", confidence=1.5), "confidence"),
        (Draft(content="a", source="s" * (limits.MAX_SOURCE_CHARS + 1)), "source"),
    ],
)
def test_bad_fields_are_named(draft: Draft, field: str) -> None:
    with pytest.raises((InvalidArgument, LimitExceeded)) as error:
        validate_draft(draft)
    assert error.value.field == field


def test_query_limits() -> None:
    assert validate_query("  nas  ") == "nas"
    with pytest.raises(InvalidArgument):
        validate_query(" ")
    with pytest.raises(LimitExceeded, match="max_query_chars"):
        validate_query("q" * (limits.MAX_QUERY_CHARS + 1))


def test_page_size() -> None:
    assert validate_page_size(0, 10, 50) == 10
    assert validate_page_size(50, 10, 50) == 50
    with pytest.raises(LimitExceeded, match="at most 50"):
        validate_page_size(51, 10, 50)
    with pytest.raises(InvalidArgument):
        validate_page_size(-1, 10, 50)


def test_memory_ids_are_checked() -> None:
    assert parse_memory_id(" 3F2B8C4E-9A1D-4E5F-8B7C-2D1E0F9A8B7C ") == "3f2b8c4e-9a1d-4e5f-8b7c-2d1e0f9a8b7c"
    with pytest.raises(InvalidArgument, match="is not a memory id"):
        parse_memory_id("42")


def test_agent_writes_wait_for_review_unless_the_vault_is_in_auto_mode() -> None:
    assert initial_status("review", propose=False) is Status.PROPOSED
    assert initial_status("auto", propose=False) is Status.ACTIVE
    assert initial_status("auto", propose=True) is Status.PROPOSED


def test_review_dates_follow_the_type() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert review_after(MemoryType.ASSUMPTION, start) == start + timedelta(days=30)
    assert review_after(MemoryType.PREFERENCE, start) == start + timedelta(days=365)
    assert review_after(MemoryType.OBSERVATION, start) is None


def test_cursor_round_trip_and_tampering() -> None:
    request = cursor.fingerprint("recall", "v", "nas")
    token = cursor.encode("recall", request, {"offset": 10})
    assert cursor.decode(token, "recall", request) == {"offset": 10}
    assert cursor.decode("", "recall", request) is None
    with pytest.raises(InvalidArgument, match="different query"):
        cursor.decode(token, "recall", cursor.fingerprint("recall", "v", "other"))
    with pytest.raises(InvalidArgument, match="not one this call returned"):
        cursor.decode("garbage!", "recall", request)
    with pytest.raises(InvalidArgument):
        cursor.decode(token, "list", request)


def test_an_edited_cursor_is_refused_as_not_ours_whatever_was_changed() -> None:
    request = cursor.fingerprint("list", "v")
    moment, memory_id = "2026-11-30T18:00:00+00:00", "0b5d2c5e-7a43-4a39-9d39-3f1b3c1e9e01"
    good = cursor.decode(cursor.encode("list", request, {"created_at": moment, "id": memory_id}), "list", request)
    assert cursor.keyset_of(good) == (datetime.fromisoformat(moment), memory_id)
    assert cursor.offset_of(cursor.decode(cursor.encode("recall", request, {"offset": 20}), "recall", request)) == 20
    assert cursor.offset_of(None) == 0 and cursor.keyset_of(None) is None and cursor.id_of(None) is None
    edited = [
        (cursor.offset_of, {"offset": -5}),
        (cursor.offset_of, {"offset": "10"}),
        (cursor.offset_of, {"offset": True}),
        (cursor.offset_of, {}),
        (cursor.keyset_of, {"created_at": "yesterday", "id": memory_id}),
        (cursor.keyset_of, {"created_at": "2026-11-30T18:00:00", "id": memory_id}),  # no time zone
        (cursor.keyset_of, {"created_at": 7, "id": memory_id}),
        (cursor.keyset_of, {"created_at": moment, "id": "12"}),
        (cursor.id_of, {"id": None}),
    ]
    for read, position in edited:
        token = cursor.encode("list", request, position)
        with pytest.raises(InvalidArgument, match="not one this call returned"):
            read(cursor.decode(token, "list", request))
    no_request = base64.urlsafe_b64encode(json.dumps({"k": "list", "p": {}}).encode()).decode()
    with pytest.raises(InvalidArgument, match="not one this call returned"):
        cursor.decode(no_request, "list", request)


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ('{"note": "a\\u0000b"}', "NUL"),
        ('{"a\\u0000": 1}', "NUL"),
        ('{"deep": [{"x": ["\\u0000"]}]}', "NUL"),
        ('{"ratio": NaN}', "not valid JSON"),
        ('{"ratio": -Infinity}', "not valid JSON"),
    ],
)
def test_metadata_postgres_cannot_store_is_refused_before_the_write(metadata: str, said: str) -> None:
    """Found by the MCP tool fuzzer: remember with such metadata failed inside Postgres (INTERNAL)."""
    with pytest.raises(InvalidArgument, match=said) as refused:
        parse_metadata(metadata)
    assert refused.value.field == "metadata"


@pytest.mark.parametrize("cursor", ["\u00fc1\u0010\u5640.d\U000a77d9", "abc.d\u00e9f", "\u00e9.\u00e9"])
def test_an_archive_cursor_with_characters_we_never_issue_is_refused_not_a_crash(cursor: str) -> None:
    """Found by the /api/v1 fuzzer: archive search with such a cursor failed with INTERNAL."""
    signer = CursorSigner(b"k" * 32)
    with pytest.raises(InvalidArgument, match="not one this server issued") as refused:
        signer.open(cursor, "archive-search", "caller", None)
    assert refused.value.field == "cursor"


def test_metadata_with_control_characters_other_than_nul_is_kept() -> None:
    assert parse_metadata('{"tab": "a\\tb", "vt": "\\u000b"}') == {"tab": "a\tb", "vt": "\u000b"}


def test_a_memory_filter_is_checked_before_any_sql() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidArgument) as backwards:
        memory_filter(created_from=start, created_to=start)
    assert backwards.value.field == "created_to"
    with pytest.raises(InvalidArgument) as long_key:
        memory_filter(key="k" * (limits.MAX_KEY_CHARS + 1))
    assert long_key.value.field == "key"
    assert memory_filter(key=" nas.model ", scope="") == MemoryFilter(key="nas.model")
    assert MemoryFilter().sql_args() == (None,) * 6
