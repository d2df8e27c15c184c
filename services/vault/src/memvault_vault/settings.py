"""Vault service settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

from pydantic import BaseModel

from memvault_core.metrics import MetricsSettings
from memvault_core.settings import (
    IdentitySettings,
    LogSettings,
    NatsSettings,
    PostgresSettings,
    ServiceSettings,
)


class VaultGroup(BaseModel):
    listen: str = "127.0.0.1:50051"
    """host:port for gRPC; 0.0.0.0:50051 in a container."""
    indexer_address: str = ""
    """host:port of the indexer; empty means recall is keyword-only."""
    index_timeout_seconds: float = 1.5
    """How long recall waits for the indexer before answering keyword-only."""
    shutdown_grace_seconds: float = 10.0
    relay: bool = True
    """Publish outbox events to NATS from this process (one replica at a time does)."""
    retention_interval_seconds: float = 3600.0
    """How often to delete what the vaults' retention settings no longer keep; 0 turns it off."""


class SourcesGroup(BaseModel):
    """Tracked sources (`MEMVAULT_SOURCES__*`): which files and URLs the vault may read, and the schedule."""

    file_roots: list[str] = []
    """Directories tracked files must lie in (after resolving symlinks); empty refuses every file source."""
    url_hosts: list[str] = []
    """Host names tracked URLs may use (`*.home.lan` allows its subdomains); empty refuses every URL source."""
    private_networks: list[str] = []
    """Private address ranges URLs may lead to (e.g. `10.0.0.0/8`); `*` allows every private address.
    Without one, a host resolving to a private, loopback or link-local address is refused."""
    fetch_timeout_seconds: float = 10.0
    max_redirects: int = 3
    check_interval_seconds: float = 30.0
    """How often the vault process checks which sources are due; 0 turns the in-process loop off (a
    `memvault-vault sources sync` CronJob does it instead)."""


class Settings(ServiceSettings):
    vault: VaultGroup = VaultGroup()
    sources: SourcesGroup = SourcesGroup()
    postgres: PostgresSettings = PostgresSettings()
    nats: NatsSettings = NatsSettings()
    identity: IdentitySettings
    log: LogSettings = LogSettings()
    metrics: MetricsSettings = MetricsSettings()


class MigrateSettings(ServiceSettings):
    """`migrate`, `create-owner` and `retention` need only the database."""

    postgres: PostgresSettings = PostgresSettings()
    log: LogSettings = LogSettings()


class BackupSettings(ServiceSettings):
    """`backup` and `restore` need the database, and the indexer (with the identity key) for embeddings."""

    postgres: PostgresSettings = PostgresSettings()
    vault: VaultGroup = VaultGroup()
    identity: IdentitySettings | None = None
    log: LogSettings = LogSettings()


class SourcesSettings(ServiceSettings):
    """`sources sync|status|changes|watch` need the database and the source rules."""

    postgres: PostgresSettings = PostgresSettings()
    sources: SourcesGroup = SourcesGroup()
    vault: VaultGroup = VaultGroup()
    identity: IdentitySettings | None = None
    log: LogSettings = LogSettings()
