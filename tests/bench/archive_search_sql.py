"""The archive search's two SQL statements before and after (commit 87b287b against this one), on
the data `tests.bench.archive_search --keep DIR` left, in the same run, one connection, each query
text run twice and timed the second time; the plan is the generic one (as asyncpg's prepared
statements get after five calls), so what a server answers with once warmed up.

    .venv/bin/python -m tests.bench.archive_search_sql DIR [--queries 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import asyncpg

from memvault_vault.archive import reading_store as after
from tests.bench import report
from tests.bench.archive_corpus import Generator

TIMEOUT_SECONDS = 30
"""A statement still running after this is cancelled and counted as this long."""
BEFORE_KEYWORD = (
    "SELECT m.id::text AS id, max(ts_rank_cd(m.search, q)) AS rank, CASE WHEN EXISTS (SELECT 1 FROM"
    " archive_message_index s WHERE s.message_id = m.id AND s.state = 'indexed') THEN NULL"
    " ELSE coalesce(memvault_index_text(m.text, coalesce(m.context, ''), m.created_at), m.text) END AS pending"
    " FROM (SELECT replace(plainto_tsquery('english', $2)::text, ' & ', ' | ')::tsquery AS q) AS w,"
    " archive_message m"
    " JOIN archive_revision_message rm ON rm.message_id = m.id"
    " JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision"
    " WHERE m.vault_id = $1 AND c.vault_id = $1 AND m.search @@ q AND c.tags @> $3::text[]"
    " AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])"
    " GROUP BY m.id ORDER BY rank DESC, m.id LIMIT $5"
)
BEFORE_HITS = (
    "SELECT DISTINCT ON (m.id) m.id::text AS id, m.text, m.role, c.id::text AS conversation_id, c.title,"
    " c.head_revision, rm.position, coalesce(m.created_at, c.created_at) AS created_at"
    " FROM archive_message m JOIN archive_revision_message rm ON rm.message_id = m.id"
    " JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision"
    " WHERE m.id = ANY($2::uuid[]) AND m.vault_id = $1 AND c.vault_id = $1 AND c.tags @> $3::text[]"
    " AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])"
    " ORDER BY m.id, rm.position"
)


async def main_async(args: argparse.Namespace) -> None:
    server = os.environ["MEMVAULT_TEST_POSTGRES_DSN"].rsplit("/", 1)[0]
    database = (Path(args.dir) / "database").read_text().strip()
    conn = await asyncpg.connect(f"{server}/{database}")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute("SET jit = off")  # as the vault's connections (database.py)
    await conn.execute(f"SET statement_timeout = '{TIMEOUT_SECONDS}s'")
    vault = await conn.fetchval("SELECT id FROM vault WHERE name = 'default'")
    store = after.ArchiveReadStore.__new__(after.ArchiveReadStore)
    store._pool = conn  # type: ignore[assignment]  # one connection stands in for the pool
    store._common, store._common_at = {}, -after.COMMON_WORDS_REFRESH_SECONDS
    common = await store._common_words()
    queries = Generator(seed=99).queries(args.queries)
    print(f"load average before: {os.getloadavg()}")
    print("| query kind | keyword before ms | keyword after ms | references before ms | references after ms |")
    print("|---|---|---|---|---|")
    for kind, texts in queries.items():
        times: dict[str, list[float]] = {"kb": [], "ka": [], "hb": [], "ha": []}
        for text in texts[: args.queries]:
            base = (vault, text, [], [], 50)
            rows: list[asyncpg.Record] = []
            unlisted = min(common.values(), default=0.0)
            new = (*base, list(common), list(common.values()), after.RANK_BUDGET, after.COMMON_WORD_SAMPLE, unlisted)
            for name, sql, params in (
                ("kb", BEFORE_KEYWORD, base),
                ("ka", after._KEYWORD.format(deep="LIMIT $11"), (*new, after.RANKED_DEEP)),
            ):
                for attempt in (0, 1):
                    started = time.perf_counter()
                    try:
                        found = await conn.fetch(sql, *params)
                    except asyncpg.QueryCanceledError:
                        times[name].append(float(TIMEOUT_SECONDS))
                        break
                    rows = found if name == "ka" else []
                    if attempt:
                        times[name].append(time.perf_counter() - started)
            ids = [r["id"] for r in rows] * 2  # as many as a union of both sides
            for name, sql in (("hb", BEFORE_HITS), ("ha", None)):
                for attempt in (0, 1):
                    started = time.perf_counter()
                    if sql is None:
                        await after.ArchiveReadStore.hits(store, type("V", (), {"id": vault})(), ids, [], [])  # type: ignore[arg-type]
                    else:
                        try:
                            await conn.fetch(sql, vault, ids, [], [])
                        except asyncpg.QueryCanceledError:
                            times[name].append(float(TIMEOUT_SECONDS))
                            break
                    if attempt:
                        times[name].append(time.perf_counter() - started)
        cells = [
            f"{report.percentile(times[n], 50) * 1000:.0f} / {report.percentile(times[n], 95) * 1000:.0f}"
            for n in ("kb", "ka", "hb", "ha")
        ]
        print(f"| {kind} | " + " | ".join(cells) + " |", flush=True)
    print(
        f"load average after: {os.getloadavg()}  (cells: p50 / p95 over {args.queries} queries;"
        f" {TIMEOUT_SECONDS * 1000} ms: cancelled at the timeout)"
    )
    await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.archive_search_sql", description=__doc__)
    parser.add_argument("dir", help="the --keep directory of tests.bench.archive_search")
    parser.add_argument("--queries", type=int, default=5, help="queries of each kind (5)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
