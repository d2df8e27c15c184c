"""Owner sign-in with a local account: /login, /logout and the one-time /setup/<token> links."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import credentials, people, sessions
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.dashboard.i18n import N_, words_of
from memvault_gateway.signin import oidc
from memvault_gateway.web import pages
from memvault_gateway.web.http import HOME, client_address, safe_next
from memvault_gateway.web.throttle import limited

log = logging.getLogger("memvault_gateway")

router = APIRouter()
SIGNED_OUT = "signed-out"
"""Query parameter of the sign-in page after signing out: it then says so."""
CONNECTING = N_("An app asked to connect to your memvault. Sign in, then choose what it may use.")
"""What the sign-in page says when an app sent the person here (before, nothing said why)."""
EXPIRED = N_("The sign-in form expired; try again.")
PASSWORDS_DIFFER = N_("the two passwords differ")
FROM_AUTH = (
    N_("This form was not sent from this site; open the page on this site and submit it from there."),
    N_("use at least 12 characters (a few unrelated words work well)"),
    N_("use at most 256 characters"),
)
"""`auth`'s English answers shown on these pages, for the catalogue (a test keeps them equal to auth's)."""


async def _login_page(
    gw: Gateway,
    request: Request,
    next_path: str,
    error: str = "",
    status: int = 200,
    *,
    username: str = "",
    notice: str = "",
    values: Mapping[str, object] | None = None,
) -> Response:
    """The sign-in page in the request's language; `error` and `notice` are catalogue messages (`values`
    fill the error's placeholders)."""
    words = words_of(request)
    token = sessions.login_csrf(gw, request)
    if not notice and next_path.startswith("/authorize?"):
        notice = CONNECTING
    settings = gw.settings.oidc
    response = pages.login(
        next_path=next_path,
        csrf=token,
        error=words(error, values) if error else "",
        notice=words(notice) if notice else "",
        username=username,
        local_accounts=gw.settings.login.local_accounts,
        oidc_label=settings.button_label if settings.enabled else "",
        form_action=await oidc.sign_in_form_targets(gw),
        email_sign_in=gw.settings.smtp.enabled,
        status=status,
        words=words,
    )
    sessions.keep_login_csrf(gw, response, token)
    return response


@router.get("/login")
async def login_form(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    next_path = safe_next(request.query_params.get("next"))
    if await sessions.current_session(gw, request) is not None:
        return RedirectResponse(next_path, status_code=302)
    notice = N_("You are signed out.") if SIGNED_OUT in request.query_params else ""
    return await _login_page(gw, request, next_path, notice=notice)


@router.post("/login", dependencies=[Depends(limited("login"))])
async def login(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    form = await request.form()
    next_path = safe_next(str(form.get("next") or ""))
    if not sessions.same_origin(gw, request):
        return await _login_page(gw, request, next_path, sessions.CROSS_SITE, 403)
    if not sessions.login_csrf_ok(gw, request, str(form.get("csrf_token") or "")):
        return await _login_page(gw, request, next_path, EXPIRED, 403)
    if not gw.settings.login.local_accounts:
        return await _login_page(gw, request, next_path, N_("Password sign-in is turned off here."), 403)
    username = str(form.get("username") or "").strip().lower()
    password = str(form.get("password") or "")
    # Counted per user name and address: a stranger's wrong guesses lock the stranger out, not the owner.
    failures = (username, client_address(request) or "unknown")
    if await gw.throttle.blocked("login-failures", *failures):
        wait = await gw.throttle.retry_after("login-failures", *failures)
        log.warning("sign-in refused", extra={"reason": "too many failures for this user name from this address"})
        return await _login_page(
            gw,
            request,
            next_path,
            N_("Too many failed attempts for this user from here; try again in %(minutes)s minutes."),
            429,
            username=username[:100],
            values={"minutes": wait // 60 + 1},
        )
    user = await gw.store.user_by_username(username) if username and len(username) < 100 else None
    ok = await asyncio.to_thread(credentials.check_password, password[:1024], user.password_hash if user else None)
    if user is None or not ok or user.disabled:
        log.info("sign-in refused", extra={"reason": "bad credentials"})
        await gw.throttle.count("login-failures", *failures)
        if user is not None:
            with contextlib.suppress(MemvaultError):
                await gw.vault.ensure_account(user.subject, user.display_name)
                await gw.vault.audit(user.subject, "session.refuse", target=username, details={"method": "password"})
        return await _login_page(
            gw, request, next_path, N_("Wrong user name or password."), 401, username=username[:100]
        )
    await people.ensure_vault_account(gw, user)
    await sessions.start_session(gw, request, user, "password")
    return RedirectResponse(next_path, status_code=303)


@router.post("/logout")
async def logout(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    form = await request.form()
    session = await sessions.current_session(gw, request)
    response = RedirectResponse(f"/login?{SIGNED_OUT}", status_code=303)
    if session is not None and not sessions.csrf_ok(gw, request, session, str(form.get("csrf_token") or "")):
        return sessions.form_refused(gw, request, page=HOME)
    await sessions.end_session(gw, request, response)
    return response


_NOT_VALID = {
    "replaced": N_(
        "This link was replaced by a newer one; the newest link is printed by `memvault-dev setup-link` "
        "(or `memvault-gateway setup-link`), or ask the administrator who sent you this one for it."
    ),
    "used": N_("This setup link was used already: sign in with the password it set, or ask for a new link."),
    "expired": N_("This setup link has expired; ask for a new one (`memvault-dev setup-link` under `make run`)."),
    "unknown": N_(
        "This setup link is not known here: check that it was copied whole and that its address "
        "(host and port) is this memvault's."
    ),
}


async def _not_valid(gw: Gateway, request: Request, token_hash: str | None) -> Response:
    """Why a setup link cannot be used, so that a stale one points to where the newest is printed."""
    state = await gw.store.setup_link_state(token_hash) if token_hash else "unknown"
    text = _NOT_VALID.get(state, _NOT_VALID["unknown"])
    return pages.message(N_("Link not valid"), text, 404, words=words_of(request))


@router.get("/setup/{token}")
async def setup_form(token: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    token_hash = credentials.token_hash(token) if len(token) < 200 else None
    user = await gw.store.setup_link_user(token_hash) if token_hash else None
    if user is None or token_hash is None:
        return await _not_valid(gw, request, token_hash)
    csrf = sessions.login_csrf(gw, request)
    response = pages.setup(username=user.username or user.subject, token=token, csrf=csrf, words=words_of(request))
    sessions.keep_login_csrf(gw, response, csrf)
    return response


@router.post("/setup/{token}", dependencies=[Depends(limited("setup"))])
async def setup(token: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    form = await request.form()
    token_hash = credentials.token_hash(token) if len(token) < 200 else None
    user = await gw.store.setup_link_user(token_hash) if token_hash else None
    words = words_of(request)
    if user is None or token_hash is None:
        return await _not_valid(gw, request, token_hash)
    csrf = str(form.get("csrf_token") or "")
    if not sessions.same_origin(gw, request):
        return pages.message(N_("Request refused"), sessions.CROSS_SITE, 403, words=words)
    if not sessions.login_csrf_ok(gw, request, csrf):
        return pages.message(
            N_("Request refused"), N_("The form expired; open the setup link again."), 403, words=words
        )
    password = str(form.get("password") or "")
    problem = credentials.password_problem(password)
    if problem is None and password != str(form.get("password_again") or ""):
        problem = PASSWORDS_DIFFER
    if problem:
        return pages.setup(
            username=user.username or user.subject,
            token=token,
            csrf=csrf,
            error=words(problem),
            status=400,
            words=words,
        )
    password_hash = await asyncio.to_thread(credentials.hash_password, password)
    user = await gw.store.use_setup_link(token_hash, password_hash)
    if user is None:
        return await _not_valid(gw, request, token_hash)
    await people.ensure_vault_account(gw, user)
    try:
        await gw.vault.audit(user.subject, "account.password_set", target=user.username or user.subject)
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": "account.password_set", "error": error.kind})
    await sessions.start_session(gw, request, user, "password")
    return RedirectResponse(HOME, status_code=303)
