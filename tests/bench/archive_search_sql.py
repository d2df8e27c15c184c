"""Archive search's keyword statement of an earlier commit against this checkout's, on the data
`tests.bench.archive_search --keep DIR` left: in the same run, one connection, the two statements taking
turns query by query, each query run twice and timed the second time. The plans are the generic ones
(as asyncpg's prepared statements get after five calls), JIT and synchronized scans are off, as on the
vault's connections.

"Before" is `archive/keyword_sql.py` as `--before` (a commit, default HEAD) has it, run with that
module's own budgets; "after" is this checkout's module. The last column counts the queries whose 50
candidates are the same messages in both (a sampled common word may differ by design).

    .venv/bin/python -m tests.bench.archive_search_sql DIR [--before COMMIT] [--queries 10]

With `--read-ahead 1,64` it times instead each query's FIRST run (this checkout's statement), the
queries of a fresh `--query-seed` taking the given `effective_io_concurrency` values in turn, and counts
the pages each read into Postgres's buffers (EXPLAIN ANALYZE, BUFFERS, TIMING OFF): what a query no
earlier run asked costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


async def first_runs(conn: asyncpg.Connection, vault: Any, args: argparse.Namespace) -> None:
    """Each query's first run, the read-ahead settings taking turns query by query."""
    arms = [int(a) for a in args.read_ahead.split(",")]
    literal = "'{}'"
    await conn.execute(
        "PREPARE keyword (uuid, text, text[], text[], int, int, int, float8) AS " + keyword_sql.KEYWORD_CANDIDATES
    )

    def execute(text: str) -> str:
        quoted = "'" + text.replace("'", "''") + "'"
        return f"EXECUTE keyword ('{vault}', {quoted}, {literal}, {literal}, 50, {', '.join(map(str, params(keyword_sql)))})"

    for _ in range(6):  # the generic plan, as the vault's pooled statements get
        await conn.fetch(execute("the plan"))
    queries = Generator(seed=args.query_seed).queries(args.queries)
    print(f"load average before: {os.getloadavg()}; query seed {args.query_seed}")
    print("| query kind | effective_io_concurrency | queries | first run ms, p50 / p95 / max | pages read, mean |")
    print("|---|---|---|---|---|")
    for kind, texts in queries.items():
        times: dict[int, list[float]] = {arm: [] for arm in arms}
        reads: dict[int, list[int]] = {arm: [] for arm in arms}
        for n, text in enumerate(texts[: args.queries]):
            arm = arms[n % len(arms)]
            await conn.execute(f"SET effective_io_concurrency = {arm}")
            plan = json.loads(
                await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) " + execute(text))
            )
            times[arm].append(plan[0]["Execution Time"] / 1000)
            reads[arm].append(plan[0]["Plan"]["Shared Read Blocks"])
        for arm in arms:
            ms = [f"{report.percentile(times[arm], q) * 1000:.1f}" for q in (50, 95, 100)]
            print(
                f"| {kind} | {arm} | {len(times[arm])} | {' / '.join(ms)} | {sum(reads[arm]) / len(reads[arm]):,.0f} |"
            )
    print(f"load average after: {os.getloadavg()}")


async def main_async(args: argparse.Namespace) -> None:
    server = os.environ["MEMVAULT_TEST_POSTGRES_DSN"].rsplit("/", 1)[0]
    database = (Path(args.dir) / "database").read_text().strip()
    conn = await asyncpg.connect(f"{server}/{database}")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute("SET jit = off")
    await conn.execute("SET synchronize_seqscans = off")
    await conn.execute(f"SET statement_timeout = '{TIMEOUT_SECONDS}s'")
    vault = await conn.fetchval("SELECT id FROM vault WHERE name = 'default'")
    if args.read_ahead:
        await first_runs(conn, vault, args)
        await conn.close()
        return
    versions = {"before": module_at(args.before), "after": keyword_sql}
    queries = Generator(seed=args.query_seed).queries(args.queries)
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
    parser.add_argument(
        "--read-ahead",
        default="",
        help="time first runs instead, taking these effective_io_concurrency values in turn (e.g. 1,64)",
    )
    parser.add_argument("--query-seed", type=int, default=99, help="seed of the generated queries (99)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
