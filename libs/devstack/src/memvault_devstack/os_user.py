"""The OS user the embedded Postgres runs as when memvault runs as root (Postgres refuses root).

Commands for that user start through a fresh Python that drops to it and execs the program. Python forks,
rather than vforks, a child it must switch users in, and a fork runs the `pthread_atfork` handlers of
every library loaded here: gRPC's (the dev stack and the test process hold channels) crash the child about
once in 300 forks while gRPC's threads are busy (CI saw `pg_ctl start` fail with an empty log). A plain
spawn of the trampoline runs no such handlers.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memvault_devstack.errors import DevstackError

log = logging.getLogger(__name__)

OS_USER = "embedded_postgres"

# As subprocess's user=, group=, extra_groups=[] leave the child: no supplementary groups, then the group,
# then the user (real, effective and saved: as root these set all three); the signals Python ignores at
# start (SIGPIPE, SIGXFSZ) back to their defaults, as subprocess restores them; the program found on PATH.
# Everything it imports is imported before the drop (the user may not be able to read this Python's
# files). A program that cannot be started exits 127 with one line saying why.
_DROP_AND_EXEC = """
import os, shutil, signal, sys
uid, gid, program = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
path = program if os.sep in program else shutil.which(program) or program
os.setgroups([]); os.setgid(gid); os.setuid(uid)
for name in ("SIGPIPE", "SIGXFSZ"):
    if hasattr(signal, name):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
try:
    os.execv(path, sys.argv[3:])
except OSError as error:
    sys.stderr.write(f"cannot start {program}: {error}\\n")
    os._exit(127)
"""


@dataclass(frozen=True)
class OsUser:
    name: str
    uid: int
    gid: int


def os_user_for_postgres() -> OsUser | None:
    """The unprivileged user to run Postgres as when we are root; None otherwise."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(OS_USER)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise DevstackError(
                f"Postgres cannot run as root and there is no OS user `{OS_USER}` to run it as; "
                "create that user or run memvault as a normal user"
            ) from None
        options = ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        subprocess.run([useradd, *options, OS_USER], check=True, capture_output=True)
        entry = pwd.getpwnam(OS_USER)
    return OsUser(OS_USER, entry.pw_uid, entry.pw_gid)


def make_traversable(directory: Path) -> None:
    """Let other users pass through `directory` and its parents (x only, nothing readable)."""
    for path in (directory, *directory.parents):
        mode = path.stat().st_mode
        if not mode & stat.S_IXOTH:
            log.info("adding o+x to %s so the %s user can reach its data", path, OS_USER)
            path.chmod(mode | stat.S_IXOTH)


def make_usable_by_others(install_dir: Path) -> None:
    """The wheel's binaries and libraries, readable and executable by the Postgres OS user."""
    make_traversable(install_dir)
    probe = install_dir / "bin" / "postgres"
    if probe.stat().st_mode & stat.S_IXOTH:
        return
    for root, dirs, files in os.walk(install_dir):
        for name in dirs:
            path = Path(root, name)
            path.chmod(path.stat().st_mode | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        for name in files:
            path = Path(root, name)
            mode = path.stat().st_mode | stat.S_IRGRP | stat.S_IROTH
            if mode & stat.S_IXUSR:
                mode |= stat.S_IXGRP | stat.S_IXOTH
            path.chmod(mode)


def as_user(user: OsUser | None, command: Sequence[str]) -> list[str]:
    """`command` as `user` runs it: through the trampoline above, or unchanged for no user."""
    if user is None:
        return list(command)
    return [sys.executable, "-I", "-S", "-c", _DROP_AND_EXEC, str(user.uid), str(user.gid), *command]
