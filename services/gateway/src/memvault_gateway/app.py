"""The gateway's HTTP surface: health, /connect and /mcp."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from urllib.parse import urlsplit

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

from memvault_core.grpc import client_channel
from memvault_core.identity import SCOPES, Identity, IdentitySigner
from memvault_gateway import proxy
from memvault_gateway.settings import GatewayGroup

log = logging.getLogger("memvault_gateway")

LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _is_loopback_address(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def dev_mode_usable(settings: GatewayGroup) -> bool:
    """Dev mode only ever applies when the gateway's public URL is a loopback address."""
    return settings.dev_mode and (urlsplit(settings.public_url).hostname or "") in LOOPBACK_NAMES


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        headers=headers,
        media_type="application/problem+json",
    )


def create_app(settings: GatewayGroup, signer: IdentitySigner) -> FastAPI:
    dev_mode = dev_mode_usable(settings)
    if settings.dev_mode and not dev_mode:
        log.warning(
            "dev mode ignored: the public URL is not a loopback address", extra={"public_url": settings.public_url}
        )
    allowed_origins = {_origin(settings.public_url), *(o.rstrip("/") for o in settings.allowed_origins)}
    mcp_url = f"{settings.public_url}/mcp"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = httpx.AsyncClient(timeout=httpx.Timeout(settings.upstream_timeout_seconds, connect=5.0))
        HTTPXClientInstrumentor().instrument_client(client)
        channel = client_channel(settings.vault_address)
        app.state.upstream = client
        app.state.vault_health = health_pb2_grpc.HealthStub(channel)
        try:
            yield
        finally:
            await client.aclose()
            await channel.close(grace=None)

    app = FastAPI(title="memvault gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is alive."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        """The gateway can reach the vault and the mcp service."""
        checks: dict[str, str] = {}
        try:
            reply = await request.app.state.vault_health.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
            checks["vault"] = "ok" if reply.status == health_pb2.HealthCheckResponse.SERVING else "not serving"
        except Exception as error:  # any failure means not ready; the reason goes to the caller
            checks["vault"] = f"unreachable ({type(error).__name__})"
        try:
            health_url = settings.mcp_url.rsplit("/mcp", 1)[0] + "/healthz"
            reply_http = await request.app.state.upstream.get(health_url, timeout=2.0)
            checks["mcp"] = "ok" if reply_http.status_code == 200 else f"status {reply_http.status_code}"
        except httpx.HTTPError as error:
            checks["mcp"] = f"unreachable ({type(error).__name__})"
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
        )

    @app.get("/connect")
    async def connect() -> PlainTextResponse:
        """Plain markdown telling an agent how to connect and which tools to use when."""
        text = resources.files("memvault_gateway").joinpath("connect.md").read_text(encoding="utf-8")
        return PlainTextResponse(
            text.format(mcp_url=mcp_url, owner="the vault owner"), media_type="text/markdown; charset=utf-8"
        )

    @app.api_route("/mcp", methods=["GET", "POST", "DELETE"])
    async def mcp(request: Request) -> Response:
        origin = request.headers.get("origin")
        loopback_request = (
            _is_loopback_address(request.client.host if request.client else None)
            and (urlsplit(f"//{request.headers.get('host', '')}").hostname or "") in LOOPBACK_NAMES
            and "x-forwarded-for" not in request.headers
            and "forwarded" not in request.headers
        )
        if origin is not None:
            origin_allowed = origin.rstrip("/") in allowed_origins or (
                dev_mode and (urlsplit(origin).hostname or "") in LOOPBACK_NAMES
            )
            if not origin_allowed:
                return problem(403, "Forbidden origin", f"requests from origin {origin[:100]!r} are not allowed")
        if "access_token" in request.query_params:
            return problem(400, "Token in query string", "send the access token in the Authorization header only")
        if not (dev_mode and loopback_request):
            return problem(
                401,
                "Unauthorized",
                "sign-in for agents (OAuth) is not enabled on this gateway yet; on this machine, run it with "
                "MEMVAULT_GATEWAY__DEV_MODE=true and connect through 127.0.0.1",
                headers={"WWW-Authenticate": 'Bearer realm="memvault", error="invalid_token"'},
            )
        identity = Identity(subject=settings.dev_subject, client="", scopes=frozenset(SCOPES))
        try:
            body = await proxy.read_body(request)
        except proxy.BodyTooLarge:
            return problem(413, "Request too large", "the request body is over the gateway's limit (max_request_bytes)")
        try:
            return await proxy.forward(
                request.app.state.upstream, settings.mcp_url, request, body, signer.sign(identity)
            )
        except httpx.HTTPError as error:
            log.warning("mcp service unreachable", extra={"error": type(error).__name__})
            return problem(503, "MCP service unavailable", "the mcp service did not answer; try again shortly")

    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz")
    return app
