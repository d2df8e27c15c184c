"""Vault settings: whether agents' changes wait for review, how long old records are kept, and deleting the
vault (after a grace period during which it is read-only and the deletion can be cancelled)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core.errors import InvalidArgument
from memvault_gateway.api import retention as api_retention
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.api import vault_settings as api_vault_settings
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

GRACE_DAYS = 7
"""The vault's deletion grace period (the vault's `accounts.service.DELETION_GRACE`), as the page says it."""
DELETION_NOTICES = {
    "scheduled": N_("The vault is marked for deletion: it is read-only until then, and you can cancel below."),
    "cancelled": N_("The deletion is cancelled: the vault is writable again."),
}

RETENTION_FIELDS = ("superseded_retention_days", "rejected_retention_days", "audit_retention_days")


@router.get(PREFIX + "/{vault}/settings")
async def settings(
    vault: str,
    request: Request,
    gw: GatewayDep,
    saved: bool = False,
    cleaned: Annotated[int, Query(ge=-1)] = -1,
    cleaned_audit: Annotated[int, Query(ge=0)] = 0,
    deletion: Literal["", "scheduled", "cancelled"] = "",
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
        grace_days=GRACE_DAYS,
        deletion_notice=person.gettext(DELETION_NOTICES[deletion]) if deletion else "",
    )


@router.post(PREFIX + "/{vault}/settings/deletion")
async def schedule_deletion(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Mark the vault for deletion after the grace period (the vault checks the name typed and the owner's role)."""
    person = await owner(request, gw, vault)
    form = await person.form()
    await gw.vault.schedule_deletion(person.session.user.subject, vault, str(form.get("confirm") or ""))
    return redirect(f"{person.url('settings')}?deletion=scheduled#deletion")


@router.post(PREFIX + "/{vault}/settings/deletion/cancel")
async def cancel_deletion(vault: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    await person.form()
    await gw.vault.cancel_deletion(person.session.user.subject, vault)
    return redirect(f"{person.url('settings')}?deletion=cancelled#deletion")


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
