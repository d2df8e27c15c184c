"""Backups carry the conversation archive and tracked sources (format version 2), and
`memvault-vault archive verify` finds damage.

The round trip compares every row of every archive and sources table (ids, revisions, messages
with their content, tags, idempotency keys, raw imports byte for byte, import outcomes and
failures, sources with their pending changes) between the original and the restored vault.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import jsonschema
import pytest
from chatgpt_export import branched, dump, linear
from test_backup import SCHEMA, Deployment, _backup, _restore, elsewhere, here  # noqa: F401 (fixtures)
from vault_helpers import Caller

from memvault.events.v1 import archive_events_pb2 as epb
from memvault.vault.v1 import memory_pb2 as mpb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_vault.archive.service import ArchiveService
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.archive.verify import verify
from memvault_vault.backup import format as backup_format
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.archive import MessageInput
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

# table: (columns compared, order); the vault id is left out (it differs between deployments)
TABLES: dict[str, tuple[str, str]] = {
    "archive_conversation": ("*", "id"),
    "archive_revision": ("*", "conversation_id, number"),
    "archive_message": ("*", "id"),
    "archive_revision_message": ("*", "conversation_id, revision, position"),
    "archive_idempotency": ("*", "key"),
    "archive_import": ("*", "id"),
    "archive_import_chunk": (
        "import_id, part, encode(sha256(data), 'hex') AS sha, length(data) AS n",
        "import_id, part",
    ),
    "archive_import_failure": ("*", "import_id, conversation_ref"),
    "tracked_source": ("*", "id"),
    "source_change": ("*", "id"),
}


async def vault_id(deployment: Deployment, name: str) -> str:
    return str(await deployment.fetchval("SELECT id FROM vault WHERE name = $1", name))


async def rows(database: Database, vault: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for table, (columns, order) in TABLES.items():
        found = await database.pool.fetch(
            f"SELECT {columns} FROM {table} t WHERE t.vault_id = $1 ORDER BY {order}",  # noqa: S608 (constants)
            vault,
        )
        out[table] = [
            {k: v for k, v in dict(r).items() if k not in ("vault_id", "search", "claimed_until")} for r in found
        ]
    return out


async def archived_events(database: Database, vault: str) -> dict[str, str]:
    """message id -> content hash of the `message.archived` events the outbox holds for `vault`."""
    found: dict[str, str] = {}
    for row in await database.pool.fetch("SELECT payload FROM outbox WHERE subject LIKE '%message.archived'"):
        event = epb.MessageArchived.FromString(row["payload"])
        if event.vault_id == vault:
            assert event.revision >= 1 and event.conversation_id
            found[event.message_id] = event.content_hash
    return found


async def fill_archive(deployment: Deployment, caller: Caller) -> dict[str, str]:
    """Conversations with several revisions, tags and an idempotency key; an import with a failure and a
    duplicate; a tracked source with a pending change."""
    database = deployment.database
    services = VaultServices.build(database)
    store = ArchiveStore(database)
    vault = VaultAccess(await vault_id(deployment, caller.vault), caller.vault, "owner", "auto")
    first = await store.write(
        vault,
        "user:me",
        kind="create",
        conversation_id=None,
        base_revision=0,
        messages=[
            MessageInput("n1", None, "user", "text", "my cat is called Miso"),
            MessageInput("n2", "n1", "assistant", "text", "noted", content={"parts": ["noted"], "x": 1.5}),
        ],
        title="Pets",
        tags=["home", "pets"],
        idempotency=("key-1", "hash-1"),
    )
    second = await store.write(
        vault,
        "user:me",
        kind="append",
        conversation_id=first.conversation_id,
        base_revision=1,
        messages=[MessageInput("n3", None, "user", "text", "and my dog is Rex")],
    )
    await store.restore(vault, "user:me", first.conversation_id, 1, second.revision, None)
    await store.set_tags(vault, "user:me", first.conversation_id, ["home"], 1)
    # columns later migrations added (0016, 0018): a message's stable key and a copy's origin travel too
    await database.pool.execute(
        "UPDATE archive_message SET message_key = 'pets.cat' WHERE conversation_id = $1 AND node_id = 'n1'",
        first.conversation_id,
    )
    await database.pool.execute(
        "UPDATE archive_conversation SET derived_from = $2::jsonb WHERE id = $1",
        first.conversation_id,
        json.dumps(
            {"vault": "elsewhere", "vault_id": vault.id, "conversation_id": first.conversation_id, "revision": 1}
        ),
    )
    data = dump([branched("conv-1", None, "the wifi password is on the fridge"), {"id": "bad"}, linear("c2", "hi")])
    started = await store.start_import(
        vault, "user:me", "chatgpt", "conversations.json", len(data), hashlib.sha256(data).hexdigest()
    )
    half = len(data) // 2
    await store.upload_part(vault, started.id, 0, data[:half])
    await store.upload_part(vault, started.id, 1, data[half:])
    await store.finish_import(vault, "user:me", started.id)
    archive = ArchiveService(store, services.accounts)
    while await archive.process_checkpoint(started.id):
        pass
    again = await store.start_import(vault, "user:me", "chatgpt", "again.json", len(data), started.sha256)
    await store.upload_part(vault, again.id, 0, data)
    await store.finish_import(vault, "user:me", again.id)

    remembered = await caller.stub.Remember(
        vpb.RememberRequest(vault=caller.vault, memory=mpb.MemoryDraft(content="The build uses Python 3.12")),
        metadata=caller.metadata(),
    )
    memory_id = remembered.result.memory_id
    source_id = await database.pool.fetchval(
        "INSERT INTO tracked_source (vault_id, memory_id, kind, location, selector, mode, interval_seconds,"
        " baseline_hash, baseline_value, tracked_by, actor, next_check_at)"
        " VALUES ($1, $2, 'json_file', 'project/versions.json', '/python', 'review', 3600, 'h1', '\"3.12\"',"
        " 'user:me', 'user:me', now()) RETURNING id::text",
        vault.id,
        memory_id,
    )
    await database.pool.execute(
        "INSERT INTO source_change (vault_id, source_id, memory_id, old_hash, new_hash, old_value, new_value, status)"
        " VALUES ($1, $2, $3, 'h1', 'h2', '\"3.12\"', '\"3.13\"', 'pending')",
        vault.id,
        source_id,
        memory_id,
    )
    return {"conversation": first.conversation_id, "import": started.id, "memory": memory_id, "source": source_id}


async def test_backup_holds_the_archive_and_sources_and_restores_them_row_for_row(
    here: Deployment,  # noqa: F811
    elsewhere: Deployment,  # noqa: F811
) -> None:
    source = await here.caller()
    await fill_archive(here, source)
    before = await rows(here.database, await vault_id(here, source.vault))
    assert all(before[t] for t in TABLES), [t for t in TABLES if not before[t]]
    data = await _backup(source, here.backups, omit_embeddings=True)
    records = [json.loads(line) for line in data.decode().splitlines()]
    assert records[0]["version"] == 2
    counts = records[-1]["counts"]
    assert counts["conversation"] == len(before["archive_conversation"]) == 3
    assert counts["revision"] == len(before["archive_revision"])
    assert counts["message"] == len(before["archive_message"])
    assert counts["import"] == 2 and counts["import_failure"] == 1
    assert counts["source"] == 1 and counts["source_change"] == 1
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for record in records:
        errors = [e.message for e in validator.iter_errors(record)]
        assert not errors, (record["kind"], errors[:3])

    target = Caller(elsewhere.vaults, source.signer, source.subject, source.vault)
    assert await elsewhere.ensure_owner(source.subject, source.vault)
    report = await _restore(target, elsewhere.backups, data, chunk=4096)
    restored = {c.kind: c.count for c in report.counts}
    assert restored["conversation"] == 3 and restored["import_chunk"] == counts["import_chunk"]
    target_id = await vault_id(elsewhere, target.vault)
    after = await rows(elsewhere.database, target_id)
    assert after == before
    assert any(m["message_key"] == "pets.cat" for m in after["archive_message"])
    assert any(c["derived_from"] is not None for c in after["archive_conversation"])
    assert after["source_change"][0]["old_value"] == '"3.12"'
    # every restored message with text is sent to the indexer, as an archive write sends it
    assert await archived_events(elsewhere.database, target_id) == {
        str(m["id"]): m["content_hash"] for m in after["archive_message"] if m["text"]
    }
    findings = await verify(elsewhere.database.pool, await vault_id(elsewhere, target.vault))
    assert findings.problems == [] and findings.imports == 1 and findings.revisions == len(before["archive_revision"])

    # A vault holding conversations (and no memories) is replaced only when asked.
    await elsewhere.database.pool.execute(
        "DELETE FROM memory WHERE vault_id = $1", await vault_id(elsewhere, target.vault)
    )
    with pytest.raises(Exception, match="holds memories or conversations"):
        await _restore(target, elsewhere.backups, data)
    await _restore(target, elsewhere.backups, data, replace=True)
    assert await rows(elsewhere.database, await vault_id(elsewhere, target.vault)) == before


async def test_a_copy_beside_the_original_gets_new_ids_that_still_join_up(here: Deployment) -> None:  # noqa: F811
    source = await here.caller()
    ids = await fill_archive(here, source)
    data = await _backup(source, here.backups, omit_embeddings=True)
    copy = await here.caller()
    await _restore(copy, here.backups, data)
    copied = await rows(here.database, await vault_id(here, copy.vault))
    original = await rows(here.database, await vault_id(here, source.vault))
    for table in TABLES:
        assert len(copied[table]) == len(original[table]), table
    assert ids["conversation"] not in {str(c["id"]) for c in copied["archive_conversation"]}
    assert ids["source"] not in {str(s["id"]) for s in copied["tracked_source"]}
    memories = {
        str(r[0])
        for r in await here.database.pool.fetch(
            "SELECT id FROM memory WHERE vault_id = $1", await vault_id(here, copy.vault)
        )
    }
    assert ids["memory"] not in memories
    assert {str(s["memory_id"]) for s in copied["tracked_source"]} <= memories
    assert {str(c["memory_id"]) for c in copied["source_change"]} <= memories
    assert {str(c["source_id"]) for c in copied["source_change"]} == {str(s["id"]) for s in copied["tracked_source"]}
    # the receipt kept for the idempotency key names the copy's conversation
    receipt = json.loads(copied["archive_idempotency"][0]["receipt"])
    assert receipt["conversation_id"] in {str(c["id"]) for c in copied["archive_conversation"]}
    findings = await verify(here.database.pool, await vault_id(here, copy.vault))
    assert findings.problems == [] and findings.imports == 1


@pytest.mark.unit
def test_a_version_1_file_still_reads() -> None:
    writer = backup_format.BackupWriter()
    head = backup_format.header("home", "2026-01-02T00:00:00+00:00", embeddings=False) | {"version": 1}
    audit = {"kind": "audit", "actor": "user:me", "action": "memory.remember", "at": "2026-01-01T00:00:00Z"}
    data = writer.line(head) + writer.line(audit)
    v1_kinds = ("settings", "guide", "guide_version", "batch", "exclusion", "memory", "embedding", "history", "audit")
    manifest = {"kind": "manifest", "counts": {k: writer.counts.get(k, 0) for k in v1_kinds}}
    manifest["sha256"] = hashlib.sha256(data).hexdigest()
    data += json.dumps(manifest).encode() + b"\n"
    reader = backup_format.BackupReader()
    assert [r.kind for r in reader.feed(data)] == ["audit"]
    reader.finish()
    assert reader.header is not None and reader.header["version"] == 1


async def test_archive_verify_reports_a_damaged_row_and_exits_non_zero(
    here: Deployment,  # noqa: F811
    vault_dsn: str,
) -> None:
    caller = await here.caller()
    ids = await fill_archive(here, caller)
    vault = await vault_id(here, caller.vault)
    command = [sys.executable, "-m", "memvault_vault", "archive", "verify", "--vault", caller.vault]
    env = os.environ | {"MEMVAULT_POSTGRES__DSN": vault_dsn}
    clean = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "all intact" in clean.stdout

    pool = here.database.pool
    await pool.execute(
        "UPDATE archive_message SET text = 'my cat is called Mochi' WHERE vault_id = $1 AND text LIKE '%Miso%'", vault
    )
    await pool.execute(
        "UPDATE archive_revision SET content_sha256 = repeat('0', 64) WHERE conversation_id = $1 AND number = 2",
        ids["conversation"],
    )
    await pool.execute(
        "UPDATE archive_import_chunk SET data = overlay(data PLACING '\\x58'::bytea FROM 3)"
        " WHERE import_id = $1 AND part = 1",
        ids["import"],
    )
    damaged = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, timeout=120)
    assert damaged.returncode == 1, damaged.stdout + damaged.stderr
    out = damaged.stdout
    assert f"conversation {ids['conversation']} message" in out and "content hashes to" in out
    assert f"conversation {ids['conversation']} revision 2: content_sha256 {'0' * 64}" in out
    assert f"import {ids['import']} (conversations.json): its chunks hash to" in out
    assert "3 problems" in out

    # another vault's archive is not this one's business
    other = await here.caller()
    alone = await asyncio.to_thread(
        subprocess.run, [*command[:-1], other.vault], env=env, capture_output=True, text=True, timeout=120
    )
    assert alone.returncode == 0 and "0 messages" in alone.stdout
