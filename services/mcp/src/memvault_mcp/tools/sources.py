"""The tools for tracked sources: track_source links a memory to its file or URL; `sources` syncs,
lists and resolves changes, reports health and stops tracking (one tool with an action, to keep the
tool list short)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, StrictInt

from memvault.vault.v1 import sources_pb2 as spb
from memvault_core import limits, wire
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools.registry import ADDITIVE, ask_vault, tool

ShortVaultArg = Annotated[str, Field(description="Empty: your default vault.", json_schema_extra={"maxLength": 63})]


def source_for_agent(source: spb.TrackedSource) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "source_id": source.id,
        "memory_id": source.memory_id,
        "kind": wire.SOURCE_KINDS.name_or(source.kind, ""),
        "location": source.location,
        "mode": wire.SOURCE_MODES.name_or(source.mode, ""),
        "interval_seconds": source.interval_seconds,
        "last_checked": wire.iso_for_agent(source, "last_checked_at"),
    }
    if source.selector:
        shown["selector"] = source.selector
    if source.last_error:
        shown["error"] = source.last_error
    if source.overdue:
        shown["overdue"] = True
    if source.pending_changes:
        shown["pending_changes"] = source.pending_changes
    return shown


def change_for_agent(change: spb.SourceChange) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "change_id": change.id,
        "source_id": change.source_id,
        "memory_id": change.memory_id,
        "kind": wire.SOURCE_KINDS.name_or(change.kind, ""),
        "location": change.location,
        "status": wire.SOURCE_CHANGE_STATUSES.name_or(change.status, ""),
        "detected": wire.iso_for_agent(change, "detected_at"),
    }
    if change.new_value_json:
        shown["new_value"] = json.loads(change.new_value_json)
        shown["proposed_statement"] = change.proposed_statement
    else:
        shown["next_step"] = "read the source, then accept with the statement it now supports, or dismiss"
    if change.replacement_id:
        shown["replacement_id"] = change.replacement_id
    return shown


def check_for_agent(check: spb.SourceCheck) -> dict[str, Any]:
    shown: dict[str, Any] = {"source_id": check.source_id, "memory_id": check.memory_id, "outcome": check.outcome}
    for name in ("message", "change_id", "replacement_id"):
        if getattr(check, name):
            shown[name] = getattr(check, name)
    if check.flagged_dependents:
        shown["flagged_dependents"] = list(check.flagged_dependents)
    return shown


@tool(
    "Track source",
    "Link an active memory to its file or URL. JSON: a JSON Pointer selector and a template with {{value}}; "
    "auto mode supersedes the memory when the value changes, review waits. Text: always review.",
    ADDITIVE,
)
async def track_source(
    ctx: Context,
    memory_id: Annotated[str, Field(json_schema_extra={"format": "uuid"})],
    kind: wire.SourceKindName,
    location: Annotated[
        str,
        Field(
            description="Absolute path or http(s) URL.",
            json_schema_extra={"maxLength": limits.MAX_SOURCE_LOCATION_CHARS},
        ),
    ],
    selector: Annotated[str, Field(description="e.g. /campaign/budget")] = "",
    statement_template: Annotated[str, Field(description="e.g. 'The budget is {{value}}.'")] = "",
    mode: Literal["auto", "review", ""] = "",
    interval_seconds: Annotated[
        StrictInt, Field(ge=0, le=limits.MAX_SOURCE_INTERVAL_SECONDS, description="0: 300")
    ] = 0,
    vault: ShortVaultArg = "",
) -> dict[str, Any]:
    request = spb.TrackSourceRequest(
        vault=vault,
        memory_id=memory_id,
        kind=wire.SOURCE_KINDS.value(kind),
        location=location,
        selector=selector,
        statement_template=statement_template,
        mode=wire.SOURCE_MODES.value(mode) if mode else spb.SOURCE_MODE_UNSPECIFIED,
        interval_seconds=interval_seconds,
    )
    response = await ask_vault(ctx, VaultClient.track_source, request)
    answer: dict[str, Any] = {"vault": response.vault, "source": source_for_agent(response.source)}
    if response.current_statement:
        answer["current_statement"] = response.current_statement
    return answer


@tool(
    "Tracked sources",
    "sync (due, or source_id; before relying on a tracked fact), changes (pending), resolve (change_id, "
    "accept; text needs your statement), status (health), untrack (source_id).",
    ADDITIVE,
)
async def sources(
    ctx: Context,
    action: Literal["sync", "changes", "resolve", "status", "untrack"],
    source_id: str = "",
    change_id: str = "",
    accept: bool = False,
    statement: Annotated[str, Field(json_schema_extra={"maxLength": limits.MAX_CONTENT_CHARS})] = "",
    vault: ShortVaultArg = "",
) -> dict[str, Any]:
    if action == "sync":
        synced = await ask_vault(
            ctx, VaultClient.sync_sources, spb.SyncSourcesRequest(vault=vault, source_id=source_id)
        )
        return {"vault": synced.vault, "checks": [check_for_agent(c) for c in synced.checks]}
    if action == "changes":
        listed = await ask_vault(ctx, VaultClient.list_source_changes, spb.ListSourceChangesRequest(vault=vault))
        return {"vault": listed.vault, "changes": [change_for_agent(c) for c in listed.changes]}
    if action == "resolve":
        if not change_id:
            raise ToolError("resolve needs change_id (from action 'changes') and accept true or false")
        request = spb.ResolveSourceChangeRequest(vault=vault, change_id=change_id, accept=accept, statement=statement)
        resolved = await ask_vault(ctx, VaultClient.resolve_source_change, request)
        return {"vault": resolved.vault, **check_for_agent(resolved.result)}
    if action == "untrack":
        if not source_id:
            raise ToolError("untrack needs source_id (from action 'status')")
        gone = await ask_vault(
            ctx, VaultClient.untrack_source, spb.UntrackSourceRequest(vault=vault, source_id=source_id)
        )
        return {"vault": gone.vault, "untracked": gone.source_id}
    health = await ask_vault(ctx, VaultClient.get_source_status, spb.GetSourceStatusRequest(vault=vault))
    return {
        "vault": health.vault,
        "errors": health.errors,
        "overdue": health.overdue,
        "pending_changes": health.pending_changes,
        "sources": [source_for_agent(s) for s in health.sources],
    }
