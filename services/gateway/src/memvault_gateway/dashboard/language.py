"""The language switcher (remembered in a cookie) and the dashboard's own static files."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import Response

from memvault_core.errors import InvalidArgument, NotFound
from memvault_gateway.auth import sessions
from memvault_gateway.dashboard import i18n
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner, redirect
from memvault_gateway.web import http

router = APIRouter(route_class=DashboardRoute)
static_files = APIRouter()

ONE_YEAR = 365 * 24 * 3600
_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}


@router.post(PREFIX + "/language")
async def choose_language(request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw)
    form = await person.form()
    chosen = str(form.get("language") or "")
    if chosen not in i18n.LANGUAGES:
        raise InvalidArgument(f"language must be one of: {', '.join(i18n.LANGUAGES)}", field="language")
    answer = redirect(http.safe_next(str(form.get("next") or PREFIX)))
    sessions.set_cookie(gw, answer, i18n.LANGUAGE_COOKIE, chosen, ONE_YEAR)
    return answer


@static_files.get("/static/dashboard/{name}")
async def static(name: str) -> Response:
    """A file of the dashboard's static folder (no subfolders, known types only)."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    folder = resources.files("memvault_gateway.dashboard").joinpath("static")
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in _STATIC_TYPES:
        raise NotFound("no such file")
    file = folder.joinpath(name)
    if not file.is_file():
        raise NotFound("no such file")
    return Response(
        file.read_bytes(),
        media_type=_STATIC_TYPES[suffix],
        headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
    )
