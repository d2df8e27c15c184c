"""`memvault-vault sources sync|status|changes` on a database of its own: quiet when nothing changed,
one line per change or error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from memvault_core.identity import Identity
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.domain.memory import Draft
from memvault_vault.schema import apply_migrations
from memvault_vault.services import VaultServices
from memvault_vault.settings import SourcesGroup
from memvault_vault.sources.reader import SourceRules

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def own_dsn(postgres_dsn: str) -> AsyncIterator[str]:
    name = f"sources_cmd_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(postgres_dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = postgres_dsn.rsplit("/", 1)[0] + "/" + name
    try:
        apply_migrations(dsn)
        yield dsn
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


def run(dsn: str, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MEMVAULT_POSTGRES__DSN": dsn,
        "MEMVAULT_SOURCES__FILE_ROOTS": json.dumps([str(root)]),
        "MEMVAULT_LOG__LEVEL": "WARNING",
    }
    return subprocess.run(
        [sys.executable, "-m", "memvault_vault", "sources", *args], env=env, capture_output=True, text=True, timeout=60
    )


async def test_sync_is_quiet_until_a_source_changes_then_says_what_happened(own_dsn: str, tmp_path: Path) -> None:
    database = await Database.connect(own_dsn, 1, 2)
    try:
        assert await AccountStore(database).ensure_owner("cmd-owner", "cmd")
        await database.pool.execute("UPDATE vault_settings SET approval_mode = 'auto'")
        rules = SourceRules.from_settings(SourcesGroup(file_roots=[str(tmp_path)]))
        services = VaultServices.build(database, source_rules=rules)
        owner = Identity(subject="cmd-owner", scopes=frozenset({"read", "write", "admin"}))
        budget, policy = tmp_path / "budget.json", tmp_path / "policy.md"
        budget.write_text('{"budget": "$50,000"}')
        policy.write_text("Refunds within 30 days.")
        _, written = await services.memories.remember(owner, "cmd", Draft("The budget is $50,000."), propose=False)
        _, rule = await services.memories.remember(owner, "cmd", Draft("Refunds within 30 days."), propose=False)
        _, source, _ = await services.sources.track(
            owner,
            "cmd",
            written.results[0].memory_id,
            kind="json_file",
            location=str(budget),
            selector="/budget",
            template="The budget is {{value}}.",
        )
        await services.sources.track(owner, "cmd", rule.results[0].memory_id, kind="text_file", location=str(policy))
        await database.pool.execute("UPDATE tracked_source SET next_check_at = now()")

        quiet = run(own_dsn, tmp_path, "sync")
        assert quiet.returncode == 0, quiet.stderr
        assert quiet.stdout == ""

        budget.write_text('{"budget": "$35,000"}')
        policy.write_text("Refunds within 14 days.")
        await database.pool.execute("UPDATE tracked_source SET next_check_at = now()")
        changed = run(own_dsn, tmp_path, "sync")
        lines = changed.stdout.splitlines()
        assert changed.returncode == 0 and len(lines) == 2, changed.stdout
        assert any("superseded" in line for line in lines) and any("pending" in line for line in lines)
        assert "14 days" not in changed.stdout

        changes = run(own_dsn, tmp_path, "changes").stdout.splitlines()
        assert len(changes) == 1 and "text changed" in changes[0]
        budget.unlink()
        await database.pool.execute("UPDATE tracked_source SET next_check_at = now()")
        failed = run(own_dsn, tmp_path, "sync")
        assert failed.returncode == 1 and "does not exist" in failed.stdout
        status = run(own_dsn, tmp_path, "status").stdout.splitlines()
        assert status[0] == "2 sources: 1 with errors, 0 overdue, 1 pending changes"
        assert source.id in status[1] + status[2]
    finally:
        await database.close()
