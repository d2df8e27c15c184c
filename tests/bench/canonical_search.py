"""How long `memvault-vault archive search` takes on Postgres alone (docs/benchmarks.md, bench:archive-canonical-search).

Makes a database of its own on the MEMVAULT_TEST_POSTGRES_DSN server, migrates it, writes one vault with
`--conversations` conversations of `--messages` messages each (set-based SQL, as an import would leave them:
one revision per conversation) and `--memories` memories, then times `canonical_search.search` (the
command's query, without the process start) for a rare term, a two-word query and a common word (a tenth of the messages), `--rounds`
times each, and prints the median and the worst in milliseconds. Drops its database at the end.

    python -m tests.bench.canonical_search --conversations 2000 --messages 50 --memories 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

import asyncpg

from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive import canonical_search
from memvault_vault.database import Database
from memvault_vault.schema import apply_migrations

WORDS = ["boiler", "garden", "invoice", "router", "ticket", "lantern", "harbor", "violin", "meadow", "copper"]


async def fill(database: Database, conversations: int, messages: int, memories: int) -> str:
    pool = database.pool
    assert await AccountStore(database).ensure_owner("bench", "bench")
    vault_id = await pool.fetchval("SELECT id FROM vault WHERE name = 'bench'")
    await pool.execute(
        """
        INSERT INTO archive_conversation (id, vault_id, title, source, head_revision)
        SELECT md5('c' || n)::uuid, $1, 'conversation ' || n, 'api', 1 FROM generate_series(1, $2) n;
        """,
        vault_id,
        conversations,
    )
    await pool.execute(
        "INSERT INTO archive_revision (vault_id, conversation_id, number, kind, message_count, content_sha256)"
        " SELECT $1, md5('c' || n)::uuid, 1, 'import', $3, md5('r' || n) FROM generate_series(1, $2) n",
        vault_id,
        conversations,
        messages,
    )
    await pool.execute(
        """
        INSERT INTO archive_message (id, vault_id, conversation_id, node_id, role, content_type, text, content_hash)
        SELECT md5('m' || c || '/' || p)::uuid, $1, md5('c' || c)::uuid, 'n' || p, 'user', 'text',
               'message ' || p || ' of conversation ' || c || ' about the ' || ($4::text[])[1 + (c * 7 + p) % 10]
               || CASE WHEN c = 17 AND p = 3 THEN ' at api.rare-host.example' ELSE '' END,
               md5('h' || c || '/' || p)
        FROM generate_series(1, $2) c, generate_series(1, $3) p
        """,
        vault_id,
        conversations,
        messages,
        WORDS,
    )
    await pool.execute(
        "INSERT INTO archive_revision_message (vault_id, conversation_id, revision, position, message_id, active)"
        " SELECT $1, md5('c' || c)::uuid, 1, p - 1, md5('m' || c || '/' || p)::uuid, true"
        " FROM generate_series(1, $2) c, generate_series(1, $3) p",
        vault_id,
        conversations,
        messages,
    )
    await pool.execute(
        "INSERT INTO memory (vault_id, content, content_hash, type, trust, status)"
        " SELECT $1, 'memory ' || n || ' on the ' || ($3::text[])[1 + n % 10], md5('k' || n), 'fact', 'imported',"
        " 'active' FROM generate_series(1, $2) n",
        vault_id,
        memories,
        WORDS,
    )
    await pool.execute("ANALYZE archive_message; ANALYZE memory; ANALYZE archive_revision_message")
    return str(vault_id)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    server = os.environ["MEMVAULT_TEST_POSTGRES_DSN"]
    name = f"bench_search_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(server)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = server.rsplit("/", 1)[0] + "/" + name
    try:
        await asyncio.to_thread(apply_migrations, dsn)
        database = await Database.connect(dsn, 1, 2)
        started = time.perf_counter()
        vault_id = await fill(database, args.conversations, args.messages, args.memories)
        print(
            f"filled {args.conversations * args.messages} messages, {args.memories} memories in "
            f"{time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f}"
        )
        for query in ("api.rare-host.example", "conversation 17", "boiler"):
            times = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                hits = await canonical_search.search(database.pool, query, vault_id=vault_id, limit=20)
                times.append((time.perf_counter() - start) * 1000)
            print(f"{query!r}: {len(hits)} hits, median {statistics.median(times):.1f} ms, worst {max(times):.1f} ms")
        await database.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
