import asyncio
import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memvault_devstack.errors import DevstackError
from memvault_devstack.fixtures import StackStarter
from memvault_devstack.layout import SERVICES
from memvault_devstack.nats import JetStreamProbe
from memvault_devstack.ports import port_accepts
from memvault_devstack.processes import process_alive, stop_leftover
from memvault_devstack.stack import Stack
from memvault_devstack.supervisor import Supervisor

pytestmark = pytest.mark.integration

FAKE_SERVICE = Path(__file__).with_name("fake_service.py")


def fake_commands() -> dict[str, list[str]]:
    return {name: [sys.executable, str(FAKE_SERVICE), name] for name in SERVICES}


def get(url: str) -> Any:
    response = httpx.get(url, trust_env=False, timeout=5.0)
    response.raise_for_status()
    return response.json()


@pytest.fixture
def events(tmp_path: Path) -> Path:
    return tmp_path / "events.log"


@pytest.fixture
def fake_stack(start_stack: StackStarter, events: Path) -> StackStarter:
    """start_stack running the fake services; `env` options add to FAKE_EVENTS."""

    def start(**options: Any) -> Stack:
        options["env"] = {"FAKE_EVENTS": str(events), **options.get("env", {})}
        options.setdefault("commands", fake_commands())
        options.setdefault("ready_timeout", 30.0)
        return start_stack(**options)

    return start


def test_services_get_the_runtime_contract(fake_stack: StackStarter, events: Path) -> None:
    stack = fake_stack(
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},
        service_env={"gateway": {"FAKE_ONLY_GATEWAY": "yes"}},
    )

    gateway = get(f"{stack.gateway_url}/env")
    assert gateway["MEMVAULT_GATEWAY__MCP_URL"] == stack.mcp_service_url
    assert gateway["MEMVAULT_GATEWAY__VAULT_ADDRESS"] == stack.vault_address
    assert gateway["MEMVAULT_GATEWAY__PUBLIC_URL"] == stack.gateway_url
    assert gateway["MEMVAULT_GATEWAY__DEV_MODE"] == "true"
    assert gateway["MEMVAULT_GATEWAY__DEV_SUBJECT"] == "owner"
    assert gateway["MEMVAULT_POSTGRES__DSN"] == stack.postgres_dsn
    assert gateway["MEMVAULT_NATS__URL"] == stack.nats_url
    assert gateway["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4317"
    assert gateway["FAKE_ONLY_GATEWAY"] == "yes"
    mcp = get(f"http://127.0.0.1:{stack.ports['mcp']}/env")
    assert mcp["MEMVAULT_MCP__VAULT_ADDRESS"] == stack.vault_address
    assert "FAKE_ONLY_GATEWAY" not in mcp
    assert mcp["MEMVAULT_IDENTITY__SECRET"] == gateway["MEMVAULT_IDENTITY__SECRET"] == stack.identity_secret
    assert len(stack.identity_secret) >= 32
    assert stack.mcp_url == f"{stack.gateway_url}/mcp"
    assert events.read_text().splitlines()[:3] == [
        "vault migrate",
        "vault create-owner --subject owner --vault default",
        "gateway migrate",
    ]


def test_services_stop_in_reverse_order(fake_stack: StackStarter, events: Path) -> None:
    stack = fake_stack()
    stack.stop()

    stops = [line for line in events.read_text().splitlines() if line.startswith("stop ")]
    assert stops == ["stop gateway", "stop mcp", "stop indexer", "stop vault"]
    assert not any(port_accepts(port) for port in stack.ports.values())


def test_restarted_services_keep_ports_and_secret(fake_stack: StackStarter, events: Path) -> None:
    stack = fake_stack()
    ports, secret = dict(stack.ports), stack.identity_secret

    stack.restart_services()

    assert dict(stack.ports) == ports
    assert get(f"{stack.gateway_url}/env")["MEMVAULT_IDENTITY__SECRET"] == secret
    assert events.read_text().splitlines().count("start vault") == 2


def test_identity_secret_is_private_and_kept_across_runs(fake_stack: StackStarter, tmp_path: Path) -> None:
    first = fake_stack(data_dir=tmp_path / "data", services=["mcp"])
    secret = first.identity_secret
    first.stop()

    second = fake_stack(data_dir=tmp_path / "data", services=["mcp"])

    assert second.identity_secret == secret
    assert stat.S_IMODE(os.stat(tmp_path / "data" / "identity-secret").st_mode) == 0o600


def test_only_the_chosen_services_start(fake_stack: StackStarter, events: Path) -> None:
    stack = fake_stack(services=["indexer"])

    assert events.read_text().splitlines() == ["start indexer"]
    assert stack.process("indexer").running()
    with pytest.raises(KeyError):
        stack.process("vault")


def test_a_failing_service_is_named_with_its_output(fake_stack: StackStarter, events: Path) -> None:
    with pytest.raises(DevstackError, match=r"indexer exited \(exit code 3\)") as failure:
        fake_stack(env={"FAKE_FAIL": "indexer"})

    assert "configured to fail" in str(failure.value)
    assert "stop vault" in events.read_text().splitlines()


def test_a_service_that_never_gets_ready_times_out(fake_stack: StackStarter) -> None:
    with pytest.raises(DevstackError, match=r"mcp did not become ready within 2s \(GET .*/healthz"):
        fake_stack(env={"FAKE_NEVER_READY": "mcp"}, ready_timeout=2.0)


def test_a_missing_command_is_named(fake_stack: StackStarter) -> None:
    commands = {**fake_commands(), "gateway": ["memvault-gateway-not-installed"]}

    with pytest.raises(DevstackError, match="`memvault-gateway-not-installed` is not installed"):
        fake_stack(commands=commands)


def test_a_taken_gateway_port_fails_before_anything_starts(fake_stack: StackStarter, events: Path) -> None:
    stack = fake_stack(services=["gateway"])

    port = stack.ports["gateway"]
    with pytest.raises(DevstackError, match=f"port {port} on 127.0.0.1 is already in use") as failure:
        fake_stack(gateway_port=port)
    assert f"--gateway-port {port + 1}" in str(failure.value)
    assert f"make run PORT={port + 1}" in str(failure.value)
    assert events.read_text().splitlines() == ["start gateway"]


async def test_works_as_an_async_context_manager(
    tmp_path: Path, postgres_dsn: str, nats_url: str, events: Path
) -> None:
    stack = Stack(
        tmp_path / "data",
        postgres_dsn=postgres_dsn,
        nats_url=nats_url,
        commands=fake_commands(),
        env={"FAKE_EVENTS": str(events)},
        services=["vault"],
    )
    async with stack:
        assert stack.process("vault").running()
        await stack.restart_services_async()
    assert (await asyncio.to_thread(events.read_text)).splitlines()[-1] == "stop vault"


def test_starts_embedded_postgres_and_nats_in_the_data_dir() -> None:
    # Not tmp_path: as root, Postgres runs as another OS user that cannot enter pytest's 0700 dirs.
    data_dir = Path(tempfile.mkdtemp(prefix="memvault-devstack-test-"))
    try:
        with Stack(data_dir, services=[]) as stack:
            assert stack.postgres_dsn.startswith("postgresql://postgres@127.0.0.1:")
            assert stack.nats_url.startswith("nats://127.0.0.1:")
            assert (data_dir / "postgres" / "PG_VERSION").exists()
            assert (data_dir / "nats" / "jetstream").is_dir()
            assert (data_dir / "logs" / "postgres.log").exists()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_dead_embedded_nats_is_restarted_on_its_url(tmp_path: Path, postgres_dsn: str) -> None:
    with Stack(tmp_path / "data", postgres_dsn=postgres_dsn, services=[]) as stack:
        url = stack.nats_url
        os.kill(int((tmp_path / "data" / "nats" / "nats-server.pid").read_text()), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while "nats" not in stack.crashed():
            assert time.monotonic() < deadline, "the dead NATS was not noticed"
            time.sleep(0.05)
        out = io.StringIO()

        Supervisor(stack, out, sleep=lambda seconds: None).check()

        assert "memvault-dev: nats exited (SIGKILL); restarting it in 1s" in out.getvalue()
        assert "memvault-dev: nats restarted; ready in " in out.getvalue()
        assert stack.nats_url == url
        assert JetStreamProbe(int(url.rsplit(":", 1)[1])).ready()
        assert stack.crashed() == {}


def wait_until_crashed(stack: Stack, names: set[str]) -> None:
    deadline = time.monotonic() + 10
    while not names <= set(stack.crashed()):
        assert time.monotonic() < deadline, f"{names - set(stack.crashed())} not noticed dead"
        time.sleep(0.05)


def test_several_dead_services_come_back_in_dependency_order(fake_stack: StackStarter, events: Path) -> None:
    # A slow mcp: a gateway started beside it instead of after it would be the first to start.
    stack = fake_stack(env={"FAKE_SLOW_START": "mcp", "FAKE_GATEWAY_NEEDS_MCP": "1"})
    supervisor = Supervisor(stack, io.StringIO(), sleep=lambda seconds: None)
    stack.process("vault").kill()  # an earlier crash: vault is now the newest process of the four
    wait_until_crashed(stack, {"vault"})
    supervisor.check()
    seen = len(events.read_text().splitlines())
    for name in ("gateway", "mcp", "vault"):
        stack.process(name).kill()
    wait_until_crashed(stack, {"gateway", "mcp", "vault"})
    out = io.StringIO()
    supervisor.out = out

    supervisor.check()

    lines = out.getvalue().splitlines()
    assert "memvault-dev: vault exited (SIGKILL); restarting it in 2s (attempt 2 of 3, log: " in lines[0]
    assert "memvault-dev: restarting in dependency order: vault, then mcp, then gateway" in lines
    restarted = [line.split()[1] for line in lines if " restarted; ready in " in line]
    assert restarted == ["vault", "mcp", "gateway"]
    starts = [line for line in events.read_text().splitlines()[seen:] if line.startswith("start ")]
    assert starts == ["start vault", "start mcp", "start gateway"]
    assert stack.crashed() == {}
    assert get(f"{stack.gateway_url}/readyz") == {"status": "ok"}


def test_a_service_that_keeps_dying_while_restarting_holds_back_what_needs_it(
    fake_stack: StackStarter, events: Path
) -> None:
    stack = fake_stack(env={"FAKE_FAIL_AGAIN": "vault"})
    for name in ("mcp", "vault"):
        stack.process(name).kill()
    wait_until_crashed(stack, {"mcp", "vault"})
    out = io.StringIO()
    delays: list[float] = []

    with pytest.raises(DevstackError, match=r"vault exited \(exit code 3\) 4 times within 60s; giving up"):
        Supervisor(stack, out, sleep=delays.append).check()

    lines = out.getvalue().splitlines()
    retries = [line for line in lines if line.startswith("memvault-dev: vault exited again (exit code 3)")]
    assert len(retries) == 2
    assert "before it was ready; restarting it in 2s (attempt 2 of 3, log: " in retries[0]
    assert "before it was ready; restarting it in 4s (attempt 3 of 3, log: " in retries[1]
    assert delays == [1.0, 2.0, 4.0]
    assert "memvault-dev: mcp waits until vault is back" in lines
    assert events.read_text().splitlines().count("start mcp") == 1  # never started before its vault


def test_mcp_dying_again_while_restarting_is_retried_and_the_gateway_gets_ready(
    fake_stack: StackStarter, events: Path
) -> None:
    # The gateway, like the real one, is ready only while mcp is; mcp's second start fails.
    stack = fake_stack(env={"FAKE_GATEWAY_NEEDS_MCP": "1", "FAKE_FAIL_START": "mcp:2"}, ready_timeout=10.0)
    for name in ("gateway", "mcp"):
        stack.process(name).kill()
    wait_until_crashed(stack, {"gateway", "mcp"})
    out = io.StringIO()

    Supervisor(stack, out, sleep=lambda seconds: None).check()

    lines = out.getvalue().splitlines()
    assert any(
        line.startswith("memvault-dev: mcp exited again (exit code 3) before it was ready; restarting it in 2s")
        for line in lines
    )
    restarted = [line.split()[1] for line in lines if " restarted; ready in " in line]
    assert restarted == ["mcp", "gateway"]
    assert "fail mcp" in events.read_text().splitlines()
    assert stack.crashed() == {}
    assert get(f"{stack.gateway_url}/readyz") == {"status": "ok"}


def test_a_service_alive_but_not_ready_says_what_it_waits_for(fake_stack: StackStarter) -> None:
    stack = fake_stack(env={"FAKE_GATEWAY_NEEDS_MCP": "1"}, ready_timeout=3.0)
    stack.process("gateway").kill()
    wait_until_crashed(stack, {"gateway"})
    stack.service_env["mcp"] = {"FAKE_NEVER_READY": "mcp"}
    stack.respawn("mcp")  # running, never ready: the gateway cannot get ready either
    out = io.StringIO()

    with pytest.raises(DevstackError, match=r"gateway did not become ready within 3s"):
        Supervisor(stack, out, sleep=lambda seconds: None, note_every=1.0).check()

    notes = [line for line in out.getvalue().splitlines() if line.startswith("memvault-dev: gateway is running but")]
    assert notes, out.getvalue()
    assert f"not ready after 1s; it waits for GET {stack.gateway_url}/readyz answering 200" in notes[0]
    assert "(it needs vault, mcp)" in notes[0]


def test_a_pid_file_naming_a_process_of_someone_else_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "data" / "run").mkdir(parents=True)
    pid_file = tmp_path / "data" / "run" / "vault.pid"
    other = subprocess.Popen(["sleep", "30"], cwd=tmp_path)  # the pid reused by an unrelated program
    try:
        pid_file.write_text(f"{other.pid}\n")

        stop_leftover(pid_file, "sleep", cwd=tmp_path / "data")

        assert process_alive(other.pid) and other.poll() is None
        assert not pid_file.exists()
    finally:
        other.kill()
        other.wait()


def test_service_ports_skip_the_ports_service_env_hands_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metrics port the caller chose was free and is free again: the OS may offer it to the stack too."""
    import memvault_devstack.layout as layout_module

    offers = iter([[41001, 41002, 41003, 41004], [41005, 41006, 41007, 41008]])
    monkeypatch.setattr(layout_module, "free_ports", lambda count: next(offers))
    stack = Stack(tmp_path, service_env={"mcp": {"MEMVAULT_METRICS__PORT": "41003"}})
    assert stack.ports == {"vault": 41005, "indexer": 41006, "mcp": 41007, "gateway": 41008}
