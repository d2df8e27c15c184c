"""Archive search's keyword statement of an earlier commit against this checkout's, on the data
`tests.bench.archive_search --keep DIR` left: in the same run, one connection, the two statements taking
turns query by query, each query run twice and timed the second time. The plans are the generic ones
(as asyncpg's prepared statements get after five calls), JIT and synchronized scans are off, as on the
vault's connections.

"Before" is `archive/keyword_sql.py` as `--before` (a commit, default HEAD) has it, run with that
module's own budgets; "after" is this checkout's module. The last column counts the queries whose 50
candidates are the same messages in both (a sampled common word may differ by design).

    .venv/bin/python -m tests.bench.archive_search_sql DIR [--before COMMIT] [--queries 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import time
import types
from pathlib import Path
from typing import Any

import asyncpg

from memvault_vault.archive import keyword_sql
from tests.bench import report
from tests.bench.archive_corpus import Generator

ROOT = Path(__file__).resolve().parents[2]
MODULE = "services/vault/src/memvault_vault/archive/keyword_sql.py"
TIMEOUT_SECONDS = 30
"""A statement still running after this is cancelled and counted as this long."""


def module_at(commit: str) -> types.ModuleType:
    """keyword_sql as `commit` has it (its source run in a module of its own)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:{MODULE}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType(f"keyword_sql_{commit}")
    exec(compile(source, f"{commit}:{MODULE}", "exec"), module.__dict__)  # noqa: S102 - our own file, from git
    return module


def params(module: Any) -> tuple[Any, ...]:
    """The statement's parameters after $5, as the vault passes them for this version of the module."""
    budgets = (module.FULL_RANK_BUDGET, module.COMMON_WORD_SAMPLE)
    return (*budgets, module.DENSE_SHARE) if hasattr(module, "DENSE_SHARE") else budgets


async def main_async(args: argparse.Namespace) -> None:
    server = os.environ["MEMVAULT_TEST_POSTGRES_DSN"].rsplit("/", 1)[0]
    database = (Path(args.dir) / "database").read_text().strip()
    conn = await asyncpg.connect(f"{server}/{database}")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute("SET jit = off")
    await conn.execute("SET synchronize_seqscans = off")
    await conn.execute(f"SET statement_timeout = '{TIMEOUT_SECONDS}s'")
    vault = await conn.fetchval("SELECT id FROM vault WHERE name = 'default'")
    versions = {"before": module_at(args.before), "after": keyword_sql}
    queries = Generator(seed=99).queries(args.queries)
    print(f"load average before: {os.getloadavg()}; before = {args.before}, after = this checkout")
    print("| query kind | keyword before ms, p50 / p95 | keyword after ms, p50 / p95 | same 50 candidates |")
    print("|---|---|---|---|")
    for kind, texts in queries.items():
        times: dict[str, list[float]] = {name: [] for name in versions}
        same = 0
        for text in texts[: args.queries]:
            found: dict[str, list[str]] = {}
            for name, module in versions.items():
                for attempt in (0, 1):
                    started = time.perf_counter()
                    try:
                        rows = await conn.fetch(module.KEYWORD_CANDIDATES, vault, text, [], [], 50, *params(module))
                    except asyncpg.QueryCanceledError:
                        times[name].append(float(TIMEOUT_SECONDS))
                        rows = []
                        break
                    if attempt:
                        times[name].append(time.perf_counter() - started)
                found[name] = sorted(r["id"] for r in rows)
            same += found["before"] == found["after"]
        cells = [
            f"{report.percentile(times[n], 50) * 1000:.1f} / {report.percentile(times[n], 95) * 1000:.1f}"
            for n in versions
        ]
        print(f"| {kind} | " + " | ".join(cells) + f" | {same} of {len(texts[: args.queries])} |", flush=True)
    print(f"load average after: {os.getloadavg()}")
    await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.archive_search_sql", description=__doc__)
    parser.add_argument("dir", help="the --keep directory of tests.bench.archive_search")
    parser.add_argument("--before", default="HEAD", help="the commit whose keyword_sql.py is 'before' (HEAD)")
    parser.add_argument("--queries", type=int, default=10, help="queries of each kind (10)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
