"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import contextlib
import socket
import time

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on right now (the OS picks it; another process may still take it)."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """`count` distinct free ports: every socket stays bound until all are chosen."""
    with contextlib.ExitStack() as sockets:
        ports = []
        for _ in range(count):
            sock = sockets.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could bind `host:port` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option servers set, so a port in TIME_WAIT after a restart counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def port_accepts(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on `host:port`."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until_accepting(port: int, host: str = LOOPBACK, timeout: float = 10.0) -> bool:
    """Poll until `host:port` accepts connections; False when the deadline passes first."""
    deadline = time.monotonic() + timeout
    while True:
        if port_accepts(port, host):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
