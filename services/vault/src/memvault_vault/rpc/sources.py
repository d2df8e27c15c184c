"""SourcesService over gRPC: tracked sources, their checks and their changes, translated to and from
the wire; every call goes to `services.sources`."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import grpc

from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import sources_pb2_grpc
from memvault_core import wire
from memvault_core.errors import InvalidArgument
from memvault_core.grpc import identity_token
from memvault_core.identity import Identity, IdentitySigner
from memvault_vault.services import VaultServices
from memvault_vault.sources.records import CheckResult, SourceChange, TrackedSource
from memvault_vault.sources.service import is_overdue


def source_to_proto(source: TrackedSource, now: datetime) -> spb.TrackedSource:
    return spb.TrackedSource(
        id=source.id,
        vault=source.vault,
        memory_id=source.memory_id,
        kind=wire.SOURCE_KINDS.value(source.kind.value),
        location=source.location,
        selector=source.selector,
        statement_template=source.template,
        mode=wire.SOURCE_MODES.value(source.mode.value),
        interval_seconds=source.interval_seconds,
        created_at=wire.to_timestamp(source.created_at),
        last_checked_at=wire.to_timestamp(source.last_checked_at),
        next_check_at=wire.to_timestamp(source.next_check_at),
        last_error=source.last_error,
        error_since=wire.to_timestamp(source.error_since),
        pending_changes=source.pending_changes,
        overdue=is_overdue(source, now),
        baseline_value_json=json.dumps(source.baseline_value, ensure_ascii=False) if source.kind.is_json else "",
    )


def change_to_proto(change: SourceChange) -> spb.SourceChange:
    return spb.SourceChange(
        id=change.id,
        vault=change.vault,
        source_id=change.source_id,
        memory_id=change.memory_id,
        kind=wire.SOURCE_KINDS.value(change.kind.value),
        location=change.location,
        old_hash=change.old_hash,
        new_hash=change.new_hash,
        new_value_json=json.dumps(change.new_value, ensure_ascii=False) if change.has_value else "",
        status=wire.SOURCE_CHANGE_STATUSES.value(change.status.value),
        detected_at=wire.to_timestamp(change.detected_at),
        resolved_at=wire.to_timestamp(change.resolved_at),
        resolved_by=change.resolved_by,
        replacement_id=change.replacement_id,
        proposed_statement=change.proposed_statement,
        old_value_json=json.dumps(change.old_value, ensure_ascii=False) if change.has_old_value else "",
    )


def check_to_proto(check: CheckResult) -> spb.SourceCheck:
    return spb.SourceCheck(
        source_id=check.source_id,
        vault=check.vault,
        memory_id=check.memory_id,
        outcome=check.outcome,
        message=check.message,
        change_id=check.change_id,
        replacement_id=check.replacement_id,
        flagged_dependents=list(check.flagged_dependents),
    )


def _kind(value: int) -> str:
    name = wire.SOURCE_KINDS.name(value)
    if name is None:
        raise InvalidArgument("kind is required: one of " + ", ".join(wire.SOURCE_KINDS.names), field="kind")
    return name


class SourcesServicer(sources_pb2_grpc.SourcesServiceServicer):
    def __init__(self, services: VaultServices, signer: IdentitySigner) -> None:
        self._sources = services.sources
        self._signer = signer

    def _identity(self, context: grpc.aio.ServicerContext) -> Identity:
        return self._signer.verify(identity_token(context))

    async def TrackSource(
        self, request: spb.TrackSourceRequest, context: grpc.aio.ServicerContext
    ) -> spb.TrackSourceResponse:
        vault, source, statement = await self._sources.track(
            self._identity(context),
            request.vault,
            request.memory_id,
            kind=_kind(request.kind),
            location=request.location,
            selector=request.selector,
            template=request.statement_template,
            mode=wire.SOURCE_MODES.name_or(request.mode, ""),
            interval_seconds=request.interval_seconds,
        )
        return spb.TrackSourceResponse(
            vault=vault.name, source=source_to_proto(source, datetime.now(UTC)), current_statement=statement
        )

    async def UntrackSource(
        self, request: spb.UntrackSourceRequest, context: grpc.aio.ServicerContext
    ) -> spb.UntrackSourceResponse:
        vault = await self._sources.untrack(self._identity(context), request.vault, request.source_id)
        return spb.UntrackSourceResponse(vault=vault.name, source_id=request.source_id)

    async def SyncSources(
        self, request: spb.SyncSourcesRequest, context: grpc.aio.ServicerContext
    ) -> spb.SyncSourcesResponse:
        vault, checks = await self._sources.sync(self._identity(context), request.vault, request.source_id)
        return spb.SyncSourcesResponse(vault=vault.name, checks=[check_to_proto(c) for c in checks])

    async def ListSourceChanges(
        self, request: spb.ListSourceChangesRequest, context: grpc.aio.ServicerContext
    ) -> spb.ListSourceChangesResponse:
        if request.limit < 0:
            raise InvalidArgument("limit must not be negative", field="limit")
        vault, changes = await self._sources.changes(
            self._identity(context), request.vault, include_resolved=request.include_resolved, limit=request.limit
        )
        return spb.ListSourceChangesResponse(vault=vault.name, changes=[change_to_proto(c) for c in changes])

    async def ResolveSourceChange(
        self, request: spb.ResolveSourceChangeRequest, context: grpc.aio.ServicerContext
    ) -> spb.ResolveSourceChangeResponse:
        vault, result = await self._sources.resolve(
            self._identity(context),
            request.vault,
            request.change_id,
            accept=request.accept,
            statement=request.statement,
        )
        return spb.ResolveSourceChangeResponse(vault=vault.name, result=check_to_proto(result))

    async def GetSourceStatus(
        self, request: spb.GetSourceStatusRequest, context: grpc.aio.ServicerContext
    ) -> spb.GetSourceStatusResponse:
        vault, health = await self._sources.status(self._identity(context), request.vault)
        now = datetime.now(UTC)
        return spb.GetSourceStatusResponse(
            vault=vault.name,
            sources=[source_to_proto(s, now) for s in health.sources],
            errors=health.errors,
            overdue=health.overdue,
            pending_changes=health.pending_changes,
        )

    async def ListMemorySources(
        self, request: spb.ListMemorySourcesRequest, context: grpc.aio.ServicerContext
    ) -> spb.ListMemorySourcesResponse:
        identity = self._identity(context)
        sources = await self._sources.for_memory(identity, request.vault, request.memory_id)
        vault = sources[0].vault if sources else request.vault
        now = datetime.now(UTC)
        return spb.ListMemorySourcesResponse(vault=vault, sources=[source_to_proto(s, now) for s in sources])
