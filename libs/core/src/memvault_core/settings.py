"""Settings groups shared by the services, and the one function that loads them.

Only this module (and the services' own settings modules built on it) reads the
environment. Variables are named `MEMVAULT_<GROUP>__<FIELD>`, for example
`MEMVAULT_POSTGRES__DSN`; OpenTelemetry keeps its standard `OTEL_*` variables.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "MEMVAULT_"
ENV_DELIMITER = "__"


class ServiceSettings(BaseSettings):
    """Base for a service's settings: prefix, nesting and strictness in one place."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="ignore",
        frozen=True,
    )


class PostgresSettings(BaseModel):
    dsn: str = "postgresql://postgres@127.0.0.1:5432/memvault"
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)

    @field_validator("dsn")
    @classmethod
    def _postgres_scheme(cls, value: str) -> str:
        if not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL, for example postgresql://user@host:5432/memvault")
        return value


class NatsSettings(BaseModel):
    url: str = "nats://127.0.0.1:4222"
    namespace: str = Field(default="", pattern=r"^[a-z0-9_-]{0,32}$")
    """Set it to share one NATS server between several memvault installations (or test runs):
    streams, subjects and consumers then carry it, so they never see each other's events."""
    stream_replicas: int = Field(default=1, ge=1, le=5)
    """Copies JetStream keeps of each stream (3 on a three-node cluster: a node can be lost without
    losing or stalling events). It must not exceed the number of JetStream servers."""

    @property
    def servers(self) -> list[str]:
        """The URLs in `url`, which may list several nodes of a cluster separated by commas."""
        return [part.strip() for part in self.url.split(",") if part.strip()]

    @property
    def stream(self) -> str:
        return "MEMVAULT_EVENTS" + (f"_{self.namespace.upper().replace('-', '_')}" if self.namespace else "")

    @property
    def dead_letter_stream(self) -> str:
        return "MEMVAULT_DEADLETTER" + (f"_{self.namespace.upper().replace('-', '_')}" if self.namespace else "")

    @property
    def subject_root(self) -> str:
        """`memvault` or `<namespace>.memvault`: events are `<root>.events.v1.<entity>.<verb>`."""
        return f"{self.namespace}.memvault" if self.namespace else "memvault"

    @field_validator("url")
    @classmethod
    def _nats_scheme(cls, value: str) -> str:
        parts = [part.strip() for part in value.split(",")]
        if not all(part.startswith(("nats://", "tls://")) for part in parts):
            raise ValueError(
                "must be a nats:// or tls:// URL, for example nats://127.0.0.1:4222, or several separated "
                "by commas (the nodes of a cluster)"
            )
        return value


class IdentitySettings(BaseModel):
    """The key gateway, mcp, vault and indexer share to sign and check internal identities."""

    secret: SecretStr
    ttl_seconds: int = Field(default=120, ge=5, le=3600)

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 32:
            raise ValueError("must be at least 32 characters; generate one with `openssl rand -hex 32`")
        return value


class LogSettings(BaseModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def env_name(location: tuple[int | str, ...]) -> str:
    """The environment variable behind a settings field location."""
    return ENV_PREFIX + ENV_DELIMITER.join(str(part).upper() for part in location)


def _groups(cls: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The settings groups of `cls` by name (`vault` for MEMVAULT_VAULT__*)."""
    return {
        name: model
        for name, declared in cls.model_fields.items()
        if isinstance(model := declared.annotation, type) and issubclass(model, BaseModel)
    }


def _ours(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(variable, lower-cased name after the prefix) for every MEMVAULT_ variable, sorted."""
    return [
        (name.upper(), name[len(ENV_PREFIX) :].lower())
        for name in sorted(environ)
        if name.upper().startswith(ENV_PREFIX)
    ]


def unknown_variables(cls: type[BaseSettings], environ: Mapping[str, str]) -> list[str]:
    """`MEMVAULT_<GROUP>__<FIELD>` variables naming a group of `cls` but none of its fields: typos,
    which would otherwise be ignored without a word. Groups `cls` lacks may be another service's."""
    groups = _groups(cls)
    problems = []
    for name, rest in _ours(environ):
        group, _, path = rest.partition(ENV_DELIMITER)
        field = path.split(ENV_DELIMITER)[0]
        if field and group in groups and field not in groups[group].model_fields:
            known = ", ".join(env_name((group, known)) for known in groups[group].model_fields)
            problems.append(f"{name}: not a setting (this group has {known})")
    return problems


def near_misses(cls: type[BaseSettings], environ: Mapping[str, str]) -> list[str]:
    """Variables that are no setting of `cls` but one letter or underscore away from one
    (`MEMVAULT_VAULT_INDEXER_ADDRESS`, `MEMVAULT_VAULTS__INDEXER_ADDRESS`). Only warned about:
    the same environment may carry other tools' MEMVAULT_ variables (Compose's, for one)."""
    groups = _groups(cls)
    found = []
    for name, rest in _ours(environ):
        group, delimiter, path = rest.partition(ENV_DELIMITER)
        if delimiter:  # a group this service lacks, spelt like one it has
            close = difflib.get_close_matches(group, groups, n=1, cutoff=0.8)
            candidates = [(close[0], path.split(ENV_DELIMITER)[0])] if close and group not in groups else []
        else:  # one underscore where two belong
            candidates = [(g, rest[len(g) + 1 :]) for g in groups if rest.startswith(g + "_")]
        for wanted_group, wanted_field in candidates:
            if wanted_field in groups[wanted_group].model_fields:
                found.append(f"{name} is not a setting; did you mean {env_name((wanted_group, wanted_field))}?")
    return found


def _required(cls: type[BaseModel], location: tuple[int | str, ...]) -> list[str]:
    """The variables to set for a missing field: a whole missing group stands for its required fields."""
    group = _groups(cls).get(str(location[0])) if len(location) == 1 else None
    if group is not None:
        return [env_name((*location, name)) for name, field in group.model_fields.items() if field.is_required()]
    return [env_name(location)]


def load_settings(cls: type[SettingsT]) -> SettingsT:
    """Build settings from the environment, or exit listing every invalid or unknown variable."""
    for warning in near_misses(cls, os.environ):
        print(f"memvault: warning: {warning}", file=sys.stderr)
    problems = [f"  {problem}" for problem in unknown_variables(cls, os.environ)]
    try:
        settings = cls()
    except ValidationError as error:
        for problem in error.errors():
            if problem["type"] == "missing":
                problems += [f"  {name}: is required but not set" for name in _required(cls, problem["loc"])]
            else:
                problems.append(f"  {env_name(problem['loc'])}: {problem['msg']}")
    if not problems:
        return settings
    print(f"memvault: invalid configuration ({len(problems)} problem(s)):", *problems, sep="\n", file=sys.stderr)
    raise SystemExit(2) from None
