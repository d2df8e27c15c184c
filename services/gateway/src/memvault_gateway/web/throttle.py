"""Rate limits on the endpoints an attacker can hammer without a credential.

Moving-window counters (the `limits` library) in this process's memory: each gateway replica
counts on its own, which is enough to make password guessing and registration floods slow.
Keys are the peer address; behind a reverse proxy every request shares the proxy's address,
so the limits are generous enough to act as a global ceiling there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request
from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

from memvault_gateway.web.http import client_address

RULES: dict[str, RateLimitItem] = {
    # Password attempts from one address.
    "login": parse("20/minute"),
    # Failed passwords for one user name from one address: then that address waits out the window for
    # that name (keyed by name alone, anyone could lock the owner out by failing on purpose).
    "login-failures": parse("10/15 minutes"),
    "register": parse("30/hour"),
    # GET and POST /authorize together, from one address.
    "authorize": parse("60/minute"),
    # Client metadata documents fetched for one address (each is a request to a URL an outsider
    # chose, and a new client row when it succeeds); a fresh cached document is not counted.
    "metadata-document": parse("60/hour"),
    # A document URL whose fetch or check just failed is not fetched again for a while.
    "metadata-document-failed": parse("1/30 seconds"),
    "token": parse("120/minute"),
    "setup": parse("20/hour"),
    # Email sign-in links asked for from one address, and for one email address (counted whether or
    # not it belongs to an account, so the answer says nothing about that): a stranger cannot use the
    # gateway to flood someone's mailbox.
    "email-link": parse("20/hour"),
    "email-link-address": parse("5/hour"),
    # Sign-in links opened and used from one address (each is 256 random bits: this only bounds the load).
    "email-sign-in": parse("60/hour"),
}


class Throttle:
    def __init__(self) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    async def allow(self, rule: str, *keys: str) -> bool:
        """Count one attempt; False when the rule's limit is already reached (the attempt is refused)."""
        return await self._limiter.hit(RULES[rule], rule, *keys)

    async def blocked(self, rule: str, *keys: str) -> bool:
        """Whether the limit is reached, without counting an attempt."""
        return not await self._limiter.test(RULES[rule], rule, *keys)

    async def count(self, rule: str, *keys: str) -> None:
        await self._limiter.hit(RULES[rule], rule, *keys)

    async def retry_after(self, rule: str, *keys: str) -> int:
        stats = await self._limiter.get_window_stats(RULES[rule], rule, *keys)
        return max(1, int(stats.reset_time - time.time()))

    async def enforce(self, rule: str, *keys: str) -> None:
        """Count one attempt; past the limit, a 429 with Retry-After (raised as HTTPException)."""
        if not await self.allow(rule, *keys):
            wait = await self.retry_after(rule, *keys)
            raise HTTPException(
                status_code=429,
                detail=f"too many requests; try again in {wait} seconds",
                headers={"Retry-After": str(wait)},
            )


def peer_of(request: Request) -> str:
    """The key rate limits count a request under: the address it came from."""
    return client_address(request) or "unknown"


def limited(rule: str) -> Callable[[Request], Coroutine[Any, Any, None]]:
    """A route dependency: 429 with Retry-After once this peer has used up `rule`."""

    async def check(request: Request) -> None:
        throttle: Throttle = request.app.state.gateway.throttle
        await throttle.enforce(rule, peer_of(request))

    return check
