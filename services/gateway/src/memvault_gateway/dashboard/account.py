"""/account in the dashboard's layout: who is signed in, where agents connect, what has access (with
Revoke), the email sign-in address, sign out. `signin.account` gathers what it shows."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from fastapi import Request
from fastapi.responses import HTMLResponse

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import people
from memvault_gateway.context import Gateway
from memvault_gateway.dashboard import i18n
from memvault_gateway.dashboard.common import Owner
from memvault_gateway.dashboard.i18n import N_
from memvault_gateway.store import Session
from memvault_gateway.web.pages import GrantRow

log = logging.getLogger("memvault_gateway")

# The /account page's answers to the address form, given to `page`.
NOT_AN_ADDRESS = N_("%(typed)s is not an email address; write it as name@example.org.")
TOO_MANY_FROM_HERE = N_("Too many links were asked for from here; try again in %(minutes)d minutes.")
TOO_MANY_FOR_ADDRESS = N_("Too many links were asked for this address; try again in %(minutes)d minutes.")
NAME_PROBLEMS = {
    "empty": N_("The name is empty; write the name others should see."),
    "long": N_("The name is %(n)d characters long; use at most %(max)d."),
    "control": N_("The name holds a control or invisible character (%(code)s); remove it."),
}
"""The account page's answers to the name form, by `people.display_name_problem`'s code."""
NAME_CHANGED = N_("Your name is now %(name)s.")
NAME_NOT_CHANGED = N_("The vault could not be reached, so your name was not changed; try again in a moment.")
LINK_SENT = N_(
    "A link to confirm %(address)s is on its way to it (unless another account uses that address). It works once, "
    "within %(minutes)d minutes; until then sign-in links go where they went."
)


async def page(
    request: Request,
    gw: Gateway,
    session: Session,
    *,
    user_name: str,
    mcp_url: str,
    grants: Sequence[GrantRow],
    dev_subject: str = "",
    signed_in_by_proxy: bool = False,
    email_enabled: bool = False,
    email: str | None = None,
    email_problem: str = "",
    name_problem: str = "",
    typed_name: str = "",
    notice: str = "",
    values: Mapping[str, object] | None = None,
    status: int = 200,
) -> HTMLResponse:
    """The account page, with the dashboard's navigation for the person's default (or first) vault.

    With `email_enabled` it has the email sign-in part (`email`: the current address). `notice` and
    `email_problem` (or `name_problem`, with the name as typed in `typed_name`) are catalogue messages (marked with `N_`), translated here and filled in with
    `values`. The page still answers when the vault cannot be reached: grants live in the gateway,
    only the navigation is lost."""
    try:
        vaults = await gw.vault.vaults(session.user.subject)
    except MemvaultError as error:
        log.warning("vaults not listed for the account page", extra={"error": error.kind})
        vaults = []
    chosen = next((v for v in vaults if v.name == "default"), vaults[0] if vaults else None)
    person = Owner(request, gw, session, i18n.language_of(request), vaults, chosen)
    return person.render(
        "account.html",
        "account",
        status,
        account_name=user_name,
        mcp_url=mcp_url,
        grants=grants,
        dev_subject=dev_subject,
        signed_in_by_proxy=signed_in_by_proxy,
        email_enabled=email_enabled,
        email=email,
        email_problem=person.gettext(email_problem) % dict(values or {}) if email_problem else "",
        name_problem=person.gettext(name_problem) % dict(values or {}) if name_problem else "",
        typed_name=typed_name if name_problem else user_name,
        max_name=people.MAX_DISPLAY_NAME_CHARS,
        notice=person.gettext(notice) % dict(values or {}) if notice else "",
    )
