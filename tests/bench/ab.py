"""Two checkouts of memvault, measured alternately on the same host: import throughput and recall.

    python -m tests.bench.ab --before ../base --after . --rounds 4

Each checkout runs its own services (its `.venv/bin/memvault-*`), on a database and NATS namespace of
its own, both stacks up side by side. Each round:

1. for `before` and `after` in turn (the order swaps every round, so neither always runs on a warmer
   or cooler machine): the bundled model alone, in a process of its own, on the indexer's default
   2 threads, embedding in one call the very texts the import then brings (texts/s and CPU per text:
   the yardstick the import is compared with, taken right before it); then `--imports` memories through `bulk_remember` over MCP, 500 per call, one client
   (`--in-flight` calls at a time, default 2, as memvault's own importers send them),
   until every one is searchable (memories/s, and CPU milliseconds per memory by process); then a
   wait until the indexer has built its vector index after the burst, so that no build runs during
   the next measurement, of either stack;
2. `--recalls` recalls over MCP to both stacks, call by call (the same query to each, which goes
   first alternating), so both see the same load: p50 and p95, and CPU milliseconds per recall by
   process (fresh queries each round, so none is in an indexer's cache).

Machines here are shared, so absolute times drift between rounds; the ratio after / before in each
round is what to read. Postgres CPU counts only the backends of each stack's own database.

`--before-env` and `--after-env` (KEY=VALUE, repeatable) add environment to one side's services, so a
setting can be compared within one checkout: `--before . --before-env OTEL_TRACES_SAMPLER=always_on`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault_devstack.layout import SERVICES
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from tests.bench import corpus, report
from tests.bench.run import IN_FLIGHT, bulk_remember_all, until_indexed, until_vector_index_built
from tests.e2e.e2e_helpers import call, mcp_session

ROOT = Path(__file__).resolve().parents[2]
PER_CALL = 500
CORPUS_SEED = 11

MODEL_SCRIPT = """
import sys, time
from memvault_indexer.embedder import OnnxMiniLMEmbedder
from tests.bench import corpus
texts = corpus.memories(int(sys.argv[2]), seed=int(sys.argv[3]))[int(sys.argv[1]):]
embedder = OnnxMiniLMEmbedder(threads=2)
embedder.embed(texts[:64])
start, cpu = time.perf_counter(), time.process_time()
embedder.embed(texts)
print(len(texts) / (time.perf_counter() - start), 1000 * (time.process_time() - cpu) / len(texts))
"""


def backend_cpu_seconds(database: str) -> float:
    """CPU time of the Postgres backends connected to `database` (their command line names it)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            words = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split()
            if database in words:
                total += report.cpu_seconds(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return total


class StackMeter:
    """CPU seconds of one stack's service processes, its database's backends and this process."""

    def __init__(self, stack: Stack, database: str) -> None:
        self.pids = {name: pid for name in stack.services if (pid := stack.process(name).pid) is not None}
        self.database = database
        self._before: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _read(self) -> dict[str, float]:
        now = {name: report.cpu_seconds(pid) for name, pid in self.pids.items()}
        now["postgres"] = backend_cpu_seconds(self.database)
        now["benchmark client"] = time.process_time()
        return now

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> None:
        after = self._read()
        self.used = {name: after[name] - self._before[name] for name in after}


@dataclass
class Side:
    label: str
    checkout: Path
    stack: Stack
    database: str
    server: str | None
    imported: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


def side_commands(checkout: Path) -> dict[str, list[str]]:
    bin_dir = checkout / ".venv" / "bin"
    commands = {name: [str(bin_dir / f"memvault-{name}")] for name in SERVICES}
    for name, argv in commands.items():
        if not Path(argv[0]).exists():
            raise SystemExit(f"{argv[0]} is missing: run `make install` in {checkout} first ({name})")
    return commands


def model_alone(start: int, end: int, seed: int) -> tuple[float, float]:
    """The bundled model alone in a fresh process (2 threads), like `python -m tests.bench.run embedding`,
    embedding `corpus.memories(end, seed)[start:]` in one call: texts/s, and CPU milliseconds per text."""
    out = subprocess.run(
        [sys.executable, "-c", MODEL_SCRIPT, str(start), str(end), str(seed)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    rate, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(rate), float(cpu)


async def measure_import(side: Side, round_no: int, args: argparse.Namespace) -> dict[str, Any]:
    """The model alone, then this round's import until searchable, then the wait for the index build."""
    stack = side.stack
    row: dict[str, Any] = {"round": round_no}
    # Each side imports the same texts in the same round, distinct from every earlier round's; the model
    # alone embeds those very texts first (same lengths, same padding).
    start, end = args.seed + args.imports * round_no, args.seed + args.imports * (round_no + 1)
    row["model"], row["model_cpu"] = await asyncio.to_thread(model_alone, start, end, CORPUS_SEED)
    texts = corpus.memories(end, seed=CORPUS_SEED)[start:end]
    meter = StackMeter(stack, side.database)
    async with mcp_session(stack.mcp_url) as client:
        meter.start()
        start = time.perf_counter()
        exact_only = 0
        in_flight = asyncio.Semaphore(args.in_flight)

        async def one_call(offset: int) -> None:
            nonlocal exact_only
            async with in_flight:
                answer = await call(
                    client, "bulk_remember", items=[{"content": t} for t in texts[offset : offset + PER_CALL]]
                )
            exact_only += answer.get("duplicate_check") == "exact-only"

        await asyncio.gather(*(one_call(offset) for offset in range(0, len(texts), PER_CALL)))
        imported = time.perf_counter() - start
        side.imported += len(texts)
        await until_indexed(stack, side.imported)
        searchable = time.perf_counter() - start
        meter.stop()
    row["import_rate"] = len(texts) / searchable
    row["import_calls_seconds"] = imported
    row["exact_only_calls"] = exact_only
    row["import_cpu"] = {k: 1000 * v / len(texts) for k, v in meter.used.items()}
    await until_vector_index_built(stack)
    side.rows.append(row)
    print(
        f"round {round_no} {side.label}: model {row['model']:.0f} texts/s, import {row['import_rate']:.0f} "
        f"memories/s ({row['import_rate'] / row['model']:.0%} of the model; CPU "
        f"{sum(row['import_cpu'].values()):.1f} ms/memory, the model alone {row['model_cpu']:.1f} ms/text; "
        f"{exact_only} of {len(texts) // PER_CALL} calls checked exact-only because the indexer missed its deadline)",
        flush=True,
    )
    return row


async def measure_recall(sides: list[Side], round_no: int, args: argparse.Namespace) -> None:
    """The same queries to both stacks, call by call (which one goes first alternates), so both see the
    same load; CPU per recall by process of each stack (the benchmark client serves both, so it is left out)."""
    queries = corpus.queries(args.recalls, seed=1000 + round_no)
    samples: dict[str, list[float]] = {side.label: [] for side in sides}
    modes: dict[str, set[str]] = {side.label: set() for side in sides}
    meters = {side.label: StackMeter(side.stack, side.database) for side in sides}
    async with mcp_session(sides[0].stack.mcp_url) as first, mcp_session(sides[1].stack.mcp_url) as second:
        clients = {sides[0].label: first, sides[1].label: second}
        for side in sides:
            await call(clients[side.label], "recall", query="warm up")
        for meter in meters.values():
            meter.start()
        for number, query in enumerate(queries):
            for side in sides if number % 2 == 0 else sides[::-1]:
                began = time.perf_counter()
                modes[side.label].add((await call(clients[side.label], "recall", query=query))["mode"])
                samples[side.label].append(time.perf_counter() - began)
        for meter in meters.values():
            meter.stop()
    for side in sides:
        row = side.rows[-1]
        used = {k: v for k, v in meters[side.label].used.items() if k != "benchmark client"}
        row["recall_p50"] = 1000 * report.percentile(samples[side.label], 50)
        row["recall_p95"] = 1000 * report.percentile(samples[side.label], 95)
        row["recall_modes"] = sorted(modes[side.label])
        row["recall_cpu"] = {k: 1000 * v / len(queries) for k, v in used.items()}
        print(
            f"round {round_no} {side.label}: recall p50 {row['recall_p50']:.1f} p95 {row['recall_p95']:.1f} ms "
            f"({'/'.join(row['recall_modes'])}; CPU {sum(row['recall_cpu'].values()):.1f} ms/recall)",
            flush=True,
        )


async def seed(side: Side, args: argparse.Namespace) -> None:
    texts = corpus.memories(args.seed, seed=CORPUS_SEED)
    async with mcp_session(side.stack.mcp_url) as client:
        await bulk_remember_all(client, texts)
    side.imported = len(texts)
    await until_indexed(side.stack, side.imported)
    await until_vector_index_built(side.stack)


def env_pair(text: str) -> tuple[str, str]:
    """`KEY=VALUE` of --before-env and --after-env."""
    key, equals, value = text.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"take KEY=VALUE, not {text!r}")
    return key, value


def make_side(label: str, checkout: Path, env: list[tuple[str, str]]) -> Side:
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_ab_{label}_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(
        ROOT / "build" / "bench" / f"ab-{label}-{secrets.token_hex(3)}",
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=SERVICES,
        log_level="WARNING",
        commands=side_commands(checkout),
        # A shared, busy machine can take longer than the default 10 s (50 s for an import) per call.
        env={
            "MEMVAULT_MCP__CALL_TIMEOUT_SECONDS": "60",
            "MEMVAULT_GATEWAY__UPSTREAM_TIMEOUT_SECONDS": "300",
            **dict(env),
        },
    )
    return Side(label, checkout, stack, database, server)


def ratio_line(name: str, before: list[float], after: list[float], unit: str, digits: int = 0) -> str:
    ratios = [a / b for a, b in zip(after, before, strict=True) if b]
    cells = ", ".join(f"{b:.{digits}f} → {a:.{digits}f}" for b, a in zip(before, after, strict=True))
    return f"| {name} | {cells} {unit} | {statistics.median(ratios):.2f} |"


def summary(before: Side, after: Side, args: argparse.Namespace) -> str:
    def column(side: Side, key: str) -> list[float]:
        return [float(r[key]) for r in side.rows]

    def cpu(side: Side, key: str) -> list[float]:
        return [sum(r[key].values()) for r in side.rows]

    def share(side: Side) -> list[float]:
        return [100 * r["import_rate"] / r["model"] for r in side.rows]

    def cpu_share(side: Side) -> list[float]:
        return [100 * r["model_cpu"] / sum(r["import_cpu"].values()) for r in side.rows]

    lines = [
        f"{len(before.rows)} rounds, before = {args.before_name}, after = {args.after_name}; each round imports "
        f"{args.imports:,} memories (500 per `bulk_remember`, {args.in_flight} call(s) in flight) into a vault of {args.seed:,} or more, then "
        f"{args.recalls} recalls over MCP. Per round, before → after; ratio = median of after / before.",
        "",
        "| measure | per round | ratio |",
        "|---|---|---|",
        ratio_line("bundled model alone, texts/s", column(before, "model"), column(after, "model"), ""),
        ratio_line(
            "import until searchable, memories/s", column(before, "import_rate"), column(after, "import_rate"), ""
        ),
        ratio_line("import as % of the model's texts/s", share(before), share(after), "%"),
        ratio_line(
            "CPU per memory imported, all processes, ms", cpu(before, "import_cpu"), cpu(after, "import_cpu"), "", 1
        ),
        ratio_line("recall over MCP p50, ms", column(before, "recall_p50"), column(after, "recall_p50"), "", 1),
        ratio_line("recall over MCP p95, ms", column(before, "recall_p95"), column(after, "recall_p95"), "", 1),
        ratio_line(
            "CPU per recall, all processes but the client, ms",
            cpu(before, "recall_cpu"),
            cpu(after, "recall_cpu"),
            "",
            1,
        ),
        "",
        "CPU ms per memory imported / per recall, by process, mean over the rounds:",
        "",
        report.cpu_header("process"),
    ]
    for side in (before, after):
        for key, what in (("import_cpu", "per memory imported"), ("recall_cpu", "per recall")):
            mean = {n: statistics.fmean(r[key][n] for r in side.rows) for n in side.rows[0][key]}
            lines.append(report.cpu_row(f"{side.label}, {what}", {n: v / 1000 for n, v in mean.items()}, 1))
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    sides = [
        make_side("before", args.before.resolve(), args.before_env),
        make_side("after", args.after.resolve(), args.after_env),
    ]
    try:
        for side in sides:
            await asyncio.to_thread(side.stack.start)
        await asyncio.gather(*(seed(side, args) for side in sides))
        deadline = time.monotonic() + args.max_minutes * 60
        for round_no in range(args.rounds):
            order = sides if round_no % 2 == 0 else sides[::-1]
            for side in order:
                await measure_import(side, round_no, args)
            await measure_recall(sides, round_no, args)
            if time.monotonic() > deadline and round_no + 1 < args.rounds:
                print(f"stopping after {round_no + 1} rounds: --max-minutes {args.max_minutes} reached", flush=True)
                break
    finally:
        for side in sides:
            await asyncio.to_thread(side.stack.stop)
            if side.server:
                drop_database(side.server, side.database)
            shutil.rmtree(side.stack.data_dir, ignore_errors=True)
    rounds = min(len(s.rows) for s in sides)
    for side in sides:
        del side.rows[rounds:]
    body = summary(sides[0], sides[1], args)
    print()
    print(body)
    if args.out:
        args.out.write_text(body + "\n")


def git_name(checkout: Path) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(checkout)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the code before (with its .venv)")
    parser.add_argument("--after", type=Path, default=ROOT, help="checkout of the code after (default this one)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, each measuring both (default 4)")
    parser.add_argument("--seed", type=int, default=1000, help="memories each vault starts with (default 1,000)")
    parser.add_argument("--imports", type=int, default=3000, help="memories imported per measurement (3,000)")
    parser.add_argument("--recalls", type=int, default=200, help="recalls per measurement (default 200)")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=IN_FLIGHT,
        help=f"bulk_remember calls the import keeps in flight (default {IN_FLIGHT})",
    )
    parser.add_argument("--max-minutes", type=float, default=30, help="start no new round after this long")
    parser.add_argument("--out", type=Path, help="also write the summary table to this file")
    for side in ("before", "after"):
        parser.add_argument(
            f"--{side}-env",
            action="append",
            default=[],
            type=env_pair,
            metavar="KEY=VALUE",
            help=f"environment of the {side} services",
        )
    args = parser.parse_args()
    args.before_name = " ".join([git_name(args.before), *(f"{k}={v}" for k, v in args.before_env)])
    args.after_name = " ".join([git_name(args.after), *(f"{k}={v}" for k, v in args.after_env)])
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
