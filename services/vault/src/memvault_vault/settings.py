"""Vault service settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

from typing import Annotated

from croniter import croniter
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

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
    outbox_keep_seconds: float = Field(default=3600.0, ge=0)
    """How long a published outbox event stays in Postgres before the relay deletes it."""
    retention_interval_seconds: float = 3600.0
    """How often to delete what the vaults' retention settings no longer keep; 0 turns it off."""
    retention_schedule: str = ""
    """The cron schedule of the CronJob that runs `memvault-vault retention` instead (the chart sets it
    with the interval at 0); only shown on the dashboard, as when retention runs next."""

    @field_validator("retention_schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        if value.strip() and not croniter.is_valid(value.strip()):
            raise ValueError(f"{value!r} is not a cron schedule; write it as the CronJob's, e.g. '20 * * * *'")
        return value.strip()

    cursor_secret: SecretStr | None = None
    """Key of the HMAC that signs archive cursors (every vault replica needs the same); unset, one is
    derived from MEMVAULT_IDENTITY__SECRET."""


class SourcesGroup(BaseModel):
    """Tracked sources (`MEMVAULT_SOURCES__*`): which files and URLs the vault may read, and the schedule."""

    file_roots: list[str] = []
    """Directories tracked files must lie in (after resolving symlinks); empty refuses every file source."""
    url_hosts: list[str] = []
    """Host names tracked URLs may use (`*.home.lan` allows its subdomains); empty refuses every URL source."""
    private_networks: list[str] = []
    """Private address ranges URLs may lead to (e.g. `10.0.0.0/8`); `*` allows every private address.
    Without one, a host resolving to a private, loopback or link-local address is refused."""
    fetch_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    max_redirects: Annotated[int, Field(ge=0)] = 3
    check_interval_seconds: Annotated[float, Field(ge=0)] = 30.0
    """How often the vault process checks which sources are due; 0 turns the in-process loop off (a
    `memvault-vault sources sync` CronJob does it instead)."""
    claim_seconds: float = 120.0
    """How long one check holds its source, so two syncs never check it at once. A check whose process
    died (killed, OOM) lets its source go after this long; the next sync then checks it again."""

    @model_validator(mode="after")
    def _claim_outlasts_a_fetch(self) -> SourcesGroup:
        if self.claim_seconds <= self.fetch_timeout_seconds:
            raise ValueError(
                f"claim_seconds ({self.claim_seconds:g}) must be longer than fetch_timeout_seconds "
                f"({self.fetch_timeout_seconds:g}), or one check could overlap another"
            )
        return self


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
