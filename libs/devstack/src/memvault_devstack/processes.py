"""Child processes of the dev stack: start with an environment, log, wait until ready, stop.

Every child runs in its own session, so Ctrl-C in the terminal reaches only `memvault-dev`,
which then stops the children in reverse order instead of all of them dying at once.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memvault_devstack.errors import DevstackError
from memvault_devstack.ports import LOOPBACK, port_accepts

log = logging.getLogger(__name__)

TAIL_LINES = 40
_echo_lock = threading.Lock()


class ReadinessProbe(Protocol):
    """Answers whether a started process serves requests yet."""

    def ready(self) -> bool: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class HttpProbe:
    """Ready when GET `url` answers 200."""

    url: str

    def ready(self) -> bool:
        try:
            # trust_env=False: a proxy from the environment must not intercept loopback calls.
            response = httpx.get(self.url, timeout=2.0, trust_env=False)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def describe(self) -> str:
        return f"GET {self.url} answering 200"


@dataclass(frozen=True)
class GrpcHealthProbe:
    """Ready when grpc.health.v1 Check(service) answers SERVING at `address` (host:port)."""

    address: str
    service: str = ""

    def ready(self) -> bool:
        host, _, port = self.address.rpartition(":")
        if not port_accepts(int(port), host or LOOPBACK):
            return False
        options = [("grpc.enable_http_proxy", 0)]
        with grpc.insecure_channel(self.address, options=options) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                response = stub.Check(health_pb2.HealthCheckRequest(service=self.service), timeout=2.0)
            except grpc.RpcError:
                return False
        return bool(response.status == health_pb2.HealthCheckResponse.SERVING)

    def describe(self) -> str:
        return f"gRPC health of {self.address} answering SERVING"


def resolve_command(argv: Sequence[str]) -> list[str]:
    """`argv` with its program found in this interpreter's scripts directory or on PATH."""
    program = argv[0]
    if os.sep in program:
        return list(argv)
    search = os.pathsep.join(
        [str(Path(sys.executable).parent), sysconfig.get_path("scripts"), os.environ.get("PATH", "")]
    )
    found = shutil.which(program, path=search)
    if found is None:
        raise DevstackError(
            f"`{program}` is not installed: it is neither next to {sys.executable} nor on PATH; "
            "run `make install` (or `.venv/bin/pip install -e <its package>`)"
        )
    return [found, *argv[1:]]


def format_log_line(line: str) -> str:
    """A service's JSON log line as `LEVEL message key=value ...`; other lines unchanged."""
    if not line.startswith("{"):
        return line
    try:
        entry = json.loads(line)
    except ValueError:
        return line
    if not isinstance(entry, dict) or "message" not in entry:
        return line
    level = str(entry.pop("level", ""))
    message = str(entry.pop("message"))
    exception = entry.pop("exception", None)
    for key in ("time", "service", "logger", "color_message"):
        entry.pop(key, None)
    fields = " ".join(f"{key}={value}" for key, value in entry.items())
    text = f"{level:<7} {message} {fields}".rstrip()
    return f"{text}\n{exception}" if exception else text


def describe_exit(code: int | None) -> str:
    """An exit code as people read it: `exit code 3`, `SIGTERM` (negative codes are signals)."""
    if code is None:
        return "not started"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def tail_of(path: Path, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a log file, or a note that it is empty or missing."""
    try:
        with path.open(encoding="utf-8", errors="replace") as stream:
            last = collections.deque(stream, maxlen=lines)
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "".join(last).rstrip() or f"({path} is empty)"


def run_command(name: str, argv: Sequence[str], *, env: Mapping[str, str], log_path: Path, timeout: float) -> float:
    """Run a one-off command to completion, output appended to `log_path`; its duration in seconds.

    Raises DevstackError naming `name` with the tail of the log when it fails or times out.
    """
    command = resolve_command(argv)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("a", encoding="utf-8") as log_file:
        log_file.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n")
        log_file.flush()
        try:
            result = subprocess.run(
                command,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                start_new_session=True,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise DevstackError(
                f"{name} (`{' '.join(argv)}`) did not finish within {timeout:.0f}s; "
                f"last lines of {log_path}:\n{tail_of(log_path)}"
            ) from None
    if result.returncode != 0:
        raise DevstackError(
            f"{name} (`{' '.join(argv)}`) failed with exit code {result.returncode}; "
            f"last lines of {log_path}:\n{tail_of(log_path)}"
        )
    return time.monotonic() - started


class ManagedProcess:
    """A long-running child: output goes to a log file (and optionally to `echo`, prefixed)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        echo: IO[str] | None = None,
        pid_file: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.echo = echo
        self.pid_file = pid_file
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited, else None."""
        return self._popen.poll() if self._popen is not None else None

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def start(self) -> None:
        """Spawn the process; raises DevstackError when its program is not installed."""
        if self.running():
            return
        command = resolve_command(self.argv)
        if self.pid_file is not None:
            stop_leftover(self.pid_file, Path(command[0]).name, cwd=self.cwd)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = self.log_path.open("a", encoding="utf-8")
        log_file.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(self.argv)}\n")
        log_file.flush()
        self._tail.clear()
        try:
            self._popen = subprocess.Popen(
                command,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            log_file.close()
            raise DevstackError(f"{self.name}: cannot run `{command[0]}`: {error}") from error
        if self.pid_file is not None:
            self.pid_file.parent.mkdir(parents=True, exist_ok=True)
            self.pid_file.write_text(f"{self._popen.pid}\n")
        self._pump = threading.Thread(
            target=self._copy_output, args=(self._popen, log_file), name=f"{self.name}-output", daemon=True
        )
        self._pump.start()

    def _copy_output(self, popen: subprocess.Popen[bytes], log_file: IO[str]) -> None:
        assert popen.stdout is not None
        with popen.stdout as stream, log_file:
            for raw in stream:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                log_file.write(line + "\n")
                log_file.flush()
                self._tail.append(line)
                if self.echo is not None:
                    text = format_log_line(line).replace("\n", "\n" + " " * 10)
                    with _echo_lock:
                        self.echo.write(f"{self.name:<8}| {text}\n")
                        self.echo.flush()

    def tail(self) -> str:
        """The last lines this run wrote (the log file when nothing was captured)."""
        if self._pump is not None and self._popen is not None and self._popen.poll() is not None:
            self._pump.join(timeout=2.0)
        lines = list(self._tail)
        return "\n".join(lines) if lines else tail_of(self.log_path)

    def wait_ready(self, probe: ReadinessProbe, timeout: float) -> float:
        """Poll `probe` until ready; seconds waited. DevstackError (with the log tail) on exit or timeout."""
        started = time.monotonic()
        deadline = started + timeout
        while True:
            code = self.returncode
            if code is not None:
                raise DevstackError(
                    f"{self.name} exited ({describe_exit(code)}) before it was ready; "
                    f"last lines of {self.log_path}:\n{self.tail()}"
                )
            if probe.ready():
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise DevstackError(
                    f"{self.name} did not become ready within {timeout:.0f}s ({probe.describe()}); "
                    f"last lines of {self.log_path}:\n{self.tail()}"
                )
            time.sleep(0.1)

    def kill(self) -> int | None:
        """SIGKILL at once, as a crash or an OOM kill would end it; the exit code."""
        if self._popen is not None and self._popen.poll() is None:
            _signal_group(self._popen.pid, signal.SIGKILL)
        return self.stop()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` seconds; the exit code (None if never started)."""
        popen = self._popen
        if popen is None:
            return None
        if popen.poll() is None:
            _signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0fs; killing it", self.name, timeout)
                _signal_group(popen.pid, signal.SIGKILL)
                popen.wait()
        # Helpers the service spawned (worker pools) share its process group.
        _signal_group(popen.pid, signal.SIGKILL)
        if self._pump is not None:
            self._pump.join(timeout=5.0)
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)
        return popen.returncode


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_leftover(pid: int, sig: signal.Signals) -> None:
    _signal_group(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def command_line(pid: int) -> str:
    """The command line of a running process ('' when it cannot be read)."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.parent.is_dir():
        try:
            return proc.read_bytes().replace(b"\0", b" ").decode("utf-8", errors="replace")
        except OSError:
            return ""
    ps = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return ps.stdout.strip()


def working_directory(pid: int) -> Path | None:
    """The current directory of a running process (None where it cannot be read, as on macOS)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def stop_leftover(pid_file: Path, program: str, *, cwd: Path | None = None, timeout: float = 10.0) -> None:
    """Stop a process a previous, killed run left behind (named in `pid_file`, running `program`).

    The pid may since belong to something else: it is signalled only when its command line names
    `program` and, with `cwd`, it runs in that directory (the stack's data dir) where that can be read.
    """
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        pid_file.unlink(missing_ok=True)
        return
    ours = program in command_line(pid) and (cwd is None or working_directory(pid) in (None, cwd.resolve()))
    if pid > 1 and process_alive(pid) and ours:
        log.warning("stopping %s (pid %d) left running by an earlier run", program, pid)
        _signal_leftover(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if process_alive(pid):
            _signal_leftover(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
