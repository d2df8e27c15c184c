"""`memvault-vault sources sync|status|changes|watch` on a database of its own: quiet when nothing changed,
one line per change or error; watch says an error once (and once when it clears) and ends on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
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


class Watcher:
    """`memvault-vault sources watch --poll N` as a process, its output lines gathered as they come."""

    def __init__(self, dsn: str, root: Path, poll: float) -> None:
        env = {
            **os.environ,
            "MEMVAULT_POSTGRES__DSN": dsn,
            "MEMVAULT_SOURCES__FILE_ROOTS": json.dumps([str(root)]),
            "MEMVAULT_LOG__LEVEL": "WARNING",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memvault_vault", "sources", "watch", "--poll", str(poll)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    async def wait_for_lines(self, count: int, deadline: float = 30.0) -> list[str]:
        end = time.monotonic() + deadline
        while len(self.lines) < count:
            assert self.process.poll() is None, self.process.stderr.read() if self.process.stderr else ""
            assert time.monotonic() < end, f"waited {deadline}s for line {count}; got {self.lines}"
            await asyncio.sleep(0.05)
        return self.lines

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=15)
        self._reader.join(timeout=5)
        return code, self.process.stderr.read() if self.process.stderr else ""


async def checked_rounds(database: Database, rounds: int, deadline: float = 30.0) -> None:
    """Make every source due, `rounds` times, each time waiting until the watcher has checked them all."""
    end = time.monotonic() + deadline
    for _ in range(rounds):
        await database.pool.execute("UPDATE tracked_source SET next_check_at = now() - interval '1 second'")
        while await database.pool.fetchval("SELECT count(*) FROM tracked_source WHERE next_check_at <= now()"):
            assert time.monotonic() < end, "the watcher did not check the due sources in time"
            await asyncio.sleep(0.05)


async def test_watch_is_quiet_until_something_changes_then_says_it_once_and_stops_on_sigterm(
    own_dsn: str, tmp_path: Path
) -> None:
    database = await Database.connect(own_dsn, 1, 2)
    watcher: Watcher | None = None
    try:
        assert await AccountStore(database).ensure_owner("watch-owner", "watch")
        await database.pool.execute("UPDATE vault_settings SET approval_mode = 'auto'")
        services = VaultServices.build(
            database, source_rules=SourceRules.from_settings(SourcesGroup(file_roots=[str(tmp_path)]))
        )
        owner = Identity(subject="watch-owner", scopes=frozenset({"read", "write", "admin"}))
        budget, policy = tmp_path / "budget.json", tmp_path / "policy.md"
        budget.write_text('{"budget": "$50,000"}')
        policy.write_text("Refunds within 30 days.")
        _, written = await services.memories.remember(owner, "watch", Draft("The budget is $50,000."), propose=False)
        _, rule = await services.memories.remember(owner, "watch", Draft("Refunds within 30 days."), propose=False)
        await services.sources.track(
            owner,
            "watch",
            written.results[0].memory_id,
            kind="json_file",
            location=str(budget),
            selector="/budget",
            template="The budget is {{value}}.",
        )
        _, text_source, _ = await services.sources.track(
            owner, "watch", rule.results[0].memory_id, kind="text_file", location=str(policy)
        )

        watcher = Watcher(own_dsn, tmp_path, poll=0.2)
        await checked_rounds(database, 3)
        assert watcher.lines == []  # nothing changed: not a word

        budget.write_text('{"budget": "$35,000"}')
        await checked_rounds(database, 2)
        [changed] = await watcher.wait_for_lines(1)
        assert "superseded" in changed and text_source.id not in changed

        policy.unlink()
        await checked_rounds(database, 1)
        failed = (await watcher.wait_for_lines(2))[1]
        assert text_source.id in failed and "error" in failed and "does not exist" in failed
        await checked_rounds(database, 3)  # the same error again: said once already
        assert len(watcher.lines) == 2, watcher.lines

        policy.write_text("Refunds within 30 days.")
        await checked_rounds(database, 2)
        recovered = (await watcher.wait_for_lines(3))[2]
        assert text_source.id in recovered and "recovered" in recovered
        assert len(watcher.lines) == 3, watcher.lines
        assert "Refunds" not in "\n".join(watcher.lines)  # never the source's text

        code, errors = watcher.stop()
        watcher = None
        assert code == 0 and "Traceback" not in errors, errors
    finally:
        if watcher is not None:
            watcher.process.kill()
            watcher.process.wait(timeout=10)
        await database.close()


def test_a_claim_shorter_than_a_fetch_is_refused_at_start_up(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MEMVAULT_POSTGRES__DSN": "postgresql://nobody@127.0.0.1:1/none",
        "MEMVAULT_SOURCES__FETCH_TIMEOUT_SECONDS": "10",
        "MEMVAULT_SOURCES__CLAIM_SECONDS": "5",
    }
    refused = subprocess.run(
        [sys.executable, "-m", "memvault_vault", "sources", "sync"], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0
    assert "claim_seconds (5) must be longer than fetch_timeout_seconds (10)" in refused.stderr, refused.stderr
