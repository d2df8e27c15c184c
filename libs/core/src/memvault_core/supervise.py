"""Keep a long-running loop alive: restart it with backoff after any failure, until cancelled."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def run_forever(
    step: Callable[[], Awaitable[None]],
    what: str,
    max_delay: float = 30.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run `step` again and again; after a failure wait 0.5 s, doubling up to `max_delay`, and retry.

    Used by loops whose work is durable elsewhere (the outbox, the event stream), so a failure
    only delays it: nothing is lost by starting over. `sleep` waits between attempts (a test passes
    one that records the delays instead of waiting).
    """
    delay = 0.5
    while True:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning(f"{what} paused", extra={"error": type(error).__name__, "retry_in": delay})
            await sleep(delay)
            delay = min(delay * 2, max_delay)
        else:
            delay = 0.5
