"""Commands for Postgres's OS user, started while gRPC is busy in this process (CI saw a forked child crash)."""

import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from memvault_devstack.os_user import as_user, os_user_for_postgres

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs Postgres as another OS user")


def test_as_nobody_else_the_command_is_unchanged() -> None:
    assert as_user(None, ["pg_ctl", "--version"]) == ["pg_ctl", "--version"]


@as_root
def test_the_command_runs_as_postgres_os_user_without_groups() -> None:
    user = os_user_for_postgres()
    assert user is not None
    result = subprocess.run(as_user(user, ["/usr/bin/id"]), capture_output=True, text=True, check=True)
    assert (
        result.stdout.strip()
        == f"uid={user.uid}({user.name}) gid={user.gid}({user.name}) groups={user.gid}({user.name})"
    )


@as_root
def test_the_program_starts_as_subprocess_would_start_it() -> None:
    # Found on PATH, with SIGPIPE and SIGXFSZ at their defaults (Python ignores both in itself).
    user = os_user_for_postgres()
    status = subprocess.run(as_user(user, ["cat", "/proc/self/status"]), capture_output=True, text=True, check=True)
    ignored = int(next(line for line in status.stdout.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (13 - 1) | 1 << (25 - 1)) == 0
    missing = subprocess.run(as_user(user, ["/nonexistent/pg_ctl", "--version"]), capture_output=True, text=True)
    assert missing.returncode == 127 and "cannot start /nonexistent/pg_ctl" in missing.stderr


@pytest.fixture
def busy_grpc() -> Iterator[None]:
    """A health server and three threads calling it without pause, as a stack's readiness probes do."""
    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()
    calls = [0, 0, 0]

    def call(caller: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not stop.is_set():
                stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
                calls[caller] += 1

    callers = [threading.Thread(target=call, args=(n,)) for n in range(3)]
    for caller in callers:
        caller.start()
    yield
    alive = [caller.is_alive() for caller in callers]
    stop.set()
    for caller in callers:
        caller.join()
    server.stop(None)
    assert all(alive) and min(calls) > 100, f"gRPC was not kept busy: callers alive {alive}, calls {calls}"


@as_root
def test_commands_for_the_os_user_survive_a_busy_grpc(busy_grpc: None) -> None:
    # Started with subprocess's own user switch, about 1 in 300 of these children crashed (SIGSEGV in
    # gRPC's fork handler) before exec; 600 catch that nine times in ten.
    user = os_user_for_postgres()
    failures = []
    for _ in range(600):
        result = subprocess.run(
            as_user(user, ["/bin/echo", "ok"]), capture_output=True, text=True, start_new_session=True, check=False
        )
        if result.returncode != 0 or result.stdout != "ok\n":
            failures.append((result.returncode, result.stdout[:200], result.stderr[:200]))
    assert failures == []
