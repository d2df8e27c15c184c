"""Connected apps and service tokens with access to the person's vaults: Revoke, and new service tokens."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core.errors import InvalidArgument
from memvault_core.identity import SCOPES
from memvault_gateway.api import manage
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, Owner, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

MAX_CLIENT_ID_CHARS = 2000

REVOKED = N_("Access revoked: %(name)s can no longer use your vaults.")
DELETED = N_("%(name)s is deleted: its tokens no longer work, and it must register again to connect.")


async def _page(
    person: Owner, gw: GatewayDep, *, notice: str = "", created: dict[str, Any] | None = None
) -> HTMLResponse:
    grants, clients = await asyncio.gather(
        manage.list_grants(person.session, gw), manage.list_clients(person.session, gw)
    )
    return person.render(
        "apps.html",
        "apps",
        grants=grants["grants"],
        clients=clients["clients"],
        mcp_url=gw.mcp_resource,
        scopes=SCOPES,
        created=created,
        notice=notice,
    )


@router.get(PREFIX + "/{vault}/apps")
async def apps(vault: str, request: Request, gw: GatewayDep, revoked: str = "", deleted: str = "") -> HTMLResponse:
    person = await owner(request, gw, vault)
    notice = ""
    if revoked:
        notice = person.gettext(REVOKED) % {"name": revoked[:100]}
    elif deleted:
        notice = person.gettext(DELETED) % {"name": deleted[:100]}
    return await _page(person, gw, notice=notice)


@router.post(PREFIX + "/{vault}/apps/clients/delete")
async def delete_client(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Delete a registered client (the rule is /api/v1's: `manage.delete_client`)."""
    person = await owner(request, gw, vault)
    form = await person.form()
    client_id = str(form.get("client_id") or "")
    if not client_id or len(client_id) > MAX_CLIENT_ID_CHARS:
        raise InvalidArgument(f"client_id must be 1 to {MAX_CLIENT_ID_CHARS} characters", field="client_id")
    answer = await manage.delete_client(person.session, gw, client_id)
    return redirect(f"{person.url('apps')}?deleted={quote(answer['deleted']['client_name'][:100])}")


@router.post(PREFIX + "/{vault}/apps/{grant_id}/revoke")
async def revoke(vault: str, grant_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    await person.form()
    answer = await manage.revoke_grant(grant_id, person.session, gw)
    return redirect(f"{person.url('apps')}?revoked={quote(answer['revoked']['name'])}")


@router.post(PREFIX + "/{vault}/service-tokens")
async def create_service_token(vault: str, request: Request, gw: GatewayDep) -> HTMLResponse:
    """A token for a script, limited to the ticked scopes and vaults; its secret is shown on this page only."""
    person = await owner(request, gw, vault)
    form = await person.form()
    days = str(form.get("expires_in_days") or "").strip()
    body = manage.ServiceTokenRequest.model_validate(
        {
            "name": str(form.get("name") or ""),
            "scopes": form.getlist("scope"),
            "vaults": form.getlist("vault"),
            "expires_in_days": int(days) if days.isdigit() and len(days) < 6 else (days or None),
        }
    )
    answer = await manage.create_service_token(body, person.session, gw)
    created: dict[str, Any] = json.loads(bytes(answer.body))
    response = await _page(person, gw, created=created)
    response.status_code = 201
    return response
