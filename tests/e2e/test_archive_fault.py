"""A ChatGPT export imported with `memvault import chatgpt` while the vault is SIGKILLed half-way through the
import and the indexer half-way through indexing (all four services as processes), each started again.

Afterwards the import's counts are those of one clean import (no conversation twice, none lost), and the
vector store holds exactly one point per archived message at its current text (none missing, none
extra), each found by archive search. `python -m tests.bench.archive_pipeline --runs kill` does the same
on the 3,000-conversation, 100,000-message export.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest
from archive_checks import (
    OWNER_ENV,
    Progress,
    archive_counts,
    found_first,
    owner_token,
    points_against_messages,
    progress,
    sample_messages,
    start_cli_import,
)
from e2e_helpers import eventually

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.stack import Stack
from memvault_vault.domain.archive import IMPORT_CHECKPOINT_CONVERSATIONS
from tests.bench.archive_import_rss import write_export

pytestmark = pytest.mark.e2e

CONVERSATIONS = 100
MESSAGES = 3000


async def wait_for(
    connection: asyncpg.Connection,
    reached: Callable[[Progress], bool],
    what: str,
    cli: asyncio.subprocess.Process | None = None,
) -> Progress:
    """Poll the import's progress every 20 ms until `reached(progress)`; fail after 300 s, or if the import
    command `cli` ended first (then there was no import left to interrupt)."""
    deadline = time.monotonic() + 300
    while True:
        now = await progress(connection)
        if reached(now):
            return now
        assert cli is None or cli.returncode is None, f"the import command ended before {what}"
        assert time.monotonic() < deadline, f"never reached {what}: {now}"
        await asyncio.sleep(0.02)


async def kill_and_restart(stack: Stack, name: str) -> None:
    await asyncio.to_thread(stack.stop_service, name, kill=True)
    await asyncio.to_thread(stack.restart, name)


async def test_vault_and_indexer_killed_half_way_index_every_message_exactly_once(
    fresh_stack: StackStarter, tmp_path: Path
) -> None:
    stack = await asyncio.to_thread(fresh_stack, service_env={"gateway": OWNER_ENV})
    export = tmp_path / "conversations.json"
    write_export(export, CONVERSATIONS, MESSAGES, "chatgpt")
    token, vault = await owner_token(stack)
    connection = await asyncpg.connect(stack.postgres_dsn)
    cli = await start_cli_import(stack, export, token, vault)
    answer = asyncio.ensure_future(cli.communicate())

    # The vault dies as soon as a checkpoint is committed, in the middle of the next one.
    at_kill = await wait_for(
        connection, lambda p: p.done >= IMPORT_CHECKPOINT_CONVERSATIONS, "the first import checkpoint", cli
    )
    assert at_kill.state == "running" and at_kill.done < CONVERSATIONS, at_kill
    await kill_and_restart(stack, "vault")

    # The indexer dies with a third of the messages indexed, and more on their way.
    at_kill = await wait_for(connection, lambda p: p.indexed >= MESSAGES // 3, "a third of the messages indexed")
    assert at_kill.indexed < MESSAGES, at_kill
    await kill_and_restart(stack, "indexer")

    out, err = await answer
    assert cli.returncode == 0, err.decode()[-2000:]
    assert "done; 100 of 100 conversations, 100 new, 0 updated, 0 unchanged, 0 failed" in out.decode()

    async def all_indexed() -> Progress | None:
        now = await progress(connection)
        assert now.index_failed == 0, now
        return now if now.indexed >= MESSAGES else None

    # Events the killed indexer held unacknowledged come back after the consumer's ack wait (60 s).
    done = await eventually(all_indexed, deadline=600, interval=0.25)
    await connection.close()
    assert (done.state, done.total, done.imported, done.updated, done.duplicates, done.failed) == (
        "done",
        CONVERSATIONS,
        CONVERSATIONS,
        0,
        0,
        0,
    )
    counts = await archive_counts(stack.postgres_dsn)
    assert (counts.conversations, counts.distinct_sources, counts.revisions, counts.messages) == (
        CONVERSATIONS,
        CONVERSATIONS,
        CONVERSATIONS,
        MESSAGES,
    )

    # Each found first, by vector and full-text search together (on a loaded host the vault may answer
    # keyword-only when the indexer misses its deadline: then it is asked again).
    samples = await sample_messages(stack.postgres_dsn, 6)

    async def found_by_both() -> dict[str, object] | None:
        found = await found_first(stack, token, vault, samples)
        assert found["first"] == found["asked"] == 6, found
        return found if found["modes"] == ["hybrid"] else None

    await eventually(found_by_both, deadline=120, interval=2)

    await asyncio.to_thread(stack.stop_service, "indexer")  # it owns the embedded store
    check = await points_against_messages(stack)
    assert check.exactly_once and check.messages == MESSAGES, str(check)
    await asyncio.to_thread(stack.start_services)

    again = await start_cli_import(stack, export, token, vault)
    out, err = await again.communicate()
    assert again.returncode == 0 and "already imported" in out.decode(), err.decode()[-2000:]
