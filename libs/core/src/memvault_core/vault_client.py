"""The vault's gRPC API as the edges call it: one typed method per RPC, each with the caller's signed
identity attached, a deadline set, and errors turned back into the MemvaultError hierarchy.

`identity` is always a token signed by `memvault_core.identity.IdentitySigner`: the MCP service
passes on the one the gateway sent it; the gateway signs one for the person or token calling.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from memvault.vault.v1 import accounts_pb2 as apb
from memvault.vault.v1 import accounts_pb2_grpc, archive_pb2_grpc, sources_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import archive_pb2 as arpb
from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.grpc import client_channel, error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# Imports and their undo write many rows in one call; they get this many times the usual deadline.
SLOW_CALL_FACTOR = 5


class VaultClient:
    """VaultService, AccountService and SourcesService over one channel."""

    def __init__(self, address: str, timeout_seconds: float) -> None:
        self.channel = client_channel(address)
        self._vault = vault_pb2_grpc.VaultServiceStub(self.channel)
        self._accounts = accounts_pb2_grpc.AccountServiceStub(self.channel)
        self._archive = archive_pb2_grpc.ArchiveServiceStub(self.channel)
        self._sources = sources_pb2_grpc.SourcesServiceStub(self.channel)
        self._timeout = timeout_seconds

    async def close(self) -> None:
        await self.channel.close()

    async def _call(
        self,
        method: Callable[..., Awaitable[ResponseT]],
        request: RequestT,
        identity: str,
        *,
        slow: bool = False,
    ) -> ResponseT:
        try:
            return await method(
                request,
                metadata=((GRPC_METADATA_KEY, identity),),
                timeout=self._timeout * (SLOW_CALL_FACTOR if slow else 1),
            )
        except grpc.aio.AioRpcError as error:
            raise error_from_rpc(error) from None

    # --- VaultService -------------------------------------------------------------------------------

    async def get_capabilities(
        self, identity: str, request: vpb.GetCapabilitiesRequest | None = None
    ) -> vpb.GetCapabilitiesResponse:
        return await self._call(self._vault.GetCapabilities, request or vpb.GetCapabilitiesRequest(), identity)

    async def list_vaults(self, identity: str, request: vpb.ListVaultsRequest | None = None) -> vpb.ListVaultsResponse:
        return await self._call(self._vault.ListVaults, request or vpb.ListVaultsRequest(), identity)

    async def get_operating_guide(
        self, identity: str, request: vpb.GetOperatingGuideRequest
    ) -> vpb.GetOperatingGuideResponse:
        return await self._call(self._vault.GetOperatingGuide, request, identity)

    async def remember(self, identity: str, request: vpb.RememberRequest) -> vpb.RememberResponse:
        return await self._call(self._vault.Remember, request, identity)

    async def bulk_remember(self, identity: str, request: vpb.BulkRememberRequest) -> vpb.BulkRememberResponse:
        return await self._call(self._vault.BulkRemember, request, identity, slow=True)

    async def recall(self, identity: str, request: vpb.RecallRequest) -> vpb.RecallResponse:
        return await self._call(self._vault.Recall, request, identity)

    async def list_memories(self, identity: str, request: vpb.ListMemoriesRequest) -> vpb.ListMemoriesResponse:
        return await self._call(self._vault.ListMemories, request, identity)

    async def forget(self, identity: str, request: vpb.ForgetRequest) -> vpb.ForgetResponse:
        return await self._call(self._vault.Forget, request, identity)

    async def get_stats(self, identity: str, request: vpb.GetStatsRequest) -> vpb.GetStatsResponse:
        return await self._call(self._vault.GetStats, request, identity)

    async def supersede_memory(self, identity: str, request: vpb.SupersedeMemoryRequest) -> vpb.SupersedeMemoryResponse:
        return await self._call(self._vault.SupersedeMemory, request, identity)

    async def edit_memory(self, identity: str, request: vpb.EditMemoryRequest) -> vpb.EditMemoryResponse:
        return await self._call(self._vault.EditMemory, request, identity)

    async def list_exclusions(self, identity: str, request: vpb.ListExclusionsRequest) -> vpb.ListExclusionsResponse:
        return await self._call(self._vault.ListExclusions, request, identity)

    async def lift_exclusion(self, identity: str, request: vpb.LiftExclusionRequest) -> vpb.LiftExclusionResponse:
        return await self._call(self._vault.LiftExclusion, request, identity)

    async def invalidate_memory(
        self, identity: str, request: vpb.InvalidateMemoryRequest
    ) -> vpb.InvalidateMemoryResponse:
        return await self._call(self._vault.InvalidateMemory, request, identity)

    async def approve_memory(self, identity: str, request: vpb.ApproveMemoryRequest) -> vpb.ApproveMemoryResponse:
        return await self._call(self._vault.ApproveMemory, request, identity)

    async def reject_memory(self, identity: str, request: vpb.RejectMemoryRequest) -> vpb.RejectMemoryResponse:
        return await self._call(self._vault.RejectMemory, request, identity)

    async def mark_reviewed(self, identity: str, request: vpb.MarkReviewedRequest) -> vpb.MarkReviewedResponse:
        return await self._call(self._vault.MarkReviewed, request, identity)

    async def explain_memory(self, identity: str, request: vpb.ExplainMemoryRequest) -> vpb.ExplainMemoryResponse:
        return await self._call(self._vault.ExplainMemory, request, identity)

    async def audit_memories(self, identity: str, request: vpb.AuditMemoriesRequest) -> vpb.AuditMemoriesResponse:
        return await self._call(self._vault.AuditMemories, request, identity)

    async def list_review_queue(
        self, identity: str, request: vpb.ListReviewQueueRequest
    ) -> vpb.ListReviewQueueResponse:
        return await self._call(self._vault.ListReviewQueue, request, identity)

    async def list_import_batches(
        self, identity: str, request: vpb.ListImportBatchesRequest
    ) -> vpb.ListImportBatchesResponse:
        return await self._call(self._vault.ListImportBatches, request, identity)

    async def undo_import_batch(
        self, identity: str, request: vpb.UndoImportBatchRequest
    ) -> vpb.UndoImportBatchResponse:
        return await self._call(self._vault.UndoImportBatch, request, identity, slow=True)

    async def get_settings(self, identity: str, request: vpb.GetSettingsRequest) -> vpb.GetSettingsResponse:
        return await self._call(self._vault.GetSettings, request, identity)

    async def update_settings(self, identity: str, request: vpb.UpdateSettingsRequest) -> vpb.UpdateSettingsResponse:
        return await self._call(self._vault.UpdateSettings, request, identity)

    async def update_operating_guide(
        self, identity: str, request: vpb.UpdateOperatingGuideRequest
    ) -> vpb.UpdateOperatingGuideResponse:
        return await self._call(self._vault.UpdateOperatingGuide, request, identity)

    async def list_guide_versions(
        self, identity: str, request: vpb.ListGuideVersionsRequest
    ) -> vpb.ListGuideVersionsResponse:
        return await self._call(self._vault.ListGuideVersions, request, identity)

    async def list_vault_audit(self, identity: str, request: vpb.ListVaultAuditRequest) -> vpb.ListVaultAuditResponse:
        return await self._call(self._vault.ListVaultAudit, request, identity)

    # --- AccountService -----------------------------------------------------------------------------

    async def ensure_account(self, identity: str, request: apb.EnsureAccountRequest) -> apb.EnsureAccountResponse:
        return await self._call(self._accounts.EnsureAccount, request, identity)

    async def create_vault(self, identity: str, request: apb.CreateVaultRequest) -> apb.CreateVaultResponse:
        return await self._call(self._accounts.CreateVault, request, identity)

    async def list_members(self, identity: str, request: apb.ListMembersRequest) -> apb.ListMembersResponse:
        return await self._call(self._accounts.ListMembers, request, identity)

    async def set_membership(self, identity: str, request: apb.SetMembershipRequest) -> apb.SetMembershipResponse:
        return await self._call(self._accounts.SetMembership, request, identity)

    async def remove_membership(
        self, identity: str, request: apb.RemoveMembershipRequest
    ) -> apb.RemoveMembershipResponse:
        return await self._call(self._accounts.RemoveMembership, request, identity)

    async def append_audit(self, identity: str, request: apb.AppendAuditRequest) -> apb.AppendAuditResponse:
        return await self._call(self._accounts.AppendAudit, request, identity)

    async def list_audit(self, identity: str, request: apb.ListAuditRequest) -> apb.ListAuditResponse:
        return await self._call(self._accounts.ListAudit, request, identity)

    async def schedule_vault_deletion(
        self, identity: str, request: apb.ScheduleVaultDeletionRequest
    ) -> apb.ScheduleVaultDeletionResponse:
        return await self._call(self._accounts.ScheduleVaultDeletion, request, identity)

    async def cancel_vault_deletion(
        self, identity: str, request: apb.CancelVaultDeletionRequest
    ) -> apb.CancelVaultDeletionResponse:
        return await self._call(self._accounts.CancelVaultDeletion, request, identity)

    # --- ArchiveService -----------------------------------------------------------------------------

    async def search_messages(self, identity: str, request: arpb.SearchMessagesRequest) -> arpb.SearchMessagesResponse:
        return await self._call(self._archive.SearchMessages, request, identity)

    async def list_conversations(
        self, identity: str, request: arpb.ListConversationsRequest
    ) -> arpb.ListConversationsResponse:
        return await self._call(self._archive.ListConversations, request, identity)

    async def get_conversation(
        self, identity: str, request: arpb.GetConversationRequest
    ) -> arpb.GetConversationResponse:
        return await self._call(self._archive.GetConversation, request, identity)

    async def list_revisions(self, identity: str, request: arpb.ListRevisionsRequest) -> arpb.ListRevisionsResponse:
        return await self._call(self._archive.ListRevisions, request, identity)

    async def get_message_context(
        self, identity: str, request: arpb.GetMessageContextRequest
    ) -> arpb.GetMessageContextResponse:
        return await self._call(self._archive.GetMessageContext, request, identity)

    async def get_messages(self, identity: str, request: arpb.GetMessagesRequest) -> arpb.GetMessagesResponse:
        return await self._call(self._archive.GetMessages, request, identity)

    async def read_conversations(
        self, identity: str, request: arpb.ReadConversationsRequest
    ) -> arpb.ReadConversationsResponse:
        return await self._call(self._archive.ReadConversations, request, identity)

    async def resolve_conversations(
        self, identity: str, request: arpb.ResolveConversationsRequest
    ) -> arpb.ResolveConversationsResponse:
        return await self._call(self._archive.ResolveConversations, request, identity)

    async def get_archive_stats(
        self, identity: str, request: arpb.GetArchiveStatsRequest
    ) -> arpb.GetArchiveStatsResponse:
        return await self._call(self._archive.GetArchiveStats, request, identity)

    async def get_import(self, identity: str, request: arpb.GetImportRequest) -> arpb.GetImportResponse:
        return await self._call(self._archive.GetImport, request, identity)

    # Archive writes (one MCP tool, archive_write) and context packs.

    async def create_conversation(
        self, identity: str, request: arpb.CreateConversationRequest
    ) -> arpb.CreateConversationResponse:
        return await self._call(self._archive.CreateConversation, request, identity)

    async def append_messages(self, identity: str, request: arpb.AppendMessagesRequest) -> arpb.AppendMessagesResponse:
        return await self._call(self._archive.AppendMessages, request, identity)

    async def replace_transcript(
        self, identity: str, request: arpb.ReplaceTranscriptRequest
    ) -> arpb.ReplaceTranscriptResponse:
        return await self._call(self._archive.ReplaceTranscript, request, identity)

    async def upsert_messages(self, identity: str, request: arpb.UpsertMessagesRequest) -> arpb.UpsertMessagesResponse:
        return await self._call(self._archive.UpsertMessages, request, identity)

    async def edit_messages(self, identity: str, request: arpb.EditMessagesRequest) -> arpb.EditMessagesResponse:
        return await self._call(self._archive.EditMessages, request, identity)

    async def commit_batch(self, identity: str, request: arpb.CommitBatchRequest) -> arpb.CommitBatchResponse:
        return await self._call(self._archive.CommitBatch, request, identity)

    async def restore_revision(
        self, identity: str, request: arpb.RestoreRevisionRequest
    ) -> arpb.RestoreRevisionResponse:
        return await self._call(self._archive.RestoreRevision, request, identity)

    async def set_conversation_tags(self, identity: str, request: arpb.SetTagsRequest) -> arpb.SetTagsResponse:
        return await self._call(self._archive.SetTags, request, identity)

    async def copy_conversations(
        self, identity: str, request: arpb.CopyConversationsRequest
    ) -> arpb.CopyConversationsResponse:
        return await self._call(self._archive.CopyConversations, request, identity)

    async def delete_conversation(
        self, identity: str, request: arpb.DeleteConversationRequest
    ) -> arpb.DeleteConversationResponse:
        return await self._call(self._archive.DeleteConversation, request, identity)

    async def empty_archive(self, identity: str, request: arpb.EmptyArchiveRequest) -> arpb.EmptyArchiveResponse:
        return await self._call(self._archive.EmptyArchive, request, identity)

    async def build_context_pack(
        self, identity: str, request: arpb.BuildContextPackRequest
    ) -> arpb.BuildContextPackResponse:
        return await self._call(self._archive.BuildContextPack, request, identity)

    # --- SourcesService ------------------------------------------------------------------------------

    async def track_source(self, identity: str, request: spb.TrackSourceRequest) -> spb.TrackSourceResponse:
        return await self._call(self._sources.TrackSource, request, identity)

    async def untrack_source(self, identity: str, request: spb.UntrackSourceRequest) -> spb.UntrackSourceResponse:
        return await self._call(self._sources.UntrackSource, request, identity)

    async def sync_sources(self, identity: str, request: spb.SyncSourcesRequest) -> spb.SyncSourcesResponse:
        # Each due source is a file read or a URL fetch (up to its own timeout).
        return await self._call(self._sources.SyncSources, request, identity, slow=True)

    async def list_source_changes(
        self, identity: str, request: spb.ListSourceChangesRequest
    ) -> spb.ListSourceChangesResponse:
        return await self._call(self._sources.ListSourceChanges, request, identity)

    async def resolve_source_change(
        self, identity: str, request: spb.ResolveSourceChangeRequest
    ) -> spb.ResolveSourceChangeResponse:
        return await self._call(self._sources.ResolveSourceChange, request, identity)

    async def get_source_status(
        self, identity: str, request: spb.GetSourceStatusRequest
    ) -> spb.GetSourceStatusResponse:
        return await self._call(self._sources.GetSourceStatus, request, identity)

    async def list_memory_sources(
        self, identity: str, request: spb.ListMemorySourcesRequest
    ) -> spb.ListMemorySourcesResponse:
        return await self._call(self._sources.ListMemorySources, request, identity)
