"""For the services' migration tests: a database of a test's own, and yoyo steps that `migrate` and
`rollback --to` never take alone (apply up to one migration, roll back exactly one)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from yoyo import read_migrations
from yoyo.migrations import MigrationList

from memvault_core.postgres import Migrations
from memvault_devstack.postgres import create_database, drop_database


@contextmanager
def fresh_database(server_dsn: str, prefix: str) -> Iterator[str]:
    """An empty database named `<prefix>_<random>` on the server, dropped afterwards; its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    dsn = create_database(server_dsn, name, exist_ok=False)
    try:
        yield dsn
    finally:
        drop_database(server_dsn, name)


def apply_up_to(migrations: Migrations, dsn: str, last: str) -> list[str]:
    """Apply the migrations `migrate` would, in its order, up to and including `last`; their ids."""
    backend = migrations.backend(dsn)
    pending = list(backend.to_apply(read_migrations(str(migrations.folder))))
    chosen = MigrationList(pending[: [m.id for m in pending].index(last) + 1])
    with backend.lock():
        backend.apply_migrations(chosen)
    return [m.id for m in chosen]


def roll_back_one(migrations: Migrations, dsn: str, migration_id: str) -> None:
    """Run the rollback file of one applied migration (and no other)."""
    backend = migrations.backend(dsn)
    with backend.lock():
        applied = backend.to_rollback(read_migrations(str(migrations.folder)))
        backend.rollback_migrations(MigrationList([m for m in applied if m.id == migration_id]))
