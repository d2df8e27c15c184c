"""`memvault-vault archive verify`: checks the conversation archive straight on the database (an operator
or a CronJob on a machine that reaches Postgres). Prints each problem on a line, then a summary; exits 1
when anything is damaged, 0 when all is well."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from memvault_core.errors import MemvaultError
from memvault_core.logging import setup_logging
from memvault_core.settings import load_settings
from memvault_vault.archive.verify import vault_ids_named, verify
from memvault_vault.database import Database
from memvault_vault.settings import MigrateSettings

COMMANDS = ("archive",)


def add_parsers(commands: Any) -> None:
    archive = commands.add_parser(
        "archive",
        help="conversation archive maintenance: verify recomputes every message and revision hash and every "
        "raw import's sha256 over its chunks; prints what is wrong and exits 1 on damage",
    )
    archive.add_argument("action", choices=("verify",))
    archive.add_argument("--vault", help="one vault, by name or id (default: every vault)")


def run(args: argparse.Namespace) -> int:
    settings = load_settings(MigrateSettings)
    setup_logging("vault", settings.log.level)
    try:
        return asyncio.run(_verify(settings.postgres.dsn, args.vault))
    except MemvaultError as error:
        print(f"memvault-vault archive: {error.message}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"memvault-vault archive: {error}", file=sys.stderr)
        return 1


async def _verify(dsn: str, vault_name: str | None) -> int:
    database = await Database.connect(dsn, 1, 2)
    try:
        vault_id = None
        if vault_name:
            ids = await vault_ids_named(database.pool, vault_name)
            if len(ids) != 1:
                print(
                    f"memvault-vault archive: no vault named {vault_name!r}"
                    if not ids
                    else f"memvault-vault archive: {len(ids)} accounts have a vault named {vault_name!r}; give the "
                    "vault's id instead: " + ", ".join(ids),
                    file=sys.stderr,
                )
                return 1
            vault_id = ids[0]
        findings = await verify(database.pool, vault_id)
    finally:
        await database.close()
    for problem in findings.problems:
        print(problem)
    verdict = f"{len(findings.problems)} problems" if findings.problems else "all intact"
    print(
        f"archive verify: {findings.messages} messages, {findings.revisions} revisions, "
        f"{findings.imports} raw imports checked: {verdict}"
    )
    return 1 if findings.problems else 0
