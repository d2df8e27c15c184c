import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memvault_devstack.claim import LOCK_FILE, STATE_FILE
from memvault_devstack.ports import free_port, port_accepts
from memvault_devstack.postgres import create_database, drop_database, psql, with_database
from memvault_gateway.auth.credentials import token_hash

FAKE_SERVICE = Path(__file__).with_name("fake_service.py")

# memvault-dev itself, with the fake services in place of the real ones.
RUN_WITH_FAKES = f"""
import sys
import memvault_devstack.stack as stack
stack.DEFAULT_COMMANDS = {{name: (sys.executable, {str(FAKE_SERVICE)!r}, name) for name in stack.SERVICES}}
from memvault_devstack.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.unit
def test_help_names_every_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memvault_devstack", "run", "--help"], capture_output=True, text=True, check=True
    )

    for option in ("--data-dir", "--gateway-port", "--postgres-dsn", "--nats-url", "--services", "--quiet"):
        assert option in result.stdout
    assert "Ctrl-C" in result.stdout


def wait_for_text(path: Path, text: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text()
        if text in content:
            return content
        assert process.poll() is None, f"memvault-dev exited early:\n{content}"
        time.sleep(0.1)
    raise AssertionError(f"{text!r} did not appear within {timeout}s:\n{path.read_text()}")


@pytest.mark.integration
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_prints_how_to_connect_and_stops_cleanly(
    tmp_path: Path, postgres_dsn: str, nats_url: str, stop_signal: signal.Signals
) -> None:
    output, events = tmp_path / "output.txt", tmp_path / "events.log"
    command = [
        sys.executable, "-c", RUN_WITH_FAKES, "run", "--data-dir", str(tmp_path / "data"),
        "--gateway-port", "0", "--postgres-dsn", postgres_dsn, "--nats-url", nats_url,
    ]  # fmt: skip
    with output.open("wb") as stream:
        process = subprocess.Popen(
            command, stdout=stream, stderr=subprocess.STDOUT, env={**os.environ, "FAKE_EVENTS": str(events)}
        )
    try:
        shown = wait_for_text(output, "Press Ctrl-C to stop.", process)
        url = next(line.split()[-1] for line in shown.splitlines() if "MCP endpoint" in line)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert f"claude mcp add --transport http memvault {url}" in shown
        assert f'url = "{url}"' in shown
        assert f'{{"mcpServers": {{"memvault": {{"url": "{url}"}}}}}}' in shown
        assert "gateway | INFO    gateway starting" in shown
        assert "http://127.0.0.1/setup/fake-one-time-link" in shown  # the owner's first sign-in
        assert f"Password reset memvault-dev setup-link --data-dir {tmp_path / 'data'}" in shown
        gateway = url.removesuffix("/mcp")
        assert httpx.get(f"{gateway}/readyz", trust_env=False).status_code == 200

        process.send_signal(stop_signal)

        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    stops = [line for line in events.read_text().splitlines() if line.startswith("stop ")]
    assert stops == ["stop gateway", "stop mcp", "stop indexer", "stop vault"]
    assert not port_accepts(int(gateway.rsplit(":", 1)[1]))
    assert "memvault-dev: stopped" in output.read_text()


class Runner:
    """memvault-dev (with fake services) on one data dir and gateway port, output in a file."""

    def __init__(self, tmp_path: Path, postgres_dsn: str, nats_url: str, **env: str) -> None:
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "data"
        self.events = tmp_path / "events.log"
        self.port = free_port()
        self.arguments = [
            "run", "--data-dir", str(self.data_dir), "--gateway-port", str(self.port),
            "--postgres-dsn", postgres_dsn, "--nats-url", nats_url,
        ]  # fmt: skip
        self.env = {**os.environ, "FAKE_EVENTS": str(self.events), **env}
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> tuple[subprocess.Popen[bytes], Path]:
        output = self.tmp_path / f"output-{len(self.processes)}.txt"
        with output.open("wb") as stream:
            process = subprocess.Popen(
                [sys.executable, "-c", RUN_WITH_FAKES, *self.arguments],
                stdout=stream,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        self.processes.append(process)
        wait_for_text(output, "Press Ctrl-C to stop.", process)
        return process, output

    def pid(self, service: str) -> int:
        return int((self.data_dir / "run" / f"{service}.pid").read_text())

    def events_of(self, prefix: str) -> list[str]:
        return [line for line in self.events.read_text().splitlines() if line.startswith(prefix)]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=60)


@pytest.fixture
def runner(tmp_path: Path, postgres_dsn: str, nats_url: str) -> Iterator[Runner]:
    started = Runner(tmp_path, postgres_dsn, nats_url)
    yield started
    started.stop()


@pytest.mark.integration
def test_a_run_after_a_killed_one_stops_its_leftovers_and_starts(runner: Runner) -> None:
    killed, _ = runner.start()
    leftover = runner.pid("gateway")
    killed.kill()  # SIGKILL: no chance to stop the services
    killed.wait()
    assert port_accepts(runner.port)

    again, output = runner.start()

    assert "left running by an earlier run" in output.read_text()
    assert runner.pid("gateway") != leftover
    assert runner.events_of("stop ") == ["stop gateway", "stop mcp", "stop indexer", "stop vault"]
    assert httpx.get(f"http://127.0.0.1:{runner.port}/readyz", trust_env=False).status_code == 200
    again.send_signal(signal.SIGINT)
    assert again.wait(timeout=60) == 0


@pytest.mark.integration
def test_a_crashed_service_is_restarted(runner: Runner) -> None:
    process, output = runner.start()
    crashed = runner.pid("indexer")

    os.kill(crashed, signal.SIGKILL)

    shown = wait_for_text(output, "memvault-dev: indexer restarted; ready in ", process, timeout=30)
    assert "memvault-dev: indexer exited (SIGKILL); restarting it in 1s" in shown
    assert runner.pid("indexer") != crashed
    assert runner.events_of("start indexer") == ["start indexer", "start indexer"]
    assert process.poll() is None


@pytest.mark.integration
def test_a_service_that_keeps_crashing_stops_everything(tmp_path: Path, postgres_dsn: str, nats_url: str) -> None:
    runner = Runner(tmp_path, postgres_dsn, nats_url, FAKE_FAIL_AGAIN="indexer")
    process, output = runner.start()
    try:
        os.kill(runner.pid("indexer"), signal.SIGKILL)

        assert process.wait(timeout=60) == 1
    finally:
        runner.stop()
    shown = output.read_text()
    assert shown.count("memvault-dev: indexer exited (SIGKILL); restarting it in 1s") == 1
    assert shown.count("memvault-dev: indexer exited again (exit code 3) before it was ready; restarting it") == 2
    assert "memvault-dev: indexer exited (exit code 3) 4 times within 60s; giving up" in shown
    assert "fake indexer: cannot start, configured to fail" in shown.split("giving up")[1]  # the log tail
    assert runner.events_of("stop ") == ["stop gateway", "stop mcp", "stop vault"]
    assert not port_accepts(runner.port)


@pytest.mark.integration
def test_a_file_in_place_of_the_postgres_directory_is_one_line(tmp_path: Path, nats_url: str) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "postgres").touch()

    result = subprocess.run(
        [sys.executable, "-m", "memvault_devstack", "run", "--data-dir", str(tmp_path / "data"),
         "--gateway-port", "0", "--nats-url", nats_url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"memvault-dev: {tmp_path / 'data' / 'postgres'} is a file (0 bytes) where the Postgres data "
        "directory should be; move it away and start again"
    ]


def files_in(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under `directory` with its modification time and size."""
    return {str(path): (path.lstat().st_mtime_ns, path.lstat().st_size) for path in sorted(directory.rglob("*"))}


@pytest.mark.integration
def test_a_second_run_on_the_same_data_dir_says_who_runs_it_and_touches_nothing(runner: Runner) -> None:
    first, output = runner.start()
    before, events, pids = (
        files_in(runner.data_dir),
        runner.events.read_text(),
        {name: runner.pid(name) for name in ("vault", "indexer", "mcp", "gateway")},
    )

    second = subprocess.run(
        [sys.executable, "-c", RUN_WITH_FAKES, *runner.arguments],
        env=runner.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert second.returncode == 1
    assert second.stdout == ""
    assert second.stderr.splitlines() == [
        f"memvault-dev: memvault-dev already runs on {runner.data_dir} (pid {first.pid}, "
        f"http://127.0.0.1:{runner.port}); nothing was changed. Use that one (Ctrl-C in its terminal "
        "stops it), or give this one another --data-dir"
    ]
    assert files_in(runner.data_dir) == before  # pid files, logs, the lock and state files
    assert runner.events.read_text() == events  # no service was started, stopped or set up
    assert {name: runner.pid(name) for name in pids} == pids
    assert first.poll() is None
    assert httpx.get(f"http://127.0.0.1:{runner.port}/readyz", trust_env=False).status_code == 200
    assert "stopping" not in output.read_text()


@pytest.fixture
def own_database(postgres_dsn: str) -> Iterator[str]:
    server, name = with_database(postgres_dsn, "postgres"), f"memvault_devstack_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server, name)
    try:
        yield dsn
    finally:
        drop_database(server, name)


def setup_link_command(data_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Without a database in the environment: the command must find the running stack's by itself.
    env = {name: value for name, value in env.items() if name != "MEMVAULT_POSTGRES__DSN"}
    return subprocess.run(
        [sys.executable, "-m", "memvault_devstack", "setup-link", "--data-dir", str(data_dir)],
        env=env, capture_output=True, text=True, timeout=120, check=False, cwd=data_dir.parent,
    )  # fmt: skip


def link_states(dsn: str, *links: str) -> list[str]:
    states = []
    for link in links:
        token = link.rsplit("/", 1)[1]
        states.append(
            psql(
                dsn,
                "SELECT CASE WHEN replaced_at IS NOT NULL THEN 'replaced' WHEN used_at IS NOT NULL THEN 'used'"
                " ELSE 'usable' END FROM gateway.setup_link WHERE token_hash = :'hash'",
                variables={"hash": token_hash(token)},
            )
        )
    return states


@pytest.mark.integration
def test_setup_link_prints_a_link_for_the_running_gateway(tmp_path: Path, own_database: str, nats_url: str) -> None:
    # The gateway's own migrate and setup-link run, against this test's database.
    runner = Runner(tmp_path, own_database, nats_url, FAKE_REAL_GATEWAY_COMMANDS="1")
    try:
        _, output = runner.start()
        first = next(line.split()[-1] for line in output.read_text().splitlines() if "/setup/" in line)
        assert first.startswith(f"http://127.0.0.1:{runner.port}/setup/mvsetup_")

        result = setup_link_command(runner.data_dir, runner.env)

        assert result.returncode == 0, result.stderr
        [link] = result.stdout.splitlines()
        assert link.startswith(f"http://127.0.0.1:{runner.port}/setup/mvsetup_")
        assert link_states(own_database, first, link) == ["replaced", "usable"]
        assert result.stderr == ""
    finally:
        runner.stop()

    stopped = setup_link_command(runner.data_dir, runner.env)

    assert stopped.returncode == 1 and stopped.stdout == ""
    assert stopped.stderr.splitlines() == [
        f"memvault-dev: no memvault-dev runs on {runner.data_dir}; start it (`make run`) and run this again "
        "(the link is for its gateway and database)"
    ]


@pytest.mark.unit
def test_setup_link_trusts_no_state_file_without_a_live_owner(tmp_path: Path) -> None:
    # What a memvault-dev killed with SIGKILL leaves behind: its files, but no lock held.
    data_dir = tmp_path / "data"
    (data_dir / "run").mkdir(parents=True)
    (data_dir / LOCK_FILE).write_text("4242\n")
    (data_dir / STATE_FILE).write_text(
        '{"pid": 4242, "data_dir": "x", "ready": true, "gateway_url": "http://127.0.0.1:1",'
        ' "postgres_dsn": "postgresql://postgres@127.0.0.1:1/memvault", "gateway_command": ["false"]}'
    )

    result = setup_link_command(data_dir, dict(os.environ))

    assert result.returncode == 1
    assert result.stderr.startswith(f"memvault-dev: no memvault-dev runs on {data_dir};")
