"""/account in the dashboard's layout: who is signed in, where agents connect, what has access (with
Revoke), the email sign-in address, sign out. `signin.account` gathers what it shows."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from memvault_core.errors import MemvaultError
from memvault_gateway.context import Gateway
from memvault_gateway.dashboard import i18n
from memvault_gateway.dashboard.common import Owner
from memvault_gateway.store import Session
from memvault_gateway.web.pages import GrantRow

log = logging.getLogger("memvault_gateway")


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
    email_section: str = "",
) -> HTMLResponse:
    """The account page, with the dashboard's navigation for the person's default (or first) vault.

    `email_section` is `account_email.section`'s HTML (every value escaped there). The page still
    answers when the vault cannot be reached: grants live in the gateway, only the navigation is lost."""
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
        account_name=user_name,
        mcp_url=mcp_url,
        grants=grants,
        dev_subject=dev_subject,
        signed_in_by_proxy=signed_in_by_proxy,
        email_section=Markup(email_section),  # noqa: S704 (escaped where it is built)
    )
