"""`make bench`: latency and throughput over MCP and gRPC, written into docs/benchmarks.md.

Starts the services as processes (embedded Postgres and NATS, or the servers named by
MEMVAULT_TEST_POSTGRES_DSN / MEMVAULT_TEST_NATS_URL), fills one vault through MCP, then
times each operation over MCP (through the gateway) beside the same work done in this
process straight against the vault (gRPC) and the database (SQL), so the cost of the
hops is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from memvault_indexer.indexing import OPTIMIZE_WHEN_IDLE_SECONDS
from memvault_indexer.store import OPTIMIZING_SUFFIX
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.domain.memory import RECALLABLE_BY_DEFAULT
from memvault_vault.recall.store import RecallStore
from tests.bench import corpus, report
from tests.e2e.e2e_helpers import call, mcp_session, vault_stats

ROOT = Path(__file__).resolve().parents[2]


async def timed(samples: list[float], action: Callable[[], Awaitable[object]]) -> None:
    start = time.perf_counter()
    await action()
    samples.append(time.perf_counter() - start)


async def foundation(stack: Stack, size: int, calls: int) -> str:
    texts = corpus.memories(size + calls)
    seed, fresh = texts[:size], texts[size:]
    queries = corpus.queries(calls)
    async with mcp_session(stack.mcp_url) as client:
        start = time.perf_counter()
        await bulk_remember_all(client, seed)
        seeding = time.perf_counter() - start
        await analyze(stack)
        remember: list[float] = []
        for text in fresh:
            await timed(remember, lambda text=text: call(client, "remember", content=text))  # type: ignore[misc]
        recall: list[float] = []
        for query in queries:
            await timed(recall, lambda query=query: call(client, "recall", query=query))  # type: ignore[misc]

    signer = IdentitySigner(stack.identity_secret)
    channel = client_channel(stack.vault_address)
    stub = vault_pb2_grpc.VaultServiceStub(channel)
    grpc_recall: list[float] = []
    for query in queries:
        metadata = ((GRPC_METADATA_KEY, signer.sign(Identity(subject="owner", scopes=frozenset(SCOPES)))),)
        await timed(
            grpc_recall,
            lambda query=query, metadata=metadata: stub.Recall(vpb.RecallRequest(query=query), metadata=metadata),  # type: ignore[misc]
        )
    await channel.close()

    database = await Database.connect(stack.postgres_dsn, 1, 2)
    store = RecallStore(database)
    vault = await AccountStore(database).vault_of("owner", "default")
    assert vault is not None
    sql_recall: list[float] = []

    async def keyword_recall(query: str) -> None:  # the vault's two queries: search, then read the page
        found = await store.keyword_search(
            vault, query, statuses=RECALLABLE_BY_DEFAULT, types=(), tags=(), limit=11, offset=0
        )
        await store.recall_page(vault, [f.id for f in found[:10]])

    for query in queries:
        await timed(sql_recall, lambda query=query: keyword_recall(query))  # type: ignore[misc]
    await database.close()

    rss = {name: report.peak_rss_mib(stack.process(name).pid) for name in stack.services}
    lines = [
        f"One vault holding {size:,} memories (seeded through `bulk_remember` over MCP in "
        f"{seeding:.1f} s: {size / seeding:,.0f} memories/s). One client, calls in sequence.",
        "",
        report.LATENCY_HEADER,
        report.latency_row("remember over MCP (gateway → mcp → vault)", remember),
        report.latency_row("recall over MCP (gateway → mcp → vault), keyword", recall),
        report.latency_row("recall over gRPC straight to vault (baseline)", grpc_recall),
        report.latency_row("keyword search SQL in-process (baseline)", sql_recall),
        "",
        "| service | peak RSS MiB |",
        "|---|---|",
        *(f"| {name} | {mib:.0f} |" for name, mib in rss.items()),
    ]
    return "\n".join(lines)


async def analyze(stack: Stack) -> None:
    """Refresh the planner's statistics after a bulk load, as autovacuum does within a minute or so.
    The Postgres on these machines runs with autovacuum off, and without statistics the planner
    treats a 100,000-row table as empty."""
    connection = await asyncpg.connect(stack.postgres_dsn)
    try:
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


PER_CALL = 500
IN_FLIGHT = 2
"""`bulk_remember` calls an import keeps in flight: while the vault writes one, the indexer already
embeds the next one's texts for its duplicate check, so neither waits for the other."""


async def bulk_remember_all(
    client: Any, texts: list[str], *, per_call: int = PER_CALL, in_flight: int = IN_FLIGHT, **arguments: Any
) -> list[dict[str, Any]]:
    """`texts` through `bulk_remember`, `per_call` a call, `in_flight` calls at a time; the answers in order."""
    slots = asyncio.Semaphore(in_flight)

    async def one(offset: int) -> dict[str, Any]:
        async with slots:
            items = [{"content": t} for t in texts[offset : offset + per_call]]
            return await call(client, "bulk_remember", items=items, **arguments)

    return list(await asyncio.gather(*(one(offset) for offset in range(0, len(texts), per_call))))


async def import_memories(client: Any, texts: list[str]) -> float:
    start = time.perf_counter()
    await bulk_remember_all(client, texts)
    return time.perf_counter() - start


async def import_until_searchable(
    stack: Stack, client: Any, texts: list[str], expected: int
) -> tuple[float, float, dict[str, float]]:
    """Seconds from the first `bulk_remember` of `texts` until `expected` memories are searchable,
    seconds the import calls alone took, and the CPU seconds each process used meanwhile."""
    meter = cpu_meter(stack)
    meter.start()
    start = time.perf_counter()
    imported = await import_memories(client, texts)
    await until_indexed(stack, expected)
    searchable = time.perf_counter() - start
    meter.stop()
    return searchable, imported, meter.used


def cpu_meter(stack: Stack) -> report.CpuMeter:
    return report.CpuMeter({name: pid for name in stack.services if (pid := stack.process(name).pid) is not None})


POLL_SECONDS = 0.25
TAIL_POLL_SECONDS = 0.02
TAIL = 1000


async def until_indexed(stack: Stack, expected: int, deadline: float = 3600) -> None:
    """Wait until the vault has `expected` memories indexed and none pending. It asks every 0.25 s, and every
    20 ms once fewer than 1,000 are left (an import's last two calls), so that an import's time until
    searchable is not rounded up by up to a quarter of a second (3 % of a 2,000-memory import at 270
    memories/s), without asking 50 times a second all along."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        stats = await vault_stats(stack)
        if stats.indexed >= expected and stats.index_pending == 0:
            return
        if stats.index_failed:
            raise RuntimeError(f"{stats.index_failed} memories failed to index: {stats.recent_failures}")
        left = max(expected - stats.indexed, stats.index_pending)
        await asyncio.sleep(TAIL_POLL_SECONDS if left < TAIL else POLL_SECONDS)
    raise TimeoutError(f"not indexed within {deadline:.0f}s")


async def until_vector_index_built(stack: Stack) -> None:
    """Wait out the embedded store's index build once writes pause, so recall is timed as it runs
    from then on: the indexer starts it OPTIMIZE_WHEN_IDLE_SECONDS after its last write (if enough
    points are new), on a copy of the shard (OPTIMIZING_SUFFIX), until it swaps it in."""
    start = time.monotonic()
    seen = False
    while True:
        building = any((stack.data_dir / "qdrant").glob(f"*{OPTIMIZING_SUFFIX}"))
        seen = seen or building
        if not building and (seen or time.monotonic() - start > OPTIMIZE_WHEN_IDLE_SECONDS + 10):
            return
        await asyncio.sleep(0.5)


async def recall_latencies(
    stack: Stack, calls: int, seed: int
) -> tuple[list[float], list[float], str, dict[str, dict[str, float]]]:
    """Recall over MCP (through the gateway) and over gRPC straight to the vault; the mode answered;
    and the CPU seconds each process used on either path.

    Each path gets its own queries: the indexer keeps recent embeddings, so a query asked twice
    would be cheaper the second time."""
    queries = corpus.queries(calls, seed=seed)
    over_mcp: list[float] = []
    modes: list[str] = []
    meters = {"MCP": cpu_meter(stack), "gRPC": cpu_meter(stack)}
    async with mcp_session(stack.mcp_url) as client:
        meters["MCP"].start()
        for query in queries:
            start = time.perf_counter()
            modes.append((await call(client, "recall", query=query))["mode"])
            over_mcp.append(time.perf_counter() - start)
        meters["MCP"].stop()
    mode = ", ".join(f"{m} {modes.count(m)}/{len(modes)}" for m in sorted(set(modes)))
    signer = IdentitySigner(stack.identity_secret)
    channel = client_channel(stack.vault_address)
    stub = vault_pb2_grpc.VaultServiceStub(channel)
    over_grpc: list[float] = []
    meters["gRPC"].start()
    for query in corpus.queries(calls, seed=seed + 1):
        # Signed per call, as the mcp service does: the identity lives two minutes.
        metadata = ((GRPC_METADATA_KEY, signer.sign(Identity(subject="owner", scopes=frozenset(SCOPES)))),)
        await timed(
            over_grpc,
            lambda query=query, metadata=metadata: stub.Recall(vpb.RecallRequest(query=query), metadata=metadata),
        )  # type: ignore[misc]
    meters["gRPC"].stop()
    await channel.close()
    return over_mcp, over_grpc, mode, {path: meter.used for path, meter in meters.items()}


async def in_process_recall(stack: Stack, queries: list[str]) -> dict[str, list[float]]:
    """The same work without service hops: embed, vector search and full-text search in this process."""
    from memvault_indexer.embedder import OnnxMiniLMEmbedder
    from memvault_indexer.store import EdgeVectorStore

    embedder = OnnxMiniLMEmbedder(threads=1)
    store = EdgeVectorStore(stack.data_dir / "qdrant", model=embedder.name, dimension=embedder.dimension)
    await store.ensure_collection()
    database = await Database.connect(stack.postgres_dsn, 1, 2)
    vault = await AccountStore(database).vault_of("owner", "default")
    assert vault is not None
    connection = await asyncpg.connect(stack.postgres_dsn)
    vault_id = await connection.fetchval("SELECT id::text FROM vault WHERE name = 'default'")
    await connection.close()
    samples: dict[str, list[float]] = {"embed": [], "vector search": [], "full-text search": [], "total": []}
    for query in queries:
        start = time.perf_counter()
        vector = embedder.embed([query])[0]
        embedded = time.perf_counter()
        await store.search(vector, vault_id, 50)
        searched = time.perf_counter()
        await RecallStore(database).keyword_search(
            vault, query, statuses=RECALLABLE_BY_DEFAULT, types=(), tags=(), limit=50, offset=0
        )
        done = time.perf_counter()
        samples["embed"].append(embedded - start)
        samples["vector search"].append(searched - embedded)
        samples["full-text search"].append(done - searched)
        samples["total"].append(done - start)
    await store.close()
    await database.close()
    return samples


async def reindex_seconds(stack: Stack) -> tuple[float, dict[str, float]]:
    """`memvault-indexer reindex` against a freshly started indexer (its embedding cache empty): every
    memory embedded again from Postgres, upserted, and the embedded Qdrant's index rebuilt. Seconds,
    and the CPU seconds each process used."""
    await asyncio.to_thread(stack.stop_service, "indexer")
    await asyncio.to_thread(stack.start_services)
    meter = cpu_meter(stack)
    meter.start()
    start = time.perf_counter()
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "memvault_indexer", "reindex", "--address", stack.indexer_address],
        env=stack.env_for("indexer"),
        capture_output=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    meter.stop()
    return seconds, meter.used


async def indexing(stack: Stack, calls: int, sizes: tuple[int, int, int]) -> str:
    first, throughput_size, total = sizes
    texts = corpus.memories(total)
    queries = corpus.queries(calls, seed=27)  # for the in-process run, which embeds without a cache
    rows: list[str] = []
    async with mcp_session(stack.mcp_url) as client:
        await import_memories(client, texts[:first])
        await until_indexed(stack, first)
    await analyze(stack)
    await until_vector_index_built(stack)
    mcp_small, grpc_small, mode, cpu_small = await recall_latencies(stack, calls, seed=23)
    rows += [
        report.latency_row(f"recall over MCP, {first:,} memories ({mode})", mcp_small),
        report.latency_row(f"recall over gRPC to vault, {first:,} memories", grpc_small),
    ]
    reindexed, cpu_reindex = await reindex_seconds(stack)
    async with mcp_session(stack.mcp_url) as client:
        searchable, imported, cpu_import = await import_until_searchable(
            stack, client, texts[first : first + throughput_size], first + throughput_size
        )
        await import_memories(client, texts[first + throughput_size :])
        await until_indexed(stack, total)
    await analyze(stack)
    await until_vector_index_built(stack)
    mcp_big, grpc_big, mode, cpu_big = await recall_latencies(stack, calls, seed=25)
    rows += [
        report.latency_row(f"recall over MCP, {total:,} memories ({mode})", mcp_big),
        report.latency_row(f"recall over gRPC to vault, {total:,} memories", grpc_big),
    ]
    rss = {name: report.peak_rss_mib(stack.process(name).pid) for name in stack.services}
    await asyncio.to_thread(stack.stop_service, "indexer")  # it owns the embedded store; now this process may open it
    local = await in_process_recall(stack, queries)
    rows += [report.latency_row(f"in-process at {total:,}: {name}", samples) for name, samples in local.items()]
    lines = [
        f"Index throughput: {throughput_size:,} memories through `bulk_remember` over MCP until every one is "
        f"searchable: {searchable:.1f} s, **{throughput_size / searchable:,.0f} memories/s** "
        f"(the import calls alone took {imported:.1f} s). Bundled all-MiniLM-L6-v2 int8 on the indexer's default 2 embedding threads, "
        "Qdrant Edge.",
        "",
        f"The indexer alone: `memvault-indexer reindex` of the {first:,} memories, with its embedding cache "
        f"empty, took {reindexed:.1f} s: **{first / reindexed:,.0f} memories/s** embedded, upserted and "
        "indexed (HNSW) from Postgres.",
        "",
        f"Recall: {calls} queries per row, drawn afresh for each row (so no query's embedding comes from the "
        "indexer's cache), one client, calls in sequence. Over MCP = gateway → mcp → vault → indexer; over "
        "gRPC = vault → indexer; in-process = the same embedding, vector search (top 50) and full-text search "
        "(top 50) in the benchmark process, without any service hop.",
        "",
        report.LATENCY_HEADER,
        *rows,
        "",
        "| service | peak RSS MiB |",
        "|---|---|",
        *(f"| {name} | {mib:.0f} |" for name, mib in rss.items()),
        "",
        "Where the two cores go: CPU milliseconds each process used, per recall and per memory indexed "
        "(Postgres = every postgres process of the machine).",
        "",
        report.cpu_header("CPU ms per recall / per memory"),
        report.cpu_row(f"recall over MCP, {first:,} memories", cpu_small["MCP"], calls),
        report.cpu_row(f"recall over gRPC to vault, {first:,} memories", cpu_small["gRPC"], calls),
        report.cpu_row(f"recall over MCP, {total:,} memories", cpu_big["MCP"], calls),
        report.cpu_row(f"recall over gRPC to vault, {total:,} memories", cpu_big["gRPC"], calls),
        report.cpu_row(
            f"`bulk_remember` until searchable, per memory ({throughput_size:,})", cpu_import, throughput_size
        ),
        report.cpu_row(f"`reindex`, per memory ({first:,})", cpu_reindex, first),
    ]
    return "\n".join(lines)


async def throughput(stack: Stack, seed: int, count: int) -> str:
    """Index throughput alone, in a minute or two: `count` memories through `bulk_remember` until
    searchable, into a vault of `seed` memories. For comparing two versions of the code, run
    alternately; printed, not written to docs/benchmarks.md."""
    texts = corpus.memories(seed + count)
    async with mcp_session(stack.mcp_url) as client:
        await import_memories(client, texts[:seed])
        await until_indexed(stack, seed)
        searchable, imported, used = await import_until_searchable(stack, client, texts[seed:], seed + count)
    return (
        f"{count:,} memories into a vault of {seed:,}: searchable after {searchable:.1f} s, "
        f"{count / searchable:,.0f} memories/s (the import calls alone took {imported:.1f} s)\n\n"
        f"{report.cpu_header('CPU ms per memory')}\n{report.cpu_row('bulk_remember until searchable', used, count)}"
    )


def embedding(count: int = 2000) -> str:
    """The bundled embedder alone, in this process: texts/s for a bulk, and one query, by thread count."""
    from memvault_indexer.embedder import BUNDLED_BATCH_SIZE, BUNDLED_BATCH_TOKENS, OnnxMiniLMEmbedder

    texts = corpus.memories(count, seed=5)
    queries = corpus.queries(200, seed=29)
    rows = []
    for threads in (1, 2):
        embedder = OnnxMiniLMEmbedder(threads=threads)
        embedder.embed(texts[:64])  # load and warm up
        start = time.perf_counter()
        embedder.embed(texts)
        rate = count / (time.perf_counter() - start)
        single: list[float] = []
        for query in queries:
            began = time.perf_counter()
            embedder.embed([query])
            single.append(time.perf_counter() - began)
        rows.append(
            f"| {threads} | {rate:,.0f} | {report.percentile(single, 50) * 1000:.1f} | "
            f"{report.percentile(single, 95) * 1000:.1f} |"
        )
    return "\n".join(
        [
            f"Bundled all-MiniLM-L6-v2 (int8 ONNX) in one process, nothing else running: {count:,} memory texts "
            f"in one call (runs of at most {BUNDLED_BATCH_SIZE} texts and {BUNDLED_BATCH_TOKENS} tokens, sorted by tokens, "
            "side by side on `threads` threads), and 200 "
            "single queries.",
            "",
            "| threads | bulk texts/s | query p50 ms | query p95 ms |",
            "|---|---|---|---|",
            *rows,
        ]
    )


async def main_async(args: argparse.Namespace) -> None:
    if args.suite == "embedding":
        body = await asyncio.to_thread(embedding)
        print(body)
        report.write_section("embedding", body, "python -m tests.bench.run embedding")
        return
    data_dir = ROOT / "build" / "bench" / secrets.token_hex(3)
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_bench_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    services = ("vault", "mcp", "gateway") if args.suite == "foundation" else ("vault", "indexer", "mcp", "gateway")
    stack = Stack(
        data_dir,
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=services,
        log_level="WARNING",
    )
    try:
        await asyncio.to_thread(stack.start)
        if args.suite == "foundation":
            body = await foundation(stack, args.memories, args.calls)
        elif args.suite == "throughput":
            body = await throughput(stack, args.memories, args.throughput_memories)
        else:
            body = await indexing(stack, args.calls, (args.memories, args.throughput_memories, args.large_memories))
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(body)
    if args.suite == "throughput":
        return
    command = "make bench" if args.default_sizes else f"python -m tests.bench.run {' '.join(sys.argv[1:])}"
    report.write_section(args.suite, body, command)
    print(f"\nwritten to {report.BENCHMARKS.relative_to(ROOT)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.run", description=__doc__)
    parser.add_argument(
        "suite", choices=["foundation", "indexing", "embedding", "throughput"], help="which benchmark to run"
    )
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the vault (default 10,000)")
    parser.add_argument(
        "--throughput-memories", type=int, default=20_000, help="indexing and throughput: memories timed (20,000)"
    )
    parser.add_argument("--large-memories", type=int, default=100_000, help="indexing: the large vault (100,000)")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per operation (default 300)")
    args = parser.parse_args()
    args.default_sizes = len(sys.argv) == 2
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
