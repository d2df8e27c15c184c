"""VaultService over gRPC: check the caller's identity, translate, delegate."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from memvault.common.v1 import limits_pb2
from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core import limits, wire
from memvault_core.grpc import identity_token
from memvault_core.identity import Identity, IdentitySigner
from memvault_vault.domain import capabilities
from memvault_vault.domain.memory import MemoryType
from memvault_vault.rpc import convert
from memvault_vault.services import VaultServices


class VaultServicer(vault_pb2_grpc.VaultServiceServicer):
    def __init__(self, services: VaultServices, signer: IdentitySigner) -> None:
        self._services = services
        self._signer = signer

    def _identity(self, context: grpc.aio.ServicerContext) -> Identity:
        return self._signer.verify(identity_token(context))

    async def GetCapabilities(
        self, request: vpb.GetCapabilitiesRequest, context: grpc.aio.ServicerContext
    ) -> vpb.GetCapabilitiesResponse:
        self._identity(context)
        return vpb.GetCapabilitiesResponse(
            limits=limits_pb2.Limits(**limits.as_dict()),
            memory_types=[t.value for t in MemoryType],
            capabilities_version=capabilities.CAPABILITIES_VERSION,
            more_limits=capabilities.more_limits(),
            features=capabilities.features(),
        )

    async def ListVaults(
        self, request: vpb.ListVaultsRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListVaultsResponse:
        vaults = await self._services.accounts.vaults(self._identity(context))
        return vpb.ListVaultsResponse(
            vaults=[
                vpb.VaultInfo(
                    name=v.name,
                    role=v.role,
                    approval_mode=v.approval_mode,
                    delete_after=wire.to_timestamp(v.delete_after),
                )
                for v in vaults
            ]
        )

    async def GetOperatingGuide(
        self, request: vpb.GetOperatingGuideRequest, context: grpc.aio.ServicerContext
    ) -> vpb.GetOperatingGuideResponse:
        guide = await self._services.guide.guide_view(
            self._identity(context), request.vault, include_default=request.include_default
        )
        return vpb.GetOperatingGuideResponse(
            vault=guide.vault,
            text=guide.text,
            version=guide.version,
            newer_default_available=guide.newer_default_available,
            default_revision=guide.default_revision,
            default_text=guide.default_text,
            updated_at=wire.to_timestamp(guide.updated_at),
            updated_by=guide.updated_by,
        )

    async def Remember(self, request: vpb.RememberRequest, context: grpc.aio.ServicerContext) -> vpb.RememberResponse:
        identity = self._identity(context)
        vault, summary = await self._services.memories.remember(
            identity, request.vault, convert.draft_from_proto(request.memory), propose=request.propose
        )
        return vpb.RememberResponse(
            vault=vault.name,
            result=convert.result_to_proto(summary.results[0]),
            duplicate_check=convert.check_to_proto(summary.check),
            notices=summary.notices,
        )

    async def BulkRemember(
        self, request: vpb.BulkRememberRequest, context: grpc.aio.ServicerContext
    ) -> vpb.BulkRememberResponse:
        drafts = [convert.draft_from_proto(item) for item in request.items]
        text_type = convert.types_from_proto([request.text_type]) or [MemoryType.FACT]
        vault, summary = await self._services.imports.bulk_remember(
            self._identity(context),
            request.vault,
            drafts,
            request.source,
            text=request.text,
            text_type=text_type[0],
            sequence=request.sequence,
        )
        return vpb.BulkRememberResponse(
            vault=vault.name,
            batch_id=summary.batch_id or "",
            results=[convert.result_to_proto(r) for r in summary.results],
            duplicate_check=convert.check_to_proto(summary.check),
            notices=summary.notices,
        )

    async def Recall(self, request: vpb.RecallRequest, context: grpc.aio.ServicerContext) -> vpb.RecallResponse:
        vault, page = await self._services.recall.recall(
            self._identity(context),
            request.vault,
            request.query,
            limit=request.limit,
            page_cursor=request.cursor,
            types=convert.types_from_proto(list(request.types)),
            tags=list(request.tags),
            statuses=convert.statuses_from_proto(list(request.statuses)),
            as_of=wire.from_timestamp(request, "as_of"),
            include_expired=request.include_expired,
            filters=convert.filter_from_proto(request.filter),
        )
        return vpb.RecallResponse(
            vault=vault.name,
            hits=[
                vpb.RecallHit(
                    memory=convert.memory_to_proto(h.memory),
                    score=h.score,
                    may_conflict_with=h.may_conflict_with,
                    conflicts_with=h.conflicts_with,
                    meaning_score=h.meaning_score,
                    keyword_score=h.keyword_score,
                )
                for h in page.hits
            ],
            mode=page.mode,
            warnings=page.warnings,
            next_cursor=page.next_cursor,
            memory_warnings=[convert.warning_to_proto(w) for w in page.memory_warnings],
        )

    async def ListMemories(
        self, request: vpb.ListMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListMemoriesResponse:
        vault, memories, next_cursor = await self._services.memories.list_memories(
            self._identity(context),
            request.vault,
            statuses=convert.statuses_from_proto(list(request.statuses)),
            types=convert.types_from_proto(list(request.types)),
            tags=list(request.tags),
            limit=request.limit,
            page_cursor=request.cursor,
            filters=convert.filter_from_proto(request.filter),
        )
        return vpb.ListMemoriesResponse(
            vault=vault.name, memories=[convert.memory_to_proto(m) for m in memories], next_cursor=next_cursor
        )

    async def Forget(self, request: vpb.ForgetRequest, context: grpc.aio.ServicerContext) -> vpb.ForgetResponse:
        vault, memory_id = await self._services.memories.forget(
            self._identity(context), request.vault, request.memory_id
        )
        return vpb.ForgetResponse(vault=vault.name, memory_id=memory_id)

    async def ListExclusions(
        self, request: vpb.ListExclusionsRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListExclusionsResponse:
        vault, found, total = await self._services.memories.exclusions(
            self._identity(context), request.vault, limit=request.limit, offset=request.offset, text=request.text
        )
        return vpb.ListExclusionsResponse(
            vault=vault.name,
            exclusions=[
                vpb.Exclusion(content_hash=e.content_hash, reason=e.reason, created_at=wire.to_timestamp(e.created_at))
                for e in found
            ],
            total=total,
        )

    async def LiftExclusion(
        self, request: vpb.LiftExclusionRequest, context: grpc.aio.ServicerContext
    ) -> vpb.LiftExclusionResponse:
        vault, lifted = await self._services.memories.lift_exclusion(
            self._identity(context), request.vault, hash_of=request.content_hash, text=request.text
        )
        return vpb.LiftExclusionResponse(vault=vault.name, content_hash=lifted)

    async def GetStats(self, request: vpb.GetStatsRequest, context: grpc.aio.ServicerContext) -> vpb.GetStatsResponse:
        vault, stats = await self._services.memories.stats(self._identity(context), request.vault)
        overview: dict[str, Any] = {}
        if request.include_overview:  # the access check above came first; these read only
            (mode, reason, model), outlook = await asyncio.gather(
                self._services.recall.search_mode(), self._services.retention.outlook(vault)
            )
            overview = {
                "search_mode": mode,
                "search_mode_reason": reason,
                "embedding_model": model,
                "retention": convert.outlook_to_proto(outlook),
            }
        return vpb.GetStatsResponse(
            vault=vault.name,
            memories=stats["memories"],
            memories_by_type=stats["memories_by_type"],
            **overview,
            indexed=stats["indexed"],
            index_pending=stats["index_pending"],
            index_failed=stats["index_failed"],
            recent_failures=[vpb.IndexFailure(**failure) for failure in stats["recent_failures"]],
        )

    # --- lifecycle ---------------------------------------------------------------------------------

    async def SupersedeMemory(
        self, request: vpb.SupersedeMemoryRequest, context: grpc.aio.ServicerContext
    ) -> vpb.SupersedeMemoryResponse:
        vault, outcome = await self._services.memories.supersede(
            self._identity(context),
            request.vault,
            request.memory_id,
            convert.draft_from_proto(request.replacement),
            expected_version=request.expected_version,
        )
        return vpb.SupersedeMemoryResponse(
            vault=vault.name,
            result=convert.result_to_proto(outcome.result),
            applied=outcome.applied,
            flagged_dependents=outcome.flagged,
            duplicate_check=convert.check_to_proto(outcome.check),
            notices=outcome.notices,
        )

    async def EditMemory(
        self, request: vpb.EditMemoryRequest, context: grpc.aio.ServicerContext
    ) -> vpb.EditMemoryResponse:
        vault, memory, changed = await self._services.memories.edit(
            self._identity(context),
            request.vault,
            request.memory_id,
            content=request.content if request.HasField("content") else None,
            tags=list(request.tags) if request.replace_tags else None,
            expected_version=request.expected_version,
        )
        return vpb.EditMemoryResponse(vault=vault.name, memory=convert.memory_to_proto(memory), changed=changed)

    async def InvalidateMemory(
        self, request: vpb.InvalidateMemoryRequest, context: grpc.aio.ServicerContext
    ) -> vpb.InvalidateMemoryResponse:
        vault, memory, applied, flagged = await self._services.memories.invalidate(
            self._identity(context),
            request.vault,
            request.memory_id,
            request.reason,
            expected_version=request.expected_version,
        )
        return vpb.InvalidateMemoryResponse(
            vault=vault.name, memory=convert.memory_to_proto(memory), applied=applied, flagged_dependents=flagged
        )

    async def ApproveMemory(
        self, request: vpb.ApproveMemoryRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ApproveMemoryResponse:
        vault, memory, superseded, flagged = await self._services.review.approve(
            self._identity(context),
            request.vault,
            request.memory_id,
            replace_similar=request.replace_similar,
            replace_ids=list(request.replace_ids),
            expected_version=request.expected_version,
        )
        return vpb.ApproveMemoryResponse(
            vault=vault.name,
            memory=convert.memory_to_proto(memory),
            superseded=superseded,
            flagged_dependents=flagged,
        )

    async def RejectMemory(
        self, request: vpb.RejectMemoryRequest, context: grpc.aio.ServicerContext
    ) -> vpb.RejectMemoryResponse:
        vault, memory = await self._services.review.reject(
            self._identity(context),
            request.vault,
            request.memory_id,
            request.reason,
            expected_version=request.expected_version,
        )
        return vpb.RejectMemoryResponse(vault=vault.name, memory=convert.memory_to_proto(memory))

    async def MarkReviewed(
        self, request: vpb.MarkReviewedRequest, context: grpc.aio.ServicerContext
    ) -> vpb.MarkReviewedResponse:
        vault, memory = await self._services.review.mark_reviewed(
            self._identity(context), request.vault, request.memory_id, expected_version=request.expected_version
        )
        return vpb.MarkReviewedResponse(vault=vault.name, memory=convert.memory_to_proto(memory))

    async def ExplainMemory(
        self, request: vpb.ExplainMemoryRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ExplainMemoryResponse:
        vault, explanation = await self._services.memories.explain(
            self._identity(context), request.vault, request.memory_id
        )
        return vpb.ExplainMemoryResponse(
            vault=vault.name,
            memory=convert.memory_to_proto(explanation.memory),
            history=[
                vpb.HistoryEntry(
                    version=step.version,
                    change=step.change,
                    actor=step.actor,
                    at=wire.to_timestamp(step.at),
                    cause=step.cause,
                    changed_fields=step.changed_fields,
                    status=convert.status_to_proto(step.status),
                    content=step.content,
                )
                for step in explanation.history
            ],
            related=[
                vpb.RelatedMemory(relation=relation, memory=convert.memory_to_proto(memory))
                for relation, memory in explanation.related
            ],
            notes=explanation.notes,
            missing=explanation.missing,
        )

    async def AuditMemories(
        self, request: vpb.AuditMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> vpb.AuditMemoriesResponse:
        vault, findings, counts, next_cursor = await self._services.review.audit_memories(
            self._identity(context),
            request.vault,
            list(request.kinds),
            limit=request.limit,
            page_cursor=request.cursor,
        )
        return vpb.AuditMemoriesResponse(
            vault=vault.name,
            findings=[
                vpb.AuditFinding(
                    memory=convert.memory_to_proto(f.memory), kinds=f.kinds, related=f.related, message=f.message
                )
                for f in findings
            ],
            counts=counts,
            next_cursor=next_cursor,
        )

    async def ListReviewQueue(
        self, request: vpb.ListReviewQueueRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListReviewQueueResponse:
        vault, items, total, next_cursor = await self._services.review.review_queue(
            self._identity(context), request.vault, limit=request.limit, page_cursor=request.cursor
        )
        return vpb.ListReviewQueueResponse(
            vault=vault.name,
            items=[
                vpb.ReviewItem(
                    memory=convert.memory_to_proto(memory),
                    related=[
                        vpb.RelatedMemory(relation=relation, memory=convert.memory_to_proto(other))
                        for relation, other in related
                    ],
                )
                for memory, related in items
            ],
            next_cursor=next_cursor,
            total=total,
        )

    async def ListImportBatches(
        self, request: vpb.ListImportBatchesRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListImportBatchesResponse:
        vault, batches, next_cursor = await self._services.imports.batches(
            self._identity(context), request.vault, limit=request.limit, page_cursor=request.cursor
        )
        return vpb.ListImportBatchesResponse(
            vault=vault.name, batches=[convert.batch_to_proto(b) for b in batches], next_cursor=next_cursor
        )

    async def UndoImportBatch(
        self, request: vpb.UndoImportBatchRequest, context: grpc.aio.ServicerContext
    ) -> vpb.UndoImportBatchResponse:
        vault, report = await self._services.imports.undo_batch(
            self._identity(context), request.vault, request.batch_id
        )
        return vpb.UndoImportBatchResponse(
            vault=vault.name,
            batch=convert.batch_to_proto(report.batch),
            removed=report.removed,
            restored=report.restored,
            kept_changes=report.kept_changes,
        )

    async def GetSettings(
        self, request: vpb.GetSettingsRequest, context: grpc.aio.ServicerContext
    ) -> vpb.GetSettingsResponse:
        vault, settings = await self._services.guide.settings(self._identity(context), request.vault)
        return vpb.GetSettingsResponse(vault=vault.name, settings=vpb.VaultSettings(**settings))

    async def UpdateSettings(
        self, request: vpb.UpdateSettingsRequest, context: grpc.aio.ServicerContext
    ) -> vpb.UpdateSettingsResponse:
        changes: dict[str, object] = {"approval_mode": request.approval_mode}
        for name in ("superseded_retention_days", "rejected_retention_days", "audit_retention_days"):
            if request.HasField(name):
                changes[name] = getattr(request, name)
        vault, settings = await self._services.guide.update_settings(self._identity(context), request.vault, changes)
        return vpb.UpdateSettingsResponse(vault=vault.name, settings=vpb.VaultSettings(**settings))

    async def UpdateOperatingGuide(
        self, request: vpb.UpdateOperatingGuideRequest, context: grpc.aio.ServicerContext
    ) -> vpb.UpdateOperatingGuideResponse:
        vault, version = await self._services.guide.update_guide(
            self._identity(context),
            request.vault,
            request.text,
            expected_version=request.expected_version,
            adopt_default=request.adopt_default,
        )
        return vpb.UpdateOperatingGuideResponse(vault=vault.name, version=version)

    async def ListGuideVersions(
        self, request: vpb.ListGuideVersionsRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListGuideVersionsResponse:
        vault, versions = await self._services.guide.guide_versions(
            self._identity(context), request.vault, limit=request.limit, before_version=request.before_version
        )
        return vpb.ListGuideVersionsResponse(
            vault=vault.name,
            versions=[
                vpb.GuideVersion(
                    version=version,
                    updated_by=by,
                    updated_at=wire.to_timestamp(at),
                    text=text if request.include_text else "",
                    chars=len(text),
                )
                for version, by, at, text in versions
            ],
        )

    async def ListVaultAudit(
        self, request: vpb.ListVaultAuditRequest, context: grpc.aio.ServicerContext
    ) -> vpb.ListVaultAuditResponse:
        vault, entries, next_before = await self._services.audit.vault_audit(
            self._identity(context),
            request.vault,
            actor=request.actor,
            action=request.action,
            target=request.target,
            since=wire.from_timestamp(request, "since"),
            until=wire.from_timestamp(request, "until"),
            limit=request.limit,
            before_id=request.before_id,
        )
        return vpb.ListVaultAuditResponse(
            vault=vault.name,
            entries=[
                vpb.VaultAuditEntry(
                    id=e.id,
                    actor=e.actor,
                    action=e.action,
                    target=e.target,
                    details_json=e.details_json,
                    at=wire.to_timestamp(e.at),
                )
                for e in entries
            ],
            next_before_id=next_before,
        )
