"""`make drills`: fault drills against a whole local stack, a table of what was lost and repeated.

One stack with a Postgres and a NATS server of its own (embedded, in build/drills/, never the
machine's shared servers) and the four services as processes. Each drill writes memories through
the official MCP client while it breaks one thing, then checks Postgres and the vector store:

- written: distinct memories the drill sent; acknowledged: those the tool reported stored (a call
  that failed during the fault is retried with the same text, as an agent would);
- lost: acknowledged memories that are not in Postgres, or not indexed once the stack settled;
- duplicated: texts stored more than once, and vector points beyond one per memory;
- time to recover: from the fault until writes succeed again and every acknowledged memory is
  indexed.

Every drill has a deadline and the run stops by itself; the table goes to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_helpers import index_points, mcp_session, vault_stats  # noqa: E402
from mcp import Client  # noqa: E402

from memvault_devstack.stack import Stack  # noqa: E402
from tests.bench import report  # noqa: E402
from tests.drills.oauth import access_token  # noqa: E402

RELIABILITY = ROOT / "docs" / "reliability.md"
DRILL_DEADLINE = 300.0
"""Seconds a drill may take before it is reported as not recovered."""


@dataclass
class Row:
    drill: str
    written: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    recovered: float | None = None
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        recover = f"{self.recovered:.1f} s" if self.recovered is not None else "not within the deadline"
        return (
            f"| {self.drill} | {self.written} | {self.acknowledged} | {self.lost} | {self.duplicated} | {recover} "
            f"| {'; '.join(self.notes)} |"
        )


HEADER = (
    "| drill | written | acknowledged | lost | duplicated | time to recover | what was seen |\n"
    "|---|---|---|---|---|---|---|"
)


def words() -> str:
    return " ".join(uuid.uuid4().hex[:8] for _ in range(4))


class Writer:
    """Writes tagged memories one at a time (or in batches), retrying a failed call with the same text."""

    def __init__(self, client_factory: Callable[[], contextlib.AbstractAsyncContextManager[Client]], tag: str):
        self.client_factory = client_factory
        self.tag = tag
        self.written: list[str] = []
        self.acknowledged: set[str] = set()
        self.errors: list[str] = []
        self.last_success = 0.0

    def text(self, i: int) -> str:
        return f"{self.tag} note {i}: {words()}"

    async def one(self, client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as error:  # the connection itself failed (gateway or mcp down)
            self.errors.append(f"{type(error).__name__}: {str(error)[:160]}")
            raise
        if result.is_error:
            self.errors.append((result.content[0].text if result.content else "error")[:200])  # type: ignore[union-attr]
            return None
        self.last_success = time.monotonic()
        return dict(result.structured_content or {})

    async def remember_loop(
        self,
        count: int,
        *,
        start: int = 0,
        pause: float = 0.1,
        on: dict[int, Callable[[], Awaitable[None]]] | None = None,
    ) -> None:
        """Remember texts `start` to `start + count - 1`; before text i, await `on[i]()` (a fault)."""
        hooks = dict(on or {})
        deadline = time.monotonic() + DRILL_DEADLINE
        i = start
        texts: dict[int, str] = {}
        while i < start + count and time.monotonic() < deadline:
            try:
                # A session per connection: a restarted gateway or mcp ends it, and a new one is opened
                # (with the same token) as an agent's client would.
                async with self.client_factory() as client:
                    while i < start + count and time.monotonic() < deadline:
                        if i in hooks:
                            await hooks.pop(i)()
                        if i not in texts:
                            texts[i] = self.text(i)
                            self.written.append(texts[i])
                        if await self.one(client, "remember", {"content": texts[i]}) is not None:
                            self.acknowledged.add(texts[i])
                            i += 1
                            await asyncio.sleep(pause)
                        else:
                            await asyncio.sleep(0.5)  # retry the same text, as an agent would
            except Exception as error:  # the session broke (an ExceptionGroup from its task group)
                self.errors.append(f"session ended: {type(error).__name__}")
                await asyncio.sleep(0.5)

    async def bulk(self, client: Client, items: list[str]) -> bool:
        for text in items:
            if text not in self.written:
                self.written.append(text)
        try:
            result = await self.one(client, "bulk_remember", {"items": [{"content": text} for text in items]})
        except Exception:
            return False
        if result is None:
            return False
        stored = sum(result["summary"].get(kind, 0) for kind in ("stored", "similar", "duplicate"))
        if stored == len(items):
            self.acknowledged.update(items)
        else:
            self.errors.append(f"bulk_remember acknowledged {stored} of {len(items)}: {result['summary']}")
        return True


class Drills:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.rows: list[Row] = []

    def session(self, headers: dict[str, str] | None = None) -> contextlib.AbstractAsyncContextManager[Client]:
        return mcp_session(self.stack.mcp_url, headers=headers)

    async def db(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.stack.postgres_dsn)

    async def stored_counts(self, tag: str) -> dict[str, int]:
        conn = await self.db()
        try:
            rows = await conn.fetch(
                "SELECT content, count(*) AS n FROM memory WHERE content LIKE $1 GROUP BY content", tag + "%"
            )
        finally:
            await conn.close()
        return {row["content"]: int(row["n"]) for row in rows}

    async def whole(self) -> bool:
        """Every memory in the vault indexed, nothing pending or failed, one point per memory."""
        try:
            stats = await vault_stats(self.stack)
            if stats.index_pending or stats.index_failed:
                return False
            total = await self._memory_count()
            return bool(stats.indexed == total and await index_points(self.stack) == total)
        except Exception:
            return False

    async def _memory_count(self) -> int:
        conn = await self.db()
        try:
            return int(await conn.fetchval("SELECT count(*) FROM memory"))
        finally:
            await conn.close()

    async def settle(self, row: Row, writer: Writer, fault_at: float) -> None:
        """Wait until writes succeed after the fault and the index is whole; then count."""
        deadline = time.monotonic() + DRILL_DEADLINE
        while time.monotonic() < deadline:
            if writer.last_success > fault_at and await self.whole():
                row.recovered = time.monotonic() - fault_at
                break
            await asyncio.sleep(0.5)
        counts = await self.stored_counts(writer.tag)
        row.written = len(writer.written)
        row.acknowledged = len(writer.acknowledged)
        row.lost = sum(1 for text in writer.acknowledged if text not in counts)
        row.duplicated = sum(n - 1 for n in counts.values() if n > 1)
        try:
            points, total = await index_points(self.stack), await self._memory_count()
            if points > total:
                row.duplicated += points - total
                row.notes.append(f"{points - total} vector points beyond one per memory")
            elif row.recovered is None and points < total:
                row.lost += total - points
                row.notes.append(f"{total - points} memories not indexed at the deadline")
        except Exception as error:
            row.notes.append(f"index not readable: {type(error).__name__}")
        if writer.errors:
            row.notes.append(f"{len(writer.errors)} failed calls retried, e.g. “{_clean(writer.errors[0])}”")
        self.rows.append(row)
        print(row.markdown(), flush=True)

    # -- the drills -------------------------------------------------------------------------------

    async def indexer_killed_mid_import(self) -> None:
        row = Row("indexer SIGKILL mid-import (bulk_remember, 8 × 250)")
        writer = Writer(self.session, "drill-indexer")
        fault_at = 0.0
        async with self.session() as client:
            for batch in range(8):
                if batch == 3:
                    fault_at = time.monotonic()
                    await asyncio.to_thread(self.stack.stop_service, "indexer", kill=True)
                items = [writer.text(batch * 250 + i) for i in range(250)]
                await writer.bulk(client, items)
        await asyncio.to_thread(self.stack.start_services)
        await self.settle(row, writer, fault_at)

    async def nats_stopped_and_killed(self) -> None:
        row = Row("NATS stopped (SIGTERM), then SIGKILLed, during writes")
        writer = Writer(self.session, "drill-nats")
        nats = self.stack.embedded_nats
        assert nats is not None and nats.process is not None
        fault_at = 0.0

        async def stop() -> None:
            nonlocal fault_at
            fault_at = time.monotonic()
            assert nats.process is not None
            await asyncio.to_thread(nats.process.stop)
            row.notes.append("writes went on while NATS was down")

        async def back() -> None:
            await asyncio.to_thread(self.stack.restart, "nats")

        async def kill() -> None:
            assert nats.process is not None
            await asyncio.to_thread(nats.process.kill)

        await writer.remember_loop(80, on={20: stop, 35: back, 50: kill, 60: back})
        await self.settle(row, writer, fault_at)

    async def vault_killed_mid_transaction(self) -> None:
        row = Row("vault SIGKILL mid-transaction (a 500-item bulk_remember in flight)")
        writer = Writer(self.session, "drill-vault")
        items = [writer.text(i) for i in range(500)]
        async with self.session() as client:
            call = asyncio.create_task(writer.bulk(client, items))
            await asyncio.sleep(1.0)
            fault_at = time.monotonic()
            await asyncio.to_thread(self.stack.stop_service, "vault", kill=True)
            await call
            half = await self.stored_counts(writer.tag)
            row.notes.append(
                "the interrupted call "
                + ("was acknowledged" if writer.acknowledged else "failed")
                + f"; {len(half)} of {len(items)} texts in Postgres before the retry (all or none: "
                + ("yes" if len(half) in (0, len(items)) else "NO")
                + ")"
            )
        await asyncio.to_thread(self.stack.start_services)
        # The agent retries the whole batch until it is acknowledged (exact repeats are not stored twice).
        deadline = time.monotonic() + DRILL_DEADLINE
        while items[0] not in writer.acknowledged and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                async with self.session() as client:
                    if await writer.bulk(client, items) and items[0] in writer.acknowledged:
                        break
            await asyncio.sleep(1.0)
        await self.settle(row, writer, fault_at)

    async def postgres_restarted(self) -> None:
        row = Row("Postgres restarted under load (fast shutdown, 3 s down)")
        writer = Writer(self.session, "drill-postgres")
        postgres = self.stack.embedded_postgres
        assert postgres is not None
        fault_at = 0.0

        restarting: list[asyncio.Task[str]] = []

        async def restart() -> None:
            nonlocal fault_at
            fault_at = time.monotonic()
            # In the background: the writer goes on (and fails, and retries) while Postgres is down.
            restarting.append(asyncio.create_task(asyncio.to_thread(postgres.restart, pause=3.0)))

        load = asyncio.create_task(self._recall_load(30.0))
        await writer.remember_loop(60, on={20: restart})
        await asyncio.gather(*restarting)
        row.notes.append(f"recalls alongside: {await load}")
        await self.settle(row, writer, fault_at)

    async def _recall_load(self, seconds: float) -> str:
        ok = failed = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                async with self.session() as client:
                    while time.monotonic() < end:
                        result = await client.call_tool("recall", {"query": "drill note"})
                        if result.is_error:
                            failed += 1
                        else:
                            ok += 1
                        await asyncio.sleep(0.2)
            except Exception:
                failed += 1
                await asyncio.sleep(0.5)
        return f"{ok} answered, {failed} failed while it was down"

    async def vector_store_deleted(self) -> None:
        row = Row("vector store directory deleted while the indexer runs")
        writer = Writer(self.session, "drill-qdrant")
        fault_at = 0.0

        async def delete() -> None:
            nonlocal fault_at
            fault_at = time.monotonic()
            shutil.rmtree(self.stack.data_dir / "qdrant", ignore_errors=True)

        async def restart_indexer() -> None:
            # What an operator (or Kubernetes, on a failed probe) does: restart it; it rebuilds.
            await asyncio.to_thread(self.stack.stop_service, "indexer")
            await asyncio.to_thread(self.stack.start_services)

        await writer.remember_loop(40, on={10: delete, 25: restart_indexer})
        await self.settle(row, writer, fault_at)

    async def gateway_restarted_with_tokens(self) -> None:
        row = Row("gateway restarted with live OAuth tokens (3 agents)")
        tokens = [await asyncio.to_thread(access_token, self.stack.gateway_url, self.stack.mcp_url) for _ in range(3)]
        writers = [
            Writer(lambda token=token: self.session({"Authorization": f"Bearer {token}"}), f"drill-gateway-{n}")
            for n, token in enumerate(tokens)
        ]
        fault_at = time.monotonic() + 1e9

        async def restart() -> None:
            nonlocal fault_at
            fault_at = time.monotonic()
            await asyncio.to_thread(self.stack.stop_service, "gateway")
            await asyncio.to_thread(self.stack.start_services)

        await asyncio.gather(
            writers[0].remember_loop(40, on={15: restart}), writers[1].remember_loop(40), writers[2].remember_loop(40)
        )
        unauthorized = sum(1 for w in writers for e in w.errors if "401" in e or "sign in" in e)
        row.notes.append(f"{unauthorized} calls asked to sign in again (0 expected)")
        merged = Writer(self.session, "drill-gateway-")
        for w in writers:
            merged.written += w.written
            merged.acknowledged |= w.acknowledged
            merged.errors += w.errors
            merged.last_success = max(merged.last_success, w.last_success)
        merged.tag = "drill-gateway"
        await self.settle(row, merged, fault_at)
        if unauthorized:
            row.recovered = None  # agents had to consent again: not recovered

    async def disk_full(self) -> None:
        row = Row("disk full: the memory table on a full 16 MiB tmpfs, then space returns")
        if os.geteuid() != 0:
            row.notes.append("not run: mounting a tmpfs needs root (run the others with DRILLS=…)")
            self.rows.append(row)
            print(row.markdown(), flush=True)
            return
        mount = self.stack.data_dir / "small-disk"
        mount.mkdir(exist_ok=True)
        await asyncio.to_thread(
            subprocess.run, ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True
        )
        conn = await self.db()
        filler = mount / "filler"
        try:
            space = mount / "pg"
            space.mkdir()
            postgres = self.stack.embedded_postgres
            assert postgres is not None
            owner = postgres.data_dir.stat()
            os.chown(space, owner.st_uid, owner.st_gid)
            await conn.execute(f"CREATE TABLESPACE drill_small LOCATION '{space}'")
            await conn.execute("ALTER TABLE memory SET TABLESPACE drill_small")
            free = shutil.disk_usage(mount).free
            with filler.open("wb") as out:  # leave about 40 KiB: a few pages of new memories
                out.write(b"\0" * max(0, free - 40 * 1024))
            writer = Writer(self.session, "drill-disk")
            refusal = ""
            async with self.session() as client:
                for i in range(2000):
                    text = writer.text(i)
                    writer.written.append(text)
                    result = await client.call_tool("remember", {"content": text + " " + "x" * 400})
                    if result.is_error:
                        refusal = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                        writer.written.pop()
                        break
                    writer.acknowledged.add(text)
            row.notes.append(f"refused after {len(writer.acknowledged)} writes; the agent read: “{_clean(refusal)}”")
            filler.unlink()  # space returns
            fault_at = time.monotonic()
            acknowledged_before = len(writer.acknowledged)
            await writer.remember_loop(10, start=len(writer.written) + 1)
            again = len(writer.acknowledged) - acknowledged_before
            row.notes.append(f"{again} of 10 writes accepted once space returned")
            # The texts had a tail of x's: compare on the prefix the writer kept.
            counts_raw = await self._stored_prefixes(writer.tag)
            row.written = len(writer.written)
            row.acknowledged = len(writer.acknowledged)
            row.lost = sum(1 for text in writer.acknowledged if text not in counts_raw)
            row.duplicated = sum(n - 1 for n in counts_raw.values() if n > 1)
            deadline = time.monotonic() + DRILL_DEADLINE
            while time.monotonic() < deadline:
                if again and await self.whole():
                    row.recovered = time.monotonic() - fault_at
                    break
                await asyncio.sleep(0.5)
            self.rows.append(row)
            print(row.markdown(), flush=True)
        finally:
            filler.unlink(missing_ok=True)
            with contextlib.suppress(Exception):
                await conn.execute("ALTER TABLE memory SET TABLESPACE pg_default")
                await conn.execute("DROP TABLESPACE drill_small")
            await conn.close()
            await asyncio.to_thread(subprocess.run, ["umount", "-l", str(mount)], check=False)

    async def _stored_prefixes(self, tag: str) -> dict[str, int]:
        conn = await self.db()
        try:
            rows = await conn.fetch(
                "SELECT split_part(content, ' x', 1) AS text, count(*) AS n FROM memory WHERE content LIKE $1 "
                "GROUP BY 1",
                tag + "%",
            )
        finally:
            await conn.close()
        return {row["text"]: int(row["n"]) for row in rows}


def _clean(text: str) -> str:
    return " ".join(text.split()).replace("|", "/")[:220]


ALL = (
    "indexer",
    "nats",
    "vault",
    "postgres",
    "vector-store",
    "gateway",
    "disk-full",
)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


@contextlib.asynccontextmanager
async def started(data_dir: Path) -> AsyncIterator[Stack]:
    stack = Stack(
        data_dir,
        log_level="WARNING",
        # Agents consent without a browser, as `make conformance` does (loopback only; see docs/security.md).
        service_env={"gateway": {"MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT": "owner"}},
    )
    await asyncio.to_thread(stack.start)
    try:
        yield stack
    finally:
        await asyncio.to_thread(stack.stop)


async def main_async(args: argparse.Namespace) -> int:
    data_dir = ROOT / "build" / "drills" / secrets.token_hex(3)
    chosen = args.drills or list(ALL)
    load_before = load_average()
    started_at = time.monotonic()
    async with started(data_dir) as stack:
        drills = Drills(stack)
        runs: dict[str, Callable[[], Awaitable[None]]] = {
            "indexer": drills.indexer_killed_mid_import,
            "nats": drills.nats_stopped_and_killed,
            "vault": drills.vault_killed_mid_transaction,
            "postgres": drills.postgres_restarted,
            "vector-store": drills.vector_store_deleted,
            "gateway": drills.gateway_restarted_with_tokens,
            "disk-full": drills.disk_full,
        }
        print(HEADER, flush=True)
        for name in chosen:
            try:
                await asyncio.wait_for(runs[name](), DRILL_DEADLINE * 2)
            except TimeoutError:
                drills.rows.append(Row(name, notes=["the drill did not finish within its deadline"]))
    shutil.rmtree(data_dir, ignore_errors=True)
    body = "\n".join([HEADER, *(row.markdown() for row in drills.rows)])
    took = time.monotonic() - started_at
    if not args.no_write:
        write_report(body, load_before, load_average(), took)
    bad = [row for row in drills.rows if row.lost or row.duplicated or row.recovered is None]
    print(f"\n{len(drills.rows)} drills in {took:.0f} s; {len(bad)} lost, duplicated or did not recover", flush=True)
    return 1 if bad else 0


def write_report(body: str, load_before: str, load_after: str, took: float) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    block = (
        "<!-- drills -->\n"
        f"_Run {stamp} on {report.machine()}, commit {report.git_revision()}, with `make drills` "
        f"({took:.0f} s; load average before {load_before}, after {load_after}: the machine is shared)._\n\n"
        f"{body}\n<!-- /drills -->"
    )
    text = RELIABILITY.read_text()
    start, end = text.find("<!-- drills -->"), text.find("<!-- /drills -->")
    if start == -1 or end == -1:
        raise SystemExit(f"{RELIABILITY} has no <!-- drills --> … <!-- /drills --> section")
    RELIABILITY.write_text(text[:start] + block + text[end + len("<!-- /drills -->") :])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.drills.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("drills", nargs="*", help=f"which drills (default all: {', '.join(ALL)})")
    parser.add_argument("--no-write", action="store_true", help="print the table only; leave docs/reliability.md")
    args = parser.parse_args()
    unknown = sorted(set(args.drills) - set(ALL))
    if unknown:
        parser.error(f"unknown drill(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")
    raise SystemExit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
