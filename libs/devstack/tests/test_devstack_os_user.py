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


@pytest.fixture
def busy_grpc() -> Iterator[None]:
    """A health server and three threads calling it without pause, as a stack's readiness probes do."""
    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()

    def call() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not stop.is_set():
                stub.Check(health_pb2.HealthCheckRequest(), timeout=5)

    callers = [threading.Thread(target=call) for _ in range(3)]
    for caller in callers:
        caller.start()
    yield
    stop.set()
    for caller in callers:
        caller.join()
    server.stop(None)


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
