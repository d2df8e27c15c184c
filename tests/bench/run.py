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
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from memvault_vault.domain.memory import RECALLABLE_BY_DEFAULT
from memvault_vault.store import Store
from tests.bench import corpus, report
from tests.e2e.e2e_helpers import call, mcp_session

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
        for offset in range(0, size, 500):
            await call(client, "bulk_remember", items=[{"content": t} for t in seed[offset : offset + 500]])
        seeding = time.perf_counter() - start
        remember: list[float] = []
        for text in fresh:
            await timed(remember, lambda text=text: call(client, "remember", content=text))  # type: ignore[misc]
        recall: list[float] = []
        for query in queries:
            await timed(recall, lambda query=query: call(client, "recall", query=query))  # type: ignore[misc]

    signer = IdentitySigner(stack.identity_secret)
    metadata = ((GRPC_METADATA_KEY, signer.sign(Identity(subject="owner", scopes=frozenset(SCOPES)))),)
    channel = client_channel(stack.vault_address)
    stub = vault_pb2_grpc.VaultServiceStub(channel)
    grpc_recall: list[float] = []
    for query in queries:
        await timed(
            grpc_recall,
            lambda query=query: stub.Recall(vpb.RecallRequest(query=query), metadata=metadata),  # type: ignore[misc]
        )
    await channel.close()

    store = await Store.connect(stack.postgres_dsn, 1, 2)
    vault = await store.vault_of("owner", "default")
    assert vault is not None
    sql_recall: list[float] = []
    for query in queries:
        await timed(
            sql_recall,
            lambda query=query: store.keyword_search(  # type: ignore[misc]
                vault, query, statuses=RECALLABLE_BY_DEFAULT, types=(), tags=(), limit=11, offset=0
            ),
        )
    await store.close()

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


async def main_async(args: argparse.Namespace) -> None:
    data_dir = ROOT / "build" / "bench" / secrets.token_hex(3)
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_bench_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(
        data_dir,
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=args.services.split(","),
        log_level="WARNING",
    )
    try:
        await asyncio.to_thread(stack.start)
        body = await foundation(stack, args.memories, args.calls)
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(body)
    report.write_section("foundation", body, "make bench")
    print(f"\nwritten to {report.BENCHMARKS.relative_to(ROOT)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.run", description=__doc__)
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the vault (default 10,000)")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per operation (default 300)")
    parser.add_argument("--services", default="vault,mcp,gateway", help="services to start")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
