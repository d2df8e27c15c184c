"""Measurements to markdown: percentiles, the machine, and sections of docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
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
