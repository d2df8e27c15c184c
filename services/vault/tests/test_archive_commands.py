"""`memvault-vault archive search | failures | retry` as an operator runs them: a subprocess on the database,
no indexer, no account."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest
from chatgpt_export import dump, linear
from test_archive import archive_stub, create, run_import, status, stub, upload  # noqa: F401 (fixtures)
from test_archive_retry import new_caller
from vault_helpers import Caller

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_vault.database import Database
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore

pytestmark = pytest.mark.integration


async def archive(vault_dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memvault_vault", "archive", *args]
    env = os.environ | {"MEMVAULT_POSTGRES__DSN": vault_dsn}
    return await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, timeout=120)


async def remember(database: Database, caller: Caller, text: str) -> str:
    """A memory row as the vault stores one (the canonical store is what the command reads)."""
    return str(
        await database.pool.fetchval(
            "INSERT INTO memory (vault_id, content, content_hash, type, trust, status)"
            " SELECT id, $2, md5($2), 'fact', 'stated', 'active' FROM vault v WHERE v.name = $1 RETURNING id",
            caller.vault,
            text,
        )
    )


async def test_search_finds_messages_and_memories_in_postgres(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
    vault_dsn: str,
) -> None:
    owner = await new_caller(database, archive_stub)
    other = await new_caller(database, archive_stub)
    host = f"api-{uuid.uuid4().hex[:6]}.internal.example"
    receipt = await create(owner, ("user", f"staging deploys go to {host} on fridays"), ("assistant", "noted"))
    memory_id = await remember(database, owner, f"The staging host is {host}; production is elsewhere.")
    await create(other, ("user", f"someone else's note about {host}"))
    message_id = await database.pool.fetchval(
        "SELECT id::text FROM archive_message WHERE conversation_id = $1 AND role = 'user'", receipt.conversation_id
    )

    plain = await archive(vault_dsn, "search", host, "--vault", owner.vault)
    assert plain.returncode == 0, plain.stderr
    assert f"message {receipt.conversation_id} rev 1 message {message_id} (user) vault={owner.vault}" in plain.stdout
    assert f"memory  {memory_id} rev 1 memory (active) vault={owner.vault}" in plain.stdout
    assert "«" in plain.stdout and "archive search: 2 hits" in plain.stdout
    assert other.vault not in plain.stdout  # --vault keeps to one vault

    as_json = await archive(vault_dsn, "search", host, "--vault", owner.vault, "--json", "--limit", "5")
    answer = json.loads(as_json.stdout)
    kinds = {h["kind"]: h for h in answer["hits"]}
    assert set(kinds) == {"message", "memory"}
    assert kinds["message"]["conversation_id"] == receipt.conversation_id
    assert kinds["message"]["message_id"] == message_id and kinds["message"]["revision"] == 1
    assert kinds["memory"]["memory_id"] == memory_id and kinds["memory"]["status"] == "active"
    assert host.split(".")[0] in kinds["message"]["snippet"]

    everywhere = json.loads((await archive(vault_dsn, "search", host, "--json")).stdout)
    assert {h["vault"] for h in everywhere["hits"]} == {owner.vault, other.vault}

    # A message only an earlier revision holds: found with --all-revisions, at that revision.
    await stub(owner).ReplaceTranscript(
        pb.ReplaceTranscriptRequest(
            vault=owner.vault,
            conversation_id=receipt.conversation_id,
            base_revision=1,
            messages=[pb.MessageDraft(role="user", text="the staging host moved")],
        ),
        metadata=owner.metadata(),
    )
    head_only = json.loads((await archive(vault_dsn, "search", host, "--vault", owner.vault, "--json")).stdout)
    assert [h["kind"] for h in head_only["hits"]] == ["memory"]
    every = json.loads(
        (await archive(vault_dsn, "search", host, "--vault", owner.vault, "--json", "--all-revisions")).stdout
    )
    message = next(h for h in every["hits"] if h["kind"] == "message")
    assert (message["message_id"], message["revision"]) == (message_id, 1)

    for args, says in (
        (("the",), "has no words to search for"),
        ((host, "--limit", "0"), "--limit must be 1 to 200"),
        ((host, "--vault", "no-such-vault-here"), "no vault named 'no-such-vault-here'"),
        (("   ",), "QUERY is empty"),
    ):
        wrong = await archive(vault_dsn, "search", *args)
        assert wrong.returncode == 1 and says in wrong.stderr, (args, wrong.stderr)
        assert "Traceback" not in wrong.stderr


async def test_failures_and_retry_by_id(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
    vault_dsn: str,
) -> None:
    owner = await new_caller(database, archive_stub)
    pool = database.pool
    job = await upload(owner, dump([linear("fine", "a fine conversation")]))
    await run_import(database, job.id)
    # The job stopped on its file: as a failed import looks once its checkpoint gave up.
    await pool.execute(
        "UPDATE archive_import SET state = 'failed', error = 'conversations.json is not valid JSON after"
        " conversation 0', next_index = 0, imported = 0, total = 0 WHERE id = $1",
        job.id,
    )
    receipt = await create(owner, ("user", "the heating oil arrives in October"))
    message_id = await pool.fetchval(
        "SELECT id::text FROM archive_message WHERE conversation_id = $1", receipt.conversation_id
    )
    await IndexFeedStore(database).report_messages(
        [IndexReport(message_id, "h", "test-model", "failed", "the indexer gave up", kind="message")]
    )

    listed = await archive(vault_dsn, "failures", "--vault", owner.vault)
    assert listed.returncode == 0, listed.stderr
    assert (
        f"import {job.id} vault={owner.vault} failed, 0 failed conversations: conversations.json is not"
        in listed.stdout
    )
    assert f"message {message_id} vault={owner.vault} conversation={receipt.conversation_id}" in listed.stdout
    assert "archive failures: 1 imports, 1 message index jobs" in listed.stdout

    retried = await archive(vault_dsn, "retry", job.id, message_id)
    assert retried.returncode == 0, retried.stderr
    assert f"import {job.id} (vault {owner.vault}): queued again" in retried.stdout
    assert f"message {message_id} (vault {owner.vault}): sent to the indexer again" in retried.stdout
    await run_import(database, job.id)
    done = await status(owner, job.id)
    assert (done.state, done.imported, done.duplicates) == ("done", 0, 1)  # committed before: not imported twice
    assert await pool.fetchval("SELECT count(*) FROM archive_message_index WHERE message_id = $1", message_id) == 0

    missing = str(uuid.uuid4())
    again = await archive(vault_dsn, "retry", job.id, missing, message_id, "not-a-uuid")
    assert again.returncode == 1
    assert "ID must be an import's or an archived message's id" in again.stderr
    again = await archive(vault_dsn, "retry", job.id, missing, message_id)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert f"import {job.id} is done with no failed conversations" in again.stderr
    assert f"no import or archived message {missing}" in again.stderr
    assert f"message {message_id} did not fail (it is pending" in again.stderr
    assert (
        "archive failures: 0 imports, 0 message index jobs"
        in (await archive(vault_dsn, "failures", "--vault", owner.vault)).stdout
    )


async def test_help_names_every_archive_command(vault_dsn: str) -> None:
    shown = await archive(vault_dsn, "-h")
    assert shown.returncode == 0
    for action in ("verify", "failures", "retry", "search"):
        assert action in shown.stdout
    search = await archive(vault_dsn, "search", "-h")
    assert "--all-revisions" in search.stdout and "--json" in search.stdout
