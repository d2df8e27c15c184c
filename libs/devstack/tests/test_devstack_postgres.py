import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault_devstack.errors import DevstackError
from memvault_devstack.ports import free_port, port_accepts
from memvault_devstack.postgres import (
    EmbeddedPostgres,
    cgroup_memory_limit,
    create_database,
    drop_database,
    machine_memory_bytes,
    one_machine_settings,
    psql,
    server_major_version,
)

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


def test_the_buffer_cache_is_a_quarter_of_the_memory_within_bounds(tmp_path: Path) -> None:
    gib = 2**30
    assert one_machine_settings(tmp_path, 16 * gib)["shared_buffers"] == "4096MB"
    assert one_machine_settings(tmp_path, 64 * gib)["shared_buffers"] == "4096MB"  # at most 4 GB
    assert one_machine_settings(tmp_path, 4 * gib)["shared_buffers"] == "1024MB"
    assert one_machine_settings(tmp_path, 256 * 2**20)["shared_buffers"] == "128MB"  # at least Postgres's default
    assert "shared_preload_libraries" not in one_machine_settings(tmp_path, 4 * gib)  # a server without pg_prewarm
    (tmp_path / "pg_prewarm.so").touch()
    assert one_machine_settings(tmp_path, 4 * gib)["shared_preload_libraries"] == "pg_prewarm"
    assert machine_memory_bytes() > 0


def test_the_embedded_server_keeps_its_cache_across_restarts(directory: Path) -> None:
    # autoprewarm notes the cached pages at shutdown and reads them back at the next start.
    server = EmbeddedPostgres(directory / "data")
    dsn = server.start()
    try:
        expected = one_machine_settings(directory, machine_memory_bytes())["shared_buffers"]
        assert psql(
            dsn, "SELECT setting::bigint * 8 / 1024 || 'MB' FROM pg_settings WHERE name = 'shared_buffers'"
        ) == (expected)
        assert psql(dsn, "SHOW shared_preload_libraries") == "pg_prewarm"
        psql(dsn, "CREATE TABLE warm AS SELECT g, repeat('x', 500) AS body FROM generate_series(1, 20000) AS g")
        psql(dsn, "SELECT count(*) FROM warm")
    finally:
        server.stop()
    assert (directory / "data" / "autoprewarm.blocks").stat().st_size > 0


def test_the_server_version_is_read_from_pg_ctls_own_line() -> None:
    # A forked child can write to the same output before exec (CI saw gRPC's `I1206 ...` line
    # there, read as "PostgreSQL 1206"); only pg_ctl's line names the version.
    noisy = (
        "I1206 03:39:11.134728     673 fork_posix.cc:71] Other threads are currently calling into gRPC\n"
        "pg_ctl (PostgreSQL) 18.6\n"
    )
    assert server_major_version(noisy) == "18"
    assert server_major_version("pg_ctl (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)\n") == "15"
    assert server_major_version("I1206 03:39:11 something else entirely\n") is None


def test_a_containers_memory_limit_is_found_in_cgroup_v1_and_v2(tmp_path: Path) -> None:
    def limit(path: str, value: str) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(value + "\n")

    assert cgroup_memory_limit("", tmp_path) is None
    limit("memory.max", "max")  # v2, no limit
    assert cgroup_memory_limit("0::/\n", tmp_path) is None
    limit("system.slice/box.scope/memory.max", str(2 * 2**30))  # v2 seen from the host's namespace
    assert cgroup_memory_limit("0::/system.slice/box.scope\n", tmp_path) == 2 * 2**30
    limit("memory/docker/abc/memory.limit_in_bytes", str(3 * 2**30))  # v1
    limit("memory/memory.limit_in_bytes", str(2**63 - 4096))  # v1's "no limit"
    v1 = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n"
    assert cgroup_memory_limit(v1, tmp_path) == 3 * 2**30
    limit("memory.max", str(2**30))  # a container's own namespace: its limit at the root
    assert cgroup_memory_limit(v1, tmp_path) == 2**30


_REFUSED_MEMORY = """
import resource, sys
import memvault_devstack.postgres as postgres
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # inherited by pg_ctl and the server
postgres.machine_memory_bytes = lambda: 64 * 2**30  # asks for 4 GB of buffers
server = postgres.EmbeddedPostgres(sys.argv[1])
dsn = server.start()
try:
    print(postgres.psql(dsn, "SHOW shared_buffers"))
finally:
    server.stop()
"""


def test_a_machine_that_refuses_the_buffer_cache_gets_the_smallest_one(directory: Path) -> None:
    # An address-space limit stands in for strict overcommit: the 4 GB map fails, the server still starts.
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_MEMORY, str(directory / "data")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "128MB"
    assert "refused Postgres's buffer cache" in done.stderr
