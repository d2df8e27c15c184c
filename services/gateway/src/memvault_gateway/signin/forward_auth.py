"""Sign-in (and sign-up) through a trusted forward-auth proxy (Authelia, oauth2-proxy, Authentik, ...).

The proxy names the person in a header (`MEMVAULT_FORWARD_AUTH__HEADER`) on every request it
passes on; the gateway believes it only from `trusted_proxies`. `sign_in` is the step that acts on
it: the first time a name is seen it signs the person up (an account `proxy:<name>`, if
`create_accounts` allows, and a vault of their own), and whenever this browser's session is not that
person's it starts one, so forms and CSRF tokens work as for any other sign-in. The app runs it
before the routes that read the session (`sessions.current_session` itself only reads).
"""

from __future__ import annotations

from fastapi import Depends, Request

from memvault_gateway.auth import people, sessions
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.store import Session, User


def _carries_bearer_token(request: Request) -> bool:
    return request.headers.get("authorization", "").partition(" ")[0].lower() == "bearer"


async def sign_up(gw: Gateway, request: Request, name: str) -> User | None:
    """The person the proxy names as `name`: found, or created on first sight when the settings allow,
    with their vault account and a first vault. None when they may not sign in (unknown and not to be
    created, or disabled)."""
    settings = gw.settings.forward_auth
    display = (request.headers.get(settings.name_header) or "").strip() if settings.name_header else ""
    user = await people.external_user(
        gw, people.FORWARD_AUTH, name, prefix="proxy", display_name=display or name, create=settings.create_accounts
    )
    if user is not None:
        await people.ensure_vault_account(gw, user)
    return user


async def sign_in(request: Request, gw: Gateway = Depends(gateway)) -> Session | None:  # noqa: B008
    """FastAPI dependency: when a trusted proxy names a person and this browser's session is not
    theirs, sign them up if new and start their session. A request with a bearer token is a
    program's, answered by its token, and is left alone. Returns the session the routes will read."""
    name = sessions.forward_auth_name(gw, request)
    session = await sessions.current_session(gw, request)
    if name is None or _carries_bearer_token(request):
        return session
    user = await sign_up(gw, request, name)
    if user is not None and (session is None or session.user.id != user.id):
        session = await sessions.start_session(gw, request, user, people.FORWARD_AUTH)
    return session
