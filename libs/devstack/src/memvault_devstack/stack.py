"""The whole local system: Postgres, NATS and the four services as processes, data in one dir.

    with Stack(tmp_path, postgres_dsn=dsn, nats_url=url) as stack:   # or `async with`
        httpx.post(stack.mcp_url, ...)
        stack.restart_services()

Layout of the data dir: `postgres/` (embedded cluster), `nats/` (JetStream store), `qdrant/`
(indexer), `logs/<name>.log`, `run/<name>.pid`, `run/memvault-dev.lock` and `run/memvault-dev.json`
(who runs it, where: see claim.py), `identity-secret` (mode 600). One stack at a time per data dir.

Where each part is and what each service is told (addresses, environment, readiness probes):
`StackLayout` in layout.py, which `Stack` builds on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from memvault_devstack.claim import DataDirClaim, RunState
from memvault_devstack.errors import DevstackError
from memvault_devstack.layout import OWNER_SUBJECT, SERVICES, StackLayout
from memvault_devstack.nats import EmbeddedNats
from memvault_devstack.ports import LOOPBACK, port_is_free
from memvault_devstack.postgres import EmbeddedPostgres
from memvault_devstack.processes import (
    ManagedProcess,
    describe_exit,
    resolve_command,
    run_command,
    stop_leftover,
    tail_of,
)

log = logging.getLogger(__name__)


DEFAULT_COMMANDS: Mapping[str, tuple[str, ...]] = {
    "vault": ("memvault-vault",),
    "indexer": ("memvault-indexer",),
    "mcp": ("memvault-mcp",),
    "gateway": ("memvault-gateway",),
}
_SERVE_ARGUMENTS: Mapping[str, tuple[str, ...]] = {"vault": ("serve",)}
STAGES: tuple[tuple[str, ...], ...] = (("vault", "indexer"), ("mcp", "gateway"))
"""Services in one stage start together; a stage starts once the one before it is ready (mcp and
the gateway call vault and indexer). mcp and the gateway start together to save the gateway's
start-up time: its readiness waits for mcp's, and an mcp that dies fails the whole start. Restarts
are staged further (mcp, then the gateway; see supervisor.py)."""

DEFAULT_VAULT = "default"


class Stack(StackLayout):
    """Postgres and NATS (embedded unless given), migrations, the owner, and the services.

    - `data_dir`: everything the stack writes; reuse it and the data (and identity secret) survive.
    - `postgres_dsn` / `nats_url`: use these servers instead of starting embedded ones. The
      database in `postgres_dsn` must exist; the stack migrates it.
    - `gateway_port`: fixed gateway port (the URL agents are configured with); default any free one.
    - `services`: which services to start (default all four); migrations and the owner are set up
      only when `vault` is among them.
    - `env`: extra environment for every service (OTEL_* in tracing tests, for example);
      `service_env`: extra environment per service, applied last.
    - `echo`: a stream that receives every service's output, prefixed by its name (the CLI passes
      stdout); output always goes to `logs/<service>.log` too.
    - `commands`: program and leading arguments per service, replacing `memvault-<service>`.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        postgres_dsn: str | None = None,
        nats_url: str | None = None,
        gateway_port: int | None = None,
        services: Iterable[str] = SERVICES,
        env: Mapping[str, str] | None = None,
        service_env: Mapping[str, Mapping[str, str]] | None = None,
        log_level: str = "INFO",
        echo: IO[str] | None = None,
        ready_timeout: float = 120.0,
        stop_timeout: float = 10.0,
        postgres_settings: Mapping[str, str] | None = None,
        commands: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        selected = set(services)
        unknown = selected - set(SERVICES)
        if unknown:
            raise DevstackError(f"unknown service(s) {sorted(unknown)}; choose from {', '.join(SERVICES)}")
        unknown_env = set(service_env or {}) - set(SERVICES)
        if unknown_env:
            raise DevstackError(f"service_env names unknown service(s) {sorted(unknown_env)}")
        self.data_dir = Path(data_dir).absolute()
        self.services: tuple[str, ...] = tuple(name for name in SERVICES if name in selected)
        self.env = dict(env or {})
        self.service_env = {name: dict(values) for name, values in (service_env or {}).items()}
        self.log_level = log_level
        self.echo = echo
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.commands = {name: tuple((commands or {}).get(name, DEFAULT_COMMANDS[name])) for name in SERVICES}
        self.timings: dict[str, float] = {}
        self._given_postgres_dsn = postgres_dsn
        self._given_nats_url = nats_url
        self._gateway_port = gateway_port
        self._postgres_settings = dict(postgres_settings or {})
        self._postgres: EmbeddedPostgres | None = None
        self._nats: EmbeddedNats | None = None
        self._postgres_dsn: str | None = None
        self._nats_url: str | None = None
        self._identity_secret: str | None = None
        self._ports: dict[str, int] | None = None
        self._processes: dict[str, ManagedProcess] = {}
        self._claim = DataDirClaim(self.data_dir)

    @property
    def embedded_postgres(self) -> EmbeddedPostgres | None:
        """The stack's own Postgres server, None when it was given a DSN (fault drills stop it)."""
        return self._postgres

    @property
    def embedded_nats(self) -> EmbeddedNats | None:
        """The stack's own NATS server, None when it was given a URL (fault drills stop it)."""
        return self._nats

    def process(self, service: str) -> ManagedProcess:
        """The running process of a service (KeyError when it was not started)."""
        return self._processes[service]

    def exited(self) -> dict[str, int]:
        """Services that were started and have exited since, with their exit codes."""
        codes = {name: process.returncode for name, process in self._processes.items()}
        return {name: code for name, code in codes.items() if code is not None}

    def crashed(self) -> dict[str, str]:
        """What died since it started (services, embedded `nats` and `postgres`), with how it ended."""
        # Postgres and NATS first: the services need them when they come back.
        ended: dict[str, str] = {}
        if self._postgres is not None and self._postgres.died():
            ended["postgres"] = "its postmaster is gone"
        if self._nats is not None and self._nats.returncode is not None:
            ended["nats"] = describe_exit(self._nats.returncode)
        ended.update((name, describe_exit(code)) for name, code in self.exited().items())
        return ended

    def tail(self, name: str) -> str:
        """The last lines a service, `nats` or `postgres` wrote."""
        if name in self._processes:
            return self._processes[name].tail()
        if name == "nats" and self._nats is not None and self._nats.process is not None:
            return self._nats.process.tail()
        return tail_of(self.log_path(name))

    def running(self) -> bool:
        """Whether any part of the stack was started and has not been stopped."""
        return bool(self._processes) or self._nats is not None or self._postgres is not None or self._claim.held

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Stack:
        """Start everything and wait until every service is ready; on failure stop what started."""
        started = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # First, before anything is stopped, started or written: another stack may own this dir.
        self._claim.acquire()
        try:
            self._claim.publish(RunState(pid=os.getpid(), data_dir=str(self.data_dir)))
            self._stop_leftover_services()
            self._check_gateway_port()
            self._start_postgres()
            self._start_nats()
            if "vault" in self.services:
                self._prepare_database()
            self.start_services()
            self._claim.publish(self.run_state())
        except BaseException:
            try:
                self.stop()
            except Exception:
                log.exception("while stopping after a failed start")
            raise
        self.timings["total"] = time.monotonic() - started
        return self

    def run_state(self) -> RunState:
        """What `run/memvault-dev.json` says about this started stack."""
        with_gateway = "gateway" in self.services
        return RunState(
            pid=os.getpid(),
            data_dir=str(self.data_dir),
            ready=True,
            gateway_url=self.gateway_url if with_gateway else None,
            postgres_dsn=self.postgres_dsn,
            nats_url=self.nats_url,
            gateway_command=resolve_command(self.commands["gateway"]) if with_gateway else [],
        )

    def start_services(self) -> None:
        """Start the selected services (Postgres and NATS must be up), stage by stage."""
        for stage in STAGES:
            names = [name for name in stage if name in self.services and name not in self._processes]
            for name in names:
                self.respawn(name)
            for name in names:
                waited = self.wait_ready(name)
                self.timings[name] = waited
                log.info("%s ready (%.2fs)", name, waited)

    def respawn(self, name: str) -> None:
        """Start a service's process (again, on the same port: a dead one is stopped first) without
        waiting until it is ready; see `wait_ready`."""
        old = self._processes.pop(name, None)
        if old is not None:
            old.stop(self.stop_timeout)
        process = ManagedProcess(
            name,
            [*self.commands[name], *_SERVE_ARGUMENTS.get(name, ())],
            env=self.env_for(name),
            log_path=self.log_path(name),
            echo=self.echo,
            pid_file=self.data_dir / "run" / f"{name}.pid",
            cwd=self.data_dir,
        )
        self._processes[name] = process
        process.start()

    def wait_ready(self, name: str) -> float:
        """Seconds until a started service answered its readiness probe; DevstackError saying why not
        (it exited, or did not answer within `ready_timeout`) with the end of its log."""
        return self._processes[name].wait_ready(self._probe(name), self.ready_timeout)

    def stop_services(self) -> None:
        """Stop the services in reverse start order: SIGTERM, then SIGKILL after `stop_timeout`."""
        for name in reversed([name for name in SERVICES if name in self._processes]):
            code = self._processes[name].stop(self.stop_timeout)
            del self._processes[name]  # only once stopped: an interrupted stop() can be repeated
            log.info("%s stopped (%s)", name, describe_exit(code))

    def stop_service(self, name: str, *, kill: bool = False) -> None:
        """Stop one service (SIGKILL at once with `kill`, as a crash would); `start_services` brings it back."""
        process = self._processes.pop(name, None)
        if process is None:
            raise DevstackError(f"{name} is not running in this stack")
        if kill:
            process.kill()
        else:
            process.stop(self.stop_timeout)

    def restart(self, name: str) -> None:
        """Start a service, `nats` or `postgres` that died again, on the same port; wait until ready."""
        if name == "nats" and self._nats is not None:
            self._nats.restart()
        elif name == "postgres" and self._postgres is not None:
            self._postgres.restart()
        else:
            self.respawn(name)
            self.wait_ready(name)

    def restart_services(self) -> None:
        """Stop and start the services on the same ports; Postgres and NATS keep running."""
        self.stop_services()
        self.start_services()

    def stop(self) -> None:
        """Stop the services, then NATS, then Postgres; each is attempted even if another fails.
        Then the data dir is free for another stack."""
        first_error: BaseException | None = None
        for step in (self.stop_services, self._stop_nats, self._stop_postgres, self._claim.release):
            try:
                step()
            except Exception as error:
                log.exception("while stopping the stack")
                first_error = first_error or error
        if first_error is not None:
            raise first_error

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def start_async(self) -> Stack:
        """`start()` in a worker thread, so an event loop keeps running meanwhile."""
        return await asyncio.to_thread(self.start)

    async def stop_async(self) -> None:
        await asyncio.to_thread(self.stop)

    async def restart_services_async(self) -> None:
        await asyncio.to_thread(self.restart_services)

    async def __aenter__(self) -> Stack:
        return await self.start_async()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop_async()

    # -- steps ------------------------------------------------------------------------------------

    def _stop_leftover_services(self) -> None:
        # A memvault-dev killed with SIGKILL leaves its services running, the gateway on its port.
        # Postgres (postmaster.pid) and NATS (nats-server.pid) leftovers are stopped as they start.
        for name in reversed(SERVICES):
            program = Path(self.commands[name][0]).name
            stop_leftover(self.data_dir / "run" / f"{name}.pid", program, cwd=self.data_dir)

    def _check_gateway_port(self) -> None:
        port = self._gateway_port
        if port and "gateway" in self.services and not port_is_free(port):
            raise DevstackError(
                f"port {port} on {LOOPBACK} is already in use (another memvault-dev, or another program); "
                f"stop that or choose another port: `memvault-dev run --gateway-port {port + 1}` "
                f"(`make run PORT={port + 1}`)"
            )

    def _start_postgres(self) -> None:
        if self._postgres_dsn is not None:
            return
        if self._given_postgres_dsn is not None:
            self._postgres_dsn = self._given_postgres_dsn
            return
        started = time.monotonic()
        self._postgres = EmbeddedPostgres(
            self.data_dir / "postgres", log_path=self.log_path("postgres"), settings=self._postgres_settings
        )
        self._postgres_dsn = self._postgres.start()
        self.timings["postgres"] = time.monotonic() - started

    def _start_nats(self) -> None:
        if self._nats_url is not None:
            return
        if self._given_nats_url is not None:
            self._nats_url = self._given_nats_url
            return
        started = time.monotonic()
        self._nats = EmbeddedNats(self.data_dir / "nats", log_path=self.log_path("nats"))
        self._nats_url = self._nats.start()
        self.timings["nats"] = time.monotonic() - started

    def _prepare_database(self) -> None:
        env = self.env_for("vault")
        vault = self.commands["vault"]
        setup_log = self.log_path("vault-setup")
        self.timings["migrate"] = run_command(
            "vault migrate", [*vault, "migrate"], env=env, log_path=setup_log, timeout=self.ready_timeout
        )
        self.timings["create-owner"] = run_command(
            "vault create-owner",
            [*vault, "create-owner", "--subject", OWNER_SUBJECT, "--vault", DEFAULT_VAULT],
            env=env,
            log_path=setup_log,
            timeout=self.ready_timeout,
        )
        if "gateway" in self.services:
            self.timings["gateway migrate"] = run_command(
                "gateway migrate",
                [*self.commands["gateway"], "migrate"],
                env=self.env_for("gateway"),
                log_path=self.log_path("gateway-setup"),
                timeout=self.ready_timeout,
            )

    def owner_setup_link(self) -> str | None:
        """A one-time link for the owner to set a password and sign in, or None once one is set.

        The link is a credential: returned to the caller, never written to a log.
        """
        result = subprocess.run(
            resolve_command([*self.commands["gateway"], "setup-link", "--username", OWNER_SUBJECT]),
            env=self.env_for("gateway"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        link = result.stdout.strip()
        return link if result.returncode == 0 and link.startswith("http") else None

    def _stop_nats(self) -> None:
        if self._nats is not None:
            self._nats.stop()
            self._nats = None
        self._nats_url = None

    def _stop_postgres(self) -> None:
        if self._postgres is not None:
            self._postgres.stop()
            self._postgres = None
        self._postgres_dsn = None
