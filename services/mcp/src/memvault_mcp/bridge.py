"""`memvault-mcp stdio`: an MCP server on stdin/stdout for apps that only speak stdio.

It forwards tools/list and tools/call to a memvault gateway's `/mcp` over Streamable HTTP, with
the official SDK client on both sides. It signs in with a service token (`Authorization: Bearer`)
or with OAuth: the SDK's OAuthClientProvider, a callback server on a free loopback port, and the
registration and tokens kept in a file only the user can read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import sys
import time
import webbrowser
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import platformdirs
import uvicorn
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from memvault_mcp.app import INSTRUCTIONS

log = logging.getLogger("memvault_mcp.bridge")

SIGN_IN_TIMEOUT_SECONDS = 300.0
EXPIRY_MARGIN_SECONDS = 30.0
CLIENT_NAME = "memvault-mcp stdio"


class BridgeError(Exception):
    """A problem the person running the bridge must fix; the message says how."""


def token_file(url: str, config_dir: Path | None = None) -> Path:
    """Where the OAuth registration and tokens for one gateway URL are kept."""
    base = config_dir or platformdirs.user_config_path("memvault")
    return base / f"oauth-{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"


class FileTokenStorage:
    """The SDK's TokenStorage in a JSON file readable only by its owner (mode 0600)."""

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise BridgeError(f"cannot read {self.path} ({error}); delete it to sign in again") from None
        return data if isinstance(data, dict) and data.get("url") == self.url else {}

    def _write(self, **fields: Any) -> None:
        data = {**self._read(), **fields, "url": self.url}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(partial, self.path)

    async def get_tokens(self) -> OAuthToken | None:
        data = self._read()
        if not data.get("tokens"):
            return None
        tokens = OAuthToken.model_validate(data["tokens"])
        if time.time() >= float(data.get("expires_at") or "inf") - EXPIRY_MARGIN_SECONDS:
            # The SDK cannot tell when a stored token expires: without its access token it
            # refreshes at once instead of sending the person through the browser again.
            return tokens.model_copy(update={"access_token": ""})
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        self._write(tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = self._read().get("client_info")
        return OAuthClientInformationFull.model_validate(info) if info else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write(client_info=client_info.model_dump(mode="json", exclude_none=True))


class LoopbackCallback:
    """Receives the authorization answer on http://127.0.0.1:<free port>/callback.

    The port is chosen at start, so it differs from one sign-in to the next; the gateway accepts
    any port of a registered loopback redirect URI (RFC 8252 §7.3).
    """

    def __init__(self, open_browser: bool) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.redirect_uri = f"http://127.0.0.1:{self.socket.getsockname()[1]}/callback"
        self.open_browser = open_browser
        self._answer: asyncio.Future[AuthorizationCodeResult] | None = None
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None

    async def _receive(self, request: Request) -> PlainTextResponse:
        params = request.query_params
        if self._answer is None or self._answer.done():
            return PlainTextResponse("memvault: no sign-in is waiting here.", status_code=404)
        if "error" in params:
            reason = params.get("error_description") or params["error"]
            self._answer.set_exception(BridgeError(f"sign-in was not completed: {reason}"))
            return PlainTextResponse(f"memvault: sign-in was not completed ({reason}).", status_code=400)
        if "code" not in params:
            return PlainTextResponse("memvault: this address expects an authorization code.", status_code=400)
        self._answer.set_result(
            AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))
        )
        return PlainTextResponse("memvault: signed in. You can close this tab.")

    async def redirect_handler(self, url: str) -> None:
        """Start listening, then send the person to the authorization page."""
        self._answer = asyncio.get_running_loop().create_future()
        if self._server is None:
            app = Starlette(routes=[Route("/callback", self._receive)])
            config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
            self._server = uvicorn.Server(config)
            self._serving = asyncio.create_task(self._server.serve(sockets=[self.socket]))
        print(f"memvault: to sign in, open this address in your browser:\n{url}", file=sys.stderr, flush=True)
        if self.open_browser:
            webbrowser.open(url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self._answer is not None
        try:
            return await asyncio.wait_for(self._answer, SIGN_IN_TIMEOUT_SECONDS)
        except TimeoutError:
            raise BridgeError(f"no sign-in within {SIGN_IN_TIMEOUT_SECONDS:.0f} seconds; start again") from None
        finally:
            await self.close()

    async def close(self) -> None:
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            await self._serving
            self._server = self._serving = None


def oauth_provider(url: str, open_browser: bool, config_dir: Path | None = None) -> OAuthClientProvider:
    callback = LoopbackCallback(open_browser)
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[callback.redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",  # noqa: S106 (a method name, not a password)
    )
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=FileTokenStorage(token_file(url, config_dir), url),
        redirect_handler=callback.redirect_handler,
        callback_handler=callback.callback_handler,
    )


@asynccontextmanager
async def remote(url: str, *, token: str | None, open_browser: bool) -> AsyncIterator[Client]:
    """An SDK client connected to the gateway's /mcp, signed in with `token` or by OAuth."""
    auth = None if token else oauth_provider(url, open_browser)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(auth=auth, headers=headers, timeout=httpx2.Timeout(60.0, read=300.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode="auto") as client,  # type: ignore[arg-type]
    ):
        yield client


def build_server(client: Client) -> Server[Any]:
    """A stdio-facing server whose tools are the gateway's."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await client.list_tools(cursor=params.cursor if params else None)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return await client.call_tool(params.name, params.arguments)

    return Server(
        "memvault",
        version=version("memvault-mcp"),
        title="memvault",
        instructions=client.instructions or INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run(url: str, *, token: str | None, open_browser: bool, login_only: bool) -> None:
    """Connect to the gateway (signing in if need be), then serve stdio until stdin closes."""
    async with remote(url, token=token, open_browser=open_browser) as client:
        tools = await client.list_tools()
        if login_only:
            print(f"memvault: connected to {url}; {len(tools.tools)} tools available.", file=sys.stderr, flush=True)
            return
        server = build_server(client)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
