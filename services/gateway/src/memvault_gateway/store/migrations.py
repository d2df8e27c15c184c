"""The gateway's schema migrations (yoyo, files in `memvault_gateway/migrations`): apply, roll back,
and refuse a database a newer memvault migrated."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

MIGRATIONS = Path(__file__).parent.parent / "migrations"
SCHEMA = "gateway"


class NewerDatabaseError(Exception):
    """The database holds gateway migrations this code does not know: a newer memvault migrated it."""

    def __init__(self, unknown: Sequence[str]) -> None:
        super().__init__(
            f"this database was migrated by a newer memvault: {', '.join(unknown)}; "
            "run that version or restore a backup"
        )


def migration_backend(dsn: str) -> Any:
    """yoyo's backend for the gateway's schema, created if missing: yoyo's own bookkeeping tables
    live in schema `gateway` too, apart from the vault's."""
    import psycopg
    from yoyo import get_backend

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    url = dsn.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://", 1)
    url += ("&" if "?" in url else "?") + f"schema={SCHEMA}"
    return get_backend(url)


def apply_migrations(dsn: str) -> list[str]:
    """Apply the gateway's pending migrations; return the ids applied.

    Raises NewerDatabaseError, applying nothing, when the schema has migrations this code does not know.
    """
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
    """A gateway migration id this code does not have."""

    def __init__(self, migration_id: str, known: Sequence[str]) -> None:
        super().__init__(f"no gateway migration {migration_id!r} in this memvault; its migrations: {', '.join(known)}")


def rollback_migrations(dsn: str, to: str) -> list[str]:
    """Roll back, newest first and under the migration lock, every applied gateway migration after `to`
    in the order `migrate` applies them; return the ids rolled back (for going back to an older
    release, which refuses the newer schema: the rollback files are in this code)."""
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
