"""Archive search over 1,000,000 archived messages, timed over MCP (issue 16: p95 ≤ 60 ms).

    .venv/bin/python -m tests.bench.archive_search [--messages 1000000] [--real 10000] [--points 100000] [--keep DIR]

Needs MEMVAULT_TEST_POSTGRES_DSN (or `--embedded`: the stack's own Postgres, configured as `make run`
configures it) and MEMVAULT_TEST_NATS_URL. Starts vault, indexer, mcp and the
gateway (dev mode) as processes (the indexer with its embedded default store, Qdrant Edge), then seeds the owner's vault
straight into Postgres with COPY into the real tables (embedding a million texts through the indexer
would take most of an hour on two cores): generated conversations (tests/bench/archive_corpus.py),
one to three revisions each (appends; the head lists every message), the keyword document filled by
Postgres itself (the column is generated), every message marked indexed. The vector store gets `--points` points (100,000), written with the
indexer's own EdgeVectorStore while the indexer is stopped, then optimized (HNSW built) as the indexer
does: for one message in each of the first `--real` conversations (10,000) the model's embedding of the
text the indexer embeds (memvault_index_text); for the other messages of those conversations a
SYNTHETIC vector, its conversation's real embedding plus Gaussian noise, renormalised (cosine about
0.8 to it), so the points cluster by conversation as real ones do. Not a point for each of the
1,000,000: building the HNSW index of a million points takes Qdrant Edge far longer than this shared
2-core host had; the messages without a point count as indexed (as after a lost point), so the vault
never embeds their text while a search waits, and the indexer scores what it holds.

Then the official MCP client calls `archive_search` over HTTP with distinct queries of four kinds
(a common word, a rare word, three words, a question), each query once (so the indexer's query cache
never helps), and continues some searches with their cursor. Latency from sending the call to its
parsed result; CPU by process (Postgres: this database's backends only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from memvault_vault.domain.archive import message_hash, revision_hash
from tests.bench import report
from tests.bench.archive_corpus import Generator

ROOT = Path(__file__).resolve().parents[2]
GOAL_MS = 60.0
TAGS = ["work", "home", "health", "travel", "finance", "code", "garden", "family", "music", "cars"]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


async def seed_postgres(dsn: str, messages: int, conversations: int) -> tuple[str, float]:
    gen = Generator()
    conn = await asyncpg.connect(dsn)
    try:
        vault_id = str(await conn.fetchval("SELECT id FROM vault WHERE name = 'default'"))
        started = time.perf_counter()
        now = datetime.now(UTC)
        conv_rows: list[tuple[Any, ...]] = []
        rev_rows: list[tuple[Any, ...]] = []
        msg_rows: list[tuple[Any, ...]] = []
        rm_rows: list[tuple[Any, ...]] = []
        sizes = gen.conversation_sizes(conversations, messages)
        rng = gen.rng

        async def flush() -> None:
            await conn.copy_records_to_table(
                "archive_conversation",
                records=conv_rows,
                columns=["id", "vault_id", "title", "source", "external_id", "head_revision", "tags", "created_at",
                         "updated_at"],
            )  # fmt: skip
            await conn.copy_records_to_table(
                "archive_revision",
                records=rev_rows,
                columns=["vault_id", "conversation_id", "number", "parent", "kind", "message_count", "content_sha256",
                         "created_at"],
            )  # fmt: skip
            await conn.copy_records_to_table(
                "archive_message",
                records=msg_rows,
                columns=["id", "vault_id", "conversation_id", "node_id", "parent_node_id", "role", "content_type",
                         "text", "created_at", "content_hash", "context"],
            )  # fmt: skip
            await conn.copy_records_to_table(
                "archive_revision_message",
                records=rm_rows,
                columns=["vault_id", "conversation_id", "revision", "position", "message_id", "active"],
            )  # fmt: skip
            for rows in (conv_rows, rev_rows, msg_rows, rm_rows):
                rows.clear()

        # The keyword index is built once after the load (as fast as Postgres goes), then exactly as the
        # migrations define it.
        index_def = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'archive_message_search'")
        await conn.execute("DROP INDEX archive_message_search")
        for c, size in enumerate(sizes):
            conversation_id = uuid.uuid4()
            topic = gen.topic()
            start = now - timedelta(days=730) * (1 - c / len(sizes))
            heads = 1 if c % 10 < 7 else (2 if c % 10 < 9 else 3)
            tags = [TAGS[int(i)] for i in rng.choice(len(TAGS), size=int(rng.integers(0, 3)), replace=False)]
            entries: list[tuple[str, str | None, str]] = []
            previous = ""
            for n in range(size):
                role = "user" if n % 2 == 0 else "assistant"
                text = gen.message(topic, role)
                message_id = uuid.uuid4()
                node = f"n{n}"
                digest = message_hash(role, "text", text, None)
                msg_rows.append(
                    (message_id, vault_id, conversation_id, node, f"n{n - 1}" if n else None, role, "text", text,
                     start + timedelta(minutes=n), digest, previous[:4000])
                )  # fmt: skip
                entries.append((node, f"n{n - 1}" if n else None, digest))
                previous = text
                for revision in range(1, heads + 1):
                    if n < -(-size * revision // heads):
                        rm_rows.append((vault_id, conversation_id, revision, n, message_id, True))
            for revision in range(1, heads + 1):
                count = -(-size * revision // heads)
                rev_rows.append(
                    (vault_id, conversation_id, revision, revision - 1 if revision > 1 else None,
                     "import" if revision == 1 else "append", count,
                     revision_hash([(a, b, d, True) for a, b, d in entries[:count]]), start)
                )  # fmt: skip
            title = gen.title(topic[:3])
            conv_rows.append(
                (conversation_id, vault_id, title, "chatgpt", f"bench-{c}", heads, tags, start,
                 start + timedelta(minutes=size))
            )  # fmt: skip
            if len(msg_rows) >= 20_000:
                await flush()
                print(f"  {c + 1:,} conversations written", file=sys.stderr)
        await flush()
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute(index_def)
        model = "all-minilm-l6-v2"
        await conn.execute(
            "INSERT INTO archive_message_index (message_id, vault_id, content_hash, model, state)"
            " SELECT m.id, m.vault_id, md5(coalesce(memvault_index_text(m.text, coalesce(m.context, ''),"
            " m.created_at), m.text)), $2, 'indexed' FROM archive_message m WHERE m.vault_id = $1",
            vault_id,
            model,
        )
        await conn.execute("VACUUM ANALYZE")
        return vault_id, time.perf_counter() - started
    finally:
        await conn.close()


async def seed_vectors(dsn: str, qdrant_dir: Path, vault_id: str, real: int, points: int) -> tuple[int, float, float]:
    """(real embeddings, seconds embedding, seconds writing and optimizing the store)."""
    from memvault_indexer.embedder import OnnxMiniLMEmbedder
    from memvault_indexer.store import MESSAGE, EdgeVectorStore, IndexedMemory

    conn = await asyncpg.connect(dsn)
    try:
        # One message per conversation gets the model's real embedding (the first `real` conversations).
        anchors = await conn.fetch(
            "SELECT a.id, a.c, coalesce(memvault_index_text(m.text, coalesce(m.context, ''), m.created_at), m.text)"
            " AS content FROM (SELECT DISTINCT ON (conversation_id) id, conversation_id::text AS c FROM archive_message"
            " WHERE vault_id = $1 ORDER BY conversation_id, node_id LIMIT $2) AS a JOIN archive_message m ON m.id = a.id",
            vault_id,
            real,
        )
        # Then the other messages of those conversations, up to `points` in all.
        rows = await conn.fetch(
            "SELECT m.id::text AS id, m.conversation_id::text AS c, s.content_hash FROM archive_message m"
            " JOIN archive_message_index s ON s.message_id = m.id"
            " WHERE m.vault_id = $1 AND m.conversation_id = ANY($2::uuid[])"
            " ORDER BY m.id = ANY($3::uuid[]) DESC, m.conversation_id, m.node_id LIMIT $4",
            vault_id,
            [r["c"] for r in anchors],
            [r["id"] for r in anchors],
            points,
        )
    finally:
        await conn.close()
    embedder = OnnxMiniLMEmbedder(threads=2)
    started = time.perf_counter()
    vectors = embedder.embed([r["content"] for r in anchors])
    embedded = time.perf_counter() - started
    print(f"  {len(anchors):,} texts embedded in {embedded:.0f} s", file=sys.stderr)
    anchor_of = {r["c"]: vectors[i] for i, r in enumerate(anchors)}
    real_ids = {str(r["id"]) for r in anchors}
    rng = np.random.default_rng(5)
    started = time.perf_counter()
    store = EdgeVectorStore(qdrant_dir, model=embedder.name, dimension=embedder.dimension)
    await store.ensure_collection()
    batch: list[IndexedMemory] = []
    for n, row in enumerate(rows):
        base = anchor_of[row["c"]]
        if row["id"] in real_ids:
            vector = base
        else:  # SYNTHETIC: the conversation's real embedding plus noise, renormalised
            noisy = base + rng.normal(0, 0.6 / np.sqrt(embedder.dimension), size=embedder.dimension)
            vector = (noisy / np.linalg.norm(noisy)).astype(np.float32)
        batch.append(
            IndexedMemory(
                row["id"], vault_id, vector, row["content_hash"], kind=MESSAGE, conversation_id=row["c"], revision=1
            )
        )
        if len(batch) == 2000:
            await store.upsert(batch)
            batch = []
            if n % 20_000 < 2000:
                print(f"  {n:,} points", file=sys.stderr)
    await store.upsert(batch)
    await store.optimize()
    await store.close()
    return len(anchors), embedded, time.perf_counter() - started


async def default_vault(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return str(await conn.fetchval("SELECT id FROM vault WHERE name = 'default'"))
    finally:
        await conn.close()


ARCHIVE_RELATIONS = """
    WITH tables AS (SELECT oid, reltoastrelid FROM pg_class WHERE relname LIKE 'archive%' AND relkind = 'r'),
    heaps AS (SELECT oid FROM tables UNION SELECT reltoastrelid FROM tables WHERE reltoastrelid <> 0)
    SELECT oid FROM heaps UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM heaps)
"""
"""Every relation of the archive: its tables, their TOAST tables and the indexes on both."""


async def prewarm(dsn: str) -> float:
    """Read every archive relation into Postgres's buffers, as the importer's INSERTs leave the pages
    they write (the bench's COPY goes through a small ring of buffers instead): MB read."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        blocks = await conn.fetchval(
            f"SELECT coalesce(sum(pg_prewarm(oid)), 0) FROM ({ARCHIVE_RELATIONS}) AS r"  # noqa: S608 - constant
            " WHERE pg_relation_size(oid) > 0"
        )
        return int(blocks) * 8192 / 2**20
    finally:
        await conn.close()


async def cached_share(dsn: str) -> str:
    """How much of the archive's relations Postgres's buffers hold now, and the buffers' size."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        cached, total = await conn.fetchrow(
            f"""WITH archive AS (SELECT c.relfilenode, pg_relation_size(c.oid) AS bytes
                                 FROM pg_class c WHERE c.oid IN ({ARCHIVE_RELATIONS}))
                SELECT (SELECT count(*) FROM pg_buffercache b JOIN archive a ON b.relfilenode = a.relfilenode
                        WHERE b.relforknumber = 0 AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())),
                       (SELECT sum(bytes) / 8192 FROM archive)"""  # noqa: S608 - constant
        )
        buffers = await conn.fetchval("SHOW shared_buffers")
        return (
            f"{cached * 8192 / 2**20:,.0f} MB of the archive's {total * 8192 / 2**20:,.0f} MB of files "
            f"in Postgres's buffers (shared_buffers {buffers})"
        )
    finally:
        await conn.close()


async def evict_database_files(dsn: str) -> float:
    """Drop this database's files from the operating system's page cache (posix_fadvise DONTNEED; the
    server must be on this machine): MB of files."""
    conn = await asyncpg.connect(dsn)
    try:
        directory = Path(await conn.fetchval(
            "SELECT current_setting('data_directory') || '/base/' || oid FROM pg_database WHERE datname = current_database()"
        ))  # fmt: skip
    finally:
        await conn.close()
    return evict_files(directory)


def evict_files(directory: Path) -> float:
    size = 0
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as file:
                os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            size += path.stat().st_size
    return size / 2**20


async def until_autoprewarm_done(dsn: str, limit_seconds: float = 600) -> float:
    """Wait for pg_prewarm's autoprewarm to read back the pages the buffers held at the last shutdown:
    seconds waited (its worker is launched at start and exits when done)."""
    started = time.perf_counter()
    conn = await asyncpg.connect(dsn)
    try:
        if "pg_prewarm" not in (await conn.fetchval("SHOW shared_preload_libraries")):
            return 0.0
        quiet_since = None
        while time.perf_counter() - started < limit_seconds:
            working = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autoprewarm worker'"
            )
            if working:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.perf_counter()
            elif time.perf_counter() - quiet_since > 3:
                return quiet_since - started
            await asyncio.sleep(0.2)
        raise TimeoutError("autoprewarm did not finish")
    finally:
        await conn.close()


async def backend_pids(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return [
            int(r[0])
            for r in await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ]
    finally:
        await conn.close()


async def measure(
    stack: Stack, dsn: str, calls: int, query_seed: int = 99
) -> tuple[dict[str, list[float]], dict[str, float], int]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    queries = Generator(seed=query_seed).queries(calls + 3)
    times: dict[str, list[float]] = {}
    total = 0
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        Client(streamable_http_client(stack.mcp_url, http_client=http), mode="auto") as client,  # type: ignore[arg-type]
    ):

        async def search(**arguments: Any) -> dict[str, Any]:
            result = await client.call_tool("archive_search", arguments)
            if result.is_error or result.structured_content is None:
                raise RuntimeError(f"archive_search failed: {result.content}")
            return dict(result.structured_content)

        for texts in queries.values():  # warm up: one of each kind, untimed
            await search(query=texts[-1])
        pids = {n: p for n in ("gateway", "mcp", "vault", "indexer") if (p := stack.process(n).pid) is not None}
        postgres = await backend_pids(dsn)
        before = {n: report.cpu_seconds(p) for n, p in pids.items()}
        pg_before = sum(report.cpu_seconds(p) for p in postgres)
        client_before = time.process_time()
        cursors: list[str] = []
        for kind, texts in queries.items():
            samples = times.setdefault(kind, [])
            for text in texts[:calls]:
                started = time.perf_counter()
                found = await search(query=text)
                samples.append(time.perf_counter() - started)
                total += 1
                if found.get("next_cursor"):
                    cursors.append(found["next_cursor"])
        samples = times.setdefault("next page (cursor)", [])
        for cursor in cursors[:calls]:
            started = time.perf_counter()
            await search(cursor=cursor)
            samples.append(time.perf_counter() - started)
            total += 1
        used = {n: report.cpu_seconds(p) - before[n] for n, p in pids.items()}
        used["postgres"] = sum(report.cpu_seconds(p) for p in postgres) - pg_before
        used["benchmark client"] = time.process_time() - client_before
    return times, used, total


async def bench(args: argparse.Namespace) -> str:
    server = None if args.embedded else os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    if not server and not args.embedded:
        raise SystemExit("set MEMVAULT_TEST_POSTGRES_DSN (a server this makes a database on), or pass --embedded")
    keep = Path(args.keep) if args.keep else None
    data_dir = keep or ROOT / "build" / "bench" / secrets.token_hex(3)
    if keep and (keep / "postgres").is_file():  # where earlier versions of this bench noted the seeding
        (keep / "postgres").rename(keep / "postgres-seeded")
    dsn = database = None
    conditions = []
    if server:
        database = (keep / "database").read_text().strip() if keep and (keep / "database").exists() else None
        reused = database is not None
        database = database or f"memvault_bench_{secrets.token_hex(3)}"
        dsn = create_database(server, database, exist_ok=reused)
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "database").write_text(database)
        if args.evict:
            conditions.append(f"{await evict_database_files(dsn):,.0f} MB of database files evicted from the OS cache")
    elif args.evict and (data_dir / "postgres").exists():  # embedded: before its server starts
        conditions.append(f"{evict_files(data_dir / 'postgres'):,.0f} MB of Postgres files evicted from the OS cache")
    stack = Stack(
        data_dir,
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=("vault", "indexer", "mcp", "gateway"),
        log_level="WARNING",
    )
    notes = ""
    try:
        await asyncio.to_thread(stack.start)
        postgres_note = keep / "postgres-seeded" if keep else None
        seeded_note = keep / "seeded" if keep else None
        if seeded_note is not None and seeded_note.exists():
            notes = seeded_note.read_text()
        else:
            # Seeding (Postgres, unless a kept run did already; then the vector store) with the indexer stopped.
            await asyncio.to_thread(stack.stop_service, "indexer")
            if postgres_note is not None and postgres_note.exists():
                pg_note = postgres_note.read_text().strip()
                vault_id = await default_vault(stack.postgres_dsn)
            else:
                vault_id, pg_seconds = await seed_postgres(stack.postgres_dsn, args.messages, args.conversations)
                pg_note = f"Postgres {pg_seconds:.0f} s"
                if postgres_note is not None:
                    postgres_note.write_text(pg_note)
            print(f"postgres seeded ({pg_note})", file=sys.stderr)
            shutil.rmtree(data_dir / "qdrant", ignore_errors=True)  # a half-written store from a stopped run
            real, embed_seconds, store_seconds = await seed_vectors(
                stack.postgres_dsn, data_dir / "qdrant", vault_id, args.real, args.points
            )
            notes = (
                f"Seeded: {pg_note}; {real:,} real embeddings in {embed_seconds:.0f} s; "
                f"{args.points:,} points written and optimized in {store_seconds:.0f} s."
            )
            if seeded_note is not None:
                seeded_note.write_text(notes)
            await asyncio.to_thread(stack.start_services)  # the indexer again, on the filled store
        if args.embedded:
            waited = await until_autoprewarm_done(stack.postgres_dsn)
            conditions.append(
                "embedded Postgres with make run's settings, its autoprewarm finished "
                + (f"{waited:.0f} s after the stack was up" if waited >= 1 else "before the stack was up")
            )
        if args.prewarm:
            conditions.append(f"{await prewarm(stack.postgres_dsn):,.0f} MB read with pg_prewarm")
        conditions.append(await cached_share(stack.postgres_dsn))
        print("; ".join(conditions), file=sys.stderr)
        load_before = load()
        times, used, total = await measure(stack, stack.postgres_dsn, args.calls, args.query_seed)
        load_after = load()
    finally:
        await asyncio.to_thread(stack.stop)
        if not keep:
            if server and database:
                drop_database(server, database)
            shutil.rmtree(data_dir, ignore_errors=True)
    every = [s for kind, samples in times.items() if kind != "next page (cursor)" for s in samples]
    p95 = report.percentile(every, 95) * 1000
    cpu_names = ("gateway", "mcp", "vault", "indexer", "postgres", "benchmark client")
    return "\n".join(
        [
            f"{args.messages:,} archived messages in {args.conversations:,} conversations of one vault "
            f"(tests/bench/archive_corpus.py; 1 to 3 revisions each), seeded straight into Postgres with COPY, the "
            f"keyword column filled by Postgres, every message marked indexed; {args.points:,} points in the "
            f"indexer's Qdrant Edge store (HNSW built): {args.real:,} of them the model's embeddings of one message "
            "per conversation, the rest SYNTHETIC (their conversation's real embedding plus noise, renormalised) — "
            "see the module's docstring for why. "
            f"{notes} At the start: {'; '.join(conditions)}. Vault, indexer, mcp and gateway (dev mode: the owner without sign-in) as processes; the official MCP client over loopback HTTP to the gateway's /mcp, one call at a "
            f"time, every query text distinct. Host load average (1/5/15 min) {load_before} before, {load_after} "
            "after (the machine is shared).",
            "",
            report.LATENCY_HEADER,
            *(report.latency_row(f"archive_search, {kind}", samples) for kind, samples in times.items()),
            report.latency_row("archive_search, every first page", every),
            "",
            "CPU per call, ms (Postgres: this database's backends):",
            "",
            "| " + " | ".join(cpu_names) + " | all |",
            "|---" * (len(cpu_names) + 1) + "|",
            "| "
            + " | ".join(f"{1000 * used[n] / total:.1f}" for n in cpu_names)
            + f" | {1000 * sum(used[n] for n in cpu_names) / total:.1f} |",
            "",
            f"Goal: p95 ≤ {GOAL_MS:.0f} ms over every first page: "
            + (f"met ({p95:.1f} ms)." if p95 <= GOAL_MS else f"missed ({p95:.1f} ms)."),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.archive_search", description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000, help="archived messages (1,000,000)")
    parser.add_argument("--conversations", type=int, default=20_000, help="conversations (20,000)")
    parser.add_argument("--real", type=int, default=10_000, help="messages given real embeddings (10,000)")
    parser.add_argument(
        "--points",
        type=int,
        default=100_000,
        help="points in the vector store (100,000): the --real ones and the other messages of their conversations",
    )
    parser.add_argument("--calls", type=int, default=40, help="timed searches per kind of query (40)")
    parser.add_argument(
        "--query-seed",
        type=int,
        default=99,
        help="seed of the generated queries (99); another seed asks what no earlier run read into the caches",
    )
    parser.add_argument(
        "--keep",
        default="",
        metavar="DIR",
        help="keep the data (stack directory and database) in DIR and reuse it on the next run: only the first "
        "run seeds; drop the database yourself afterwards",
    )
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="use the stack's embedded Postgres with make run's settings (buffers a quarter of the memory, "
        "autoprewarm) instead of MEMVAULT_TEST_POSTGRES_DSN; kept in DIR/postgres with --keep",
    )
    parser.add_argument(
        "--prewarm",
        action="store_true",
        help="read the archive's relations into Postgres's buffers before measuring (pg_prewarm), as an import "
        "through the vault leaves the pages it writes",
    )
    parser.add_argument(
        "--evict",
        action="store_true",
        help="drop the database's files from the OS page cache before measuring (the disk-cold case; run as root "
        "or as the files' owner)",
    )
    parser.add_argument("--no-write", action="store_true", help="print the results only, not into docs/benchmarks.md")
    args = parser.parse_args()
    body = asyncio.run(bench(args))
    print(body)
    if args.no_write:
        return
    command = f"python -m tests.bench.archive_search {' '.join(sys.argv[1:])}".strip()
    report.write_section("archive-search", body, command)
    print(f"\nwritten to {report.BENCHMARKS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
