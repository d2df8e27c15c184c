"""Restarting what died in a running stack, as a dev runner should, until it keeps dying."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO

from memvault_devstack.errors import DevstackError
from memvault_devstack.stack import Stack

_RESTART_STAGES: tuple[tuple[str, ...], ...] = (("postgres",), ("nats",), ("vault", "indexer"), ("mcp",), ("gateway",))
"""What others need comes back first. Unlike at start-up, the gateway waits for mcp: its /readyz
checks mcp, so beside an mcp that dies again it would be alive and never ready."""

_NEEDS: dict[str, tuple[str, ...]] = {
    "vault": ("postgres", "nats"),
    "indexer": ("postgres", "nats", "vault"),
    "mcp": ("vault",),
    "gateway": ("vault", "mcp"),
}
"""What a service's readiness waits for (the gateway's /readyz checks vault and mcp)."""

_POLL = 0.1


class Supervisor:
    """Restarts a crashed service, NATS or Postgres after `first_delay` seconds, doubling the delay
    for each further crash; after `attempts` restarts within `window` seconds it gives up.

    When several die at once they come back in dependency order (Postgres, NATS, vault and
    indexer, then mcp, then the gateway), each stage once the one before is ready. One that dies
    again before it is ready is restarted again at once (within the same limit), and what needs it
    waits. Every restart ends in a line: ready after how long, or why not; a service that runs but
    is not ready says every `note_every` seconds what it waits for.
    """

    def __init__(
        self,
        stack: Stack,
        out: IO[str],
        *,
        attempts: int = 3,
        window: float = 60.0,
        first_delay: float = 1.0,
        note_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stack = stack
        self.out = out
        self.attempts = attempts
        self.window = window
        self.first_delay = first_delay
        self.note_every = note_every
        self._clock = clock
        self._sleep = sleep
        self._restarts: dict[str, list[float]] = {}

    def check(self) -> None:
        """Restart whatever died, until all of it is ready again; DevstackError (with its last lines)
        for what keeps dying or does not become ready."""
        crashed = self.stack.crashed()
        if not crashed:
            return
        delay = 0.0
        for name, how in sorted(crashed.items(), key=lambda item: _stage_of(item[0])):
            wait, attempt = self._count(name, how)
            delay = max(delay, wait)
            self._say(
                f"{name} exited ({how}); restarting it in {wait:g}s "
                f"(attempt {attempt} of {self.attempts}, log: {self.stack.log_path(name)})"
            )
        stages = [[name for name in stage if name in crashed] for stage in _RESTART_STAGES]
        stages = [stage for stage in stages if stage]
        if len(crashed) > 1:
            self._say("restarting in dependency order: " + ", then ".join(", ".join(stage) for stage in stages))
        self._sleep(delay)
        todo = set(crashed)  # not ready yet
        dead = set(crashed)  # to be started again
        while todo:
            stage = next([name for name in stage if name in todo] for stage in _RESTART_STAGES if set(stage) & todo)
            todo -= set(self._restart_stage(stage, dead))
            # Whatever died meanwhile (in this stage or one before it) is restarted before going on.
            now_dead = sorted(self.stack.crashed().items(), key=lambda item: _stage_of(item[0]))
            again = {name: how for name, how in now_dead if name not in dead}
            delay = 0.0
            for name, how in again.items():
                wait, attempt = self._count(name, how)
                delay = max(delay, wait)
                self._say(
                    f"{name} exited again ({how}) before it was ready; restarting it in {wait:g}s "
                    f"(attempt {attempt} of {self.attempts}, log: {self.stack.log_path(name)})"
                )
            todo |= set(again)
            dead |= set(again)
            if again:
                first = min(_stage_of(name) for name in again)
                back = ", ".join(sorted(again, key=_stage_of))
                for name in sorted(todo - set(again), key=_stage_of):
                    if _stage_of(name) > first:
                        self._say(f"{name} waits until {back} is back")
                self._sleep(delay)

    def _count(self, name: str, how: str) -> tuple[float, int]:
        """Record one more crash of `name`: the delay before its restart and which attempt it is;
        DevstackError when it has crashed too often."""
        now = self._clock()
        recent = [at for at in self._restarts.get(name, []) if now - at < self.window]
        if len(recent) >= self.attempts:
            raise DevstackError(
                f"{name} exited ({how}) {len(recent) + 1} times within {self.window:.0f}s; giving up. "
                f"Last lines of {self.stack.log_path(name)}:\n{self.stack.tail(name)}"
            )
        self._restarts[name] = [*recent, now]
        return self.first_delay * 2 ** len(recent), len(recent) + 1

    def _restart_stage(self, stage: list[str], dead: set[str]) -> list[str]:
        """Start the dead ones of one stage together (taking them out of `dead`) and wait for each;
        the names that got ready."""
        started = self._clock()
        ready: list[str] = []
        servers = [name for name in stage if name in ("postgres", "nats")]
        for name in servers:
            dead.discard(name)
            try:
                self.stack.restart(name)
            except DevstackError:
                if name not in self.stack.crashed():
                    raise
                return ready
            self._say(f"{name} restarted; ready in {self._clock() - started:.1f}s")
            ready.append(name)
        services = [name for name in stage if name not in servers]
        for name in services:
            if name in dead:
                dead.discard(name)
                self.stack.respawn(name)
        for name in services:
            waited = self._wait_ready(name)
            if waited is None:
                continue
            self._say(f"{name} restarted; ready in {waited:.1f}s")
            ready.append(name)
        return ready

    def _wait_ready(self, name: str) -> float | None:
        """Seconds until `name` was ready; None when it or what it needs died meanwhile. DevstackError
        (probe, log tail) when it runs but is not ready within the stack's ready_timeout: nothing a
        restart would fix."""
        probe = self.stack.readiness_probe(name)
        started = self._clock()
        next_note = started + self.note_every
        while True:
            crashed = self.stack.crashed()
            if name in crashed or set(_NEEDS.get(name, ())) & set(crashed):
                return None
            if probe.ready():
                return self._clock() - started
            now = self._clock()
            if now - started >= self.stack.ready_timeout:
                raise DevstackError(
                    f"{name} did not become ready within {self.stack.ready_timeout:.0f}s ({probe.describe()}); "
                    f"last lines of {self.stack.log_path(name)}:\n{self.stack.tail(name)}"
                )
            if now >= next_note:
                needs = [need for need in _NEEDS.get(name, ()) if need in self.stack.services]
                because = f" (it needs {', '.join(needs)})" if needs else ""
                self._say(
                    f"{name} is running but not ready after {now - started:.0f}s; "
                    f"it waits for {probe.describe()}{because}"
                )
                next_note += self.note_every
            time.sleep(_POLL)

    def _say(self, line: str) -> None:
        print(f"memvault-dev: {line}", file=self.out, flush=True)


def _stage_of(name: str) -> int:
    return next(number for number, stage in enumerate(_RESTART_STAGES) if name in stage)
