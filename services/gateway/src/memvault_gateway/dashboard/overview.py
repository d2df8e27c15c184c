"""The vault's overview: memories by status, proposals waiting, index health, source health, last imports,
settings."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import vault_client as rpc
from memvault_core import wire
from memvault_gateway.api import imports as api_imports
from memvault_gateway.api import memories as api_memories
from memvault_gateway.api import sources as api_sources
from memvault_gateway.api import vault_settings as api_vault_settings
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner, section_url

router = APIRouter(route_class=DashboardRoute)

STATUS_ORDER = ("proposed", "active", "superseded", "rejected", "invalidated")


@router.get(PREFIX)
async def dashboard_home(request: Request, gw: GatewayDep, vault: str = "") -> RedirectResponse:
    """The chosen vault's overview (the vault switcher's form), else the person's 'default' or first vault."""
    person = await owner(request, gw)
    names = [v.name for v in person.vaults]
    if not names:
        return RedirectResponse("/account", status_code=303)
    chosen = vault if vault in names else "default" if "default" in names else names[0]
    return RedirectResponse(section_url(chosen, "overview"), status_code=303)


@router.get(PREFIX + "/{vault}")
async def overview(vault: str, request: Request, gw: GatewayDep) -> HTMLResponse:
    person = await owner(request, gw, vault)
    stats, queue, imports, settings, sources = await asyncio.gather(
        gw.vault.call(
            rpc.VaultClient.get_stats,
            vpb.GetStatsRequest(vault=vault, include_overview=True),
            person.caller.identity(),
        ),
        api_memories.review_queue(vault, person.caller, gw, limit=1),
        api_imports.batches(vault, person.caller, gw, limit=5),
        api_vault_settings.get_settings(vault, person.caller, gw),
        api_sources.list_sources(vault, person.caller, gw),
    )
    counts = dict(stats.memories)
    by_type = dict(stats.memories_by_type)
    return person.render(
        "overview.html",
        "overview",
        counts=[(status, counts.get(status, 0)) for status in STATUS_ORDER],
        type_counts=[(name, by_type.get(name, 0)) for name in wire.MEMORY_TYPES.names],
        total=sum(counts.values()),
        waiting=queue["total"],
        index={
            "indexed": stats.indexed,
            "pending": stats.index_pending,
            "failed": stats.index_failed,
            "failures": [
                {"memory_id": f.memory_id, "error": f.error, "attempts": f.attempts} for f in stats.recent_failures
            ],
            "mode": stats.search_mode,
            "mode_reason": stats.search_mode_reason,
            "model": stats.embedding_model,
        },
        retention=retention_view(stats.retention),
        imports=imports["batches"],
        settings=settings,
        sources={
            "count": len(sources["sources"]),
            "errors": sources["errors"],
            "overdue": sources["overdue"],
            "pending": sources["pending_changes"],
            "failing": [s for s in sources["sources"] if s["error"]][:5],
        },
    )


def retention_view(outlook: vpb.RetentionOutlook) -> dict[str, Any]:
    """The overview's retention card: how it runs, last and next run, what it removes then."""

    return {
        "runner": outlook.runner,
        "interval_minutes": round(outlook.interval_seconds / 60),
        "schedule": outlook.schedule,
        "last_run": wire.from_timestamp(outlook, "last_run"),
        "next_run": wire.from_timestamp(outlook, "next_run"),
        "next_due_at": wire.from_timestamp(outlook, "next_due_at"),
        "due_rejected": outlook.due_rejected,
        "due_superseded": outlook.due_superseded,
        "due_invalidated": outlook.due_invalidated,
        "due_audit": f"{outlook.due_audit_entries}+"
        if outlook.due_audit_entries_capped
        else str(outlook.due_audit_entries),
    }
