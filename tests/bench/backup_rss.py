"""Peak memory and time of `memvault-vault backup` and `restore` as a vault grows (issue 15: flat memory).

    .venv/bin/python -m tests.bench.backup_rss [--sizes 10000,100000]

Needs MEMVAULT_TEST_POSTGRES_DSN (a server this makes and drops a database on). For each size it
fills a vault with that many memories (each with one history entry, as a write leaves them) in
SQL, then runs the commands as child processes and reads each one's peak RSS from the kernel
(`getrusage(RUSAGE_CHILDREN)` in a wrapper process of its own). The baseline is `memvault-vault backup
--help` in the same run: what loading the program costs before it reads anything.
Embeddings are left out (`--no-embeddings`): with them the vault asks the indexer for 500
vectors at a time, which adds a constant, not a per-vault, amount.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from memvault_devstack.postgres import create_database, drop_database
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.schema import apply_migrations

# Lower-case ASCII with single spaces: normalising leaves it as it is, so its sha256 is its content hash.
FILL = """
INSERT INTO memory (vault_id, content, content_hash, type, trust, status, tags, source)
SELECT $1, t.text, encode(sha256(convert_to(t.text, 'UTF8')), 'hex'), 'fact', 'imported', 'active',
       ARRAY['bench', 'tag' || (n % 50)], 'bench'
FROM generate_series(1, $2) AS n,
     LATERAL (SELECT 'memory number ' || n || ' says the homelab service ' || md5(n::text)
                     || ' runs on host ' || (n % 97) || ' and is backed up nightly' AS text) t
"""
HISTORY = """
INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor)
SELECT id, vault_id, 1, 'created', to_jsonb(m) - 'search', 'bench' FROM memory m WHERE vault_id = $1
"""


# Runs the command as its own child and prints that child's peak RSS: a fresh count per measurement.
MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
    "sys.stderr.write(code.stderr)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code.returncode)\n"
)


def run(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one child process."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:5])} failed: {done.stderr.strip().splitlines()[-1:]}")
    return seconds, int(done.stdout.strip().splitlines()[-1])


async def fill(dsn: str, vault: str, count: int) -> None:
    database = await Database.connect(dsn, 1, 2)
    try:
        assert await AccountStore(database).ensure_owner("bench", vault)
        vault_id = await database.pool.fetchval("SELECT id FROM vault WHERE name = $1", vault)
        await database.pool.execute(FILL, vault_id, count)
        await database.pool.execute(HISTORY, vault_id)
        await AccountStore(database).ensure_owner("bench", vault + "-restored")
    finally:
        await database.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    if not server:
        raise SystemExit("set MEMVAULT_TEST_POSTGRES_DSN to a Postgres server this may create a database on")
    name = f"memvault_bench_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server, name, exist_ok=False)
    rows = []
    try:
        apply_migrations(dsn)
        env = {**os.environ, "MEMVAULT_POSTGRES__DSN": dsn, "MEMVAULT_LOG__LEVEL": "WARNING"}
        vault_cli = [sys.executable, "-m", "memvault_vault"]
        _, baseline = run([*vault_cli, "backup", "--help"], env)
        with tempfile.TemporaryDirectory() as folder:
            for size in sorted(int(s) for s in args.sizes.split(",")):
                vault = f"bench-{size}"
                asyncio.run(fill(dsn, vault, size))
                path = Path(folder) / f"{vault}.jsonl"
                out = [*vault_cli, "backup", "--vault", vault, "--output", str(path), "--no-embeddings"]
                backup_seconds, backup_rss = run(out, env)
                into = [*vault_cli, "restore", "--vault", f"{vault}-restored", "--input", str(path)]
                restore_seconds, restore_rss = run(into, env)
                megabytes = path.stat().st_size / 1e6
                rows.append((size, megabytes, backup_seconds, backup_rss, restore_seconds, restore_rss))
    finally:
        drop_database(server, name)
    print(f"baseline (`memvault-vault backup --help`): peak RSS {baseline / 1024:.0f} MiB\n")
    print(
        "| memories | file MB | backup s | backup peak RSS MiB (x baseline) | restore s | restore peak RSS MiB (x baseline) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for size, megabytes, bs, brss, rs, rrss in rows:
        print(
            f"| {size:,} | {megabytes:.0f} | {bs:.1f} | {brss / 1024:.0f} ({brss / baseline:.2f}) "
            f"| {rs:.1f} | {rrss / 1024:.0f} ({rrss / baseline:.2f}) |"
        )


if __name__ == "__main__":
    main()
