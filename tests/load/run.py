"""`make load`: agents with OAuth grants of their own on a whole local stack, a realistic mix of tools
for a while, then a ramp to find where throughput stops growing.

One stack with a Postgres and a NATS server of its own (embedded, under build/load/). Each agent
registers as an OAuth client, gets its own grant and token through the gateway's real flow, and
calls tools through the official MCP client: recall 70 %, remember 20 %, bulk_remember (20 items)
4 %, list_memories 3 %, explain_memory 3 %. Reported: p50/p95/p99 per tool, errors, calls per
second, the memories written, and each service's resident memory at the start and the end of the steady phase
and of a read-only phase after it (the data stops growing there, so growth would be a leak). The ramp
runs steps with more and more agents (beyond the steady phase's agents they share its grants: the
gateway allows 30 client registrations an hour from one address); the saturation point is the
first step whose throughput grows less than 10 % over the step before (or that has errors, or a
recall p95 over 2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import shutil
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_helpers import mcp_session  # noqa: E402
from mcp import Client  # noqa: E402

from memvault_devstack.stack import Stack  # noqa: E402
from tests.bench import corpus, report  # noqa: E402
from tests.drills.oauth import access_token  # noqa: E402

MIX = (("recall", 0.70), ("remember", 0.20), ("bulk_remember", 0.04), ("list_memories", 0.03), ("explain_memory", 0.03))
READ_MIX = (("recall", 0.90), ("list_memories", 0.05), ("explain_memory", 0.05))
"""The read-only phase after the steady one: the data stops growing, so memory that still grows would be a leak."""
QUERIES = [
    "coffee",
    "what does the team deploy on",
    "allergies",
    "which printer is in the office",
    "backup schedule",
    "favourite programming language",
    "where is the NAS",
    "meeting on Tuesday",
]
SATURATION_P95_MS = 2000.0


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.latencies.values()) + sum(len(v) for v in self.errors.values())

    @property
    def error_count(self) -> int:
        return sum(len(v) for v in self.errors.values())


class Agent:
    def __init__(self, stack: Stack, token: str, seed: int, known_ids: list[str]) -> None:
        self.mix: tuple[tuple[str, float], ...] = MIX
        self.stack = stack
        self.token = token
        self.random = random.Random(seed)
        self.known_ids = known_ids

    def _pick(self) -> str:
        roll, total = self.random.random(), 0.0
        for tool, share in self.mix:
            total += share
            if roll < total:
                return tool
        return self.mix[0][0]

    def _arguments(self, tool: str) -> dict[str, Any]:
        if tool == "recall":
            return {"query": self.random.choice(QUERIES)}
        if tool == "remember":
            return {"content": f"Load note {uuid.uuid4().hex[:8]}: {self.random.choice(QUERIES)} {uuid.uuid4().hex}"}
        if tool == "bulk_remember":
            return {"items": [{"content": f"Load batch {uuid.uuid4().hex}"} for _ in range(20)]}
        if tool == "list_memories":
            return {"limit": 20}
        return {"memory_id": self.random.choice(self.known_ids)}

    async def run(self, until: float, tally: Tally) -> None:
        async with mcp_session(self.stack.mcp_url, headers={"Authorization": f"Bearer {self.token}"}) as client:
            while time.monotonic() < until:
                await self.one(client, tally)

    async def one(self, client: Client, tally: Tally) -> None:
        tool = self._pick()
        started = time.monotonic()
        try:
            result = await client.call_tool(tool, self._arguments(tool))
        except Exception as error:
            tally.errors[tool].append(f"{type(error).__name__}: {str(error)[:200]}")
            return
        if result.is_error:
            text = result.content[0].text if result.content else "error"  # type: ignore[union-attr]
            tally.errors[tool].append(text[:200])
        else:
            tally.latencies[tool].append(time.monotonic() - started)


Rss = tuple[float, float]
"""Resident memory in MiB: all of it, and the anonymous part (heap, not pages of mapped files such as
the vector store's segments, nor Postgres' shared buffers, which reads bring in and the kernel may drop)."""


def rss_mib(stack: Stack) -> dict[str, Rss]:
    """Resident memory of each service, and of Postgres and NATS (all their processes)."""
    sizes: dict[str, Rss] = {}
    for name in ("gateway", "mcp", "vault", "indexer"):
        pid = stack.process(name).pid
        sizes[name] = _rss(pid) if pid else (float("nan"), float("nan"))
    nats = stack.embedded_nats
    if nats is not None and nats.process is not None and nats.process.pid:
        sizes["nats"] = _rss(nats.process.pid)
    postgres = stack.embedded_postgres
    if postgres is not None:
        master = int((postgres.data_dir / "postmaster.pid").read_text().split()[0])
        parts = [_rss(master), *(_rss(child) for child in _children(master))]
        sizes["postgres"] = (sum(p[0] for p in parts), sum(p[1] for p in parts))
    return sizes


def _rss(pid: int) -> Rss:
    fields: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                fields[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return fields.get("VmRSS", 0.0), fields.get("RssAnon", 0.0)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


async def agents_for(stack: Stack, count: int, known_ids: list[str]) -> list[Agent]:
    """`count` agents, each registered as an OAuth client of its own with a grant of its own."""
    tokens = [await asyncio.to_thread(access_token, stack.gateway_url, stack.mcp_url) for _ in range(count)]
    return [Agent(stack, token, n, known_ids) for n, token in enumerate(tokens)]


async def phase(agents: list[Agent], seconds: float) -> tuple[Tally, float]:
    tally = Tally()
    started = time.monotonic()
    until = started + seconds
    results = await asyncio.gather(*(agent.run(until, tally) for agent in agents), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            tally.errors["session"].append(f"{type(result).__name__}: {str(result)[:200]}")
    return tally, time.monotonic() - started


async def seed(stack: Stack, count: int) -> list[str]:
    texts = corpus.memories(count, seed=11)
    ids: list[str] = []
    async with mcp_session(stack.mcp_url) as client:
        for offset in range(0, count, 500):
            result = await client.call_tool(
                "bulk_remember", {"items": [{"content": t} for t in texts[offset : offset + 500]]}
            )
            assert not result.is_error, result.content
        listed = await client.call_tool("list_memories", {"limit": 100})
        ids = [m["id"] for m in (listed.structured_content or {}).get("memories", [])]
    if not ids:
        raise SystemExit("list_memories returned no memory ids after seeding")
    return ids


def latency_table(tally: Tally, seconds: float) -> str:
    rows = ["| tool | calls | errors | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|"]
    for tool, _ in MIX:
        ms = [s * 1000 for s in tally.latencies.get(tool, [])]
        errors = len(tally.errors.get(tool, []))
        if ms:
            rows.append(
                f"| {tool} | {len(ms)} | {errors} | {report.percentile(ms, 50):.0f} | {report.percentile(ms, 95):.0f} "
                f"| {report.percentile(ms, 99):.0f} |"
            )
        else:
            rows.append(f"| {tool} | 0 | {errors} | – | – | – |")
    if tally.errors.get("session"):
        rows.append(f"| (sessions) | – | {len(tally.errors['session'])} | – | – | – |")
    ok = sum(len(v) for v in tally.latencies.values())
    rows.append(f"| **all** | {tally.calls} | {tally.error_count} | | | |")
    rows.append(f"\n{ok / seconds:.1f} successful calls/s over {seconds:.0f} s.")
    return "\n".join(rows)


def rss_table(columns: list[tuple[str, dict[str, Rss]]]) -> str:
    """One row a process, one column a moment: "all / anonymous" MiB."""
    rows = ["| process | " + " | ".join(title for title, _ in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name in columns[0][1]:
        cells = [f"{sizes[name][0]:.0f} / {sizes[name][1]:.0f}" for _, sizes in columns]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


async def count_memories(stack: Stack) -> int:
    """Memories in the stack's database, every vault and status."""
    import asyncpg

    connection = await asyncpg.connect(stack.postgres_dsn)
    try:
        return int(await connection.fetchval("SELECT count(*) FROM memory"))
    finally:
        await connection.close()


async def run(args: argparse.Namespace) -> str:
    data_dir = ROOT / "build" / "load" / secrets.token_hex(3)
    stack = Stack(
        data_dir,
        log_level="WARNING",
        # Agents consent without a browser, as `make conformance` does (loopback only; see docs/security.md).
        service_env={"gateway": {"MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT": "owner"}},
    )
    await asyncio.to_thread(stack.start)
    try:
        print(f"seeding {args.seed} memories", flush=True)
        known_ids = await seed(stack, args.seed)
        agents = await agents_for(stack, args.agents, known_ids)
        print(f"{args.agents} agents, each with its own OAuth grant; warm-up {args.warmup:.0f} s", flush=True)
        await phase(agents, args.warmup)
        before = rss_mib(stack)
        memories_before = await count_memories(stack)
        print(f"steady phase: {args.duration:.0f} s", flush=True)
        tally, seconds = await phase(agents, args.duration)
        after = rss_mib(stack)
        memories_after = await count_memories(stack)
        steady = latency_table(tally, seconds)
        print(steady, flush=True)
        samples = [e for errors in tally.errors.values() for e in errors][:3]
        read_end: dict[str, Rss] | None = None
        read_note = ""
        if args.read_phase > 0:
            print(f"read-only phase: {args.read_phase:.0f} s", flush=True)
            for agent in agents:
                agent.mix = READ_MIX
            reads, read_seconds = await phase(agents, args.read_phase)
            read_end = rss_mib(stack)
            for agent in agents:
                agent.mix = MIX
            ok = sum(len(v) for v in reads.latencies.values())
            read_note = (
                f" Then a read-only phase of {read_seconds:.0f} s (the same agents: recall 90 %, list_memories 5 %, "
                f"explain_memory 5 %; {ok} calls, {reads.error_count} errors) on the grown vault: the data no "
                "longer grows, so memory that still grows there would be a leak."
            )

        ramp_rows = ["| agents | calls/s | errors | recall p95 ms | remember p95 ms |", "|---|---|---|---|---|"]
        saturation = "not reached within the ramp"
        previous = 0.0
        pool = list(agents)
        for count in args.ramp:
            while count > len(pool):
                # The gateway allows 30 client registrations an hour from one address: agents beyond
                # the steady phase's share its grants, one token per agent in turn.
                pool.append(Agent(stack, agents[len(pool) % len(agents)].token, len(pool), known_ids))
            step, step_seconds = await phase(pool[:count], args.step)
            rate = sum(len(v) for v in step.latencies.values()) / step_seconds
            recall95 = report.percentile([s * 1000 for s in step.latencies.get("recall", [])], 95)
            remember95 = report.percentile([s * 1000 for s in step.latencies.get("remember", [])], 95)
            ramp_rows.append(f"| {count} | {rate:.1f} | {step.error_count} | {recall95:.0f} | {remember95:.0f} |")
            print(ramp_rows[-1], flush=True)
            if (
                saturation.startswith("not")
                and previous
                and (rate < previous * 1.10 or step.error_count or recall95 > SATURATION_P95_MS)
            ):
                saturation = f"{count} agents (throughput {rate:.1f} calls/s against {previous:.1f} the step before)"
            previous = max(previous, rate)
    finally:
        await asyncio.to_thread(stack.stop)
        shutil.rmtree(data_dir, ignore_errors=True)
    error_note = f"Errors: {tally.error_count}" + (f", e.g. {samples}" if samples else "") + "."
    return "\n\n".join(
        [
            f"Steady phase: {args.agents} agents for {args.duration:.0f} s after a {args.warmup:.0f} s warm-up, "
            f"on a vault of {args.seed} memories.",
            steady,
            error_note,
            f"Memories in the database: {memories_before:,} at the start of the steady phase, {memories_after:,} at "
            f"its end.{read_note} Resident memory, all of it and its anonymous part (heap; not pages of mapped "
            "files such as the vector store's, nor Postgres' shared buffers); Postgres: all its processes:",
            rss_table(
                [("start, MiB (all / anonymous)", before), ("end of the steady phase", after)]
                + ([("end of the read-only phase", read_end)] if read_end is not None else [])
            ),
            f"Ramp: {args.step:.0f} s per step (above {args.agents} agents they share the {args.agents} grants). "
            f"Saturation: {saturation}.",
            "\n".join(ramp_rows),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.load.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20, help="agents in the steady phase (default 20)")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of the steady phase (default 600)")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of warm-up before it (default 30)")
    parser.add_argument("--seed", type=int, default=2000, help="memories in the vault before it (default 2,000)")
    parser.add_argument(
        "--ramp",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[5, 10, 20, 40, 60],
        help="agents per ramp step, comma-separated (default 5,10,20,40,60)",
    )
    parser.add_argument("--step", type=float, default=60.0, help="seconds per ramp step (default 60)")
    parser.add_argument(
        "--read-phase",
        type=float,
        default=300.0,
        help="seconds of a read-only phase after the steady one, to tell a leak from growth with the data "
        "(default 300; 0 skips it)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = parser.parse_args()
    if args.agents < 1 or args.duration <= 0 or any(n < 1 for n in args.ramp):
        parser.error("--agents, --duration and every --ramp step must be positive")
    if args.read_phase < 0:
        parser.error("--read-phase must be 0 (skip it) or more seconds")
    if args.agents > 30:
        parser.error("--agents must be at most 30: the gateway allows 30 client registrations an hour from one address")
    body = asyncio.run(run(args))
    print(body)
    if not args.no_write:
        default = len(sys.argv) == 1
        command = "make load" if default else f"python -m tests.load.run {' '.join(sys.argv[1:])}"
        load = os.getloadavg()
        report.write_section(
            "load", body + f"\n\nLoad average at the end: {load[0]:.1f} (the machine is shared).", command
        )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
