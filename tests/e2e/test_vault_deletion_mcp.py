"""A vault pending deletion through the official MCP client: the agent's writes (a memory, an archived
conversation) are refused with the date and how to cancel, its reads still answer, and once the owner
cancels, the same write goes through."""

from __future__ import annotations

import asyncio

import pytest
from e2e_helpers import call, call_error, mcp_session

from memvault.vault.v1 import accounts_pb2 as pb
from memvault.vault.v1 import accounts_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e


async def test_an_agent_cannot_write_to_a_vault_pending_deletion(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    # The dev owner's session (no client) marks the vault, as the dashboard does through the gateway.
    owner = IdentitySigner(stack.identity_secret).sign(Identity(subject="owner", scopes=frozenset(SCOPES)))
    metadata = ((GRPC_METADATA_KEY, owner),)
    channel = client_channel(stack.vault_address)
    accounts = accounts_pb2_grpc.AccountServiceStub(channel)
    try:
        async with mcp_session(stack.mcp_url) as client:
            await call(client, "remember", content="The lab printer is on the second floor.")
            scheduled = await accounts.ScheduleVaultDeletion(
                pb.ScheduleVaultDeletionRequest(vault="default", confirm="default"), metadata=metadata
            )
            day = scheduled.delete_after.ToDatetime().strftime("%Y-%m-%d")

            refused = await call_error(client, "remember", content="The lab printer moved to the basement.")
            assert "pending deletion" in refused and day in refused and "cancel" in refused, refused
            archived = await call_error(
                client, "archive_write", op="create", title="t", messages=[{"role": "user", "text": "hello"}]
            )
            assert "pending deletion" in archived, archived
            found = await call(client, "recall", query="lab printer")
            assert [r["content"] for r in found["results"]] == ["The lab printer is on the second floor."]

            cancelled = await accounts.CancelVaultDeletion(
                pb.CancelVaultDeletionRequest(vault="default"), metadata=metadata
            )
            assert cancelled.cancelled
            await call(client, "remember", content="The lab printer moved to the basement.")
    finally:
        await channel.close()
