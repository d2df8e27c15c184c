"""The vault's members and their roles: add an account, change or remove a role; administrators also
create accounts, whose one-time setup link is shown here once."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core.errors import InvalidArgument
from memvault_gateway.api import manage
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, Owner, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

ROLES = ("owner", "editor", "viewer")
DONE = {"set": N_("Role saved."), "removed": N_("Member removed.")}


async def _page(
    person: Owner, gw: GatewayDep, *, notice: str = "", created: dict[str, Any] | None = None
) -> HTMLResponse:
    members = await manage.list_members(person.vault_name, person.session, gw)
    return person.render(
        "members.html",
        "members",
        members=members["members"],
        roles=ROLES,
        is_admin=person.session.user.is_admin,
        created=created,
        notice=notice,
    )


def _role(value: object) -> str:
    role = str(value or "")
    if role not in ROLES:
        raise InvalidArgument(f"role must be one of: {', '.join(ROLES)}", field="role")
    return role


@router.get(PREFIX + "/{vault}/members")
async def members(vault: str, request: Request, gw: GatewayDep, done: str = "") -> HTMLResponse:
    person = await owner(request, gw, vault)
    return await _page(person, gw, notice=person.gettext(DONE[done]) if done in DONE else "")


@router.post(PREFIX + "/{vault}/members")
async def set_member(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Give an existing account (by user name) a role here, or change a member's role."""
    person = await owner(request, gw, vault)
    form = await person.form()
    subject = str(form.get("subject") or "").strip()
    if not subject:
        raise InvalidArgument("name the account to add (its user name)", field="subject")
    body = manage.MemberRequest.model_validate({"role": _role(form.get("role"))})
    await manage.set_member(vault, subject[:200], body, person.session, gw)
    return redirect(f"{person.url('members')}?done=set")


@router.post(PREFIX + "/{vault}/members/remove")
async def remove_member(vault: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    form = await person.form()
    await manage.remove_member(vault, str(form.get("subject") or "")[:200], person.session, gw)
    return redirect(f"{person.url('members')}?done=removed")


@router.post(PREFIX + "/{vault}/members/new-account")
async def new_account(vault: str, request: Request, gw: GatewayDep) -> HTMLResponse:
    """An administrator creates an account, gives it a role here, and sees its one-time setup link."""
    person = await owner(request, gw, vault)
    form = await person.form()
    role = _role(form.get("role"))
    body = manage.AccountRequest.model_validate({"username": str(form.get("username") or "")})
    answer = await manage.create_account(body, person.session, gw)
    created: dict[str, Any] = json.loads(bytes(answer.body))
    await manage.set_member(
        vault, created["subject"], manage.MemberRequest.model_validate({"role": role}), person.session, gw
    )
    response = await _page(person, gw, created={**created, "role": role})
    response.status_code = 201
    return response
