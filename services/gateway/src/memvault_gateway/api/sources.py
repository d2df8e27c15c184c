"""/api/v1 for tracked sources: list them with their health, track a memory's file or URL, check now,
list and resolve changes, stop tracking. Each route is one SourcesService call as the caller (the
vault checks roles, scopes and the operator's file roots and URL rules), with the same argument
limits as the MCP tools `track_source` and `sources`. Changes never hold the source's text: hashes
and, for JSON, the extracted values."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field, StrictBool, StrictInt

from memvault.vault.v1 import sources_pb2 as spb
from memvault_core import limits, wire
from memvault_core import vault_client as rpc
from memvault_core.validation import Between
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.api.shapes import Body, vault_call

router = APIRouter(prefix="/api/v1")

Id = Annotated[str, Field(max_length=100)]


class TrackIn(Body):
    memory_id: Id = Field(description="The active memory the source supports.")
    kind: wire.SourceKindName
    location: str = Field(
        min_length=1, max_length=limits.MAX_SOURCE_LOCATION_CHARS, description="An absolute path or an http(s) URL."
    )
    selector: str = Field(
        default="", max_length=limits.MAX_SOURCE_LOCATION_CHARS, description="JSON kinds: a JSON Pointer."
    )
    statement_template: str = Field(
        default="", max_length=limits.MAX_CONTENT_CHARS // 2, description="JSON kinds: with {{value}}."
    )
    mode: wire.SourceModeName | None = Field(default=None, description="Leave out: auto for JSON, review for text.")
    interval_seconds: Annotated[StrictInt, Between(0, limits.MAX_SOURCE_INTERVAL_SECONDS)] = Field(
        default=0, description=f"0: {limits.DEFAULT_SOURCE_INTERVAL_SECONDS}."
    )


class SyncIn(Body):
    source_id: Id = Field(default="", description="Empty: every source of the vault that is due.")


class ResolveIn(Body):
    accept: StrictBool = Field(description="true: supersede the memory; false: dismiss (the memory stays).")
    statement: str = Field(
        default="",
        max_length=limits.MAX_CONTENT_CHARS,
        description="The replacement statement; required to accept a text change (memvault does not read prose).",
    )


def _value(text: str) -> Any:
    return json.loads(text) if text else None


def source_json(source: spb.TrackedSource) -> dict[str, Any]:
    """A tracked source with its health, as the API shows it."""
    return {
        "id": source.id,
        "memory_id": source.memory_id,
        "kind": wire.SOURCE_KINDS.name_or(source.kind, ""),
        "location": source.location,
        "selector": source.selector or None,
        "statement_template": source.statement_template or None,
        "mode": wire.SOURCE_MODES.name_or(source.mode, ""),
        "interval_seconds": source.interval_seconds,
        "baseline_value": _value(source.baseline_value_json),
        "created_at": wire.iso_for_api(source, "created_at"),
        "last_checked_at": wire.iso_for_api(source, "last_checked_at"),
        "next_check_at": wire.iso_for_api(source, "next_check_at"),
        "error": source.last_error or None,
        "error_since": wire.iso_for_api(source, "error_since"),
        "overdue": source.overdue,
        "pending_changes": source.pending_changes,
    }


def change_json(change: spb.SourceChange) -> dict[str, Any]:
    """A source change: hashes and, for JSON sources, the old and new extracted values; never the text."""
    is_json = change.kind in (spb.SOURCE_KIND_JSON_FILE, spb.SOURCE_KIND_JSON_URL)
    return {
        "id": change.id,
        "source_id": change.source_id,
        "memory_id": change.memory_id,
        "kind": wire.SOURCE_KINDS.name_or(change.kind, ""),
        "location": change.location,
        "status": wire.SOURCE_CHANGE_STATUSES.name_or(change.status, ""),
        "old_hash": change.old_hash,
        "new_hash": change.new_hash,
        "old_value": _value(change.old_value_json),
        "new_value": _value(change.new_value_json),
        "proposed_statement": change.proposed_statement or None,
        "needs_statement": not is_json,
        "detected_at": wire.iso_for_api(change, "detected_at"),
        "resolved_at": wire.iso_for_api(change, "resolved_at"),
        "resolved_by": change.resolved_by or None,
        "replacement_id": change.replacement_id or None,
    }


def check_json(check: spb.SourceCheck) -> dict[str, Any]:
    return {
        "source_id": check.source_id,
        "memory_id": check.memory_id,
        "outcome": check.outcome,
        "message": check.message or None,
        "change_id": check.change_id or None,
        "replacement_id": check.replacement_id or None,
        "flagged_dependents": list(check.flagged_dependents),
    }


@router.get("/vaults/{vault}/sources")
async def list_sources(vault: Vault, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Every tracked source of the vault with its health: errors, overdue checks and pending changes."""
    response = await vault_call(gw, rpc.VaultClient.get_source_status, spb.GetSourceStatusRequest(vault=vault), caller)
    return {
        "vault": response.vault,
        "errors": response.errors,
        "overdue": response.overdue,
        "pending_changes": response.pending_changes,
        "sources": [source_json(s) for s in response.sources],
    }


@router.get("/vaults/{vault}/memories/{memory_id}/sources")
async def memory_sources(vault: Vault, memory_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """The sources one memory tracks, with their health (as explain_memory lists them to agents)."""
    request = spb.ListMemorySourcesRequest(vault=vault, memory_id=memory_id)
    response = await vault_call(gw, rpc.VaultClient.list_memory_sources, request, caller)
    return {"vault": response.vault, "sources": [source_json(s) for s in response.sources]}


@router.post("/vaults/{vault}/sources", status_code=201)
async def track_source(vault: Vault, body: TrackIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Link an active memory to its file or URL; the source's current content becomes the baseline."""
    request = spb.TrackSourceRequest(
        vault=vault,
        memory_id=body.memory_id,
        kind=wire.SOURCE_KINDS.value(body.kind),
        location=body.location,
        selector=body.selector,
        statement_template=body.statement_template,
        mode=wire.SOURCE_MODES.value(body.mode) if body.mode else spb.SOURCE_MODE_UNSPECIFIED,
        interval_seconds=body.interval_seconds,
    )
    response = await vault_call(gw, rpc.VaultClient.track_source, request, caller)
    return {
        "vault": response.vault,
        "source": source_json(response.source),
        "current_statement": response.current_statement or None,
    }


@router.post("/vaults/{vault}/sources/sync")
async def sync_sources(vault: Vault, body: SyncIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Check one source now, or every source of the vault that is due; one result per check."""
    request = spb.SyncSourcesRequest(vault=vault, source_id=body.source_id)
    response = await vault_call(gw, rpc.VaultClient.sync_sources, request, caller)
    return {"vault": response.vault, "checks": [check_json(c) for c in response.checks]}


@router.get("/vaults/{vault}/sources/changes")
async def list_changes(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    include_resolved: bool = False,
    limit: Annotated[int, Query(), Between(1, limits.MAX_SOURCES_LISTED)] = limits.MAX_SOURCES_LISTED,
) -> dict[str, Any]:
    """Pending source changes (with include_resolved, past ones too), newest first."""
    request = spb.ListSourceChangesRequest(vault=vault, include_resolved=include_resolved, limit=limit)
    response = await vault_call(gw, rpc.VaultClient.list_source_changes, request, caller)
    return {"vault": response.vault, "changes": [change_json(c) for c in response.changes]}


@router.post("/vaults/{vault}/sources/changes/{change_id}/resolve")
async def resolve_change(
    vault: Vault, change_id: str, body: ResolveIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """Accept a pending change (the memory is superseded) or dismiss it (the new content becomes the baseline)."""
    request = spb.ResolveSourceChangeRequest(
        vault=vault, change_id=change_id, accept=body.accept, statement=body.statement
    )
    response = await vault_call(gw, rpc.VaultClient.resolve_source_change, request, caller)
    return {"vault": response.vault, **check_json(response.result)}


@router.delete("/vaults/{vault}/sources/{source_id}")
async def untrack_source(vault: Vault, source_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Stop tracking a source; the memory stays as it is."""
    request = spb.UntrackSourceRequest(vault=vault, source_id=source_id)
    response = await vault_call(gw, rpc.VaultClient.untrack_source, request, caller)
    return {"vault": response.vault, "untracked": response.source_id}
