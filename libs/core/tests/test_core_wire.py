"""The wire translation: enum names from the descriptors, timestamps both ways, and the memory as
each edge shows it (the MCP tools compact, the JSON API complete)."""

from datetime import UTC, datetime, timedelta, timezone
from typing import get_args

import pytest

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import wire

pytestmark = pytest.mark.unit

STAMP = datetime(2027, 1, 31, 9, 0, 0, 250000, tzinfo=UTC)


def test_enum_names_are_the_value_names_without_the_enum_prefix_in_declaration_order() -> None:
    assert wire.MEMORY_TYPES.names == get_args(wire.MemoryTypeName)
    assert wire.MEMORY_STATUSES.names == get_args(wire.StatusName)
    assert wire.ROLES.names == get_args(wire.RoleName)
    assert wire.SOURCE_KINDS.names == get_args(wire.SourceKindName)
    assert wire.SOURCE_MODES.names == get_args(wire.SourceModeName)
    assert wire.TRUSTS.names == ("stated", "inferred", "imported", "synced")
    assert wire.WRITE_OUTCOMES.names == ("stored", "duplicate", "excluded", "invalid", "similar", "secret")
    assert wire.DUPLICATE_CHECKS.names == ("semantic", "exact-only")
    assert get_args(wire.AuditKindName) == wire.AUDIT_KINDS


def test_enum_names_translate_both_ways_and_the_zero_value_has_no_name() -> None:
    assert wire.MEMORY_TYPES.value("constraint") == pb.MEMORY_TYPE_CONSTRAINT
    assert wire.MEMORY_TYPES.name(pb.MEMORY_TYPE_CONSTRAINT) == "constraint"
    assert wire.DUPLICATE_CHECKS.value("exact-only") == vpb.DUPLICATE_CHECK_EXACT_ONLY
    assert wire.ROLES.name(apb.ROLE_VIEWER) == "viewer"
    assert wire.MEMORY_STATUSES.name(pb.MEMORY_STATUS_UNSPECIFIED) is None
    assert wire.MEMORY_STATUSES.name(99) is None  # a value added to the .proto after this build
    assert wire.MEMORY_STATUSES.name_or(0, "active") == "active"
    with pytest.raises(KeyError):
        wire.MEMORY_TYPES.value("unspecified")


def test_an_enum_whose_values_do_not_carry_its_prefix_is_refused_at_import() -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

    file = descriptor_pb2.FileDescriptorProto(name="wire_test_bad_enum.proto", package="wire.test", syntax="proto3")
    enum = file.enum_type.add(name="Colour")
    enum.value.add(name="COLOUR_UNSPECIFIED", number=0)
    enum.value.add(name="RED", number=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    wrapper = EnumTypeWrapper(pool.FindEnumTypeByName("wire.test.Colour"))
    with pytest.raises(ValueError, match="RED does not start with COLOUR_"):
        wire.EnumNames(wrapper)


def test_iso_text_is_read_as_utc_and_refused_when_it_is_not_a_time() -> None:
    assert wire.parse_iso(" 2027-01-31 ") == datetime(2027, 1, 31, tzinfo=UTC)
    assert wire.parse_iso("2027-01-31T10:00:00+01:00") == datetime(2027, 1, 31, 9, tzinfo=UTC)
    assert wire.parse_iso("2027-01-31T09:00:00Z") == datetime(2027, 1, 31, 9, tzinfo=UTC)
    assert wire.parse_iso("") is None
    for bad in ("yesterday", "0.5", "2027-02-30", "0001-01-01T00:00:00+14:00"):
        with pytest.raises(ValueError, match=r"isoformat|UTC|out of range|must be in"):
            wire.parse_iso(bad)


def test_timestamps_round_trip_and_naive_datetimes_are_utc() -> None:
    stamp = wire.to_timestamp(STAMP)
    assert stamp is not None and stamp.ToDatetime(tzinfo=UTC) == STAMP
    naive = wire.to_timestamp(STAMP.replace(tzinfo=None))
    assert naive == stamp
    assert wire.to_timestamp(STAMP.astimezone(timezone(timedelta(hours=-5)))) == stamp
    assert wire.to_timestamp(None) is None
    memory = pb.Memory(created_at=stamp)
    assert wire.from_timestamp(memory, "created_at") == STAMP
    assert wire.from_timestamp(memory, "updated_at") is None
    assert wire.iso_for_agent(memory, "created_at") == "2027-01-31T09:00:00.250000Z"
    assert wire.iso_for_api(memory, "created_at") == "2027-01-31T09:00:00.250000+00:00"
    assert wire.iso_for_agent(memory, "updated_at") is None
    assert wire.iso_for_api(memory, "updated_at") is None


def _full_memory() -> pb.Memory:
    stamp = wire.to_timestamp(STAMP)
    return pb.Memory(
        id="m1",
        vault="home",
        content="The NAS is a Synology DS920+.",
        content_hash="h",
        type=pb.MEMORY_TYPE_DECISION,
        key="nas",
        scope="homelab",
        tags=["nas", "homelab"],
        source="chat",
        client="claude",
        trust=pb.TRUST_INFERRED,
        confidence=0.87654,
        status=pb.MEMORY_STATUS_PROPOSED,
        valid_from=stamp,
        valid_to=stamp,
        review_after=stamp,
        expires_at=stamp,
        depends_on=["m0"],
        supersedes="m-1",
        superseded_by="m2",
        similar_to=["m3"],
        batch_id="b1",
        version=4,
        created_at=stamp,
        updated_at=stamp,
        status_reason="moved",
        flagged_reason="m0 changed",
        flagged_at=stamp,
        reviewed_at=stamp,
    )


Z = "2027-01-31T09:00:00.250000Z"
OFFSET = "2027-01-31T09:00:00.250000+00:00"


def test_an_agent_sees_a_compact_memory_with_empty_fields_left_out() -> None:
    assert wire.memory_for_agent(pb.Memory(id="m1", content="c")) == {
        "id": "m1",
        "content": "c",
        "type": "fact",
        "status": "active",
        "created_at": None,
    }
    assert wire.memory_for_agent(_full_memory(), score=0.123456) == {
        "id": "m1",
        "content": "The NAS is a Synology DS920+.",
        "type": "decision",
        "status": "proposed",
        "score": 0.1235,
        "key": "nas",
        "scope": "homelab",
        "source": "chat",
        "tags": ["nas", "homelab"],
        "created_at": Z,
        "valid_to": Z,
        "review_after": Z,
        "expires_at": Z,
        "depends_on": ["m0"],
        "similar_to": ["m3"],
        "supersedes": "m-1",
        "superseded_by": "m2",
        "flagged_reason": "m0 changed",
        "status_reason": "moved",
        "confidence": 0.877,
    }


def test_an_agent_explaining_a_memory_sees_its_version_trust_and_every_time() -> None:
    full = wire.memory_in_full_for_agent(_full_memory())
    assert {
        k: full[k] for k in ("version", "trust", "client", "batch_id", "valid_from", "updated_at", "reviewed_at")
    } == {
        "version": 4,
        "trust": "inferred",
        "client": "claude",
        "batch_id": "b1",
        "valid_from": Z,
        "updated_at": Z,
        "reviewed_at": Z,
    }
    bare = wire.memory_in_full_for_agent(pb.Memory(id="m1"))
    assert bare["trust"] == "synced"  # as the tools have always said for a memory with no trust recorded
    assert bare["valid_from"] is None and bare["updated_at"] is None
    assert "client" not in bare and "batch_id" not in bare and "reviewed_at" not in bare


def test_the_api_shows_every_field_of_a_memory_with_empty_ones_null() -> None:
    assert wire.memory_for_api(_full_memory()) == {
        "id": "m1",
        "vault": "home",
        "content": "The NAS is a Synology DS920+.",
        "type": "decision",
        "status": "proposed",
        "key": "nas",
        "scope": "homelab",
        "tags": ["nas", "homelab"],
        "source": "chat",
        "client": "claude",
        "trust": "inferred",
        "confidence": 0.877,
        "valid_from": OFFSET,
        "valid_to": OFFSET,
        "review_after": OFFSET,
        "expires_at": OFFSET,
        "depends_on": ["m0"],
        "supersedes": "m-1",
        "superseded_by": "m2",
        "similar_to": ["m3"],
        "batch_id": "b1",
        "version": 4,
        "status_reason": "moved",
        "flagged_reason": "m0 changed",
        "flagged_at": OFFSET,
        "reviewed_at": OFFSET,
        "created_at": OFFSET,
        "updated_at": OFFSET,
    }
    empty = wire.memory_for_api(pb.Memory(id="m1"))
    assert empty["trust"] == "stated" and empty["type"] == "fact" and empty["status"] == "active"
    assert empty["key"] is None and empty["confidence"] is None and empty["created_at"] is None
    assert empty["tags"] == [] and empty["source"] == ""


def test_a_write_result_for_an_agent_names_the_outcome_and_only_what_applies() -> None:
    stored = vpb.WriteResult(
        outcome=vpb.WRITE_OUTCOME_SIMILAR,
        memory_id="m1",
        status=pb.MEMORY_STATUS_ACTIVE,
        similar_to=["m0"],
        conflicts_with=["m9"],
        cosine=0.91234,
        message="linked",
    )
    assert wire.write_result_for_agent(stored) == {
        "outcome": "similar",
        "id": "m1",
        "status": "active",
        "similar_to": ["m0"],
        "conflicts_with": ["m9"],
        "cosine": 0.912,
        "message": "linked",
    }
    refused = vpb.WriteResult(outcome=vpb.WRITE_OUTCOME_SECRET, status=pb.MEMORY_STATUS_ACTIVE, message="a key")
    assert wire.write_result_for_agent(refused) == {"outcome": "secret", "message": "a key"}
    assert wire.duplicate_check_for_agent(vpb.DUPLICATE_CHECK_EXACT_ONLY, ["indexer down"]) == {
        "duplicate_check": "exact-only",
        "notices": ["indexer down"],
    }
    assert wire.duplicate_check_for_agent(vpb.DUPLICATE_CHECK_UNSPECIFIED, []) == {"duplicate_check": "semantic"}


def test_a_write_result_for_the_api_has_every_key() -> None:
    duplicate = vpb.WriteResult(
        outcome=vpb.WRITE_OUTCOME_DUPLICATE, memory_id="m1", status=pb.MEMORY_STATUS_ACTIVE, match="near", index=2
    )
    assert wire.write_result_for_api(duplicate) == {
        "index": 2,
        "outcome": "duplicate",
        "id": "m1",
        "status": "active",
        "match": "near",
        "cosine": None,
        "similar_to": [],
        "conflicts_with": [],
        "message": "",
    }
    invalid = wire.write_result_for_api(vpb.WriteResult(outcome=vpb.WRITE_OUTCOME_INVALID, message="too long"))
    assert invalid["status"] is None and invalid["id"] is None and invalid["message"] == "too long"
