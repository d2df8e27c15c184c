"""The signed-in person's own email sign-in address, confirmed from the new mailbox before it counts.

/account offers it when email sign-in is on. Typing an address mails a confirmation link to it;
only opening that link (and pressing Confirm) makes it the account's address, because whoever
reads the mailbox can sign in from then on: a typo must not hand the account to a stranger. The
answer does not say whether another account has the address (none is mailed then). Removing the
address takes effect at once.
"""

from __future__ import annotations

import logging
from html import escape

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import credentials, people, sessions
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.dashboard.account import LINK_SENT, NOT_AN_ADDRESS, TOO_MANY_FOR_ADDRESS, TOO_MANY_FROM_HERE
from memvault_gateway.dashboard.i18n import N_, words_of
from memvault_gateway.signin import account, email_login, mail
from memvault_gateway.store import EmailTaken, User
from memvault_gateway.web import pages
from memvault_gateway.web.throttle import limited, peer_of

log = logging.getLogger("memvault_gateway")

router = APIRouter()

ACCOUNT_PATH = account.ACCOUNT_PATH
PATH = ACCOUNT_PATH + "/email"
TURNED_OFF = N_("Email sign-in is turned off here (MEMVAULT_SMTP__HOST is not set), so there is no address to set.")
NOT_VALID = N_("This confirmation link was used already or has expired; ask for a new one on your account page.")


async def _audit(gw: Gateway, user: User, email_set: bool) -> None:
    try:
        await gw.vault.audit(
            user.subject, "account.email", target=user.subject, details={"set": str(email_set).lower()}
        )
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": "account.email", "error": error.kind})


async def _mail_confirmation(gw: Gateway, user: User, address: str) -> None:
    try:
        if await gw.store.user_by_email(address) is not None:
            return  # theirs already, or someone else's: nobody is told which
        token = credentials.new_token(email_login.LINK_PREFIX)
        await gw.store.create_email_confirmation(user.id, credentials.token_hash(token), address, email_login.LIFETIME)
        name = user.display_name or user.username or user.subject
        text = (
            f"Someone signed in to memvault at {gw.issuer} as {name} asked to send sign-in links to this address.\n\n"
            f"Open this link to confirm it. It works once, within {email_login.LIFETIME.seconds // 60} minutes:\n\n"
            f"{gw.issuer}{PATH}/{token}\n\n"
            "If you did not ask for it, ignore this mail: nothing changes without the link.\n"
        )
        await mail.send(
            gw.settings.smtp, mail.message(gw.settings.smtp, address, "Confirm your memvault address", text)
        )
        log.info("address confirmation sent")
    except mail.MailNotSent as error:
        log.error("address confirmation not sent", extra={"reason": str(error)})
    except Exception as error:  # nobody awaits this task: a failure is logged here or nowhere
        log.error("address confirmation not sent", extra={"reason": type(error).__name__})


@router.post(PATH)
async def change(request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Mail a confirmation link to a new address, or (empty address) remove the current one."""
    form = await request.form()
    session = await sessions.current_session(gw, request)
    if session is None:
        return RedirectResponse(f"/login?next={ACCOUNT_PATH}", status_code=303)
    if not sessions.csrf_ok(gw, request, session, str(form.get("csrf_token") or "")):
        return sessions.form_refused(gw, request, page=ACCOUNT_PATH)
    if not gw.settings.smtp.enabled:
        return pages.message(email_login.TURNED_OFF_TITLE, TURNED_OFF, 404, words=words_of(request))
    typed = str(form.get("email") or "").strip()
    if not typed:
        await gw.store.set_email(session.user.id, None)
        await _audit(gw, session.user, email_set=False)
        return RedirectResponse(ACCOUNT_PATH, status_code=303)
    address = people.normalized_email(typed)
    if address is None:
        return await account.page(
            request, gw, session, email_problem=NOT_AN_ADDRESS, values={"typed": typed[:254]}, status=400
        )
    for rule, key, problem in (
        ("email-link", peer_of(request), TOO_MANY_FROM_HERE),
        ("email-link-address", address, TOO_MANY_FOR_ADDRESS),
    ):
        if not await gw.throttle.allow(rule, key):
            wait = await gw.throttle.retry_after(rule, key)
            return await account.page(
                request, gw, session, email_problem=problem, values={"minutes": wait // 60 + 1}, status=429
            )
    email_login.send_later(_mail_confirmation(gw, session.user, address))
    return await account.page(
        request,
        gw,
        session,
        notice=LINK_SENT,
        values={"address": address, "minutes": email_login.LIFETIME.seconds // 60},
    )


@router.get(PATH + "/{token}", dependencies=[Depends(limited("email-sign-in"))])
async def open_confirmation(token: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Which address for whom, and the button that confirms it (a GET changes nothing)."""
    words = _ = words_of(request)
    if not gw.settings.smtp.enabled:
        return pages.message(email_login.TURNED_OFF_TITLE, TURNED_OFF, 404, words=words)
    found = await gw.store.email_link_user(credentials.token_hash(token), "confirm") if len(token) < 200 else None
    user, address = found if found is not None else (None, None)
    if user is None or address is None:
        return pages.message(email_login.LINK_NOT_VALID, NOT_VALID, 404, words=words)
    csrf = sessions.login_csrf(gw, request)
    question = escape(
        _("Send memvault sign-in links for %(name)s to %(address)s? Whoever reads this mailbox can then sign in.")
    ) % {
        "name": f"<strong>{escape(user.display_name or user.username or user.subject)}</strong>",
        "address": f"<strong>{escape(address)}</strong>",
    }
    body = (
        f"<p>{question}</p>"
        f"<form method=post action='{PATH}/{escape(token)}'><input type=hidden name='csrf_token' value='{escape(csrf)}'>"
        + ("<button class=primary type=submit autofocus>" + escape(_("Confirm")) + "</button></form>")
    )
    response = pages.page(_("Confirm your address"), body, language=words.language)
    sessions.keep_login_csrf(gw, response, csrf)
    return response


@router.post(PATH + "/{token}", dependencies=[Depends(limited("email-sign-in"))])
async def confirm(token: str, request: Request, gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    """Spend the link and make its address the account's."""
    words = words_of(request)
    if not gw.settings.smtp.enabled:
        return pages.message(email_login.TURNED_OFF_TITLE, TURNED_OFF, 404, words=words)
    form = await request.form()
    if not sessions.login_csrf_ok(gw, request, str(form.get("csrf_token") or "")):
        return pages.message(
            email_login.REFUSED,
            N_("The form expired or came from another site; open the link again."),
            403,
            words=words,
        )
    try:
        confirmed = await gw.store.use_email_confirmation(credentials.token_hash(token)) if len(token) < 200 else None
    except EmailTaken:
        return pages.message(
            N_("Address taken"), N_("Another account uses this address by now; nothing changed."), 409, words=words
        )
    if confirmed is None:
        return pages.message(email_login.LINK_NOT_VALID, NOT_VALID, 404, words=words)
    user, address = confirmed
    await _audit(gw, user, email_set=True)
    return pages.message(
        N_("Address confirmed"), N_("Sign-in links now go to %(address)s."), words=words, values={"address": address}
    )
