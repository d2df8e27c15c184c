"""The typed vault client: a method per RPC, the identity and a deadline on every call, and the vault's
errors back as the MemvaultError they were. Against a stand-in vault on a real gRPC server."""

import re
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf.message_factory import GetMessageClass

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import accounts_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.errors import NotFound, Unavailable
from memvault_core.grpc import ErrorInterceptor, identity_token
from memvault_core.vault_client import SLOW_CALL_FACTOR, VaultClient

TIMEOUT = 4.0


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class StandIn:
    """Answers every RPC of one service with its empty response, recording what each call carried;
    a request for memory id 'missing' is answered NOT_FOUND the way the vault answers it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, str | None, float | None]] = []

    def handlers(self, service: Any) -> grpc.GenericRpcHandler:
        methods = {}
        for method in service.methods:
            methods[method.name] = grpc.unary_unary_rpc_method_handler(
                self._answer(method),
                request_deserializer=GetMessageClass(method.input_type).FromString,
                response_serializer=GetMessageClass(method.output_type).SerializeToString,
            )
        return grpc.method_handlers_generic_handler(service.full_name, methods)

    def _answer(self, method: Any) -> Any:
        async def answer(request: Any, context: grpc.aio.ServicerContext) -> Any:
            self.calls.append((method.name, request, identity_token(context), context.time_remaining()))
            if getattr(request, "memory_id", "") == "missing":
                raise NotFound("no memory missing in this vault", field="memory_id")
            return GetMessageClass(method.output_type)()

        return answer


@pytest.fixture
async def stand_in() -> AsyncIterator[tuple[StandIn, VaultClient]]:
    vault = StandIn()
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    for module in (vpb, apb):
        for service in module.DESCRIPTOR.services_by_name.values():
            server.add_generic_rpc_handlers((vault.handlers(service),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = VaultClient(f"127.0.0.1:{port}", TIMEOUT)
    try:
        yield vault, client
    finally:
        await client.close()
        await server.stop(None)


@pytest.mark.unit
def test_every_rpc_of_the_vault_and_account_services_has_a_typed_method() -> None:
    for module, stub in ((vpb, vault_pb2_grpc.VaultServiceStub), (apb, accounts_pb2_grpc.AccountServiceStub)):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert callable(getattr(VaultClient, _snake(method.name), None)), f"{stub.__name__}.{method.name}"


async def test_each_method_calls_its_rpc_with_the_identity_and_a_deadline(
    stand_in: tuple[StandIn, VaultClient],
) -> None:
    vault, client = stand_in
    for module in (vpb, apb):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                request = GetMessageClass(method.input_type)()
                response = await getattr(client, _snake(method.name))("signed-token", request)
                assert type(response) is GetMessageClass(method.output_type)
                name, received, identity, remaining = vault.calls[-1]
                assert (name, received, identity) == (method.name, request, "signed-token")
                slow = method.name in ("BulkRemember", "UndoImportBatch")
                limit = TIMEOUT * (SLOW_CALL_FACTOR if slow else 1)
                # time_remaining is rounded by the transport, so a little over the limit is still the limit
                assert remaining is not None and limit - 2 < remaining < limit + 0.5, method.name


async def test_the_vaults_error_comes_back_as_the_same_memvault_error(stand_in: tuple[StandIn, VaultClient]) -> None:
    _, client = stand_in
    with pytest.raises(NotFound) as error:
        await client.forget("signed-token", vpb.ForgetRequest(vault="home", memory_id="missing"))
    assert error.value.message == "no memory missing in this vault" and error.value.field == "memory_id"


async def test_a_vault_nobody_answers_is_unavailable() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    client = VaultClient(address, 2.0)
    try:
        with pytest.raises(Unavailable, match="cannot be reached"):
            await client.list_vaults("signed-token")
    finally:
        await client.close()
