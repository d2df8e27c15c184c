"""One `memvault-dev` per data dir: an flock held while it runs, and a state file saying where it runs.

`run/memvault-dev.lock` is locked (flock, exclusive) by the running stack for as long as it runs;
the kernel drops the lock when that process ends, however it ends, so a held lock proves a live
owner where a pid file only says that one lived once. The lock file holds the owner's pid;
`run/memvault-dev.json` (mode 600: it holds the database DSN) says what other commands need to
reach the running stack: the gateway URL, the database and the gateway command.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memvault_devstack.errors import DevstackError

LOCK_FILE = Path("run") / "memvault-dev.lock"
STATE_FILE = Path("run") / "memvault-dev.json"


class AlreadyRunningError(DevstackError):
    """Another memvault-dev holds the data dir."""


@dataclass(frozen=True)
class RunState:
    """What a running stack tells other commands (`memvault-dev setup-link`) about itself."""

    pid: int
    data_dir: str
    ready: bool = False
    gateway_url: str | None = None
    postgres_dsn: str | None = None
    nats_url: str | None = None
    gateway_command: list[str] = field(default_factory=list)
    """The gateway program (resolved path and leading arguments), for its one-off commands."""

    def describe(self) -> str:
        """`pid 1234, http://127.0.0.1:8080` (or `still starting`)."""
        where = (self.gateway_url or "without a gateway") if self.ready else "still starting"
        return f"pid {self.pid or 'unknown'}, {where}"


class DataDirClaim:
    """The lock on a data dir, taken by `acquire()` and given up by `release()`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._descriptor: int | None = None

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def acquire(self, wait: float = 1.0) -> None:
        """Take the lock, or raise AlreadyRunningError naming who holds it, having changed nothing.

        `wait` covers a command that only looks at the lock (`running_stack`) in that instant.
        """
        if self._descriptor is not None:
            return
        path = self.data_dir / LOCK_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(descriptor)
                    state = running_stack(self.data_dir)
                    who = state.describe() if state else "pid unknown"
                    raise AlreadyRunningError(
                        f"memvault-dev already runs on {self.data_dir} ({who}); nothing was changed. "
                        "Use that one (Ctrl-C in its terminal stops it), or give this one another --data-dir"
                    ) from None
                time.sleep(0.05)
        self._descriptor = descriptor
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)  # a killed run's; ours follows

    def publish(self, state: RunState) -> None:
        """Write the state file atomically (readers never see half of it), readable by us only."""
        if self._descriptor is None:
            raise DevstackError("publish() needs the lock; call acquire() first")
        path = self.data_dir / STATE_FILE
        staging = path.with_suffix(".json.tmp")
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            json.dump(asdict(state), stream)
        staging.replace(path)

    def release(self) -> None:
        """Remove the state file and give up the lock; nothing when this claim does not hold it."""
        if self._descriptor is None:
            return
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)
        os.close(self._descriptor)
        self._descriptor = None


def running_stack(data_dir: Path) -> RunState | None:
    """The state of the memvault-dev that holds `data_dir` now; None when none does."""
    data_dir = data_dir.absolute()
    try:
        descriptor = os.open(data_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held: someone runs
        else:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            return None
        try:
            pid = int(os.read(descriptor, 32).decode().strip() or 0)
        except ValueError:
            pid = 0
    finally:
        os.close(descriptor)
    try:
        values = json.loads((data_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return RunState(pid=pid, data_dir=str(data_dir))
    known = {name: values[name] for name in RunState.__dataclass_fields__ if name in values}
    return RunState(**known)
