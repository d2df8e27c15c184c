"""Measurements to markdown: percentiles, the machine, and sections of docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def latency_row(name: str, seconds: Sequence[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"| {name} | {len(ms)} | {percentile(ms, 50):.1f} | {percentile(ms, 95):.1f} | {percentile(ms, 99):.1f} "
        f"| {statistics.fmean(ms):.1f} | {len(ms) / sum(seconds):.0f} |"
    )


LATENCY_HEADER = (
    "| operation | calls | p50 ms | p95 ms | p99 ms | mean ms | calls/s (one client) |\n|---|---|---|---|---|---|---|"
)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(
            next(row for row in Path("/proc/meminfo").read_text().splitlines() if row.startswith("MemTotal")).split()[1]
        )
        memory = f", {kib / 1024 / 1024:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{os.cpu_count()} cores ({cpu}){memory}, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def peak_rss_mib(pid: int | None) -> float:
    """Peak resident memory of a live process (VmHWM), in MiB."""
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of the times in /proc/<pid>/stat


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a live process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def postgres_cpu_seconds() -> float:
    """CPU time of every process named postgres on this machine (server and backends)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    total += cpu_seconds(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
    return total


class CpuMeter:
    """CPU time used by named processes, Postgres and this process between `start` and `stop`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._before: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _read(self) -> dict[str, float]:
        now = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        now["postgres"] = postgres_cpu_seconds()
        now["benchmark client"] = time.process_time()
        return now

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> None:
        after = self._read()
        self.used = {name: after[name] - self._before[name] for name in after}


CPU_NAMES = ("gateway", "mcp", "vault", "indexer", "postgres", "benchmark client")


def cpu_header(unit: str) -> str:
    return f"| {unit} | " + " | ".join(CPU_NAMES) + " | all |\n|---|" + "---|" * (len(CPU_NAMES) + 1)


def cpu_row(name: str, used: dict[str, float], per: int) -> str:
    """Milliseconds of CPU per call (or per memory) by process."""
    cells = [f"{1000 * used[n] / per:.1f}" if n in used else "–" for n in CPU_NAMES]
    return f"| {name} | " + " | ".join(cells) + f" | {1000 * sum(used.values()) / per:.1f} |"


def git_revision() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_section(name: str, body: str, command: str) -> None:
    """Replace (or append) the section `name` of docs/benchmarks.md."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    block = (
        f"<!-- bench:{name} -->\n"
        f"_Measured {stamp} on {machine()}, commit {git_revision()}, with `{command}`._\n\n"
        f"{body.strip()}\n"
        f"<!-- /bench:{name} -->"
    )
    text = BENCHMARKS.read_text() if BENCHMARKS.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    BENCHMARKS.write_text(text)
