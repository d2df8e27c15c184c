"""Callbacks for `nats.connect` that log a NATS outage in one line, not nats-py's default traceback
every two seconds."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


def server_of(url: str) -> str:
    """The NATS URL(s) without user or password."""
    parts = [urlsplit(one.strip()) for one in url.split(",")]
    return ",".join(f"{p.scheme}://{p.hostname}:{p.port or 4222}" for p in parts)


class NatsCallbacks:
    """Logs each distinct connection problem at most once per `every` seconds, naming the server and
    what waits meanwhile (`consequence`). Pass as `nats.connect(..., **callbacks.options())`.

    `clock` (seconds, monotonic) is what `every` is measured on; a test passes one it can advance.
    """

    def __init__(
        self, url: str, consequence: str, every: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.server = server_of(url)
        self._consequence = consequence
        self._every = every
        self._clock = clock
        self._logged_at: dict[str, float] = {}

    def options(self) -> dict[str, Any]:
        return {"error_cb": self.error, "disconnected_cb": self.disconnected, "reconnected_cb": self.reconnected}

    def _once(self, problem: str) -> bool:
        now = self._clock()
        if now - self._logged_at.get(problem, -self._every) < self._every:
            return False
        self._logged_at[problem] = now
        return True

    async def error(self, error: Exception) -> None:
        problem = (str(error) or type(error).__name__).splitlines()[0]
        if self._once(problem):
            log.warning(
                f"cannot reach NATS; {self._consequence}",
                extra={"nats": self.server, "error": type(error).__name__, "reason": problem},
            )

    async def disconnected(self) -> None:
        # Also called on a deliberate close, so not a warning: error() reports an outage.
        if self._once("disconnected"):
            log.info("disconnected from NATS", extra={"nats": self.server})

    async def reconnected(self) -> None:
        self._logged_at.clear()
        log.info("reconnected to NATS", extra={"nats": self.server})
