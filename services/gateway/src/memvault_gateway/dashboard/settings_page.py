"""Vault settings: whether agents' changes wait for review, and how long old records are kept."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core.errors import InvalidArgument
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.api import vault_settings as api_vault_settings
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect

router = APIRouter(route_class=DashboardRoute)

RETENTION_FIELDS = ("superseded_retention_days", "rejected_retention_days", "audit_retention_days")


@router.get(PREFIX + "/{vault}/settings")
async def settings(vault: str, request: Request, gw: GatewayDep, saved: bool = False) -> HTMLResponse:
    person = await owner(request, gw, vault)
    current = await api_vault_settings.get_settings(vault, person.caller, gw)
    return person.render("settings.html", "settings", settings=current, saved=saved, fields=RETENTION_FIELDS)


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
