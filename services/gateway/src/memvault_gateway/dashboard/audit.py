"""The vault's audit log: who did what, filtered by actor, action, target and time, a page at a time."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from memvault_core import limits
from memvault_core.errors import InvalidArgument
from memvault_gateway.api import vault_settings as api_vault_settings
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner

router = APIRouter(route_class=DashboardRoute)

PAGE_SIZE = 50
Filter = Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)]


def _day(value: str, field: str) -> datetime | None:
    if not value.strip():
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidArgument(f"{field} must be a date such as 2027-01-31", field=field) from None


@router.get(PREFIX + "/{vault}/audit")
async def audit(
    vault: str,
    request: Request,
    gw: GatewayDep,
    actor: Filter = "",
    action: Filter = "",
    target: Filter = "",
    since: Annotated[str, Query(max_length=40)] = "",
    until: Annotated[str, Query(max_length=40)] = "",
    before: Annotated[int, Query(ge=0, le=limits.MAX_INT64)] = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    answer = await api_vault_settings.vault_audit(
        vault,
        person.caller,
        gw,
        actor=actor.strip(),
        action=action.strip(),
        target=target.strip(),
        since=_day(since, "since"),
        until=_day(until, "until"),
        limit=PAGE_SIZE,
        before=before,
    )
    filters = {"actor": actor, "action": action, "target": target, "since": since, "until": until}
    older = (
        "?" + urlencode({**{k: v for k, v in filters.items() if v}, "before": answer["next_before"]})
        if answer["next_before"]
        else ""
    )
    return person.render("audit.html", "audit", entries=answer["entries"], filters=filters, older=older)
