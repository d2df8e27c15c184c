"""Browser sessions and CSRF protection.

The session cookie holds a random id; the database keeps its hash, the person, and a CSRF token
that every form and every state-changing API call must echo. Cookies are HttpOnly, SameSite=Lax,
and `__Host-` + Secure whenever the public URL is https. A trusted forward-auth proxy's header
signs people in too (`signin.forward_auth`); they then get an ordinary session, so forms work the
same way.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from datetime import timedelta

from fastapi import Request, Response
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvault_core.errors import MemvaultError
from memvault_gateway.auth import credentials
from memvault_gateway.context import Gateway
from memvault_gateway.store import Session, User
from memvault_gateway.web import pages
from memvault_gateway.web.http import client_address

log = logging.getLogger("memvault_gateway")

_STATE_KEY = "memvault_session"
_NEW_COOKIE_KEY = "memvault_new_session_cookie"
LOGIN_CSRF_MAX_AGE = 3600
# A post whose Origin or Sec-Fetch-Site says another site sent it (same_origin).
CROSS_SITE = "This form was not sent from this site; open the page on this site and submit it from there."


def session_cookie(gw: Gateway) -> str:
    return "__Host-memvault_session" if gw.secure_cookies else "memvault_session"


def login_csrf_cookie(gw: Gateway) -> str:
    return "__Host-memvault_login_csrf" if gw.secure_cookies else "memvault_login_csrf"


def oidc_state_cookie(gw: Gateway) -> str:
    """Holds the `state` of the single sign-on this browser started, so only this browser can finish it."""
    return "__Host-memvault_oidc_state" if gw.secure_cookies else "memvault_oidc_state"


def set_cookie(gw: Gateway, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path="/", httponly=True, secure=gw.secure_cookies, samesite="lax")


def clear_cookie(gw: Gateway, response: Response, name: str) -> None:
    response.delete_cookie(name, path="/", secure=gw.secure_cookies, httponly=True, samesite="lax")


async def start_session(gw: Gateway, request: Request, user: User, method: str) -> Session:
    """A new session for `user`; the cookie is added to the response on its way out."""
    token = credentials.new_token(credentials.SESSION)
    csrf = secrets.token_urlsafe(32)
    hours = gw.settings.login.session_hours
    await gw.store.create_session(credentials.token_hash(token), user.id, csrf, method, timedelta(hours=hours))
    session = await gw.store.session(credentials.token_hash(token))
    assert session is not None
    setattr(request.state, _NEW_COOKIE_KEY, (token, hours * 3600))
    setattr(request.state, _STATE_KEY, session)
    try:
        await gw.vault.audit(
            user.subject, "session.create", target=user.username or user.subject, details={"method": method}
        )
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": "session.create", "error": error.kind})
    return session


class NewSessionCookie:
    """ASGI middleware: a response to a request that started a session carries its cookie.

    Plain ASGI (it only looks at the response's first message) rather than Starlette's
    BaseHTTPMiddleware, which would add a task and a stream to every request, /mcp included.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})  # what `request.state` reads and writes

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and (new := state.get(_NEW_COOKIE_KEY)) is not None:
                gw: Gateway = scope["app"].state.gateway
                rendered = Response()
                set_cookie(gw, rendered, session_cookie(gw), new[0], new[1])
                MutableHeaders(scope=message).append("set-cookie", rendered.headers["set-cookie"])
            await send(message)

        await self.app(scope, receive, send_with_cookie)


async def end_session(gw: Gateway, request: Request, response: Response) -> None:
    token = request.cookies.get(session_cookie(gw))
    if token:
        await gw.store.delete_session(credentials.token_hash(token))
    clear_cookie(gw, response, session_cookie(gw))


def forward_auth_name(gw: Gateway, request: Request) -> str | None:
    """The user name a trusted forward-auth proxy put in this request, if any."""
    settings = gw.settings.forward_auth
    if not settings.enabled or not settings.trusts(client_address(request)):
        return None
    name = (request.headers.get(settings.header) or "").strip()
    return name if name and len(name) <= 200 else None


def signed_in_by_proxy(gw: Gateway, request: Request) -> bool:
    """The proxy in front vouches for this request: signing out here would be undone by the next page."""
    return forward_auth_name(gw, request) is not None


async def current_session(gw: Gateway, request: Request) -> Session | None:
    """The session this browser's cookie names, if any (cached on the request). Only reads: signing a
    forward-auth proxy's person in (and up) is a step of its own, `signin.forward_auth.sign_in`, run
    before the routes that read this."""
    if hasattr(request.state, _STATE_KEY):
        cached: Session | None = getattr(request.state, _STATE_KEY)
        return cached
    token = request.cookies.get(session_cookie(gw))
    session = await gw.store.session(credentials.token_hash(token)) if token and len(token) < 200 else None
    setattr(request.state, _STATE_KEY, session)
    return session


def same_origin(gw: Gateway, request: Request) -> bool:
    """Nothing in the request says it came from another site.

    Browsers send the page's Origin on a same-origin form post (our pages' referrer policy is
    `same-origin`) and `Origin: null` when they hide it, which we treat as cross-site like any
    foreign origin. `Sec-Fetch-Site`, when sent, must say `same-origin` (or `none`: the person
    typed or bookmarked the request). A request with neither header (a script, curl) still needs
    the CSRF token, which only our own pages carry.
    """
    origin = request.headers.get("origin")
    if origin is not None and origin.rstrip("/") != gw.origin:
        return False
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


def csrf_ok(gw: Gateway, request: Request, session: Session, provided: str | None) -> bool:
    """The request carries this session's CSRF token and comes from our own pages (`same_origin`)."""
    if not same_origin(gw, request):
        return False
    return bool(provided) and hmac.compare_digest(str(provided), session.csrf_token)


def form_refused(gw: Gateway, request: Request, *, page: str) -> Response:
    """The answer to a signed-in person's form that `csrf_ok` refused.

    Either another site sent it, or it came from our own `page` opened before the person last
    signed in (an old tab), whose token belongs to a session that has ended: that is not another
    site's doing, and saying so would send the person looking for an attack.
    """
    if not same_origin(gw, request):
        return pages.message("Request refused", CROSS_SITE, 403)
    return pages.message(
        "Page out of date",
        "This page was opened before you last signed in, so nothing was done. Open it again and retry.",
        403,
        link=(page, "Open it again"),
    )


def login_csrf(gw: Gateway, request: Request) -> str:
    """A double-submit token for the sign-in form (there is no session yet to bind it to)."""
    return request.cookies.get(login_csrf_cookie(gw)) or secrets.token_urlsafe(24)


def keep_login_csrf(gw: Gateway, response: Response, token: str) -> None:
    set_cookie(gw, response, login_csrf_cookie(gw), token, LOGIN_CSRF_MAX_AGE)


def login_csrf_ok(gw: Gateway, request: Request, provided: str | None) -> bool:
    """The sign-in form's double-submit token matches its cookie, and the post is `same_origin`."""
    if not same_origin(gw, request):
        return False
    cookie = request.cookies.get(login_csrf_cookie(gw))
    return bool(cookie) and bool(provided) and hmac.compare_digest(str(cookie), str(provided))
