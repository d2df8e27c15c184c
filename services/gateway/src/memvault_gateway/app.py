"""The gateway's HTTP surface: health, /connect, OAuth, sign-in, /api/v1 and /mcp."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

import asyncpg
import httpx
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from starlette.exceptions import HTTPException
from starlette.routing import Match

from memvault_core.errors import MemvaultError
from memvault_core.identity import IdentitySigner
from memvault_core.metrics import HttpMetrics, track_pool
from memvault_core.postgres import is_connection_failure
from memvault_core.validation import describe
from memvault_gateway import dashboard
from memvault_gateway.api import (
    access,
    archive,
    archive_writes,
    backup,
    imports,
    index,
    manage,
    memories,
    reference,
    retention,
    sources,
    vault_settings,
)
from memvault_gateway.auth import people, sessions
from memvault_gateway.context import Gateway
from memvault_gateway.mcp_edge import route, signposts
from memvault_gateway.oauth import authorize, clients, discovery, token_endpoint
from memvault_gateway.settings import Settings
from memvault_gateway.signin import account, account_email, email_login, forward_auth, login, oidc
from memvault_gateway.store import Store
from memvault_gateway.vault_client import VaultClient
from memvault_gateway.web import body_limit, tracing
from memvault_gateway.web.http import problem

log = logging.getLogger("memvault_gateway")

PURGE_EVERY_SECONDS = 3600

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

RETRY_AFTER_SECONDS = 5
"""What a 503 answer's Retry-After says: a restarting database or vault is usually back by then."""

_STATUS_OF_ERROR = {
    "not_found": 404,
    "invalid_argument": 400,
    "conflict": 409,
    "permission_denied": 403,
    "unauthenticated": 401,
    "unavailable": 503,
    "limit_exceeded": 413,
}


async def purge_periodically(store: Store) -> None:
    """Drop spent codes, tokens, sessions and stale registrations, hourly (any replica may do it)."""
    while True:
        try:
            deleted = await store.purge_expired()
            if deleted:
                log.info("expired OAuth state purged", extra={"rows": deleted})
        except Exception as error:  # a failed purge is retried next hour; serving goes on
            log.warning("purge failed", extra={"error": type(error).__name__})
        await asyncio.sleep(PURGE_EVERY_SECONDS)


def create_app(settings: Settings, signer: IdentitySigner) -> FastAPI:
    gateway_settings = settings.gateway
    if gateway_settings.test_auto_approve_subject:
        log.warning(
            "TEST SETTING: every authorization request is approved automatically",
            extra={"subject": gateway_settings.test_auto_approve_subject},
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upstream = httpx.AsyncClient(
            timeout=httpx.Timeout(gateway_settings.upstream_timeout_seconds, connect=5.0), trust_env=False
        )
        HTTPXClientInstrumentor().instrument_client(upstream)
        outbound = httpx.AsyncClient(timeout=httpx.Timeout(10.0), follow_redirects=False)
        store = await Store.connect(
            settings.postgres.dsn, settings.postgres.pool_min_size, settings.postgres.pool_max_size
        )
        vault = VaultClient(gateway_settings.vault_address, signer)
        gw = Gateway(settings=settings, store=store, vault=vault, signer=signer, upstream=upstream, outbound=outbound)
        app.state.gateway = gw
        track_pool("gateway", store.pool)
        app.state.vault_health = health_pb2_grpc.HealthStub(vault.channel)
        try:
            # Migrations ran before this app was built (`memvault-gateway serve`, and `migrate` in the
            # Helm chart and the dev stack).
            if gateway_settings.dev_mode and not gw.dev_mode_usable:
                log.warning("dev mode ignored: the public URL is not a loopback address")
            purger = asyncio.create_task(purge_periodically(store))
            yield
            purger.cancel()
            await email_login.settled()  # sign-in links already asked for still go out
        finally:
            await upstream.aclose()
            await outbound.aclose()
            await vault.close()
            await store.close()

    app = FastAPI(title="memvault gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    app.add_middleware(sessions.NewSessionCookie)
    app.add_middleware(body_limit.BodyLimit)
    app.add_middleware(HttpMetrics, service="gateway")  # outermost: it times every answer, 413s too

    @app.exception_handler(MemvaultError)
    async def memvault_error(request: Request, error: MemvaultError) -> Response:
        status = _STATUS_OF_ERROR.get(error.kind, 500)
        if status == 500:
            log.error("vault call failed", extra={"error": error.kind})
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
        return problem(status, error.kind.replace("_", " ").capitalize(), error.message, headers=headers)

    async def database_gone(request: Request, error: Exception) -> Response:
        """The gateway's own database went away (stopped, restarting, connections dropped) before or
        during a request: 503 with Retry-After, as for an unreachable vault, not a 500."""
        if not is_connection_failure(error):
            raise error  # any other failure stays what it was
        log.warning("database unreachable", extra={"error": type(error).__name__, "path": request.url.path})
        return problem(
            503,
            "Service unavailable",
            f"the gateway cannot reach its database right now; try again in {RETRY_AFTER_SECONDS} seconds",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    # What `memvault_core.postgres.is_connection_failure` recognises (OSError covers refused and reset sockets).
    for failure in (
        OSError,
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.OperatorInterventionError,
        asyncpg.TooManyConnectionsError,
    ):
        app.add_exception_handler(failure, database_gone)

    @app.exception_handler(asyncpg.CharacterNotInRepertoireError)
    async def nul_in_text(request: Request, error: asyncpg.CharacterNotInRepertoireError) -> Response:
        """Postgres text cannot hold NUL; the statement failed, so nothing was written."""
        return problem(400, "Invalid argument", "text must not contain NUL characters (\\u0000); remove them")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> Response:
        """One line per problem, naming the field and what it accepts, instead of pydantic's records."""
        # FastAPI's locations start with where the field was ('body', 'query'); the field's name is enough.
        lines = [describe({**p, "loc": p["loc"][1:] or p["loc"]}) for p in error.errors()]
        return problem(422, "Invalid request", "; ".join(lines))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> Response:
        if error.status_code == 404 and error.detail == "Not Found":
            # No route: a page with directions for a browser, a problem naming /mcp for a program.
            return signposts.not_found(request, gateway_settings.public_url)
        if error.status_code == 405:
            # Starlette names only the methods of the first route matching the path; a path served by
            # several routes (GET and PUT /settings) takes those of every one.
            allowed = [
                method
                for method in _METHODS
                if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in app.router.routes)
            ]
            return problem(
                405,
                "Method not allowed",
                f"{request.method} is not allowed here; use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        return await http_exception_handler(request, error)

    @app.exception_handler(access.ApiAuthError)
    async def api_auth_error(request: Request, error: access.ApiAuthError) -> Response:
        return access.api_auth_error_response(request.app.state.gateway, error)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is alive."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        """The gateway can reach the vault and the mcp service."""
        gw: Gateway = request.app.state.gateway
        checks: dict[str, str] = {}
        try:
            reply = await request.app.state.vault_health.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
            checks["vault"] = "ok" if reply.status == health_pb2.HealthCheckResponse.SERVING else "not serving"
        except Exception as error:  # any failure means not ready; the reason goes to the caller
            checks["vault"] = f"unreachable ({type(error).__name__})"
        try:
            health_url = gateway_settings.mcp_url.rsplit("/mcp", 1)[0] + "/healthz"
            reply_http = await gw.upstream.get(health_url, timeout=2.0)
            checks["mcp"] = "ok" if reply_http.status_code == 200 else f"status {reply_http.status_code}"
        except httpx.HTTPError as error:
            checks["mcp"] = f"unreachable ({type(error).__name__})"
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
        )

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        """A browser opening the gateway's address lands on the owner's account page (or its sign-in)."""
        return RedirectResponse(account.ACCOUNT_PATH, status_code=303)

    @app.get("/connect")
    async def connect(request: Request) -> PlainTextResponse:
        """Plain markdown telling an agent how to connect and which tools to use when."""
        text = resources.files("memvault_gateway").joinpath("connect.md").read_text(encoding="utf-8")
        # In dev mode apps on this machine are answered without a token, so there is no sign-in to describe.
        dev = request.app.state.gateway.dev_mode_usable
        owner = await people.owner_name(request.app.state.gateway)
        return PlainTextResponse(
            text.format(
                mcp_url=f"{gateway_settings.public_url}/mcp",
                owner=owner,
                claude_code_sign_in="." if dev else ", then run `/mcp`\n  and choose memvault → Authenticate.",
                codex_sign_in="" if dev else "\n  then `codex mcp login memvault`.",
                approval=(
                    "This memvault runs in dev mode: apps on this machine connect without signing in and act"
                    f" as `{gateway_settings.dev_subject}`, so skip any sign-in or login step."
                    if dev
                    else "The owner approves each app once in the browser; you never handle a password or token"
                    " yourself."
                ),
            ),
            media_type="text/markdown; charset=utf-8",
        )

    for router in (
        discovery.router,
        clients.router,
        token_endpoint.router,
        email_login.router,
        oidc.router,
        reference.router,
        route.router,
    ):
        app.include_router(router)
    # Routes that read the browser's session: a trusted forward-auth proxy's person is signed in
    # (and up, on first sight) before they run.
    for router in (
        authorize.router,
        login.router,
        account.router,
        account_email.router,
        manage.router,
        memories.router,
        imports.router,
        archive.router,
        archive_writes.router,
        vault_settings.router,
        backup.router,
        retention.router,
        index.router,
        sources.router,
    ):
        app.include_router(router, dependencies=[Depends(forward_auth.sign_in)])
    dashboard.install(app, dependencies=[Depends(forward_auth.sign_in)])

    FastAPIInstrumentor.instrument_app(
        app,
        excluded_urls="healthz,readyz",
        server_request_hook=tracing.server_request_hook,
        exclude_spans=["receive", "send"],  # one span per request, not one per ASGI message
    )
    return app
