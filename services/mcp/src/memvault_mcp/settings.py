"""MCP service settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from memvault_core.metrics import MetricsSettings
from memvault_core.settings import IdentitySettings, LogSettings, ServiceSettings


class McpGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8090, ge=1, le=65535)
    vault_address: str = "127.0.0.1:50051"
    """host:port of the vault service."""
    call_timeout_seconds: float = Field(default=10.0, gt=0)
    """Deadline for one call to the vault; bulk calls get five times as long."""


class Settings(ServiceSettings):
    mcp: McpGroup = McpGroup()
    identity: IdentitySettings
    log: LogSettings = LogSettings()
    metrics: MetricsSettings = MetricsSettings()
