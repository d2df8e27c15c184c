"""The vault's tracked sources: each source's kind, location, selector, mode, interval, last and next
check, error and pending changes; check one (or every due one) now; stop tracking one; track a new one
(the same fields and limits as `POST /api/v1/.../sources`). Owners and editors act; a viewer sees the
page read-only and the vault refuses their posts."""

from __future__ import annotations

from typing import get_args

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core import limits, wire
from memvault_gateway.api import sources as api_sources
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

QUIET = frozenset({"unchanged", "already_pending", "busy"})
"""Check outcomes that changed nothing (as `memvault-vault sources watch` counts them)."""
DONE = {
    "synced": N_("Checked %(checked)d: %(changed)d changed, %(errors)d failed."),
    "untracked": N_("The source is no longer tracked; the memory stays as it is."),
    "tracked": N_("The source is tracked; its content now is the baseline."),
}
TRACK_FIELDS = ("memory_id", "kind", "location", "selector", "statement_template", "mode", "interval_seconds")


@router.get(PREFIX + "/{vault}/sources")
async def sources(
    vault: str,
    request: Request,
    gw: GatewayDep,
    done: str = "",
    checked: int = 0,
    changed: int = 0,
    errors: int = 0,
    memory_id: str = "",
) -> HTMLResponse:
    """`memory_id` fills in the track form (a memory's page links here with it)."""
    person = await owner(request, gw, vault)
    health = await api_sources.list_sources(vault, person.caller, gw)
    numbers = {"checked": max(0, checked), "changed": max(0, changed), "errors": max(0, errors)}
    notice = person.gettext(DONE[done]) % numbers if done in DONE else ""
    return person.render(
        "sources.html",
        "sources",
        health=health,
        notice=notice,
        kinds=get_args(wire.SourceKindName),
        modes=get_args(wire.SourceModeName),
        chosen={"memory_id": memory_id[:100]},
        limits={
            "location": limits.MAX_SOURCE_LOCATION_CHARS,
            "template": limits.MAX_CONTENT_CHARS // 2,
            "min_interval": limits.MIN_SOURCE_INTERVAL_SECONDS,
            "max_interval": limits.MAX_SOURCE_INTERVAL_SECONDS,
            "default_interval": limits.DEFAULT_SOURCE_INTERVAL_SECONDS,
        },
    )


@router.post(PREFIX + "/{vault}/sources")
async def track(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Track a memory's file or URL; the API's body model checks the fields, the vault its rules."""
    person = await owner(request, gw, vault)
    form = await person.form()
    fields = {name: str(form.get(name) or "").strip() for name in TRACK_FIELDS}
    body = api_sources.TrackIn.model_validate(
        {
            **fields,
            "mode": fields["mode"] or None,
            "interval_seconds": form_number(form, "interval_seconds"),
        }
    )
    await api_sources.track_source(vault, body, person.caller, gw)
    return redirect(f"{person.url('sources')}?done=tracked")


@router.post(PREFIX + "/{vault}/sources/sync")
async def sync(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Check one source now (its row's button), or every source that is due (the button above the table)."""
    person = await owner(request, gw, vault)
    form = await person.form()
    body = api_sources.SyncIn(source_id=str(form.get("source_id") or "")[:100])
    answer = await api_sources.sync_sources(vault, body, person.caller, gw)
    checks = answer["checks"]
    changed = sum(1 for c in checks if c["outcome"] not in QUIET and c["outcome"] != "error")
    failed = sum(1 for c in checks if c["outcome"] == "error")
    return redirect(f"{person.url('sources')}?done=synced&checked={len(checks)}&changed={changed}&errors={failed}")


@router.post(PREFIX + "/{vault}/sources/{source_id}/untrack")
async def untrack(vault: str, source_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    await person.form()
    await api_sources.untrack_source(vault, source_id[:100], person.caller, gw)
    return redirect(f"{person.url('sources')}?done=untracked")
