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


async def test_a_service_nobody_answers_is_named_unreachable_with_its_address() -> None:
    import socket

    import grpc

    from memvault.vault.v1 import vault_pb2, vault_pb2_grpc
    from memvault_core.errors import Unavailable
    from memvault_core.grpc import client_channel, error_from_rpc

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    channel = client_channel(address)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await vault_pb2_grpc.VaultServiceStub(channel).Recall(vault_pb2.RecallRequest(query="x"), timeout=5)
    finally:
        await channel.close()
    mapped = error_from_rpc(error.value)
    assert isinstance(mapped, Unavailable)
    assert "cannot be reached" in mapped.message and address in mapped.message
