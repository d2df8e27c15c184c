"""The vault's schema: its numbered migrations (`migrations/`), applied and rolled back with yoyo.

The service refuses to start on a database that is older or newer than this code (see `__main__`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg

MIGRATIONS = Path(__file__).parent / "migrations"


class NewerDatabaseError(Exception):
    """The database holds migrations this code does not know: a newer memvault migrated it."""

    def __init__(self, unknown: Sequence[str]) -> None:
        super().__init__(
            f"this database was migrated by a newer memvault: {', '.join(unknown)}; "
            "run that version or restore a backup"
        )


def migration_ids() -> set[str]:
    from yoyo import read_migrations

    return {migration.id for migration in read_migrations(str(MIGRATIONS))}


def migration_backend(dsn: str) -> Any:
    """yoyo's backend for the vault's database (yoyo wants the psycopg 3 driver named in the URL)."""
    from yoyo import get_backend

    return get_backend(
        dsn.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://", 1)
    )


def apply_migrations(dsn: str) -> list[str]:
    """Apply pending numbered migrations under an advisory lock; return the ids applied.

    Raises NewerDatabaseError, applying nothing, when the database has migrations this code lacks:
    its schema may need columns this code never fills."""
    from yoyo import read_migrations

    backend = migration_backend(dsn)
    migrations = read_migrations(str(MIGRATIONS))
    with backend.lock():
        pending = backend.to_apply(migrations)
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - {migration.id for migration in migrations})
        if unknown:
            raise NewerDatabaseError(unknown)
        backend.apply_migrations(pending)
    return [migration.id for migration in pending]


class UnknownMigrationError(Exception):
    """A migration id this code does not have."""

    def __init__(self, migration_id: str, known: Sequence[str]) -> None:
        super().__init__(f"no migration {migration_id!r} in this memvault; its migrations: {', '.join(known)}")


def rollback_migrations(dsn: str, to: str) -> list[str]:
    """Roll back, newest first and under the migration lock, every applied migration that comes after
    `to` in the order `migrate` applies them; return the ids rolled back.

    For going back to an older release, which refuses the newer schema: the rollback files are in
    this (newer) code. Raises NewerDatabaseError when the database has migrations even this code
    lacks, UnknownMigrationError when `to` is not one of its migrations."""
    from yoyo import read_migrations
    from yoyo.migrations import MigrationList, topological_sort

    backend = migration_backend(dsn)
    migrations = read_migrations(str(MIGRATIONS))
    order = [migration.id for migration in topological_sort(migrations)]
    if to not in order:
        raise UnknownMigrationError(to, order)
    later = set(order[order.index(to) + 1 :])
    with backend.lock():
        applied = backend.execute("SELECT migration_id FROM _yoyo_migration").fetchall()
        unknown = sorted({row[0] for row in applied} - set(order))
        if unknown:
            raise NewerDatabaseError(unknown)
        chosen = MigrationList([m for m in backend.to_rollback(migrations) if m.id in later])
        backend.rollback_migrations(chosen)
    return [migration.id for migration in chosen]


class OlderDatabaseError(Exception):
    """The database lacks migrations this code needs: `memvault-vault migrate` has not run since the upgrade."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(
            f"this database lacks migrations this memvault needs: {', '.join(missing)}; "
            "run `memvault-vault migrate` first"
        )


async def unknown_migrations(pool: asyncpg.Pool) -> list[str]:
    """Migrations applied to this database that this code does not know (a newer memvault's)."""
    if await pool.fetchval("SELECT to_regclass('_yoyo_migration')") is None:
        return []
    applied = await pool.fetch("SELECT migration_id FROM _yoyo_migration")
    return sorted({row["migration_id"] for row in applied} - migration_ids())


async def missing_migrations(pool: asyncpg.Pool) -> list[str]:
    """This code's migrations not applied to this database: its queries would fail on the old schema."""
    if await pool.fetchval("SELECT to_regclass('_yoyo_migration')") is None:
        return sorted(migration_ids())
    applied = await pool.fetch("SELECT migration_id FROM _yoyo_migration")
    return sorted(migration_ids() - {row["migration_id"] for row in applied})
