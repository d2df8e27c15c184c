"""Everything a request handler needs, built once at start-up and kept on `app.state.gateway`."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
from fastapi import Request

from memvault_core.identity import IdentitySigner
from memvault_gateway.settings import LOOPBACK_NAMES, Settings
from memvault_gateway.store import Store
from memvault_gateway.vault_client import VaultClient
from memvault_gateway.web.http import origin_of
from memvault_gateway.web.throttle import Throttle


@dataclass
class Gateway:
    settings: Settings
    store: Store
    vault: VaultClient
    signer: IdentitySigner
    upstream: httpx.AsyncClient
    """For the mcp service (inside the cluster)."""
    outbound: httpx.AsyncClient
    """For the internet: identity providers and client metadata documents."""
    cache: dict[str, object] = field(default_factory=dict)
    throttle: Throttle = field(default_factory=Throttle)
    """Rate limits on sign-in, registration and the token endpoint (this replica's counts)."""

    @property
    def issuer(self) -> str:
        return self.settings.gateway.public_url

    @property
    def origin(self) -> str:
        return origin_of(self.settings.gateway.public_url)

    @property
    def mcp_resource(self) -> str:
        """The MCP endpoint's canonical URI: the audience of agents' access tokens."""
        return f"{self.issuer}/mcp"

    @property
    def api_resource(self) -> str:
        """The JSON API's canonical URI: the audience of tokens meant for scripts."""
        return f"{self.issuer}/api/v1"

    @property
    def dev_mode_usable(self) -> bool:
        """Dev mode only ever applies when the gateway's public URL is a loopback address."""
        settings = self.settings.gateway
        return settings.dev_mode and (urlsplit(settings.public_url).hostname or "") in LOOPBACK_NAMES

    @property
    def secure_cookies(self) -> bool:
        return self.issuer.startswith("https://")

    def resource_metadata_url(self, resource: str) -> str:
        path = resource.removeprefix(self.origin)
        return f"{self.origin}/.well-known/oauth-protected-resource{path}"


async def gateway(request: Request) -> Gateway:
    """FastAPI dependency: the gateway's shared objects. Async, though it never waits: FastAPI runs
    a plain function dependency in its thread pool, a thread hop on every request."""
    context: Gateway = request.app.state.gateway
    return context
