"""A ChatGPT export through the whole archive pipeline, until every message is searchable (issue 16).

    python -m tests.bench.archive_pipeline [--conversations 3000] [--messages 100000] [--runs plain,kill]

Starts gateway, mcp, vault and indexer as processes (the servers named by MEMVAULT_TEST_POSTGRES_DSN and
MEMVAULT_TEST_NATS_URL, or embedded ones), signs the owner in, makes a service token, and uploads a
generated export (tests/bench/archive_import_rss.py's generator: linear conversations, about 200
characters a message) with `memvault import chatgpt` (parts over /api/v1). It times the upload and import,
and the time until the indexer has reported every message indexed (through outbox, NATS and the
indexer's consumer), then:

- the bundled model alone, in a process of its own on the indexer's default 2 threads, on the very texts
  the indexer embedded (the feed's text of `--model-texts` messages spread over the export): texts/s,
  and the pipeline's messages/s as a share of it (goal: at least 80 %);
- the peak RSS of each service (VmHWM; the highest of each process a service ran as) beside its RSS
  once started, CPU seconds per process, and the load average; then the indexer's peak once it has been
  idle a while (its index build after the import included), and its RSS when started again on the same
  points and asked the same searches: what holding the data costs, apart from the import's own memory;
- a search for sampled messages over /api/v1 (each should come back first, in hybrid mode);
- the vector store against Postgres (the indexer stopped): one point per message, none missing or extra.

`kill` runs the same on a fresh stack, but SIGKILLs the vault once the import is half done (and starts it
again), then the indexer once half the messages are indexed (and starts it again). `--write` puts the
table into docs/benchmarks.md (section `archive-pipeline`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from memvault_devstack.layout import SERVICES
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from tests.bench import report
from tests.bench.ab import StackMeter
from tests.bench.archive_import_rss import write_export
from tests.e2e.archive_checks import (
    OWNER_ENV,
    PointCheck,
    found_first,
    owner_token,
    points_against_messages,
    progress,
    sample_messages,
    start_cli_import,
)

ROOT = Path(__file__).resolve().parents[2]

MODEL_SCRIPT = """
import json, sys, time
from memvault_indexer.embedder import EmbedderSettings, create_embedder
texts = json.load(open(sys.argv[1]))
embedder = create_embedder(EmbedderSettings())  # the indexer's defaults: the bundled model, 2 threads
embedder.embed(texts[:64])
start, cpu = time.perf_counter(), time.process_time()
embedder.embed(texts)
print(len(texts) / (time.perf_counter() - start), 1000 * (time.process_time() - cpu) / len(texts))
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Split:
    """A process's resident memory at its highest sample: all of it (VmRSS), anonymous and file-backed pages, MiB."""

    rss: float = 0.0
    anonymous: float = 0.0
    file: float = 0.0

    def __str__(self) -> str:
        return f"{self.rss:.0f} ({self.anonymous:.0f} / {self.file:.0f})"


def resident_split(pid: int | None) -> Split:
    """VmRSS with its anonymous (RssAnon) and file-backed (RssFile) parts now, in MiB."""
    fields = {}
    if pid is not None:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) / 1024
    return Split(
        fields.get("VmRSS", float("nan")), fields.get("RssAnon", float("nan")), fields.get("RssFile", float("nan"))
    )


def rss_mib(pid: int | None) -> float:
    """Resident memory now (VmRSS), in MiB."""
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Run:
    kill: bool
    messages: int = 0
    upload_import_seconds: float = 0.0
    searchable_seconds: float = 0.0
    model_rate: float = 0.0
    model_cpu_ms: float = 0.0
    model_texts: int = 0
    started_rss: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, float] = field(default_factory=dict)
    settled_peak_rss: float = 0.0
    import_split: Split = field(default_factory=Split)
    """The indexer at its highest RSS sampled (each second) until searchable."""
    settled_split: Split = field(default_factory=Split)
    """The indexer at its highest RSS sampled while it went idle and built its index."""
    restarted_split: Split = field(default_factory=Split)
    restarted_rss: float = 0.0
    restarted_peak_rss: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    points: PointCheck = field(default_factory=PointCheck)
    cli: str = ""

    @property
    def rate(self) -> float:
        return self.messages / self.searchable_seconds

    @property
    def share(self) -> float:
        return self.rate / self.model_rate


class ServiceCpu(StackMeter):
    """StackMeter that survives a killed service: a process's CPU is read just before it is killed, and its
    successor counts from its start. (Postgres counts the backends alive at the end, so it misses those
    of a killed vault.)"""

    def __init__(self, stack: Stack, database: str) -> None:
        super().__init__(stack, database)
        self.stack = stack
        self._spent: dict[str, float] = {}

    def before_kill(self, name: str) -> None:
        spent = report.cpu_seconds(self.pids[name]) - self._before.get(name, 0.0)
        self._spent[name] = self._spent.get(name, 0.0) + spent

    def after_restart(self, name: str) -> None:
        pid = self.stack.process(name).pid
        assert pid is not None
        self.pids[name], self._before[name] = pid, 0.0

    def stop(self) -> None:
        super().stop()
        for name, spent in self._spent.items():
            self.used[name] += spent


class Peaks:
    """The highest VmHWM of each service over every process it ran as (a killed one is read just before)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.peak: dict[str, float] = {}
        self.indexer = Split()
        """The indexer's anonymous and file-backed memory at its highest sampled RSS (VmHWM has no such split)."""

    def read(self, name: str) -> None:
        with contextlib.suppress(OSError, KeyError):  # (a process that just ended)
            pid = self.stack.process(name).pid
            self.peak[name] = max(self.peak.get(name, 0.0), report.peak_rss_mib(pid))
            if name == "indexer":
                now = resident_split(pid)
                if now.rss > self.indexer.rss:
                    self.indexer = now

    def read_all(self) -> None:
        for name in self.stack.services:
            self.read(name)


def model_alone(texts: list[str]) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    try:
        out = subprocess.run(
            [sys.executable, "-c", MODEL_SCRIPT, handle.name], capture_output=True, text=True, check=True, cwd=ROOT
        )
    finally:
        os.unlink(handle.name)
    rate, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(rate), float(cpu)


async def indexed_texts(dsn: str, count: int) -> list[str]:
    """The texts the indexer embedded (date, context and text, as its feed gives them) of `count` messages."""
    from memvault_vault.database import Database
    from memvault_vault.index_feed.store import IndexFeedStore

    ids = [message_id for message_id, _ in await sample_messages(dsn, count)]
    database = await Database.connect(dsn, 1, 2)
    try:
        return [d.content for d in await IndexFeedStore(database).message_documents(ids)]
    finally:
        await database.close()


async def kill_and_restart(stack: Stack, peaks: Peaks, meter: ServiceCpu, name: str, run: Run, why: str) -> None:
    peaks.read(name)
    meter.before_kill(name)
    await asyncio.to_thread(stack.stop_service, name, kill=True)
    run.kills.append(f"{name} SIGKILLed {why}")
    await asyncio.to_thread(stack.restart, name)
    meter.after_restart(name)


async def pipeline(
    stack: Stack, database: str, path: Path, expected: int, run: Run, args: argparse.Namespace
) -> tuple[str, str]:
    """Import the export and wait until every message is searchable; returns the owner's (token, vault)."""
    token, vault = await owner_token(stack)
    peaks = Peaks(stack)
    run.started_rss = {name: rss_mib(stack.process(name).pid) for name in stack.services}
    meter = ServiceCpu(stack, database)
    run.loads.append(load())
    meter.start()
    start = time.perf_counter()
    connection = await asyncpg.connect(stack.postgres_dsn)
    cli = await start_cli_import(stack, path, token, vault)
    cli_out = asyncio.ensure_future(cli.communicate())
    vault_killed = indexer_killed = not run.kill
    while True:
        now = await progress(connection)
        if not vault_killed and now.total and now.done >= now.total // 2 and now.state == "running":
            vault_killed = True
            await kill_and_restart(
                stack, peaks, meter, "vault", run, f"at {now.done} of {now.total} conversations imported"
            )
        if not indexer_killed and now.indexed >= expected // 2:
            indexer_killed = True
            await kill_and_restart(
                stack, peaks, meter, "indexer", run, f"at {now.indexed:,} of {expected:,} messages indexed"
            )
        if cli_out.done() and not run.upload_import_seconds:
            run.upload_import_seconds = time.perf_counter() - start
        if now.index_failed:
            raise SystemExit(f"{now.index_failed} messages failed to index")
        if now.indexed >= expected and vault_killed and indexer_killed:
            break
        if time.perf_counter() - start > args.deadline:
            raise SystemExit(f"not searchable within {args.deadline:.0f} s: {now}")
        if len(run.loads) < 2 and time.perf_counter() - start > 60:
            run.loads.append(load())
        peaks.read_all()
        await asyncio.sleep(1.0)
    run.searchable_seconds = time.perf_counter() - start
    meter.stop()
    run.loads.append(load())
    peaks.read_all()
    out, err = await cli_out
    if cli.returncode != 0:
        raise SystemExit(f"memvault import failed: {err.decode()[-2000:]}")
    run.upload_import_seconds = run.upload_import_seconds or run.searchable_seconds
    run.cli = out.decode().strip().splitlines()[0]
    run.peak_rss, run.cpu, run.import_split = peaks.peak, meter.used, peaks.indexer
    final = await progress(connection)
    await connection.close()
    run.counts = {k: getattr(final, k) for k in ("state", "total", "imported", "updated", "duplicates", "failed")}
    run.search = await found_first(stack, token, vault, await sample_messages(stack.postgres_dsn, args.searches))
    return token, vault


async def index_built(stack: Stack, searchable_at: float, deadline: float) -> Peaks:
    """Wait until the indexer has been idle long enough to build its index after the import and that build
    is over (no copy of the shard being optimized), sampling its memory each second meanwhile."""
    from memvault_indexer.edge_store import OPTIMIZING_SUFFIX
    from memvault_indexer.indexing import OPTIMIZE_WHEN_IDLE_SECONDS

    peaks = Peaks(stack)
    qdrant = stack.data_dir / "qdrant"
    while True:
        peaks.read("indexer")
        idle_long_enough = time.monotonic() - searchable_at > OPTIMIZE_WHEN_IDLE_SECONDS + 5.0
        if idle_long_enough and not any(qdrant.glob(f"*{OPTIMIZING_SUFFIX}")):
            return peaks
        if time.monotonic() - searchable_at > deadline:
            raise SystemExit(f"the indexer's index build was not over {deadline:.0f} s after the import")
        await asyncio.sleep(1.0)


async def restarted_indexer(
    stack: Stack, owner: tuple[str, str], run: Run, args: argparse.Namespace, settled: Peaks
) -> None:
    """The indexer started again on the same points, after searches that read them: what holding the
    data costs, apart from the import's own memory (RSS now and its peak since the restart). First the
    peak of the indexer that ran the import, up to now: it includes the index build once writes paused."""
    run.settled_peak_rss = report.peak_rss_mib(stack.process("indexer").pid)
    run.settled_split = settled.indexer
    await asyncio.to_thread(stack.stop_service, "indexer")
    await asyncio.to_thread(stack.restart, "indexer")
    await found_first(stack, *owner, await sample_messages(stack.postgres_dsn, args.searches))
    pid = stack.process("indexer").pid
    run.restarted_rss, run.restarted_peak_rss = rss_mib(pid), report.peak_rss_mib(pid)
    run.restarted_split = resident_split(pid)


async def one_run(path: Path, conversations: int, messages: int, kill: bool, args: argparse.Namespace) -> Run:
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_archpipe_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    data_dir = ROOT / "build" / "bench" / f"archive-pipeline-{secrets.token_hex(3)}"
    stack = Stack(
        data_dir,
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=SERVICES,
        log_level="WARNING",
        service_env={"gateway": OWNER_ENV},
        env={"MEMVAULT_GATEWAY__UPSTREAM_TIMEOUT_SECONDS": "300"},
    )
    run = Run(kill=kill, messages=messages)
    try:
        await asyncio.to_thread(stack.start)
        owner = await pipeline(stack, database, path, messages, run, args)
        searchable_at = time.monotonic()
        texts = await indexed_texts(stack.postgres_dsn, min(args.model_texts, messages))
        run.model_texts = len(texts)
        run.loads.append(load())
        run.model_rate, run.model_cpu_ms = await asyncio.to_thread(model_alone, texts)
        settled = await index_built(stack, searchable_at, args.deadline)
        await restarted_indexer(stack, owner, run, args, settled)
        await asyncio.to_thread(stack.stop_service, "indexer")
        run.points = await points_against_messages(stack)
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(data_dir, ignore_errors=True)
    label = "kill run" if kill else "run"
    print(
        f"{label}: {conversations:,} conversations, {messages:,} messages: upload and import {run.upload_import_seconds:.1f} s, "
        f"searchable after {run.searchable_seconds:.1f} s = {run.rate:.0f} messages/s; the model alone "
        f"{run.model_rate:.0f} texts/s on {run.model_texts:,} of the same texts: {run.share:.0%}; CPU ms per message "
        f"{1000 * sum(run.cpu.values()) / run.messages:.1f} ({run.cpu}), the model alone {run.model_cpu_ms:.1f}; load {' → '.join(run.loads)}; "
        f"{'; '.join(run.kills) or 'no kills'}; {run.points}; search {run.search}; counts {run.counts}; "
        f"peak RSS {run.peak_rss}; started {run.started_rss}; indexer peak after the index build "
        f"{run.settled_peak_rss:.0f} MiB; indexer restarted on the same points: RSS "
        f"{run.restarted_rss:.0f} MiB, peak {run.restarted_peak_rss:.0f} MiB; the indexer's RSS (anonymous / file-backed) "
        f"at its highest sample until searchable {run.import_split}, while its index was built {run.settled_split}, "
        f"restarted {run.restarted_split} MiB",
        flush=True,
    )
    return run


def table(runs: list[Run], conversations: int, messages: int, size_mb: float) -> str:
    lines = [
        f"A generated ChatGPT export of {conversations:,} conversations and {messages:,} messages ({size_mb:.1f} MB) "
        "uploaded with `memvault import chatgpt` (parts over /api/v1), imported by the vault's job, and indexed "
        "through outbox, NATS and the indexer until the vault has every message's index report. The model alone: "
        "the bundled model in a process of its own on the indexer's 2 threads, on the texts the indexer embedded "
        "(date, context and text) of the messages named, right after the run on the same host.",
        "",
        "| run | load average (start → during → end → model) | upload + import s | until searchable s | messages/s"
        " | model alone texts/s (texts) | share of the model | CPU ms per message: pipeline, model alone"
        " | points: messages / points / missing / extra / stale | search: first of | import counts |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for run in runs:
        points = run.points
        lines.append(
            f"| {'killed half-way: ' + ', '.join(run.kills) if run.kill else 'plain'} | {' → '.join(run.loads)}"
            f" | {run.upload_import_seconds:.1f} | {run.searchable_seconds:.1f} | {run.rate:.0f}"
            f" | {run.model_rate:.0f} ({run.model_texts:,}) | **{run.share:.0%}**"
            f" | {1000 * sum(run.cpu.values()) / run.messages:.1f}, {run.model_cpu_ms:.1f}"
            f" | {points.messages:,} / {points.points:,} / {len(points.missing)} / {len(points.extra)} / {len(points.stale)}"
            f" | {run.search.get('first')} of {run.search.get('asked')} ({', '.join(run.search.get('modes', []))})"
            f" | {run.counts.get('imported')} new, {run.counts.get('updated')} updated,"
            f" {run.counts.get('duplicates')} unchanged, {run.counts.get('failed')} failed of {run.counts.get('total')} |"
        )
    names = [n for n in SERVICES]
    lines += [
        "",
        "| run | "
        + " | ".join(f"{n} RSS started → peak MiB" for n in names)
        + " | indexer peak until idle and the index built MiB"
        + " | indexer restarted on the same points, after searches: RSS (peak) MiB |",
        "|---|" + "---:|" * (len(names) + 2),
    ]
    for run in runs:
        cells = [f"{run.started_rss.get(n, 0):.0f} → {run.peak_rss.get(n, 0):.0f}" for n in names]
        cells.append(f"{run.settled_peak_rss:.0f}")
        cells.append(f"{run.restarted_rss:.0f} ({run.restarted_peak_rss:.0f})")
        lines.append(f"| {'kill' if run.kill else 'plain'} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| run | indexer RSS (anonymous / file-backed) at its highest sample until searchable MiB"
        " | at its highest sample while idle and the index built MiB | restarted on the same points MiB |",
        "|---|---:|---:|---:|",
    ]
    for run in runs:
        lines.append(
            f"| {'kill' if run.kill else 'plain'} | {run.import_split} | {run.settled_split} | {run.restarted_split} |"
        )
    lines += ["", report.cpu_header("CPU ms per message, until searchable")]
    for run in runs:
        lines.append(report.cpu_row("kill" if run.kill else "plain", run.cpu, run.messages))
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "conversations.json"
        write_export(path, args.conversations, args.messages, "chatgpt")
        size_mb = path.stat().st_size / 1e6
        for name in args.runs.split(","):
            runs.append(await one_run(path, args.conversations, args.messages, name == "kill", args))
    body = table(runs, args.conversations, args.messages, size_mb)
    print(body)
    failed = [r for r in runs if not r.points.exactly_once]
    if args.write:
        command = (
            f"python -m tests.bench.archive_pipeline --conversations {args.conversations} --messages {args.messages}"
            f" --runs {args.runs} --model-texts {args.model_texts} --searches {args.searches} --write"
        )
        report.write_section("archive-pipeline", body, command)
    if failed:
        raise SystemExit(f"not every message exactly once in the vector store: {[str(r.points) for r in failed]}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.archive_pipeline", description=__doc__)
    parser.add_argument("--conversations", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", default="plain,kill", help="comma-separated: plain, kill (default both)")
    parser.add_argument("--model-texts", type=int, default=10_000, help="texts the model alone embeds (10,000)")
    parser.add_argument("--searches", type=int, default=20, help="sampled messages searched for (20)")
    parser.add_argument("--deadline", type=float, default=7200.0, help="seconds a run may take until searchable")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()
    if not set(args.runs.split(",")) <= {"plain", "kill"}:
        parser.error("--runs takes plain and/or kill")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
