"""Helpers the gateway's tests share: a running gateway, an OAuth client, a browser, MCP calls."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import asyncpg
import httpx
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memvault_gateway.auth import credentials
from memvault_gateway.settings import Settings
from memvault_gateway.store import Store

SECRET = "gateway-test-secret-" + "x" * 32
REDIRECT = "http://127.0.0.1:33418/callback"
PASSWORD = "correct horse battery staple"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def serve_asgi(app: Any, port: int) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            return server, task
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    raise TimeoutError("server did not start")


async def stop_asgi(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    server.should_exit = True
    await task


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


@dataclass
class RunningGateway:
    url: str
    settings: Settings
    dsn: str

    @property
    def mcp(self) -> str:
        return f"{self.url}/mcp"

    def http(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, follow_redirects=False, timeout=30, **options)

    @asynccontextmanager
    async def store(self) -> AsyncIterator[Store]:
        store = await Store.connect(self.dsn, 1, 2)
        try:
            yield store
        finally:
            await store.close()

    async def fetchval(self, query: str, *args: Any) -> Any:
        conn = await asyncpg.connect(self.dsn)
        try:
            return await conn.fetchval(query, *args)
        finally:
            await conn.close()

    async def register(self, redirect_uris: list[str] | None = None, **metadata: Any) -> dict[str, Any]:
        body = {
            "client_name": metadata.pop("client_name", "Test agent"),
            "redirect_uris": redirect_uris or [REDIRECT],
            "token_endpoint_auth_method": metadata.pop("token_endpoint_auth_method", "none"),
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            **metadata,
        }
        async with self.http() as http:
            response = await http.post("/register", json=body)
        assert response.status_code == 201, response.text
        registered: dict[str, Any] = response.json()
        return registered

    async def create_user(self, username: str | None = None, *, admin: bool = False) -> tuple[str, str]:
        """A local account with a password; returns (username, password)."""
        username = username or unique("user")
        async with self.store() as store:
            user = await store.create_user(username, username=username, display_name=username, is_admin=admin)
            assert user is not None
            await store.set_password(user.id, credentials.hash_password(PASSWORD))
        return username, PASSWORD


StartGateway = Callable[..., Awaitable[RunningGateway]]


@dataclass
class Browser:
    """A person's browser: keeps cookies, signs in, reads CSRF tokens from pages.

    `address` is the loopback address it connects from (any of 127.0.0.0/8), which the gateway
    sees as the client's address."""

    gateway: RunningGateway
    address: str = "127.0.0.1"
    http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self.http = self.gateway.http(transport=httpx.AsyncHTTPTransport(local_address=self.address))

    async def close(self) -> None:
        await self.http.aclose()

    async def sign_in(self, username: str, password: str = PASSWORD, next_path: str = "/") -> httpx.Response:
        page = await self.http.get("/login", params={"next": next_path})
        assert page.status_code == 200, page.text
        return await self.http.post(
            "/login",
            data={"username": username, "password": password, "next": next_path, "csrf_token": csrf_of(page.text)},
        )

    async def csrf(self) -> str:
        me = await self.http.get("/api/v1/me")
        assert me.status_code == 200, me.text
        return str(me.json()["csrf_token"])

    async def api(self, method: str, path: str, **options: Any) -> httpx.Response:
        headers = dict(options.pop("headers", {}))
        if method.upper() not in ("GET", "HEAD"):
            headers.setdefault("X-CSRF-Token", await self.csrf())
        return await self.http.request(method, path, headers=headers, **options)

    async def consent(self, authorize_url: str, *, decision: str = "approve", **choices: list[str]) -> httpx.Response:
        """Open the consent page and submit it; `choices` override the checked vaults/scopes."""
        page = await self.http.get(authorize_url)
        assert page.status_code == 200, page.text
        # As a browser posts it: every hidden field, then each ticked box, even where names repeat.
        form = list(hidden_fields(page.text).items())
        form += [("vault", v) for v in choices.get("vault", checked(page.text, "vault"))]
        form += [("scope", s) for s in choices.get("scope", checked(page.text, "scope"))]
        form.append(("decision", decision))
        return await self.http.post(
            "/authorize", content=urlencode(form), headers={"Content-Type": "application/x-www-form-urlencoded"}
        )


def csrf_of(html: str) -> str:
    found = re.search(r"""name=["']csrf_token["'] value=["']([^"']+)["']""", html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def hidden_fields(html: str) -> dict[str, str]:
    import html as html_module

    return {
        html_module.unescape(k): html_module.unescape(v)
        for k, v in re.findall(r"<input type=hidden name='([^']+)' value='([^']*)'>", html)
    }


def checked(html: str, name: str) -> list[str]:
    return re.findall(rf"<input type=checkbox name={name} value='([^']+)' checked>", html)


@dataclass
class Agent:
    """An OAuth client of the gateway, driving the flow by hand."""

    gateway: RunningGateway
    client: dict[str, Any]
    redirect_uri: str = REDIRECT

    @property
    def client_id(self) -> str:
        return str(self.client["client_id"])

    def authorize_url(self, challenge: str, **params: str) -> str:
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "state": "s-" + secrets.token_hex(4),
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": self.gateway.mcp,
            "scope": "read write",
            **params,
        }
        return "/authorize?" + urlencode({k: v for k, v in query.items() if v is not None})

    async def token(self, **form: str) -> httpx.Response:
        data = {"client_id": self.client_id, **form}
        auth = None
        if self.client.get("token_endpoint_auth_method") == "client_secret_basic":
            data.pop("client_id")
            auth = (self.client_id, self.client["client_secret"])
        async with self.gateway.http() as http:
            return await http.post("/token", data=data, auth=auth)  # type: ignore[arg-type]

    async def exchange(self, code: str, verifier: str, **extra: str) -> httpx.Response:
        return await self.token(
            grant_type="authorization_code",
            code=code,
            code_verifier=verifier,
            redirect_uri=self.redirect_uri,
            resource=self.gateway.mcp,
            **extra,
        )

    async def refresh(self, refresh_token: str, **extra: str) -> httpx.Response:
        return await self.token(grant_type="refresh_token", refresh_token=refresh_token, **extra)


async def mcp_post(gateway: RunningGateway, body: Any, token: str | None = None, **headers: str) -> httpx.Response:
    all_headers = {**MCP_HEADERS, **headers}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    async with gateway.http() as http:
        return await http.post("/mcp", content=json.dumps(body), headers=all_headers)


@asynccontextmanager
async def mcp_client(url: str, token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


async def tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    if result.is_error:
        raise AssertionError(f"{name} failed: {result.content[0].text if result.content else result}")
    assert result.structured_content is not None
    return dict(result.structured_content)
