"""Email sign-in: a single-use link, good for 15 minutes, mailed to the address an account has.

On when `MEMVAULT_SMTP__HOST` is set. The sign-in page (and so the consent page's sign-in, which
carries `next`) offers "Email me a sign-in link". The answer is the same whether or not the address
belongs to an account, and so is its timing: looking the address up, making the link and mailing
it all happen after the answer has gone. Only the token's hash is stored; the path to continue to
is stored with it (checked by safe_next when asked for and when used), so the link itself carries
nothing but the token. Opening the link shows whom it signs in and a button: the sign-in is a POST
(with the double-submit CSRF token), so a mail scanner that fetches links does not spend it, and a
person sent someone else's link sees whose account it is before using it. Neither the address nor
the link is ever logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import credentials, people, sessions
from memvault_gateway.auth.sessions import CROSS_SITE
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.dashboard.i18n import N_, words_of
from memvault_gateway.signin import mail
from memvault_gateway.signin.login import EXPIRED, _login_page
from memvault_gateway.web import pages
from memvault_gateway.web.http import safe_next
from memvault_gateway.web.throttle import limited, peer_of

log = logging.getLogger("memvault_gateway")

router = APIRouter()

LINK_PREFIX = "mvmail_"
LIFETIME = timedelta(minutes=15)
PATH = "/login/email"
SENT = N_(
    "If that address belongs to an account here, a sign-in link is on its way. It works once, within"
    " %(minutes)s minutes; open it in this browser to continue where you were."
)
TURNED_OFF = N_(
    "Email sign-in is turned off here; sign in another way, or ask the operator to set MEMVAULT_SMTP__HOST."
)
NOT_VALID = N_("This sign-in link was used already or has expired; ask for a new one on the sign-in page.")
REFUSED = N_("Request refused")
LINK_NOT_VALID = N_("Link not valid")
TURNED_OFF_TITLE = N_("Email sign-in is off")

# Links being looked up and mailed after their answer went out; kept so they are not collected mid-way.
_sending: set[asyncio.Task[None]] = set()


def _turned_off(request: Request) -> Response:
    return pages.message(TURNED_OFF_TITLE, TURNED_OFF, 404, words=words_of(request))


def send_later(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` (it catches and logs its own failures) after the answer has gone."""
    task = asyncio.create_task(work)
    _sending.add(task)
    task.add_done_callback(_sending.discard)


async def settled() -> None:
    """Wait until every link asked for so far has been mailed (or has failed): tests, and shutting down."""
    while _sending:
        await asyncio.gather(*list(_sending), return_exceptions=True)


async def _mail_link(gw: Gateway, address: str, next_path: str) -> None:
    user = await gw.store.user_by_email(address)
    if user is None or user.disabled:
        return
    token = credentials.new_token(LINK_PREFIX)
    await gw.store.create_email_link(user.id, credentials.token_hash(token), next_path, LIFETIME)
    try:
        await gw.vault.ensure_account(user.subject, user.display_name)
        await gw.vault.audit(user.subject, "session.email_link", target=user.username or user.subject)
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": "session.email_link", "error": error.kind})
    expires = (datetime.now(UTC) + LIFETIME).strftime("%H:%M UTC")
    name = user.display_name or user.username or user.subject
    text = (
        f"Someone (we hope you) asked to sign in to memvault at {gw.issuer} as {name}.\n\n"
        f"Open this link to sign in. It works once, until {expires}:\n\n"
        f"{gw.issuer}{PATH}/{token}\n\n"
        "If you did not ask for it, ignore this mail: nobody can sign in without the link.\n"
    )
    try:
        await mail.send(gw.settings.smtp, mail.message(gw.settings.smtp, address, "Your memvault sign-in link", text))
    except mail.MailNotSent as error:
        log.error("sign-in link not sent", extra={"reason": str(error)})
        return
    log.info("sign-in link sent")


async def _mail_link_safely(gw: Gateway, address: str, next_path: str) -> None:
    try:
        await _mail_link(gw, address, next_path)
    except Exception as error:  # nobody awaits this task: a failure is logged here or nowhere
        log.error("sign-in link not sent", extra={"reason": type(error).__name__})


@router.post(PATH)
async def ask_for_link(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Mail a sign-in link to the address, if it is an account's; the answer is the same either way."""
    if not gw.settings.smtp.enabled:
        return _turned_off(request)
    form = await request.form()
    next_path = safe_next(str(form.get("next") or ""))
    if not sessions.same_origin(gw, request):
        return await _login_page(gw, request, next_path, CROSS_SITE, 403)
    if not sessions.login_csrf_ok(gw, request, str(form.get("csrf_token") or "")):
        return await _login_page(gw, request, next_path, EXPIRED, 403)
    address = people.normalized_email(str(form.get("email") or ""))
    if address is None:
        return await _login_page(
            gw, request, next_path, N_("That is not an email address; type it as you@example.org."), 400
        )
    for rule, key, whose, error in (
        (
            "email-link",
            peer_of(request),
            "from here",
            N_("Too many sign-in links were asked for from here; try again in %(minutes)s minutes."),
        ),
        (
            "email-link-address",
            address,
            "for this address",
            N_("Too many sign-in links were asked for for this address; try again in %(minutes)s minutes."),
        ),
    ):
        if not await gw.throttle.allow(rule, key):
            wait = await gw.throttle.retry_after(rule, key)
            log.warning("sign-in link refused", extra={"reason": f"too many links asked for {whose}"})
            return await _login_page(gw, request, next_path, error, 429, values={"minutes": wait // 60 + 1})
    send_later(_mail_link_safely(gw, address, next_path))
    return pages.message(
        N_("Check your email"), SENT, words=words_of(request), values={"minutes": LIFETIME.seconds // 60}
    )


def _confirm_page(name: str, token: str, csrf: str, words: pages.Words) -> Response:
    _ = words
    whom = escape(_("This link signs you in as %(name)s. It works once.")) % {
        "name": f"<strong>{escape(name)}</strong>"
    }
    body = (
        f"<p>{whom}</p>"
        f"<form method=post action='{PATH}/{escape(token)}'>"
        f"<input type=hidden name='csrf_token' value='{escape(csrf)}'>"
        + ("<button class=primary type=submit autofocus>" + escape(_("Sign in")) + "</button></form>")
        + (
            "<p class=muted>"
            + escape(_("Not you, or you did not ask for this link? Close this page; nothing happens."))
        )
        + "</p>"
    )
    return pages.page(_("Sign in to memvault"), body, language=words.language)


@router.get(PATH + "/{token}", dependencies=[Depends(limited("email-sign-in"))])
async def open_link(token: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Who the link signs in, and the button that does it (a GET spends nothing)."""
    if not gw.settings.smtp.enabled:
        return _turned_off(request)
    words = words_of(request)
    found = await gw.store.email_link_user(credentials.token_hash(token)) if len(token) < 200 else None
    if found is None:
        return pages.message(LINK_NOT_VALID, NOT_VALID, 404, words=words)
    user = found[0]
    csrf = sessions.login_csrf(gw, request)
    response = _confirm_page(user.display_name or user.username or user.subject, token, csrf, words)
    sessions.keep_login_csrf(gw, response, csrf)
    return response


@router.post(PATH + "/{token}", dependencies=[Depends(limited("email-sign-in"))])
async def use_link(token: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Spend the link, sign in, and continue where the sign-in was asked for."""
    if not gw.settings.smtp.enabled:
        return _turned_off(request)
    words = words_of(request)
    form = await request.form()
    if not sessions.same_origin(gw, request):
        return pages.message(REFUSED, CROSS_SITE, 403, words=words)
    if not sessions.login_csrf_ok(gw, request, str(form.get("csrf_token") or "")):
        return pages.message(REFUSED, N_("The form expired; open the link from your mail again."), 403, words=words)
    spent = await gw.store.use_email_link(credentials.token_hash(token)) if len(token) < 200 else None
    if spent is None:
        return pages.message(LINK_NOT_VALID, NOT_VALID, 404, words=words)
    user, next_path = spent
    await people.ensure_vault_account(gw, user)
    await sessions.start_session(gw, request, user, "email")
    return RedirectResponse(safe_next(next_path), status_code=303)
