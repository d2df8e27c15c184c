"""Vault service settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

from pydantic import BaseModel

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


class Settings(ServiceSettings):
    vault: VaultGroup = VaultGroup()
    postgres: PostgresSettings = PostgresSettings()
    nats: NatsSettings = NatsSettings()
    identity: IdentitySettings
    log: LogSettings = LogSettings()


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
