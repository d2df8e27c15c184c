"""Where an import's time goes: `bulk_remember` over MCP until searchable, each service sampled by py-spy.

    python -m tests.bench.profile_import --imports 3000 --out build/profile

Starts the stack of this checkout, seeds a vault, then imports while `py-spy record` samples every
service process (all threads, idle ones too, `--idle`), and prints per service the share of
samples in its busiest frames, by where they run (inclusive) and by the innermost frame of this
project or a library (self). The raw collapsed stacks stay in `--out` for a closer look
(`py-spy` is a PyPI package: `pip install py-spy`; it needs permission to read other processes).

`--statements N` also lists the N statements of the vault's database that took the most time while
sampled, from `pg_stat_statements` (the server must preload it: `shared_preload_libraries`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from memvault_devstack.layout import SERVICES
from memvault_devstack.postgres import create_database, drop_database, psql
from memvault_devstack.stack import Stack
from tests.bench import corpus
from tests.bench.ab import StackMeter
from tests.bench.run import bulk_remember_all, until_indexed
from tests.e2e.e2e_helpers import mcp_session

ROOT = Path(__file__).resolve().parents[2]


def summarise(path: Path, top: int, wall: bool) -> str:
    """Top frames by inclusive samples, from py-spy's collapsed output (`frame;frame;... count`)."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        if not wall and frames and "(idle)" in frames[-1]:
            continue
        total += count
        for frame in dict.fromkeys(_short(f) for f in frames[1:]):
            inclusive[frame] += count
        own[_short(frames[-1])] += count
    lines = [f"{total} samples"]
    lines += [f"  {100 * n / total:5.1f}% incl  {frame}" for frame, n in inclusive.most_common(top)]
    lines += [f"  {100 * n / total:5.1f}% self  {frame}" for frame, n in own.most_common(top)]
    return "\n".join(lines)


def _short(frame: str) -> str:
    # "function (path/to/module.py:123)" -> "function (module.py)"
    name, _, where = frame.partition(" (")
    return f"{name} ({Path(where.rstrip(')').rsplit(':', 1)[0]).name})" if where else name


def reset_statements(server: str | None) -> None:
    if server is None:
        raise SystemExit("--statements needs MEMVAULT_TEST_POSTGRES_DSN (a server preloading pg_stat_statements)")
    psql(server, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()")


def statements(server: str | None, database: str, top: int) -> str:
    """The database's statements by total time: calls, total and mean ms, rows per call, the text."""
    assert server is not None
    return psql(
        server,
        "SELECT calls, round(total_exec_time::numeric, 1), round((total_exec_time / calls)::numeric, 3),"
        " round(rows::numeric / calls, 1), left(regexp_replace(query, '\\s+', ' ', 'g'), 160)"
        " FROM pg_stat_statements JOIN pg_database d ON d.oid = dbid WHERE d.datname = :'database'"
        " ORDER BY total_exec_time DESC LIMIT :top",
        variables={"database": database, "top": str(int(top))},
    )


async def main_async(args: argparse.Namespace) -> None:
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_profile_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(
        ROOT / "build" / "bench" / f"profile-{secrets.token_hex(3)}",
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=SERVICES,
        log_level="WARNING",
    )
    args.out.mkdir(parents=True, exist_ok=True)
    py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if py_spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    try:
        await asyncio.to_thread(stack.start)
        texts = corpus.memories(args.seed + args.imports, seed=11)
        async with mcp_session(stack.mcp_url) as client:
            await bulk_remember_all(client, texts[: args.seed])
            await until_indexed(stack, args.seed)
            recorders = {
                name: subprocess.Popen(  # noqa: ASYNC220 - started once, before the timed part
                    [
                        py_spy,
                        "record",
                        "--threads",
                        "--format",
                        "raw",
                        "--rate",
                        "200",
                        "--nonblocking",
                        "-p",
                        str(stack.process(name).pid),
                        "-o",
                        str(args.out / f"{name}.txt"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for name in ("vault", "indexer", "mcp", "gateway")
            }
            await asyncio.sleep(1.0)
            if args.statements:
                reset_statements(server)
            meter = StackMeter(stack, database)
            meter.start()
            start = time.perf_counter()
            await bulk_remember_all(client, texts[args.seed :])  # IN_FLIGHT calls at a time, as importers do
            imported = time.perf_counter() - start
            await until_indexed(stack, len(texts))
            searchable = time.perf_counter() - start
            meter.stop()
            for recorder in recorders.values():
                recorder.send_signal(signal.SIGINT)
            for recorder in recorders.values():
                recorder.wait(timeout=60)
        print(
            f"{args.imports} memories: calls {imported:.1f} s, searchable after {searchable:.1f} s "
            f"({args.imports / searchable:.0f}/s); CPU ms per memory: "
            + ", ".join(f"{k} {1000 * v / args.imports:.2f}" for k, v in meter.used.items())
        )
        if args.statements:
            print(
                f"\n== postgres (top {args.statements} statements by time)\n{statements(server, database, args.statements)}"
            )
        for name in recorders:
            path = args.out / f"{name}.txt"
            if path.exists():
                print(f"\n== {name} (busy samples)\n{summarise(path, args.top, wall=False)}")
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(stack.data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profile_import", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1000, help="memories in the vault first (1,000)")
    parser.add_argument("--imports", type=int, default=3000, help="memories imported while sampled (3,000)")
    parser.add_argument("--top", type=int, default=25, help="frames listed per service")
    parser.add_argument("--statements", type=int, default=0, help="list this many top statements (pg_stat_statements)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "profile", help="where the raw stacks go")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
