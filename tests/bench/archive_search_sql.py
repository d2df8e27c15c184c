"""The archive search's keyword statement unbounded and bounded, and its hit lookup before and after
being driven from the ids, on the data `tests.bench.archive_search --keep DIR` left, in the same run,
one connection, each query text run twice and timed the second time; the plan is the generic one (as
asyncpg's prepared statements get after five calls), so what a server answers with once warmed up.

"Main" is main's keyword statement before the merge (copied here, without the pending text).
"Unbounded" is keyword_sql.KEYWORD_CANDIDATES with FULL_RANK_BUDGET beyond any count: every clause
ranked in full, the candidates and ranks of main's statement before the merge (BM25 as recall ranks).
"Bounded" is the same statement with keyword_sql's budgets.

    .venv/bin/python -m tests.bench.archive_search_sql DIR [--queries 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import asyncpg

from memvault_vault.archive import keyword_sql
from memvault_vault.archive import reading_store as after
from tests.bench import report
from tests.bench.archive_corpus import Generator

TIMEOUT_SECONDS = 30
"""A statement still running after this is cancelled and counted as this long."""
UNBOUNDED = 2**31 - 1
MAIN_KEYWORD = f"""
    WITH {keyword_sql.TERMS},
    cut AS (
        SELECT terms.lexeme, literal, df, words.n AS word FROM terms
        LEFT JOIN (
            SELECT DISTINCT w.n, l.lexeme
            FROM regexp_split_to_table($2, '[[:space:]]+') WITH ORDINALITY AS w (word, n),
                 unnest(tsvector_to_array(to_tsvector('english', w.word))) AS l (lexeme)
        ) AS words ON words.lexeme = terms.lexeme
        WHERE df > 0 AND (df <= greatest(0.1 * total, 100) OR df = (SELECT min(df) FROM terms WHERE df > 0))
    ),
    matching AS MATERIALIZED (
        SELECT (CASE
            WHEN (SELECT coalesce(sum(df), 0) FROM (SELECT DISTINCT lexeme, df FROM cut) AS c) <= {keyword_sql.RANK_BUDGET}
              OR (SELECT count(DISTINCT word) FROM cut) < 2
                THEN (SELECT coalesce(string_agg(DISTINCT literal, ' | '), '') FROM cut)
            ELSE (SELECT string_agg(DISTINCT clause, ' | ') FROM (
                SELECT '(' || a.literal || ' & ' || b.literal || ')' AS clause
                FROM cut a JOIN cut b ON a.lexeme < b.lexeme AND a.word <> b.word
                UNION ALL
                SELECT literal FROM cut WHERE df <= {keyword_sql.RARE_LEXEME_DOCS}
            ) AS clauses)
        END)::tsquery AS query
    )
,
    ranked AS (
        SELECT m.id, {keyword_sql.RANK} AS rank
        FROM archive_message m, matching
        WHERE m.vault_id = $1 AND m.search @@ matching.query AND EXISTS (
            SELECT 1 FROM archive_revision_message rm
            JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision
            WHERE rm.message_id = m.id AND c.vault_id = $1 AND c.tags @> $3::text[]
              AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[]))
        ORDER BY rank DESC, m.id
        LIMIT $5
    )
    SELECT r.id::text AS id, r.rank FROM ranked r ORDER BY r.rank DESC, r.id
"""  # noqa: S608 - constant SQL fragments (main's keyword statement before the merge, copied)
BEFORE_HITS = f"""
    WITH {keyword_sql.TERMS}
    SELECT DISTINCT ON (m.id) m.id::text AS id, m.text, m.role, c.id::text AS conversation_id, c.title,
           c.head_revision, rm.position, coalesce(m.created_at, c.created_at) AS created_at, {keyword_sql.RANK} AS rank
    FROM archive_message m JOIN archive_revision_message rm ON rm.message_id = m.id
    JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision
    WHERE m.id = ANY($5::uuid[]) AND m.vault_id = $1 AND c.vault_id = $1 AND c.tags @> $3::text[]
      AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])
    ORDER BY m.id, rm.position
"""  # noqa: S608 - constant SQL fragments (main's statement before the merge)


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
    queries = Generator(seed=99).queries(args.queries)
    print(f"load average before: {os.getloadavg()}")
    print(
        "| query kind | keyword main ms | keyword unbounded ms | keyword bounded ms | hits before ms | hits after ms"
        " | bounded top 50 = main's |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind, texts in queries.items():
        times: dict[str, list[float]] = {"km": [], "kb": [], "ka": [], "hb": [], "ha": []}
        same = 0
        for text in texts[: args.queries]:
            base = (vault, text, [], [], 50)
            found: dict[str, list[asyncpg.Record]] = {}
            budgets: dict[str, tuple[int, ...]] = {
                "km": (),
                "kb": (UNBOUNDED, UNBOUNDED),
                "ka": (keyword_sql.FULL_RANK_BUDGET, keyword_sql.COMMON_WORD_SAMPLE),
            }
            for name, params in budgets.items():
                found[name] = []
                for attempt in (0, 1):
                    started = time.perf_counter()
                    try:
                        sql = MAIN_KEYWORD if name == "km" else keyword_sql.KEYWORD_CANDIDATES
                        found[name] = await conn.fetch(sql, *base, *params)
                    except asyncpg.QueryCanceledError:
                        times[name].append(float(TIMEOUT_SECONDS))
                        break
                    if attempt:
                        times[name].append(time.perf_counter() - started)
            same += [r["id"] for r in found["km"]] == [r["id"] for r in found["ka"]]
            ids = [r["id"] for r in found["ka"]] * 2  # as many as a union of both sides
            for name in ("hb", "ha"):
                for attempt in (0, 1):
                    started = time.perf_counter()
                    if name == "ha":
                        await after.ArchiveReadStore.hits(store, type("V", (), {"id": vault})(), text, ids, [], [])  # type: ignore[arg-type]
                    else:
                        try:
                            await conn.fetch(BEFORE_HITS, vault, text, [], [], ids)
                        except asyncpg.QueryCanceledError:
                            times[name].append(float(TIMEOUT_SECONDS))
                            break
                    if attempt:
                        times[name].append(time.perf_counter() - started)
        cells = [
            f"{report.percentile(times[n], 50) * 1000:.0f} / {report.percentile(times[n], 95) * 1000:.0f}"
            for n in ("km", "kb", "ka", "hb", "ha")
        ]
        print(f"| {kind} | " + " | ".join(cells) + f" | {same}/{len(texts[: args.queries])} |", flush=True)
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
