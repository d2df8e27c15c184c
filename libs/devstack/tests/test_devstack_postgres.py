import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault_devstack.errors import DevstackError
from memvault_devstack.ports import free_port, port_accepts
from memvault_devstack.postgres import EmbeddedPostgres, create_database, drop_database, psql

pytestmark = pytest.mark.integration


@pytest.fixture
def directory() -> Iterator[Path]:
    # Not tmp_path: as root, Postgres runs as another OS user that cannot enter pytest's 0700 dirs.
    path = Path(tempfile.mkdtemp(prefix="memvault-devstack-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_data_survives_a_restart(directory: Path) -> None:
    first = EmbeddedPostgres(directory / "data")
    dsn = first.start()
    psql(dsn, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept')")
    port = first.port
    first.stop()
    assert not port_accepts(port)

    second = EmbeddedPostgres(directory / "data")
    try:
        again = second.start()
        assert again.startswith("postgresql://postgres@127.0.0.1:")
        assert again.endswith("/memvault")
        assert psql(again, "SELECT body FROM notes") == "kept"
    finally:
        second.stop()


def test_listens_on_the_port_it_is_given(directory: Path) -> None:
    port = free_port()
    with EmbeddedPostgres(directory / "data", port=port, database="other") as server:
        assert server.dsn == f"postgresql://postgres@127.0.0.1:{port}/other"
        assert psql(server.dsn, "SELECT current_database()") == "other"
        assert psql(server.dsn, "SHOW default_text_search_config") == "pg_catalog.english"
    assert not port_accepts(port)


def test_a_server_left_running_by_a_killed_run_is_taken_over(directory: Path) -> None:
    abandoned = EmbeddedPostgres(directory / "data")
    abandoned.start()  # and never stopped, as when memvault-dev is killed with SIGKILL
    old_port = abandoned.port

    with EmbeddedPostgres(directory / "data") as server:
        assert psql(server.dsn, "SELECT 1") == "1"
    assert not port_accepts(old_port)


def test_creates_and_drops_databases(directory: Path) -> None:
    with EmbeddedPostgres(directory / "data") as server:
        dsn = create_database(server.server_dsn, "memvault_test_scratch")
        assert psql(dsn, "SELECT current_database()") == "memvault_test_scratch"

        drop_database(server.server_dsn, "memvault_test_scratch")

        assert (
            psql(server.server_dsn, "SELECT count(*) FROM pg_database WHERE datname = 'memvault_test_scratch'") == "0"
        )


def test_an_interrupted_first_start_leaves_nothing_half_made(directory: Path) -> None:
    (directory / "data.initdb").mkdir()  # what a Ctrl-C during initdb leaves behind
    (directory / "data.initdb" / "base").mkdir()

    with EmbeddedPostgres(directory / "data") as server:
        assert psql(server.dsn, "SELECT 1") == "1"
    assert not (directory / "data.initdb").exists()


def test_a_directory_that_is_not_a_cluster_is_left_alone(directory: Path) -> None:
    (directory / "data").mkdir()
    (directory / "data" / "notes.txt").write_text("mine")

    with pytest.raises(DevstackError, match="neither empty nor a Postgres data directory"):
        EmbeddedPostgres(directory / "data").start()
    assert (directory / "data" / "notes.txt").read_text() == "mine"


def test_a_file_where_the_data_directory_should_be_is_named(directory: Path) -> None:
    (directory / "data").touch()

    with pytest.raises(
        DevstackError, match=r"data is a file \(0 bytes\) where the Postgres data directory should be; move it away"
    ):
        EmbeddedPostgres(directory / "data").start()
    assert (directory / "data").is_file()


def test_wal_is_kept_small_for_one_machine(directory: Path) -> None:
    server = EmbeddedPostgres(directory / "data", settings={"min_wal_size": "48MB"})
    dsn = server.start()
    try:
        assert psql(dsn, "SHOW max_wal_size") == "64MB"
        assert psql(dsn, "SHOW min_wal_size") == "48MB"  # given settings win
        assert psql(dsn, "SHOW wal_keep_size") == "0"
        assert psql(dsn, "SHOW wal_compression") in {"on", "pglz", "lz4"}
    finally:
        server.stop()
