"""Vault settings: whether agents' changes wait for review, and how long old records are kept."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core.errors import InvalidArgument
from memvault_gateway.api import retention as api_retention
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.api import vault_settings as api_vault_settings
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect

router = APIRouter(route_class=DashboardRoute)

RETENTION_FIELDS = ("superseded_retention_days", "rejected_retention_days", "audit_retention_days")


@router.get(PREFIX + "/{vault}/settings")
async def settings(
    vault: str,
    request: Request,
    gw: GatewayDep,
    saved: bool = False,
    cleaned: Annotated[int, Query(ge=-1)] = -1,
    cleaned_audit: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    current = await api_vault_settings.get_settings(vault, person.caller, gw)
    preview = None
    if person.is_owner:  # what "clean up now" would remove, counted and rolled back
        preview = await api_retention.purge(gw, person.caller.identity(), vault, dry_run=True)
    return person.render(
        "settings.html",
        "settings",
        settings=current,
        saved=saved,
        fields=RETENTION_FIELDS,
        preview=preview,
        cleaned=cleaned,
        cleaned_audit=cleaned_audit,
    )


@router.post(PREFIX + "/{vault}/settings/clean-up")
async def clean_up(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Run retention for this vault now, as its owner (audited with them as actor)."""
    person = await owner(request, gw, vault)
    await person.form()
    done = await api_retention.purge(gw, person.caller.identity(), vault, dry_run=False)
    return redirect(f"{person.url('settings')}?cleaned={done.memories}&cleaned_audit={done.audit_entries}")


@router.post(PREFIX + "/{vault}/settings")
async def save(vault: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    form = await person.form()
    mode = str(form.get("approval_mode") or "")
    if mode not in ("review", "auto"):
        raise InvalidArgument("approval_mode must be review or auto", field="approval_mode")
    body = api_shapes.SettingsIn.model_validate(
        {"approval_mode": mode, **{name: form_number(form, name) for name in RETENTION_FIELDS}}
    )
    await api_vault_settings.put_settings(vault, body, person.caller, gw)
    return redirect(f"{person.url('settings')}?saved=true")
