"""The vault's gRPC API as the MCP tools call it: identity attached, deadline set, errors translated."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import client_channel, error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY

ResponseT = TypeVar("ResponseT")


class VaultClient:
    def __init__(self, address: str, timeout_seconds: float) -> None:
        self._channel = client_channel(address)
        self._stub = vault_pb2_grpc.VaultServiceStub(self._channel)
        self._timeout = timeout_seconds

    async def close(self) -> None:
        await self._channel.close()

    async def _call(
        self, method: Callable[..., Awaitable[ResponseT]], request: object, identity: str, slow: bool = False
    ) -> ResponseT:
        try:
            return await method(
                request,
                metadata=((GRPC_METADATA_KEY, identity),),
                timeout=self._timeout * (5 if slow else 1),
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None

    async def capabilities(self, identity: str) -> vpb.GetCapabilitiesResponse:
        return await self._call(self._stub.GetCapabilities, vpb.GetCapabilitiesRequest(), identity)

    async def list_vaults(self, identity: str) -> vpb.ListVaultsResponse:
        return await self._call(self._stub.ListVaults, vpb.ListVaultsRequest(), identity)

    async def guide(self, identity: str, request: vpb.GetOperatingGuideRequest) -> vpb.GetOperatingGuideResponse:
        return await self._call(self._stub.GetOperatingGuide, request, identity)

    async def remember(self, identity: str, request: vpb.RememberRequest) -> vpb.RememberResponse:
        return await self._call(self._stub.Remember, request, identity)

    async def bulk_remember(self, identity: str, request: vpb.BulkRememberRequest) -> vpb.BulkRememberResponse:
        return await self._call(self._stub.BulkRemember, request, identity, slow=True)

    async def recall(self, identity: str, request: vpb.RecallRequest) -> vpb.RecallResponse:
        return await self._call(self._stub.Recall, request, identity)

    async def list_memories(self, identity: str, request: vpb.ListMemoriesRequest) -> vpb.ListMemoriesResponse:
        return await self._call(self._stub.ListMemories, request, identity)

    async def forget(self, identity: str, request: vpb.ForgetRequest) -> vpb.ForgetResponse:
        return await self._call(self._stub.Forget, request, identity)

    async def supersede(self, identity: str, request: vpb.SupersedeMemoryRequest) -> vpb.SupersedeMemoryResponse:
        return await self._call(self._stub.SupersedeMemory, request, identity)

    async def invalidate(self, identity: str, request: vpb.InvalidateMemoryRequest) -> vpb.InvalidateMemoryResponse:
        return await self._call(self._stub.InvalidateMemory, request, identity)

    async def audit_memories(self, identity: str, request: vpb.AuditMemoriesRequest) -> vpb.AuditMemoriesResponse:
        return await self._call(self._stub.AuditMemories, request, identity)

    async def explain(self, identity: str, request: vpb.ExplainMemoryRequest) -> vpb.ExplainMemoryResponse:
        return await self._call(self._stub.ExplainMemory, request, identity)
