"""Restarting what died in a running stack, as a dev runner should, until it keeps dying."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import IO

from memvault_devstack.errors import DevstackError
from memvault_devstack.stack import STAGES, Stack

# What others need comes back first: the servers, then the services stage by stage.
_RESTART_STAGES: tuple[tuple[str, ...], ...] = (("postgres",), ("nats",), *STAGES)


class Supervisor:
    """Restarts a crashed service, NATS or Postgres after `first_delay` seconds, doubling the delay
    for each further crash; after `attempts` restarts within `window` seconds it gives up.

    When several die at once they come back in dependency order (Postgres, NATS, vault and
    indexer, then mcp and gateway), each stage once the one before is ready. Every restart ends in
    a line: ready after how long, or why not.
    """

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
        """Restart whatever died; DevstackError (with its last lines) for what keeps dying or does
        not become ready again."""
        crashed = self.stack.crashed()
        if not crashed:
            return
        now = self._clock()
        delay = 0.0
        attempt: dict[str, int] = {}
        for name, how in crashed.items():
            recent = [at for at in self._restarts.get(name, []) if now - at < self.window]
            if len(recent) >= self.attempts:
                raise DevstackError(
                    f"{name} exited ({how}) {len(recent) + 1} times within {self.window:.0f}s; giving up. "
                    f"Last lines of {self.stack.log_path(name)}:\n{self.stack.tail(name)}"
                )
            delay = max(delay, self.first_delay * 2 ** len(recent))
            attempt[name] = len(recent) + 1
            self._restarts[name] = [*recent, now]
        stages = [[name for name in stage if name in crashed] for stage in _RESTART_STAGES]
        stages = [stage for stage in stages if stage]
        for name in (name for stage in stages for name in stage):
            self._say(
                f"{name} exited ({crashed[name]}); restarting it in {delay:g}s "
                f"(attempt {attempt[name]} of {self.attempts}, log: {self.stack.log_path(name)})"
            )
        if len(crashed) > 1:
            self._say("restarting in dependency order: " + ", then ".join(", ".join(stage) for stage in stages))
        self._sleep(delay)
        for number, stage in enumerate(stages):
            if not self._restart_stage(stage):
                waiting = [name for later in stages[number + 1 :] for name in later]
                if waiting:
                    self._say(f"{', '.join(waiting)} will be restarted once {', '.join(stage)} is back")
                return

    def _restart_stage(self, stage: list[str]) -> bool:
        """Restart one stage together and wait for each; False when one died again before it was ready."""
        started = self._clock()
        servers = [name for name in stage if name in ("postgres", "nats")]
        for name in servers:
            try:
                self.stack.restart(name)
            except DevstackError:
                if name not in self.stack.crashed():
                    raise
                return self._died_again(name, self.stack.crashed())
            self._say(f"{name} restarted; ready in {self._clock() - started:.1f}s")
        services = [name for name in stage if name not in servers]
        for name in services:
            self.stack.respawn(name)
        back = True
        for name in services:
            try:
                waited = self.stack.wait_ready(name)
            except DevstackError:
                # Not ready in time while still running: nothing a restart here would fix; the
                # error (probe, log tail) stops the stack.
                if name not in self.stack.crashed():
                    raise
                back = self._died_again(name, self.stack.crashed())
            else:
                self._say(f"{name} restarted; ready in {waited:.1f}s")
        return back

    def _died_again(self, name: str, crashed: Mapping[str, str]) -> bool:
        # Counted as a crash at the next check, which waits longer or gives up.
        self._say(
            f"{name} exited again ({crashed.get(name, 'gone')}) before it was ready; see {self.stack.log_path(name)}"
        )
        return False

    def _say(self, line: str) -> None:
        print(f"memvault-dev: {line}", file=self.out, flush=True)
