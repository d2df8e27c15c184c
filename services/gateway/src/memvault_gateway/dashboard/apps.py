"""Connected apps and service tokens with access to the person's vaults, with Revoke (as /account has)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_gateway import api
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

REVOKED = N_("Access revoked: %(name)s can no longer use your vaults.")


@router.get(PREFIX + "/{vault}/apps")
async def apps(vault: str, request: Request, gw: GatewayDep, revoked: str = "") -> HTMLResponse:
    person = await owner(request, gw, vault)
    grants = await api.list_grants(person.session, gw)
    return person.render(
        "apps.html",
        "apps",
        grants=grants["grants"],
        mcp_url=gw.mcp_resource,
        notice=person.gettext(REVOKED) % {"name": revoked[:100]} if revoked else "",
    )


@router.post(PREFIX + "/{vault}/apps/{grant_id}/revoke")
async def revoke(vault: str, grant_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    await person.form()
    answer = await api.revoke_grant(grant_id, person.session, gw)
    return redirect(f"{person.url('apps')}?revoked={quote(answer['revoked']['name'])}")
