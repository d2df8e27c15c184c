"""Restarting what died in a running stack, as a dev runner should, until it keeps dying."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO

from memvault_devstack.errors import DevstackError
from memvault_devstack.stack import Stack


class Supervisor:
    """Restarts a crashed service, NATS or Postgres after `first_delay` seconds, doubling the delay
    for each further crash; after `attempts` restarts within `window` seconds it gives up."""

    def __init__(
        self,
        stack: Stack,
        out: IO[str],
        *,
        attempts: int = 3,
        window: float = 60.0,
        first_delay: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stack = stack
        self.out = out
        self.attempts = attempts
        self.window = window
        self.first_delay = first_delay
        self._clock = clock
        self._sleep = sleep
        self._restarts: dict[str, list[float]] = {}

    def check(self) -> None:
        """Restart whatever died; DevstackError (with its last lines) for what keeps dying."""
        for name, how in self.stack.crashed().items():
            now = self._clock()
            recent = [at for at in self._restarts.get(name, []) if now - at < self.window]
            if len(recent) >= self.attempts:
                raise DevstackError(
                    f"{name} exited ({how}) {len(recent) + 1} times within {self.window:.0f}s; giving up. "
                    f"Last lines of {self.stack.log_path(name)}:\n{self.stack.tail(name)}"
                )
            delay = self.first_delay * 2 ** len(recent)
            self._restarts[name] = [*recent, now]
            print(
                f"memvault-dev: {name} exited ({how}); restarting it in {delay:g}s "
                f"(attempt {len(recent) + 1} of {self.attempts}, log: {self.stack.log_path(name)})",
                file=self.out,
                flush=True,
            )
            self._sleep(delay)
            try:
                self.stack.restart(name)
            except DevstackError:
                # A service that died again before it was ready is counted at the next check.
                if name not in self.stack.crashed():
                    raise
            else:
                print(f"memvault-dev: {name} is back", file=self.out, flush=True)
