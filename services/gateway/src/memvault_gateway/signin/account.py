"""/account: the signed-in owner's page (what has access, revoke, sign out), shown in the dashboard's
layout (`dashboard.account`) with its navigation.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import people, sessions
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.dashboard import account as dashboard_account
from memvault_gateway.store import Session
from memvault_gateway.web import pages

log = logging.getLogger("memvault_gateway")

router = APIRouter()

ACCOUNT_PATH = "/account"


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if value else ""  # the page says "never"


@router.get(ACCOUNT_PATH)
async def account(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    session = await sessions.current_session(gw, request)
    if session is None:
        return RedirectResponse(f"/login?next={ACCOUNT_PATH}", status_code=302)
    if request.query_params.get("renamed") == "1":  # after the name form: say so
        user = session.user
        name = user.display_name or user.username or user.subject
        return await page(request, gw, session, notice=dashboard_account.NAME_CHANGED, values={"name": name})
    return await page(request, gw, session)


async def page(
    request: Request,
    gw: Gateway,
    session: Session,
    *,
    notice: str = "",
    email_problem: str = "",
    name_problem: str = "",
    typed_name: str = "",
    values: Mapping[str, object] | None = None,
    status: int = 200,
) -> Response:
    """The account page of the signed-in `session`; `notice` / `email_problem` as `dashboard.account.page`."""
    grants = await gw.store.grants_of(session.user.id)
    user = session.user
    return await dashboard_account.page(
        request,
        gw,
        session,
        user_name=user.display_name or user.username or user.subject,
        mcp_url=gw.mcp_resource,
        grants=[
            pages.GrantRow(
                g.id,
                g.kind,
                g.name,
                " ".join(g.scopes),
                ", ".join(g.vaults),
                _when(g.created_at),
                _when(g.last_used_at),
            )
            for g in grants
        ],
        dev_subject=gw.settings.gateway.dev_subject if gw.dev_mode_usable else "",
        signed_in_by_proxy=sessions.signed_in_by_proxy(gw, request),
        email_enabled=gw.settings.smtp.enabled,
        email=await gw.store.email_of(user.id) if gw.settings.smtp.enabled else None,
        email_problem=email_problem,
        name_problem=name_problem,
        typed_name=typed_name,
        notice=notice,
        values=values,
        status=status,
    )


@router.post(ACCOUNT_PATH + "/name")
async def rename(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Change the signed-in person's display name: checked (length, no control characters), shown at once
    wherever the name appears, audited as `account.rename`."""
    form = await request.form()
    session = await sessions.current_session(gw, request)
    if session is None:
        return RedirectResponse(f"/login?next={ACCOUNT_PATH}", status_code=303)
    if not sessions.csrf_ok(gw, request, session, str(form.get("csrf_token") or "")):
        return sessions.form_refused(gw, request, page=ACCOUNT_PATH)
    typed = str(form.get("display_name") or "")[: 4 * people.MAX_DISPLAY_NAME_CHARS]
    problem = people.display_name_problem(typed)
    if problem is not None:
        code, values = problem
        return await page(
            request,
            gw,
            session,
            name_problem=dashboard_account.NAME_PROBLEMS[code],
            typed_name=typed,
            values=values,
            status=400,
        )
    try:
        await people.rename(gw, session.user, typed)
    except MemvaultError as error:
        log.error("display name not changed", extra={"error": error.kind})
        return await page(
            request, gw, session, name_problem=dashboard_account.NAME_NOT_CHANGED, typed_name=typed, status=503
        )
    return RedirectResponse(ACCOUNT_PATH + "?renamed=1", status_code=303)


@router.post(ACCOUNT_PATH + "/grants/{grant_id}/revoke")
async def revoke(grant_id: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    form = await request.form()
    session = await sessions.current_session(gw, request)
    if session is None:
        return RedirectResponse(f"/login?next={ACCOUNT_PATH}", status_code=303)
    if not sessions.csrf_ok(gw, request, session, str(form.get("csrf_token") or "")):
        return sessions.form_refused(gw, request, page=ACCOUNT_PATH)
    try:
        uuid.UUID(grant_id)
    except ValueError:
        return pages.message("Not found", "No such grant.", 404)
    revoked = await gw.store.revoke_grant(grant_id, "revoked by the owner", user_id=session.user.id)
    if revoked is not None:
        try:
            await gw.vault.audit(
                session.user.subject,
                "grant.revoke",
                target=revoked.id,
                details={"client": revoked.name, "kind": revoked.kind},
            )
        except MemvaultError as error:
            log.error("audit entry not written", extra={"action": "grant.revoke", "error": error.kind})
    return RedirectResponse(ACCOUNT_PATH, status_code=303)
