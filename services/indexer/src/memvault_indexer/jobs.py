"""Maintenance jobs run in the background, one at a time, with progress: rebuild and re-embed.

`rebuild` drops this model's collection and embeds every memory again; `reembed` embeds what
is missing or stale (another text, another model) and removes orphans, which after a model
change is everything. While a rebuild fills the collection, searches are refused
(`JobRunner.filling`), so recall answers keyword-only instead of from a partial index.
A page that cannot be embedded is reported to the vault as failed index jobs and the job goes
on; the vault or the store becoming unavailable stops it (state `failed`, with the error).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from memvault_core.errors import Conflict, MemvaultError, Unavailable
from memvault_indexer.feed import Document
from memvault_indexer.indexing import Indexer

log = logging.getLogger(__name__)

JobKind = Literal["rebuild", "reembed"]
JobState = Literal["running", "finished", "failed"]
PAGE_SIZE = 256


@dataclass(frozen=True)
class JobStatus:
    kind: JobKind
    state: JobState
    done: int
    total: int
    failed: int
    started_at: datetime
    finished_at: datetime | None
    error: str
    started_by: str
    model: str


class JobRunner:
    """Runs at most one maintenance job; `status` is the running or the last one."""

    def __init__(self, indexer: Indexer) -> None:
        self._indexer = indexer
        self._status: JobStatus | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def status(self) -> JobStatus | None:
        return self._status

    @property
    def filling(self) -> bool:
        """A rebuild is filling the collection from empty: searches are refused meanwhile."""
        return self._status is not None and self._status.kind == "rebuild" and self._status.state == "running"

    def start(self, kind: JobKind, started_by: str) -> JobStatus:
        if self._task is not None and not self._task.done():
            assert self._status is not None
            raise Conflict(
                f"a {self._status.kind} job is already running ({self._status.done} of {self._status.total})"
            )
        self._status = JobStatus(kind, "running", 0, 0, 0, datetime.now(UTC), None, "", started_by, self._indexer.model)
        self._task = asyncio.create_task(self._run(kind))
        return self._status

    async def wait(self) -> JobStatus:
        """Until the current job ends (for commands and tests)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)
        assert self._status is not None
        return self._status

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _update(self, **changes: object) -> None:
        assert self._status is not None
        self._status = replace(self._status, **changes)  # type: ignore[arg-type]

    async def _run(self, kind: JobKind) -> None:
        indexer = self._indexer
        try:
            self._update(total=await indexer.feed.count())
            if kind == "rebuild":
                await indexer.store.drop_collection()
                await indexer.store.ensure_collection()
                await self._fill(lambda document: True)
            else:
                points = {p.memory_id: (p.content_hash, p.model) async for p in indexer.store.scan()}
                seen = await self._fill(
                    lambda document: points.get(document.memory_id) != (document.content_hash, indexer.model)
                )
                orphans = [memory_id for memory_id in points if memory_id not in seen]
                await indexer.forget(orphans)
            await indexer.optimize_if_due(idle_seconds=float("inf"))
            self._update(state="finished", finished_at=datetime.now(UTC))
            log.info("index job finished", extra={"kind": kind, "done": self._status.done if self._status else 0})
        except asyncio.CancelledError:
            self._update(state="failed", finished_at=datetime.now(UTC), error="stopped: the indexer shut down")
            raise
        except MemvaultError as error:
            self._update(state="failed", finished_at=datetime.now(UTC), error=error.message)
            log.warning("index job failed", extra={"kind": kind, "reason": error.message})
        except Exception as error:
            self._update(state="failed", finished_at=datetime.now(UTC), error=f"{type(error).__name__}")
            log.exception("index job failed", extra={"kind": kind})

    async def _fill(self, wanted: Callable[[Document], bool]) -> set[str]:
        """Go through every memory; embed the ones `wanted` picks. Returns the ids seen."""
        indexer = self._indexer
        seen: set[str] = set()
        async for page in indexer.feed.all_documents(PAGE_SIZE):
            seen.update(d.memory_id for d in page)
            todo = [d for d in page if wanted(d)]
            failed = 0
            try:
                await indexer.write_documents(todo)
            except Unavailable:
                raise
            except Exception as error:
                # This page's texts could not be embedded: the vault lists them as failed index jobs.
                reason = error.message if isinstance(error, MemvaultError) else type(error).__name__
                await indexer.feed.report(
                    [],
                    indexer.model,
                    [(d.memory_id, reason) for d in todo if d.kind != "message"],
                    [(d.memory_id, reason) for d in todo if d.kind == "message"],
                )
                failed = len(todo)
            assert self._status is not None
            self._update(done=self._status.done + len(page), failed=self._status.failed + failed)
        return seen
