"""Helpers for the MCP service's tests: the service in-process, over HTTP, in front of a stand-in vault.

The stand-in is a real gRPC server (grpc.aio, the same error interceptor as the vault) on a free
port; each test says what it answers (`vault.answer(...)`) and reads what the tools sent
(`vault.calls`). The MCP app is the real one (`build_app`), served by uvicorn on a free port and
driven by the official MCP SDK client with an identity signed as the gateway signs it. The real
vault behind the same tools is covered by tests/e2e/test_mcp_flow.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import httpx2
import uvicorn
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from memvault.vault.v1 import archive_pb2 as apb
from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.errors import MemvaultError
from memvault_core.grpc import ErrorInterceptor, identity_token
from memvault_core.identity import HTTP_HEADER, Identity, IdentitySigner
from memvault_core.vault_client import VaultClient
from memvault_devstack.ports import free_port
from memvault_mcp.app import build_app

SECRET = "mcp-unit-test-secret-" + "x" * 32
SIGNER = IdentitySigner(SECRET)


@dataclass
class Call:
    method: str
    request: Any
    identity: str | None


class StandInVault:
    """Answers VaultService, SourcesService and ArchiveService calls as a test tells it to; any call it was not
    told about fails the test."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._answers: dict[str, Message | MemvaultError | Callable[[Any], Message]] = {}

    def answer(self, method: str, reply: Message | MemvaultError | Callable[[Any], Message]) -> None:
        """Answer every call of `method` (a VaultService RPC name) with `reply`, or fail it with the error;
        a function is asked for each call's reply with its request."""
        self._answers[method] = reply

    def requests(self, method: str) -> list[Any]:
        return [c.request for c in self.calls if c.method == method]

    def handlers(self) -> tuple[grpc.GenericRpcHandler, ...]:
        return (
            self._handler(vpb.DESCRIPTOR.services_by_name["VaultService"]),
            self._handler(spb.DESCRIPTOR.services_by_name["SourcesService"]),
            self._handler(apb.DESCRIPTOR.services_by_name["ArchiveService"]),
        )

    def _handler(self, service: Any) -> grpc.GenericRpcHandler:
        methods = {
            method.name: grpc.unary_unary_rpc_method_handler(
                self._answering(method.name),
                request_deserializer=GetMessageClass(method.input_type).FromString,
                response_serializer=GetMessageClass(method.output_type).SerializeToString,
            )
            for method in service.methods
        }
        return grpc.method_handlers_generic_handler(service.full_name, methods)

    def _answering(self, method: str) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Message]]:
        async def answer(request: Any, context: grpc.aio.ServicerContext) -> Message:
            self.calls.append(Call(method, request, identity_token(context)))
            reply = self._answers.get(method)
            if reply is None:
                raise AssertionError(f"the stand-in vault was not told how to answer {method}")
            if isinstance(reply, MemvaultError):
                raise reply
            if callable(reply):
                return reply(request)
            return reply

        return answer


class Agent:
    """An MCP SDK client connected as the gateway connects it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.sent = 0
        """Bytes of the text the last successful call's result gave the agent (UTF-8)."""

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; the test fails on a tool error."""
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            raise AssertionError(f"{tool} failed: {_text(result) or result}")
        self.sent = len(_text(result).encode())
        assert result.structured_content is not None
        return dict(result.structured_content)

    async def error(self, tool: str, **arguments: Any) -> str:
        """The error text an agent sees from a call that must fail."""
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error, f"{tool} unexpectedly succeeded: {json.dumps(result.structured_content)[:300]}"
        return _text(result)


def _text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


@dataclass
class Service:
    vault: StandInVault
    url: str

    @asynccontextmanager
    async def agent(
        self, scopes: tuple[str, ...] = ("read", "write"), *, signed: bool = True, mode: str = "auto"
    ) -> AsyncIterator[Agent]:
        """An agent connected as the gateway connects it: with an identity holding `scopes`, signed (or,
        with `signed=False`, none at all). `mode` 'legacy' speaks the 2025-11-25 protocol, 'auto' the newest."""
        headers = identity_header(scopes) if signed else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
        ):
            yield Agent(client)


def identity_header(scopes: tuple[str, ...] = ("read", "write"), subject: str = "owner") -> dict[str, str]:
    """The header the gateway adds: who is calling, with which scopes, signed."""
    return {HTTP_HEADER: SIGNER.sign(Identity(subject=subject, client="unit-test", scopes=frozenset(scopes)))}


@asynccontextmanager
async def running_service() -> AsyncIterator[Service]:
    """A stand-in vault on a free port and the MCP app on another, both stopped on the way out."""
    vault = StandInVault()
    grpc_server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    grpc_server.add_generic_rpc_handlers(vault.handlers())
    vault_port = grpc_server.add_insecure_port("127.0.0.1:0")
    await grpc_server.start()
    client = VaultClient(f"127.0.0.1:{vault_port}", 5.0)
    port = free_port()
    http_server = uvicorn.Server(
        uvicorn.Config(
            build_app(client, SIGNER), host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="on"
        )
    )
    task = asyncio.create_task(http_server.serve())
    try:
        async with asyncio.timeout(10):
            while not http_server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield Service(vault, f"http://127.0.0.1:{port}/mcp")
    finally:
        http_server.should_exit = True
        await task
        await client.close()
        await grpc_server.stop(None)
