"""`make bench` (pages): the dashboard's server time per page at 100,000 memories, written into docs/benchmarks.md.

Starts vault, mcp and gateway as processes (sign-in on, no indexer: search is keyword-only), signs
the owner in with a setup link, then seeds the owner's vault straight into Postgres (fast, not
through the API): 100,000 memories of the benchmark corpus (500 of them proposals sharing a key
with an active memory, so the review queue has something to show beside each), one memory with 100
versions in its history, 1,000,000 audit log entries, and 3,000 archived conversations tagged like
the memories (1 in 100 a copy from another vault) with every 20th memory similar to the next, for
the archive pages and the vault map (the oldest 3,000 memories also carry `legacy`, a large tag with
nothing new in it). Each page is then asked for `--calls`
times in sequence by one client on the same machine (loopback HTTP with the session cookie); the
time is from sending the request to the last byte of the page.

Goal (issue 18): p95 ≤ 150 ms for every page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import asyncpg
import httpx

from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from tests.bench import corpus, report

ROOT = Path(__file__).resolve().parents[2]
GOAL_MS = 150.0
PASSWORD = "bench password long enough"
TYPES = ("fact", "preference", "decision", "constraint", "assumption", "observation", "instruction")


def setup_link(stack: Stack) -> str:
    answer = subprocess.run(
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--username", "owner"],
        env={**os.environ, **stack.env_for("gateway")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return answer.stdout.strip().splitlines()[-1]


def csrf_of(html: str) -> str:
    found = re.search(r"name=.?csrf_token.? value=.?([^'\" >]+)", html)
    if found is None:
        raise RuntimeError("no csrf_token on the page")
    return found.group(1)


async def sign_in(http: httpx.AsyncClient, link: str) -> None:
    page = await http.get(link)
    page.raise_for_status()
    answer = await http.post(
        link, data={"csrf_token": csrf_of(page.text), "password": PASSWORD, "password_again": PASSWORD}
    )
    if answer.status_code != 303:
        raise RuntimeError(f"setting the password failed: {answer.status_code} {answer.text[:300]}")


async def seed(
    dsn: str, memories: int, proposals: int, versions: int, audit_entries: int, conversations: int
) -> dict[str, str]:
    """Fill the owner's vault; returns ids the page list needs. Straight SQL, as fast as Postgres goes."""
    texts = corpus.memories(memories)
    conn = await asyncpg.connect(dsn)
    try:
        vault_id = str(await conn.fetchval("SELECT id FROM vault WHERE name = 'default'"))
        started = time.perf_counter()
        now = datetime.now(UTC)
        # Active memories; every 200th has a key, so each proposal below can share one (the queue's "same key").
        actives = memories - proposals
        rows = [
            (
                vault_id,
                text,
                uuid.uuid4().hex + uuid.uuid4().hex,
                TYPES[i % len(TYPES)],
                f"bench.key.{i // 200}" if i % 200 == 0 else None,
                # The oldest 3,000 also carry `legacy`: a large tag with no new memories (the map's worst case).
                ["bench", f"t{i % 50}", *(["legacy"] if i < 3_000 else [])],
                "import:bench.md" if i % 3 == 0 else "",
                "mcp:Bench agent" if i % 2 else "",
                "imported" if i % 3 == 0 else "stated",
                "active" if i < actives else "proposed",
                created,
                created,
                created,
            )
            for i, text in enumerate(texts)
            # Creation times spread over the last year in corpus order, as a vault that grew.
            for created in [now - timedelta(days=365) * (1 - i / memories)]
        ]
        # The proposals take the keys of the first `proposals` keyed actives.
        for n, i in enumerate(range(actives, memories)):
            rows[i] = (*rows[i][:4], f"bench.key.{n}", *rows[i][5:])
        await conn.copy_records_to_table(
            "memory",
            records=rows,
            columns=[
                "vault_id", "content", "content_hash", "type", "key", "tags", "source", "client", "trust", "status",
                "created_at", "updated_at", "valid_from",
            ],
        )  # fmt: skip
        seeded_memories = time.perf_counter() - started

        # One memory with `versions` versions in its history (edits in place).
        busy = str(
            await conn.fetchval("SELECT id FROM memory WHERE vault_id = $1 AND status = 'active' LIMIT 1", vault_id)
        )
        await conn.execute(
            "INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor, changed_at)"
            " SELECT m.id, m.vault_id, v, CASE WHEN v = 1 THEN 'created' ELSE 'edited' END,"
            "        jsonb_set(to_jsonb(m) - 'search', '{content}', to_jsonb(m.content || ' (version ' || v || ')')),"
            "        'owner', now() - make_interval(mins => $2 - v)"
            " FROM memory m, generate_series(1, $2) v WHERE m.id = $1::uuid",
            busy,
            versions,
        )
        await conn.execute("UPDATE memory SET version = $2 WHERE id = $1::uuid", busy, versions)

        started = time.perf_counter()
        await conn.execute(
            "INSERT INTO audit_log (vault_id, actor, action, target, details, at)"
            " SELECT $1, CASE WHEN n % 3 = 0 THEN 'owner' ELSE 'mcp:Bench agent' END,"
            "        (ARRAY['memory.remember', 'memory.approve', 'memory.edit', 'memory.recall', 'batch.import'])[1 + n % 5],"
            "        md5(n::text), '{}'::jsonb, now() - make_interval(secs => n * 30)"
            " FROM generate_series(1, $2) n",
            vault_id,
            audit_entries,
        )
        seeded_audit = time.perf_counter() - started

        # The archive beside them: `conversations` conversations tagged like the memories (and some
        # copies from another vault), and links between memories (similar, replaces, depends on) for the map.
        started = time.perf_counter()
        await conn.execute(
            "INSERT INTO archive_conversation (vault_id, title, source, head_revision, tags, derived_from,"
            " created_at, updated_at)"
            " SELECT $1, 'Conversation ' || n, 'chatgpt', 1, ARRAY['chat', 't' || (n % 50)],"
            "        CASE WHEN n % 100 = 0 THEN jsonb_build_object('vault', 'elsewhere', 'vault_id', gen_random_uuid(),"
            "             'conversation_id', gen_random_uuid(), 'revision', 1) END,"
            "        now() - make_interval(mins => n), now() - make_interval(mins => n)"
            " FROM generate_series(1, $2) n",
            vault_id,
            conversations,
        )
        await conn.execute(
            "WITH m AS (SELECT id, lead(id) OVER w AS next, row_number() OVER w AS n FROM memory"
            "           WHERE vault_id = $1 AND status = 'active' WINDOW w AS (ORDER BY created_at, id))"
            " UPDATE memory SET similar_to = ARRAY[m.next]"
            " FROM m WHERE memory.id = m.id AND m.n % 20 = 0 AND m.next IS NOT NULL",
            vault_id,
        )
        seeded_archive = time.perf_counter() - started
        # As autovacuum would soon after a bulk load (it is off on these machines): the planner's
        # statistics, and the visibility map that index-only scans need.
        await conn.execute("VACUUM ANALYZE")
        return {
            "busy": busy,
            "query": corpus.queries(1, seed=3)[0],
            "seeded": f"{memories:,} memories in {seeded_memories:.1f} s, {audit_entries:,} audit entries in "
            f"{seeded_audit:.1f} s, {conversations:,} conversations and memory links in {seeded_archive:.1f} s",
        }
    finally:
        await conn.close()


async def time_pages(
    stack: Stack, args: argparse.Namespace, ids: dict[str, str], link: str
) -> list[tuple[str, list[float]]]:
    calls = args.calls
    base = f"{stack.gateway_url}/dashboard/default"
    pages = [
        ("overview", f"{base}"),
        (f"review queue ({args.proposals} proposals), first page", f"{base}/review"),
        ("memories, newest first", f"{base}/memories"),
        ("memories, filtered (type, tag, source, dates)",
         f"{base}/memories?type=decision&tag=t7&source=import:&created_from=2026-01-01&created_to=2026-12-31"),
        (f"memories, search '{ids['query']}' (keyword-only recall)", f"{base}/memories?{urlencode({'q': ids['query']})}"),
        (f"a memory with {args.versions} versions", f"{base}/memories/{ids['busy']}"),
        (f"audit log ({args.audit_entries:,} entries), first page", f"{base}/audit"),
        ("audit log, filtered by action", f"{base}/audit?action=memory.edit"),
        ("imports", f"{base}/imports"),
        ("guide", f"{base}/guide"),
        ("settings (with the clean-up preview)", f"{base}/settings"),
        ("index", f"{base}/index"),
        ("backup", f"{base}/backup"),
        ("members", f"{base}/members"),
        ("apps", f"{base}/apps"),
        ("forgotten texts", f"{base}/exclusions"),
        ("account", f"{stack.gateway_url}/account"),
        (f"archive ({args.conversations:,} conversations), first page", f"{base}/archive"),
        ("archive, filtered by tags (any of two)", f"{base}/archive?tags=t7+t8&match=any"),
        (f"vault map ({args.memories:,} memories, {args.conversations:,} conversations)", f"{base}/archive/map"),
    ]  # fmt: skip
    if args.only:
        pages = [(name, url) for name, url in pages if any(word in name for word in args.only)]
        if not pages:
            raise SystemExit(f"--only {' '.join(args.only)} matches no page")
    results: list[tuple[str, list[float]]] = []
    async with httpx.AsyncClient(timeout=60) as http:
        await sign_in(http, link)
        for name, url in pages:
            answer = await http.get(url)  # warm: the first call of a page pays for imports and caches
            if answer.status_code != 200:
                raise RuntimeError(f"{name}: {answer.status_code} {answer.text[:300]}")
            samples: list[float] = []
            for _ in range(calls):
                start = time.perf_counter()
                answer = await http.get(url)
                samples.append(time.perf_counter() - start)
                answer.raise_for_status()
            results.append((name, samples))
            print(f"{name}: p95 {report.percentile(samples, 95) * 1000:.1f} ms", file=sys.stderr)
    return results


def load() -> str:
    """The host's load averages now (the machine is shared; numbers under load run slower)."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


async def pages_bench(args: argparse.Namespace) -> str:
    data_dir = ROOT / "build" / "bench" / secrets.token_hex(3)
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_bench_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(
        data_dir,
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=("vault", "mcp", "gateway"),
        service_env={"gateway": {"MEMVAULT_GATEWAY__DEV_MODE": "false"}},
        log_level="WARNING",
    )
    try:
        await asyncio.to_thread(stack.start)
        link = await asyncio.to_thread(setup_link, stack)
        ids = await seed(
            stack.postgres_dsn, args.memories, args.proposals, args.versions, args.audit_entries, args.conversations
        )
        load_before = load()
        results = await time_pages(stack, args, ids, link)
        load_after = load()
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(data_dir, ignore_errors=True)
    missed = [name for name, samples in results if report.percentile(samples, 95) * 1000 > GOAL_MS]
    return "\n".join(
        [
            f"Dashboard pages, one owner signed in, {args.memories:,} memories in the vault ({args.proposals} of them "
            f"waiting for review), one memory with {args.versions} versions, {args.audit_entries:,} audit entries, "
            f"{args.conversations:,} archived conversations "
            f"(seeded straight into Postgres: {ids['seeded']}). Vault, mcp and gateway as processes, no indexer "
            "(search is keyword-only). Each page asked for in sequence by one client over loopback HTTP, after one "
            f"warm-up request; time to the last byte. Host load average (1/5/15 min) {load_before} before, "
            f"{load_after} after (the machine is shared).",
            "",
            report.LATENCY_HEADER,
            *(report.latency_row(name, samples) for name, samples in results),
            "",
            f"Goal: p95 ≤ {GOAL_MS:.0f} ms per page. "
            + ("Every page meets it." if not missed else f"Missed by: {', '.join(missed)}."),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.pages", description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000, help="memories in the vault (100,000)")
    parser.add_argument("--proposals", type=int, default=500, help="of them waiting for review (500)")
    parser.add_argument("--versions", type=int, default=100, help="versions of the busiest memory (100)")
    parser.add_argument("--audit-entries", type=int, default=1_000_000, help="audit log entries (1,000,000)")
    parser.add_argument("--conversations", type=int, default=3_000, help="archived conversations (3,000)")
    parser.add_argument("--calls", type=int, default=40, help="timed requests per page (40)")
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="WORD",
        help="time only the pages whose name holds one of these words (e.g. 'review'); the results are printed,"
        " not written to docs/benchmarks.md (its table lists every page)",
    )
    args = parser.parse_args()
    body = asyncio.run(pages_bench(args))
    print(body)
    if args.only:
        return
    command = "make bench" if len(sys.argv) == 1 else f"python -m tests.bench.pages {' '.join(sys.argv[1:])}"
    report.write_section("pages", body, command)
    print(f"\nwritten to {report.BENCHMARKS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
