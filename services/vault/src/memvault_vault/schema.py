"""The vault's schema: its numbered migrations (`migrations/`), applied and rolled back with yoyo
(`memvault_core.postgres.Migrations`). The service refuses to start on a database older or newer
than this code (see `__main__`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg

from memvault_core.postgres import Migrations, NewerDatabaseError, OlderDatabaseError, UnknownMigrationError

__all__ = [
    "MIGRATIONS",
    "SCHEMA",
    "NewerDatabaseError",
    "OlderDatabaseError",
    "UnknownMigrationError",
    "apply_migrations",
    "migration_backend",
    "missing_migrations",
    "rollback_migrations",
    "unknown_migrations",
]

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA = Migrations(MIGRATIONS, command="memvault-vault migrate")
"""The vault's tables and yoyo's bookkeeping live in the default schema (the gateway's in `gateway`)."""


def migration_backend(dsn: str) -> Any:
    """yoyo's backend for the vault's database."""
    return SCHEMA.backend(dsn)


def apply_migrations(dsn: str) -> list[str]:
    """Apply pending migrations; NewerDatabaseError, applying nothing, on a newer memvault's database."""
    return SCHEMA.apply(dsn)


def rollback_migrations(dsn: str, to: str) -> list[str]:
    """Roll back every applied migration after `to`, newest first (for going back to an older release)."""
    return SCHEMA.rollback(dsn, to)


async def unknown_migrations(pool: asyncpg.Pool) -> list[str]:
    return await SCHEMA.unknown(pool)


async def missing_migrations(pool: asyncpg.Pool) -> list[str]:
    return await SCHEMA.missing(pool)
