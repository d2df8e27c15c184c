"""`memvault-gateway serve`, `migrate` and `setup-link` refuse an unreachable, newer, unnamed or foreign
database in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from gateway_helpers import SECRET, free_port

from memvault_devstack.postgres import create_database, drop_database, psql, with_database
from memvault_gateway.store import MIGRATIONS, NewerDatabaseError

pytestmark = pytest.mark.integration


def run_gateway(dsn: str | None, command: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{name: value for name, value in os.environ.items() if name != "MEMVAULT_POSTGRES__DSN"},
        "MEMVAULT_IDENTITY__SECRET": SECRET,
        "MEMVAULT_GATEWAY__PORT": str(free_port()),
        **({"MEMVAULT_POSTGRES__DSN": dsn} if dsn is not None else {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "memvault_gateway", command], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def own_database(postgres_dsn: str) -> Iterator[str]:
    server, name = with_database(postgres_dsn, "postgres"), f"memvault_newer_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server, name)
    try:
        yield dsn
    finally:
        drop_database(server, name)


def test_a_database_migrated_by_a_newer_memvault_is_refused(own_database: str) -> None:
    MIGRATIONS.apply(own_database)
    psql(
        own_database,
        "INSERT INTO gateway._yoyo_migration (migration_hash, migration_id, applied_at_utc)"
        " VALUES ('f00d', '0099_from_the_future', now())",
    )
    with pytest.raises(NewerDatabaseError, match="0099_from_the_future; run that version or restore a backup"):
        MIGRATIONS.apply(own_database)
    for command in ("migrate", "serve"):
        result = run_gateway(own_database, command)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == (
            "memvault-gateway: this database was migrated by a newer memvault: 0099_from_the_future; "
            "run that version or restore a backup"
        )
        assert "Traceback" not in result.stderr


def test_an_unreachable_database_is_one_line_naming_it() -> None:
    port = free_port()
    for command in ("migrate", "serve"):
        result = run_gateway(f"postgresql://postgres:hunter2@127.0.0.1:{port}/memvault", command)
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith(
            f"memvault-gateway: cannot reach Postgres at 127.0.0.1:{port} (MEMVAULT_POSTGRES__DSN): "
        )
        assert "hunter2" not in result.stderr + result.stdout


@pytest.mark.parametrize("command", ["setup-link", "migrate"])
def test_without_a_database_named_setup_link_and_migrate_stop_in_one_line(command: str) -> None:
    # Not a default address: on this machine 127.0.0.1:5432 is some other Postgres, as on many.
    result = run_gateway(None, command)

    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(
        "memvault-gateway: MEMVAULT_POSTGRES__DSN is not set: set it to the gateway's database"
    )
    if command == "setup-link":
        assert "`memvault-dev setup-link` finds it" in result.stderr


def test_setup_link_on_a_database_that_is_not_the_gateways_is_one_line(own_database: str) -> None:
    result = run_gateway(own_database, "setup-link")

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"memvault-gateway: the database at {own_database.split('@', 1)[1]} has no gateway tables: "
        "MEMVAULT_POSTGRES__DSN names a database that is not the gateway's, or run `memvault-gateway migrate` first"
    ]


def test_setup_link_on_an_unreachable_database_is_one_line() -> None:
    port = free_port()
    result = run_gateway(f"postgresql://postgres:hunter2@127.0.0.1:{port}/memvault", "setup-link")

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"memvault-gateway: cannot reach Postgres at 127.0.0.1:{port} (MEMVAULT_POSTGRES__DSN): ")
    assert "hunter2" not in result.stderr


def test_setup_link_help_says_it_needs_the_database_and_replaces_older_links() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "Needs MEMVAULT_POSTGRES__DSN" in text
    assert "A new link replaces the account's older unused one" in text
