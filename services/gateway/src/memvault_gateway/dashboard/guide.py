"""The operating guide agents read first: edit it, see its versions, load the newer default."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_gateway import api_memories
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

SAVED = N_("Saved as version %(version)d; agents read it from now on.")
VERSIONS_SHOWN = 20


@router.get(PREFIX + "/{vault}/guide")
async def guide(
    vault: str,
    request: Request,
    gw: GatewayDep,
    saved: int = 0,
    show: int = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    current = await api_memories.get_guide(vault, person.caller, gw, include_default=False)
    versions = await api_memories.guide_versions(
        vault, person.caller, gw, limit=VERSIONS_SHOWN, before_version=0, include_text=True
    )
    shown = next((v for v in versions["versions"] if v["version"] == show), None) if show else None
    return person.render(
        "guide.html",
        "guide",
        guide=current,
        versions=versions["versions"],
        shown=shown,
        notice=person.gettext(SAVED) % {"version": saved} if saved > 0 else "",
    )


@router.post(PREFIX + "/{vault}/guide")
async def save(vault: str, request: Request, gw: GatewayDep) -> Response:
    """A new version of the guide; refused if someone saved another since this page was opened."""
    person = await owner(request, gw, vault)
    form = await person.form()
    version = form_number(form, "version")
    if form.get("adopt_default"):
        answer = await api_memories.adopt_default_guide(
            vault, api_memories.VersionIn(expected_version=version), person.caller, gw
        )
    else:
        body = api_memories.GuideIn(text=str(form.get("text") or "").replace("\r\n", "\n"), expected_version=version)
        answer = await api_memories.put_guide(vault, body, person.caller, gw)
    return redirect(f"{person.url('guide')}?saved={answer['version']}")
