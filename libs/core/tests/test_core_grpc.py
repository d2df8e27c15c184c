"""The gRPC edge: NUL characters found anywhere in a request, named by their path."""

import pytest

from memvault.vault.v1 import accounts_pb2, memory_pb2, vault_pb2
from memvault_core.grpc import nul_field

pytestmark = pytest.mark.unit


def test_nul_field_names_the_path_of_the_first_nul_in_nested_repeated_and_map_fields() -> None:
    clean = vault_pb2.BulkRememberRequest(vault="v", items=[memory_pb2.MemoryDraft(content="a", tags=["t"])])
    assert nul_field(clean) is None
    nested = vault_pb2.BulkRememberRequest(
        vault="v", items=[memory_pb2.MemoryDraft(content="a"), memory_pb2.MemoryDraft(content="b", tags=["x", "\x00"])]
    )
    assert nul_field(nested) == "items[1].tags[1]"
    assert nul_field(accounts_pb2.AppendAuditRequest(details={"k": "v\x00"})) == "details['k']"
    assert nul_field(accounts_pb2.AppendAuditRequest(details={"k\x00": "v"})) == "details['k\\x00']"
