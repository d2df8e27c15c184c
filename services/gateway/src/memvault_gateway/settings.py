"""Gateway settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from memvault_core.settings import IdentitySettings, LogSettings, ServiceSettings


class GatewayGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    public_url: str = "http://127.0.0.1:8080"
    """The URL agents and browsers use to reach this gateway, without a trailing slash."""
    mcp_url: str = "http://127.0.0.1:8090/mcp"
    vault_address: str = "127.0.0.1:50051"
    allowed_origins: list[str] = []
    """Extra browser origins allowed to call /mcp, besides the public URL's own."""
    dev_mode: bool = False
    """Answer /mcp requests from loopback addresses as `dev_subject`, with no sign-in. Never on a server."""
    dev_subject: str = "owner"
    upstream_timeout_seconds: float = Field(default=60.0, gt=0)

    @field_validator("public_url", "mcp_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


class Settings(ServiceSettings):
    gateway: GatewayGroup = GatewayGroup()
    identity: IdentitySettings
    log: LogSettings = LogSettings()
