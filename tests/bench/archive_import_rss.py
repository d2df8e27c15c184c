"""Peak memory and time of the archive's import job on a generated export (issue 16: flat memory).

    .venv/bin/python -m tests.bench.archive_import_rss [--sizes 300:10000,3000:100000] [--format chatgpt]

Needs MEMVAULT_TEST_POSTGRES_DSN (a server this makes and drops a database on). For each size
(conversations:messages) it writes a ChatGPT (or Claude.ai) export of that many conversations and
messages to a temporary file, stores it as an upload in 3 MiB parts the way `/api/v1` does, then runs
the vault's import job (`ArchiveService.process_checkpoint` in a loop, as `memvault-vault serve` runs it)
in a child process of its own (started by a small wrapper, since a child keeps the peak RSS of the
process it was forked from) and reads that child's peak RSS from the kernel. The baseline is the same
child importing an export of one conversation: what loading the program costs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memvault_devstack.postgres import create_database, drop_database
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.database import Database, VaultAccess
from memvault_vault.schema import apply_migrations

PART = 3 * 1024 * 1024

CHILD = """
import asyncio, resource, sys
from memvault_vault.archive.service import ArchiveService
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.database import Database
from memvault_vault.services import VaultServices

async def main() -> None:
    database = await Database.connect(sys.argv[1], 1, 4)
    service = ArchiveService(ArchiveStore(database), VaultServices.build(database).accounts)
    await service.process_checkpoint(sys.argv[2])  # the first also counts the conversations
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    while await service.process_checkpoint(sys.argv[2]):
        pass
    await database.close()

asyncio.run(main())
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _chatgpt(index: int, count: int) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for n in range(count):
        node = f"n{n}"
        text = f"conversation {index} message {n}: the service {hashlib.md5(f'{index}/{n}'.encode()).hexdigest()} "  # noqa: S324
        text += "runs on host " + str(n % 97) + " and is backed up nightly to the garage NAS. " * 2
        mapping[node] = {
            "id": node,
            "parent": f"n{n - 1}" if n else None,
            "children": [f"n{n + 1}"] if n + 1 < count else [],
            "message": {
                "id": node,
                "author": {"role": "user" if n % 2 == 0 else "assistant", "metadata": {}},
                "create_time": 1_700_000_000 + index * 100 + n,
                "content": {"content_type": "text", "parts": [text]},
                "metadata": {},
                "status": "finished_successfully",
            },
        }
    return {
        "title": f"chat {index}",
        "create_time": 1_700_000_000 + index * 100,
        "update_time": 1_700_000_000 + index * 100 + count,
        "conversation_id": f"bench-{index}",
        "current_node": f"n{count - 1}",
        "mapping": mapping,
    }


def _claude(index: int, count: int) -> dict[str, Any]:
    messages = []
    for n in range(count):
        text = f"conversation {index} message {n}: the service {hashlib.md5(f'{index}/{n}'.encode()).hexdigest()} "  # noqa: S324
        text += "runs on host " + str(n % 97) + " and is backed up nightly to the garage NAS. " * 2
        messages.append(
            {
                "uuid": f"{index}-{n}",
                "text": text,
                "content": [{"type": "text", "text": text}],
                "sender": "human" if n % 2 == 0 else "assistant",
                "created_at": "2025-03-01T10:00:00Z",
                "attachments": [],
                "files": [],
            }
        )
    return {
        "uuid": f"bench-{index}",
        "name": f"chat {index}",
        "created_at": "2025-03-01T10:00:00Z",
        "updated_at": "2025-03-01T10:00:00Z",
        "chat_messages": messages,
    }


def write_export(path: Path, conversations: int, messages: int, fmt: str) -> None:
    """Written one conversation at a time; messages spread evenly over the conversations."""
    make = _chatgpt if fmt == "chatgpt" else _claude
    with path.open("w") as out:
        out.write("[")
        for index in range(conversations):
            count = messages // conversations + (1 if index < messages % conversations else 0)
            out.write(("," if index else "") + json.dumps(make(index, max(1, count))))
        out.write("]")


async def upload(dsn: str, path: Path, fmt: str) -> str:
    database = await Database.connect(dsn, 1, 2)
    try:
        subject, name = f"bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
        await AccountStore(database).ensure_owner(subject, name)
        vault_id = str(await database.pool.fetchval("SELECT id FROM vault WHERE name = $1", name))
        vault = VaultAccess(vault_id, name, "owner", "auto")
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        store = ArchiveStore(database)
        size = os.path.getsize(path)  # noqa: ASYNC240 (a bench: blocking is fine here)
        record = await store.start_import(vault, "bench", fmt, path.name, size, digest.hexdigest())
        with path.open("rb") as handle:
            for part, block in enumerate(iter(lambda: handle.read(PART), b"")):
                await store.upload_part(vault, record.id, part, block)
        await store.finish_import(vault, "bench", record.id)
        return record.id
    finally:
        await database.close()


async def outcome(dsn: str, import_id: str) -> dict[str, Any]:
    database = await Database.connect(dsn, 1, 2)
    try:
        row = await database.pool.fetchrow(
            "SELECT state, total, imported, failed, (SELECT count(*) FROM archive_message m"
            " WHERE m.vault_id = i.vault_id) AS messages FROM archive_import i WHERE id = $1",
            import_id,
        )
        return dict(row)
    finally:
        await database.close()


# A child keeps the peak RSS of the process it was forked from (Linux carries it over exec), and this
# process holds the export it wrote and uploaded: a small wrapper starts the import child instead.
WRAPPER = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stderr.write(done.stderr)\n"
    "sys.stdout.write(done.stdout)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(done.returncode)\n"
)


def measure(dsn: str, import_id: str) -> tuple[float, int, int]:
    """Seconds, peak RSS (KiB) after the first checkpoint, and at the end."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, sys.executable, "-c", CHILD, dsn, import_id],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    lines = done.stdout.strip().splitlines()  # after the first checkpoint, the child's end, the wrapper's
    return time.monotonic() - started, int(lines[-3]), int(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300:10000,3000:100000", help="conversations:messages, comma-separated")
    parser.add_argument("--format", default="chatgpt", choices=("chatgpt", "claude"))
    args = parser.parse_args()
    server = os.environ["MEMVAULT_TEST_POSTGRES_DSN"]
    name = f"memvault_bench_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server, name)
    try:
        apply_migrations(dsn)
        rows = []
        with tempfile.TemporaryDirectory() as folder:
            for label, (conversations, messages) in [("baseline", (1, 2))] + [
                (size, tuple(int(x) for x in size.split(":"))) for size in args.sizes.split(",")
            ]:
                path = Path(folder) / f"{label.replace(':', '-')}.json"
                write_export(path, conversations, messages, args.format)
                import_id = asyncio.run(upload(dsn, path, args.format))
                seconds, first, peak = measure(dsn, import_id)
                result = asyncio.run(outcome(dsn, import_id))
                rows.append((conversations, messages, path.stat().st_size, seconds, first, peak, result))
                print(
                    f"{conversations} conversations, {messages} messages, {path.stat().st_size / 1e6:.1f} MB: "
                    f"{seconds:.1f} s, peak RSS {first / 1024:.0f} MiB after the first checkpoint, "
                    f"{peak / 1024:.0f} MiB at the end; {result}",
                    flush=True,
                )
        base = rows[0][5]
        print(
            "\n| conversations | messages | file MB | import s | peak RSS MiB after the first checkpoint"
            " | peak RSS MiB at the end (x baseline) |"
        )
        print("|---|---|---|---|---|---|")
        for conversations, messages, size, seconds, first, peak, _ in rows:
            print(
                f"| {conversations} | {messages} | {size / 1e6:.1f} | {seconds:.1f} | {first / 1024:.0f}"
                f" | {peak / 1024:.0f} ({peak / base:.2f}) |"
            )
    finally:
        drop_database(server, name)


if __name__ == "__main__":
    main()
