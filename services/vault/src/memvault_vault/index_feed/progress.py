"""The indexer's reports reaching this vault process, for an import that waits for the index to catch up.

An import compares its texts with every memory of the vault. Memories the index does not hold yet are
sent to the indexer as text, up to a budget; when more are waiting, the import waits until the indexer
reports progress (`IndexFeedService.ReportIndexed`) instead of polling the database on a timer. Another
vault replica may receive the reports, so a waiter also looks again after `RECHECK_SECONDS` at most.
"""

from __future__ import annotations

import asyncio
import contextlib

RECHECK_SECONDS = 1.0


class IndexProgress:
    def __init__(self) -> None:
        self._reported = asyncio.Event()

    def reported(self) -> None:
        """The indexer reported memories indexed (or failed): wake every waiter."""
        self._reported.set()
        self._reported = asyncio.Event()

    async def wait(self, at_most: float) -> None:
        """Until the next report, or `min(at_most, RECHECK_SECONDS)` seconds, whichever comes first."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, min(at_most, RECHECK_SECONDS))):
                await self._reported.wait()
