"""What every dashboard page shares: the signed-in owner, the vault in the path, forms, errors.

Pages act as the signed-in person through the same code as /api/v1 (the route functions of
`api.memories`, `api.imports`, `api.vault_settings` and `api.manage`, and the gateway's `VaultClient`), so the vault applies the same rules as for the API: a
viewer's approve is refused by the vault, whatever the page showed. Errors become pages in the
dashboard's layout, never JSON and never a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.datastructures import FormData

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import wire
from memvault_core.errors import InvalidArgument, MemvaultError, NotFound
from memvault_core.identity import SCOPES
from memvault_core.validation import describe
from memvault_gateway.auth import sessions
from memvault_gateway.auth.bearer import Principal
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.dashboard import i18n, render
from memvault_gateway.store import Session

log = logging.getLogger("memvault_gateway")

PREFIX = "/dashboard"

GatewayDep = Annotated[Gateway, Depends(gateway)]

SECTIONS = (
    ("overview", i18n.N_("Overview")),
    ("review", i18n.N_("Review")),
    ("memories", i18n.N_("Memories")),
    ("sources", i18n.N_("Sources")),
    ("imports", i18n.N_("Imports")),
    ("archive", i18n.N_("Archive")),
    ("guide", i18n.N_("Guide")),
    ("settings", i18n.N_("Settings")),
    ("index", i18n.N_("Index")),
    ("backup", i18n.N_("Backup")),
    ("members", i18n.N_("Members")),
    ("apps", i18n.N_("Apps")),
    ("audit", i18n.N_("Audit")),
)
"""The navigation, per vault; later pages are added here."""

_STATUS_OF_ERROR = {
    "not_found": 404,
    "invalid_argument": 400,
    "conflict": 409,
    "permission_denied": 403,
    "unauthenticated": 401,
    "unavailable": 503,
    "limit_exceeded": 413,
}


class SignInFirst(Exception):
    """No one is signed in: the page sends the browser to sign in and come back."""


class FormRefused(Exception):
    """A form without this session's CSRF token, or from another site."""


def section_url(vault: str, section: str) -> str:
    base = f"{PREFIX}/{quote(vault, safe='')}"
    return base if section == "overview" else f"{base}/{section}"


@dataclass
class Owner:
    """The signed-in person on one dashboard page, with the vaults they hold and the one in the path."""

    request: Request
    gw: Gateway
    session: Session
    language: str
    vaults: list[vpb.VaultInfo]
    vault: vpb.VaultInfo | None

    @property
    def caller(self) -> Principal:
        """The person as /api/v1 sees a browser session: every scope, every vault they hold a role in."""
        return Principal(subject=self.session.user.subject, client="", scopes=SCOPES, vaults=())

    @property
    def vault_name(self) -> str:
        assert self.vault is not None
        return str(self.vault.name)

    @property
    def role(self) -> str:
        return str(self.vault.role) if self.vault is not None else ""

    @property
    def can_review(self) -> bool:
        """Owners and editors decide on proposals, imports and memories; viewers only look."""
        return self.role in ("owner", "editor")

    @property
    def is_owner(self) -> bool:
        return self.role == "owner"

    @property
    def delete_after(self) -> str:
        """When the vault will be deleted, as the pages show it; empty unless it is pending deletion."""
        if self.vault is None or not self.vault.HasField("delete_after"):
            return ""
        return render.when(wire.from_timestamp(self.vault, "delete_after"))

    def gettext(self, message: str) -> str:
        return i18n.translations(self.language).gettext(message)

    async def form(self) -> FormData:
        """The posted form, if it carries this session's CSRF token and came from our own pages."""
        form = await self.request.form()
        if not sessions.csrf_ok(self.gw, self.request, self.session, str(form.get("csrf_token") or "")):
            raise FormRefused
        return form

    def url(self, section: str) -> str:
        return section_url(self.vault_name, section)

    def render(self, template: str, section: str, status: int = 200, **context: Any) -> HTMLResponse:
        user = self.session.user
        return render.render(
            self.language,
            template,
            {
                "owner": self,
                "user_name": user.display_name or user.username or user.subject,
                "csrf": self.session.csrf_token,
                "vault": self.vault,
                "vaults": self.vaults,
                "section": section,
                "sections": [
                    (name, self.gettext(label), section_url(str(self.vault.name), name)) for name, label in SECTIONS
                ]
                if self.vault is not None
                else [],
                "here": self.request.url.path,
                "notice": "",
                **context,
            },
            status,
        )


async def owner(request: Request, gw: Gateway, vault: str | None = None) -> Owner:
    """The signed-in person and, with `vault`, that vault (404 if it is not open to them)."""
    session = await sessions.current_session(gw, request)
    if session is None:
        raise SignInFirst
    vaults = await gw.vault.vaults(session.user.subject)
    chosen = None
    if vault is not None:
        chosen = next((v for v in vaults if v.name == vault), None)
        if chosen is None:
            names = ", ".join(v.name for v in vaults) or "(none)"
            raise NotFound(f"no vault named {vault[:64]!r} is open to you; your vaults: {names}", field="vault")
    return Owner(request, gw, session, i18n.language_of(request), vaults, chosen)


def redirect(url: str) -> RedirectResponse:
    """After a form: the page to see the result on (post, redirect, get)."""
    return RedirectResponse(url, status_code=303)


def _error_page(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    language = i18n.language_of(request)
    vault = request.path_params.get("vault")
    gettext = i18n.translations(language).gettext
    return render.render(
        language,
        "error.html",
        {
            "title": gettext(title),
            "detail": detail,
            "back": section_url(vault, "overview") if isinstance(vault, str) else PREFIX,
        },
        status,
    )


class DashboardRoute(APIRoute):
    """A dashboard route: signed-out visitors go to sign in, errors become pages in the dashboard's style."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await handle(request)
            except SignInFirst:
                return redirect(f"/login?next={quote(request.url.path, safe='/')}")
            except FormRefused:
                return sessions.form_refused(request.app.state.gateway, request, page=request.url.path)
            except MemvaultError as error:
                status = _STATUS_OF_ERROR.get(error.kind, 500)
                if status == 500:
                    log.error("vault call failed", extra={"error": error.kind})
                title = i18n.N_("Not allowed") if status == 403 else i18n.N_("That did not work")
                return _error_page(request, status, title, error.message)
            except (ValidationError, RequestValidationError) as error:
                lines = [describe({**p, "loc": p["loc"][1:] or p["loc"]}) for p in error.errors()]
                return _error_page(request, 400, i18n.N_("That did not work"), "; ".join(lines))

        return handler


def form_number(form: FormData, name: str) -> int:
    """A whole number from a form field (empty is 0), or a clear refusal naming the field."""
    value = str(form.get(name) or "0").strip()
    if not value.isdigit() or len(value) > 18:
        raise InvalidArgument(f"{name} must be a whole number of at least 0", field=name)
    return int(value)
