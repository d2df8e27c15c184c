"""`memvault-vault backup` and `memvault-vault restore`: the same work as the API, straight on the database.

Meant for an operator (or a CronJob) on a machine that reaches Postgres; no account is involved,
so they act on any vault by name. Progress goes to stderr, one line of error on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from tqdm import tqdm  # type: ignore[import-untyped]

from memvault_core.errors import MemvaultError
from memvault_core.identity import IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.settings import load_settings
from memvault_vault.backup.records import VaultRef
from memvault_vault.backup.service import BackupService
from memvault_vault.backup.store import BackupStore
from memvault_vault.database import Database
from memvault_vault.index_client import IndexClient
from memvault_vault.settings import BackupSettings

COMMANDS = ("backup", "restore")
READ_BYTES = 256 * 1024
ACTOR = "system:cli"


def add_parsers(commands: Any) -> None:
    backup = commands.add_parser(
        "backup",
        help="write one vault's backup file (docs/backup-format.md); progress on stderr",
    )
    which = backup.add_mutually_exclusive_group(required=True)
    which.add_argument("--vault", help="the vault's name")
    which.add_argument("--all", action="store_true", help="every vault, each into DIR/<vault>/ (needs --dir)")
    backup.add_argument(
        "--output", help="with --vault: file to write ('-' for stdout); written as FILE.partial, renamed when whole"
    )
    backup.add_argument("--dir", help="write memvault-<vault>-<time>.jsonl into DIR/<vault>/ (for scheduled backups)")
    backup.add_argument(
        "--keep", type=int, default=0, metavar="N", help="with --dir: keep the newest N backups of each vault (0: all)"
    )
    backup.add_argument(
        "--no-embeddings",
        action="store_true",
        help="leave out the embeddings (no indexer needed; restore embeds again)",
    )
    restore = commands.add_parser(
        "restore",
        help="restore a backup file into a vault, in one transaction: all of it or nothing",
    )
    restore.add_argument("--vault", required=True, help="the vault's name (it must exist: see create-owner)")
    restore.add_argument("--input", required=True, help="backup file to read ('-' for stdin)")
    restore.add_argument("--replace", action="store_true", help="replace what the vault holds (refused without)")


def run(args: argparse.Namespace) -> int:
    settings = load_settings(BackupSettings)
    setup_logging("vault", settings.log.level)
    try:
        return asyncio.run(_run(args, settings))
    except MemvaultError as error:
        print(f"memvault-vault {args.command}: {error.message}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"memvault-vault {args.command}: {error}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace, settings: BackupSettings) -> int:
    index = None
    wants_index = args.command == "restore" or not args.no_embeddings
    if wants_index and settings.vault.indexer_address and settings.identity is not None:
        signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
        index = IndexClient(settings.vault.indexer_address, settings.vault.index_timeout_seconds, signer)
    elif args.command == "backup" and not args.no_embeddings:
        print(
            "memvault-vault backup: embeddings need the indexer (MEMVAULT_VAULT__INDEXER_ADDRESS and "
            "MEMVAULT_IDENTITY__SECRET); set them or pass --no-embeddings",
            file=sys.stderr,
        )
        return 1
    database = await Database.connect(settings.postgres.dsn, min_size=0, max_size=2)
    store = BackupStore(database)
    try:
        if args.command == "backup" and (args.all or args.dir):
            return await _backup_to_dir(BackupService(store, None, index), store, args)
        if args.command == "backup" and not args.output:
            print("memvault-vault backup: give --output FILE (or --dir DIR)", file=sys.stderr)
            return 1
        vault = await store.vault_named(args.vault)
        if vault is None:
            print(f"memvault-vault {args.command}: no vault named {args.vault!r}", file=sys.stderr)
            return 1
        service = BackupService(store, None, index)
        if args.command == "backup":
            return await _backup(service, vault, args.output, embeddings=not args.no_embeddings)
        return await _restore(service, vault, args.input, replace=args.replace)
    finally:
        await database.close(finish_statistics=args.command == "restore")
        if index is not None:
            await index.close()


async def _backup(service: BackupService, vault: VaultRef, output: str, *, embeddings: bool) -> int:
    to_stdout = output == "-"
    target = Path(output)
    partial = target.with_name(target.name + ".partial")
    stream: BinaryIO = sys.stdout.buffer if to_stdout else await asyncio.to_thread(partial.open, "wb")
    bar = tqdm(total=0, unit=" memories", desc=f"backup {vault.name}", file=sys.stderr, disable=None)
    try:
        async for chunk in service.backup_vault(vault, embeddings=embeddings, actor=ACTOR):
            await asyncio.to_thread(stream.write, chunk.data)
            bar.total = chunk.memories_total
            bar.update(chunk.memories_done - bar.n)
        stream.flush()
        if not to_stdout:
            os.fsync(stream.fileno())
    except BaseException:
        if not to_stdout:
            stream.close()
            partial.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    if not to_stdout:
        stream.close()
        partial.replace(target)
        print(f"memvault-vault backup: wrote {target}", file=sys.stderr)
    return 0


async def _backup_to_dir(service: BackupService, store: BackupStore, args: argparse.Namespace) -> int:
    if not args.dir:
        print("memvault-vault backup: --all needs --dir DIR", file=sys.stderr)
        return 1
    if args.keep < 0:
        print("memvault-vault backup: --keep must be 0 or more", file=sys.stderr)
        return 1
    names = await store.vault_names() if args.all else [args.vault]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for name in names:
        vault = await store.vault_named(name)
        if vault is None:
            print(f"memvault-vault backup: no vault named {name!r}", file=sys.stderr)
            return 1
        folder = Path(args.dir) / vault.name
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        await _backup(
            service, vault, str(folder / f"memvault-{vault.name}-{stamp}.jsonl"), embeddings=not args.no_embeddings
        )
        if args.keep:
            old = sorted(folder.glob(f"memvault-{vault.name}-*.jsonl"))[: -args.keep]
            for path in old:
                await asyncio.to_thread(path.unlink)
    return 0


async def _restore(service: BackupService, vault: VaultRef, source: str, *, replace: bool) -> int:
    stream: BinaryIO = sys.stdin.buffer if source == "-" else await asyncio.to_thread(Path(source).open, "rb")
    size = 0 if source == "-" else os.fstat(stream.fileno()).st_size
    bar = tqdm(
        total=size or None, unit="B", unit_scale=True, desc=f"restore {vault.name}", file=sys.stderr, disable=None
    )

    async def chunks() -> AsyncIterator[bytes]:
        while data := await asyncio.to_thread(stream.read, READ_BYTES):
            bar.update(len(data))
            yield data

    try:
        report = await service.restore_vault(vault, chunks(), replace=replace, actor=ACTOR)
    finally:
        bar.close()
        stream.close()
    counts = ", ".join(f"{count} {kind}" for kind, count in report.counts.items() if count)
    print(f"restored into {report.vault}: {counts or 'nothing'}; {report.embeddings_kept} embeddings kept")
    for notice in report.notices:
        print(f"note: {notice}")
    return 0
