"""`memvault-vault archive ...`: the conversation archive's operator commands, straight on the database (an
operator or a CronJob on a machine that reaches Postgres; no account is involved, so they act on any vault):

- `verify` checks every message and revision hash and every raw import's sha256; prints each problem on
  a line, then a summary; exits 1 when anything is damaged, 0 when all is well.
- `failures` lists failed imports and failed message index jobs with their ids.
- `retry ID...` retries each failed import or failed message index job by its id.
- `search QUERY` searches archived messages and memories with Postgres full-text search (no indexer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from memvault_core.errors import InvalidArgument, MemvaultError
from memvault_core.logging import setup_logging
from memvault_core.settings import load_settings
from memvault_vault.archive import canonical_search
from memvault_vault.archive.operations import parse_id
from memvault_vault.archive.retry_store import ArchiveRetryStore
from memvault_vault.archive.verify import vault_ids_named, verify
from memvault_vault.database import Database
from memvault_vault.settings import MigrateSettings

COMMANDS = ("archive",)
ACTOR = "system:cli"
FAILURES_SHOWN = 50


def add_parsers(commands: Any) -> None:
    archive = commands.add_parser(
        "archive",
        help="conversation archive operations: verify, failures, retry, search (memvault-vault archive -h)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = archive.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "verify",
        help="recompute every message and revision hash and every raw import's sha256 over its chunks; "
        "prints what is wrong and exits 1 on damage",
    )
    check.add_argument("--vault", help="one vault, by name or id (default: every vault)")
    failures = actions.add_parser(
        "failures", help="list failed imports and failed message index jobs, newest first, with the ids to retry"
    )
    failures.add_argument("--vault", help="one vault, by name or id (default: every vault)")
    failures.add_argument("--limit", type=int, default=FAILURES_SHOWN, help="at most N of each (default 50)")
    retry = actions.add_parser(
        "retry",
        help="retry failed jobs by id: an import (it resumes from its last checkpoint, then imports its failed "
        "conversations again) or an archived message whose index job failed (sent to the indexer again)",
    )
    retry.add_argument("ids", nargs="+", metavar="ID", help="an import's id or a failed message's id")
    search = actions.add_parser(
        "search",
        help="keyword search over the canonical store (archived messages of head revisions, and memories) "
        "in Postgres, no indexer needed: kind, conversation or memory id, revision, message id, snippet",
    )
    search.add_argument(
        "query", metavar="QUERY", help='words that must all match; "a phrase", word or word, -word excludes'
    )
    search.add_argument("--vault", help="one vault, by name or id (default: every vault)")
    search.add_argument(
        "--limit", type=int, default=20, help=f"at most N hits, best first (1-{canonical_search.MAX_HITS}; default 20)"
    )
    search.add_argument("--json", action="store_true", help="print one JSON object with the hits")
    search.add_argument(
        "--all-revisions", action="store_true", help="also messages only earlier revisions hold (not the head)"
    )


def run(args: argparse.Namespace) -> int:
    settings = load_settings(MigrateSettings)
    setup_logging("vault", settings.log.level)
    try:
        return asyncio.run(_run(settings.postgres.dsn, args))
    except MemvaultError as error:
        print(f"memvault-vault archive {args.action}: {error.message}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"memvault-vault archive {args.action}: {error}", file=sys.stderr)
        return 1


async def _run(dsn: str, args: argparse.Namespace) -> int:
    if args.action == "search":  # checked before connecting
        canonical_search.validate(args.query, args.limit)
    ids: list[str] = []
    if args.action == "retry":
        ids = [parse_id(i, "ID", "an import's or an archived message's id") for i in args.ids]
    database = await Database.connect(dsn, 1, 2)
    try:
        vault_id = await _vault(database, getattr(args, "vault", None))
        if args.action == "verify":
            return await _verify(database, vault_id)
        if args.action == "failures":
            return await _failures(database, vault_id, args.limit)
        if args.action == "retry":
            return await _retry(database, ids)
        return await _search(database, args, vault_id)
    finally:
        await database.close()


async def _vault(database: Database, name: str | None) -> str | None:
    if not name:
        return None
    ids = await vault_ids_named(database.pool, name)
    if not ids:
        raise InvalidArgument(f"no vault named {name!r}", field="vault")
    if len(ids) > 1:
        raise InvalidArgument(
            f"{len(ids)} accounts have a vault named {name!r}; give the vault's id instead: " + ", ".join(ids),
            field="vault",
        )
    return ids[0]


async def _verify(database: Database, vault_id: str | None) -> int:
    findings = await verify(database.pool, vault_id)
    for problem in findings.problems:
        print(problem)
    verdict = f"{len(findings.problems)} problems" if findings.problems else "all intact"
    print(
        f"archive verify: {findings.messages} messages, {findings.revisions} revisions, "
        f"{findings.imports} raw imports checked: {verdict}"
    )
    return 1 if findings.problems else 0


async def _failures(database: Database, vault_id: str | None, limit: int) -> int:
    if not 1 <= limit <= 1000:
        raise InvalidArgument("--limit must be 1 to 1000", field="limit")
    retries = ArchiveRetryStore.of(database)
    imports = await retries.failed_imports(vault_id, limit)
    messages = await retries.failed_message_jobs(vault_id, limit)
    for i in imports:
        why = f": {i['error']}" if i["error"] else ""
        print(f"import {i['id']} vault={i['vault']} {i['state']}, {i['failed']} failed conversations{why}")
    for m in messages:
        print(
            f"message {m['id']} vault={m['vault']} conversation={m['conversation_id']} "
            f"index failed {m['attempts']} times: {m['error']}"
        )
    print(f"archive failures: {len(imports)} imports, {len(messages)} message index jobs")
    return 0


async def _retry(database: Database, ids: list[str]) -> int:
    """Each id in turn; one that cannot be retried is reported and the rest go on (exit 1 if any could not)."""
    retries = ArchiveRetryStore.of(database)
    refused = 0
    for job_id in ids:
        found = await retries.job_vault(job_id)
        try:
            if found is None:
                raise InvalidArgument(f"no import or archived message {job_id}", field="ID")
            kind, vault = found
            if kind == "import":
                await retries.retry_import(vault, ACTOR, job_id)
                print(f"import {job_id} (vault {vault.name}): queued again; it resumes from its last checkpoint")
            else:
                await retries.retry_messages(vault, ACTOR, [job_id])
                print(f"message {job_id} (vault {vault.name}): sent to the indexer again")
        except MemvaultError as error:
            refused += 1
            print(f"memvault-vault archive retry: {error.message}", file=sys.stderr)
    return 1 if refused else 0


async def _search(database: Database, args: argparse.Namespace, vault_id: str | None) -> int:
    hits = await canonical_search.search(
        database.pool, args.query, vault_id=vault_id, limit=args.limit, all_revisions=args.all_revisions
    )
    if args.json:
        rows = [
            {
                "kind": h.kind,
                "vault": h.vault,
                ("conversation_id" if h.kind == "message" else "memory_id"): h.id,
                "revision": h.revision,
                **({"message_id": h.message_id, "role": h.role} if h.kind == "message" else {"status": h.role}),
                "snippet": h.snippet,
                "rank": round(h.rank, 4),
            }
            for h in hits
        ]
        print(json.dumps({"query": args.query, "hits": rows}, ensure_ascii=False))
        return 0
    for h in hits:
        where = f"message {h.message_id} ({h.role})" if h.kind == "message" else f"memory ({h.role})"
        print(f"{h.kind:<7} {h.id} rev {h.revision} {where} vault={h.vault}\n    {h.snippet}")
    print(f"archive search: {len(hits)} hits")
    return 0
