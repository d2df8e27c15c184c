"""Bytes on disk per memory, by component: a `make run`-like stack (embedded Postgres and NATS with the
devstack's settings) fills a vault through `bulk_remember`, waits until every memory is indexed,
checkpoints, and measures each part of its data dir.

    python -m tests.bench.disk --memories 10000
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import sys
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_helpers import mcp_session, vault_stats  # noqa: E402

from memvault_devstack.stack import Stack  # noqa: E402
from memvault_indexer.store import OPTIMIZING_SUFFIX  # noqa: E402
from tests.bench import corpus, report  # noqa: E402

MIB = 1024 * 1024


def tree_bytes(path: Path) -> int:
    """Bytes the files under `path` take on disk (allocated blocks, as `du` counts)."""
    total = 0
    for entry in path.rglob("*"):
        try:
            if entry.is_file() and not entry.is_symlink():
                total += entry.stat().st_blocks * 512
        except OSError:
            continue
    return total


async def fill(stack: Stack, count: int) -> float:
    texts = corpus.memories(count, seed=23)
    started = time.monotonic()
    async with mcp_session(stack.mcp_url) as client:
        for offset in range(0, count, 500):
            result = await client.call_tool(
                "bulk_remember", {"items": [{"content": text} for text in texts[offset : offset + 500]]}
            )
            if result.is_error:
                raise SystemExit(f"bulk_remember failed: {result.content}")
            print(f"\rimported {min(offset + 500, count)}/{count}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        stats = await vault_stats(stack)
        print(f"\rindexed {stats.indexed}/{count}", end="", file=sys.stderr, flush=True)
        if stats.indexed >= count and stats.index_pending == 0:
            break
        await asyncio.sleep(2)
    print(file=sys.stderr)
    return time.monotonic() - started


TABLES = """
SELECT c.relname AS name,
       pg_relation_size(c.oid, 'main') + pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm') AS heap,
       coalesce(pg_total_relation_size(c.reltoastrelid), 0) AS toast,
       pg_indexes_size(c.oid) AS indexes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = 'public'
ORDER BY pg_total_relation_size(c.oid) DESC
"""


async def settled_store(stack: Stack, deadline: float = 600.0) -> str:
    """Wait until the vector store holds one copy: the indexer optimizes a copy of its shard once it
    is idle (`<collection>.optimizing`, then `.retired`), which doubles it for a while. A note on
    what was waited for."""
    qdrant = stack.data_dir / "qdrant"
    started = time.monotonic()
    last, stable = -1, 0
    while time.monotonic() - started < deadline:
        transient = [p.name for p in qdrant.iterdir() if p.name.endswith((OPTIMIZING_SUFFIX, ".retired"))]
        size = tree_bytes(qdrant)
        stable = stable + 1 if not transient and size == last else 0
        if stable >= 3:
            return f"the vector store settled (no optimize copy, size unchanged for 15 s) {time.monotonic() - started:.0f} s after indexing"
        last = size
        await asyncio.sleep(5)
    return f"the vector store had not settled {deadline:.0f} s after indexing"


async def measure(stack: Stack, count: int) -> str:
    conn = await asyncpg.connect(stack.postgres_dsn)
    try:
        await conn.execute("CHECKPOINT")
        tables = await conn.fetch(TABLES)
        index_rows = await conn.fetch(
            "SELECT indexrelname AS name, relname AS tab, pg_relation_size(indexrelid) AS size "
            "FROM pg_stat_user_indexes ORDER BY pg_relation_size(indexrelid) DESC LIMIT 8"
        )
        settings = await conn.fetch(
            "SELECT name, setting, unit FROM pg_settings WHERE name IN ('max_wal_size', 'min_wal_size', "
            "'wal_compression') ORDER BY name"
        )
    finally:
        await conn.close()
    data = stack.data_dir
    postgres_dir = tree_bytes(data / "postgres")
    wal = tree_bytes(data / "postgres" / "pg_wal")
    heap = sum(int(r["heap"]) for r in tables)
    toast = sum(int(r["toast"]) for r in tables)
    indexes = sum(int(r["indexes"]) for r in tables)
    other = postgres_dir - wal - heap - toast - indexes
    qdrant = tree_bytes(data / "qdrant")
    nats = tree_bytes(data / "nats")
    total = postgres_dir + qdrant + nats

    def row(name: str, size: int) -> str:
        return f"| {name} | {size / MIB:.1f} | {size / count:,.0f} |"

    lines = [
        f"{count:,} memories (generated facts of 40-120 characters), every one indexed, after a CHECKPOINT. "
        "Postgres settings: " + ", ".join(f"{r['name']}={r['setting']}{r['unit'] or ''}" for r in settings) + ".",
        "",
        "| component | MiB | bytes per memory |",
        "|---|---|---|",
        row("Postgres tables (heap)", heap),
        row("Postgres TOAST", toast),
        row("Postgres indexes", indexes),
        row("Postgres WAL (pg_wal)", wal),
        row("Postgres other (catalogs, xact, config)", other),
        row("vector store (qdrant/)", qdrant),
        row("NATS JetStream store", nats),
        row("**whole data dir**", total),
        "",
        "Largest tables (heap + TOAST + indexes, bytes per memory):",
        "",
        "| table | heap | TOAST | indexes |",
        "|---|---|---|---|",
    ]
    for r in tables[:8]:
        lines.append(
            f"| {r['name']} | {int(r['heap']) / count:,.0f} | {int(r['toast']) / count:,.0f} "
            f"| {int(r['indexes']) / count:,.0f} |"
        )
    parts: dict[str, int] = {}
    for entry in (data / "qdrant").rglob("*"):
        if entry.is_file() and not entry.is_symlink():
            relative = entry.relative_to(data / "qdrant").parts
            if relative[1:2] == ("segments",) and len(relative) > 3:
                key = "segments/" + relative[3].split(".")[0]
            else:
                key = "/".join(relative[1:2]) or relative[0]
            parts[key] = parts.get(key, 0) + entry.stat().st_blocks * 512
    lines += ["", "Vector store by part (MiB):", "", "| part | MiB |", "|---|---|"]
    for name, size in sorted(parts.items(), key=lambda item: -item[1])[:8]:
        lines.append(f"| {name} | {size / MIB:.1f} |")
    lines += ["", "Largest indexes (bytes per memory):", "", "| index | table | bytes per memory |", "|---|---|---|"]
    for r in index_rows:
        lines.append(f"| {r['name']} | {r['tab']} | {int(r['size']) / count:,.0f} |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> str:
    data_dir = ROOT / "build" / "disk" / secrets.token_hex(3)
    stack = Stack(data_dir, log_level="WARNING")
    await asyncio.to_thread(stack.start)
    try:
        took = await fill(stack, args.memories)
        settled = await settled_store(stack)
        body = await measure(stack, args.memories)
    finally:
        await asyncio.to_thread(stack.stop)
        shutil.rmtree(data_dir, ignore_errors=True)
    return body + f"\n\nImport and indexing took {took:.0f} s; then {settled}."


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.disk", description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000, help="memories to store (default 10,000)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = parser.parse_args()
    if args.memories < 500:
        parser.error("--memories must be at least 500")
    body = asyncio.run(main_async(args))
    print(body)
    if not args.no_write:
        report.write_section("disk", body, f"python -m tests.bench.disk {' '.join(sys.argv[1:])}".strip())


if __name__ == "__main__":
    main()
