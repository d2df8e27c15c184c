"""The operating guide agents read first: edit it, see its versions, load the newer default."""

from __future__ import annotations

import difflib

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.api import vault_settings as api_vault_settings
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

SAVED = N_("Saved as version %(version)d; agents read it from now on.")
VERSIONS_SHOWN = 20


def _diff(old: str, new: str, old_version: int, new_version: int) -> list[tuple[str, str]]:
    """The lines of a unified diff from an earlier version to the current one, each with its kind."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"version {old_version}", f"version {new_version}", lineterm=""
    )
    kinds = {"+": "added", "-": "removed", "@": "hunk"}
    return [(kinds.get(line[:1], "same") if not line.startswith(("+++", "---")) else "file", line) for line in lines]


@router.get(PREFIX + "/{vault}/guide")
async def guide(
    vault: str,
    request: Request,
    gw: GatewayDep,
    saved: int = 0,
    show: int = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    current = await api_vault_settings.get_guide(vault, person.caller, gw, include_default=False)
    versions = await api_vault_settings.guide_versions(
        vault, person.caller, gw, limit=VERSIONS_SHOWN, before_version=0, include_text=True
    )
    shown = next((v for v in versions["versions"] if v["version"] == show), None) if show else None
    diff = _diff(shown["text"], current["text"], shown["version"], current["version"]) if shown else []
    return person.render(
        "guide.html",
        "guide",
        guide=current,
        versions=versions["versions"],
        shown=shown,
        diff=diff,
        notice=person.gettext(SAVED) % {"version": saved} if saved > 0 else "",
    )


@router.post(PREFIX + "/{vault}/guide")
async def save(vault: str, request: Request, gw: GatewayDep) -> Response:
    """A new version of the guide; refused if someone saved another since this page was opened."""
    person = await owner(request, gw, vault)
    form = await person.form()
    version = form_number(form, "version")
    if form.get("adopt_default"):
        answer = await api_vault_settings.adopt_default_guide(
            vault, api_shapes.VersionIn(expected_version=version), person.caller, gw
        )
    else:
        body = api_shapes.GuideIn(text=str(form.get("text") or "").replace("\r\n", "\n"), expected_version=version)
        answer = await api_vault_settings.put_guide(vault, body, person.caller, gw)
    return redirect(f"{person.url('guide')}?saved={answer['version']}")
