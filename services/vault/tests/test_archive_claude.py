"""Claude.ai exports through the same import job as ChatGPT's (raw bytes kept, duplicates detected,
checkpoints, failures per conversation), and the job reading any export as a stream."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from chatgpt_export import dump, linear, zipped
from claude_export import plain, rich
from test_archive import archive_stub, owner, read, run_import, status, stub  # noqa: F401 (fixtures)
from vault_helpers import Caller, every_table_stale

from memvault.vault.v1 import archive_pb2 as pb
from memvault_vault.archive.chatgpt import ExportError
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.archive.stream import ExportStream
from memvault_vault.database import Database
from memvault_vault.domain.archive import IMPORT_CHECKPOINT_CONVERSATIONS

pytestmark = pytest.mark.integration


async def upload(caller: Caller, data: bytes, fmt: str = "claude", name: str = "conversations.json") -> pb.ImportStatus:
    response = await stub(caller).StartImport(
        pb.StartImportRequest(vault=caller.vault, format=fmt, filename=name, data=data), metadata=caller.metadata()
    )
    return getattr(response, "import")


async def test_a_claude_export_keeps_every_block_attachment_and_unknown_field(
    owner: Caller,  # noqa: F811
    database: Database,
) -> None:
    data = dump([rich("c-1", "Boiler", "the boiler code is 4471"), {"uuid": "broken", "name": "x"}, plain("c-2", "hi")])
    started = await upload(owner, data)
    assert started.state == "queued" and started.sha256 == hashlib.sha256(data).hexdigest()
    await run_import(database, started.id)
    done = await status(owner, started.id)
    assert (done.state, done.total, done.imported, done.failed) == ("done", 3, 2, 1)
    assert [f.conversation_id for f in done.failures] == ["broken"]
    assert "chat_messages" in done.failures[0].error
    vault_id = str(await database.pool.fetchval("SELECT vault_id FROM archive_import WHERE id = $1", started.id))
    assert await ArchiveStore(database).raw_bytes(vault_id, started.id) == data

    listed = await stub(owner).ListConversations(
        pb.ListConversationsRequest(vault=owner.vault), metadata=owner.metadata()
    )
    by_external = {c.external_id: c for c in listed.conversations}
    conversation = by_external["c-1"]
    assert conversation.title == "Boiler" and conversation.source == "claude"
    body = await read(owner, conversation.id)
    assert [(m.node_id, m.role) for m in body.messages] == [
        ("conversation", "none"),
        ("m1", "user"),
        ("m2", "assistant"),
    ]
    assert all(m.active for m in body.messages)
    human, assistant = body.messages[1], body.messages[2]
    assert human.content_type == "text" and "Remember this: the boiler code is 4471" in human.text
    assert "[attachment: notes.txt]\nthe boiler was serviced in May" in human.text and "[file: photo.png]" in human.text
    assert assistant.content_type == "thinking+tool_use+tool_result+text+hologram"
    for words in ("[thinking] the user wants", "[tool_use web_search]", "yearly", "Noted.", "from the future"):
        assert words in assistant.text
    assert json.loads(assistant.content_json)[4] == {"type": "hologram", "payload": {"words": "from the future"}}
    assert human.created_at.ToJsonString().startswith("2025-03-01T10:00:00")
    metadata = await database.pool.fetch(
        "SELECT node_id, metadata::text FROM archive_message WHERE conversation_id = $1 ORDER BY node_id",
        conversation.id,
    )
    kept = {r["node_id"]: json.loads(r["metadata"]) for r in metadata}
    assert kept["conversation"]["future_field"] == {"kept": True} and kept["conversation"]["account"]["uuid"] == "acc-1"
    assert kept["m1"]["attachments"][0]["extracted_content"] == "the boiler was serviced in May"
    assert kept["m2"]["stop_reason"] == "stop_sequence"

    hits = await stub(owner).SearchMessages(
        pb.SearchMessagesRequest(vault=owner.vault, query="boiler serviced"), metadata=owner.metadata()
    )
    assert {h.conversation_id for h in hits.hits} == {conversation.id}

    # The same bytes again: a duplicate, not processed again; the zip of a changed export: only the change.
    again = await upload(owner, data)
    assert again.state == "duplicate" and again.duplicate_of == started.id
    changed = dump([rich("c-1", "Boiler", "the boiler code is 4471"), plain("c-2", "hello again")])
    second = await upload(owner, zipped(changed), name="data.zip")
    await run_import(database, second.id)
    final = await status(owner, second.id)
    assert (final.state, final.imported, final.updated, final.duplicates) == ("done", 0, 1, 1)

    # Totals and the list of imports (the dashboard's Archive page).
    stats = await stub(owner).GetArchiveStats(pb.GetArchiveStatsRequest(vault=owner.vault), metadata=owner.metadata())
    assert (stats.conversations, dict(stats.by_source)) == (2, {"claude": 2})
    assert stats.revisions == 3 and dict(stats.imports_by_state) == {"done": 2, "duplicate": 1}
    assert (stats.imports, stats.imports_running, stats.tags) == (3, 0, 0)
    # messages with text, none indexed here (no indexer in this test)
    assert (stats.messages, stats.indexed, stats.pending) == (5, 0, 5)
    assert stats.raw_bytes == len(data) + len(zipped(changed))
    listed_imports = await stub(owner).ListImports(pb.ListImportsRequest(vault=owner.vault), metadata=owner.metadata())
    assert [i.id for i in listed_imports.imports] == [second.id, again.id, started.id]
    assert listed_imports.imports[0].format == "claude" and listed_imports.imports[0].created_at.seconds > 0

    # A Claude file sent as a ChatGPT one says what to do.
    wrong = await upload(owner, dump([plain("c-9", "x")]), fmt="chatgpt")
    await run_import(database, wrong.id)
    assert "import the file as format claude" in (await status(owner, wrong.id)).failures[0].error


async def test_a_claude_import_runs_in_checkpoints_that_resume(owner: Caller, database: Database) -> None:  # noqa: F811
    count = IMPORT_CHECKPOINT_CONVERSATIONS * 2 + 3
    data = dump([plain(f"p-{i}", f"fact number {i}") for i in range(count)])
    started = await upload(owner, data)
    from memvault_vault.archive.service import ArchiveService
    from memvault_vault.services import VaultServices

    first = ArchiveService(ArchiveStore(database), VaultServices.build(database).accounts)
    assert await first.process_checkpoint(started.id)
    midway = await status(owner, started.id)
    assert (midway.state, midway.total, midway.done) == ("running", count, IMPORT_CHECKPOINT_CONVERSATIONS)
    await run_import(database, started.id)  # a new service: nothing cached, it skips to the checkpoint
    done = await status(owner, started.id)
    assert (done.state, done.done, done.imported, done.failed) == ("done", count, count, 0)


async def test_an_imports_checkpoints_have_the_archive_tables_statistics_taken_again(
    owner: Caller,  # noqa: F811
    database: Database,
) -> None:
    started = await upload(owner, dump([plain(f"s-{i}", f"shelf {i} holds the tins") for i in range(3)]))
    async with every_table_stale(database) as analyzed:
        await run_import(database, started.id)
    assert {"archive_conversation", "archive_revision", "archive_revision_message", "archive_message"} <= set(analyzed)


def _parts(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.unit
async def test_the_stream_reads_only_the_parts_it_needs() -> None:
    data = dump([linear(f"s-{i}", "x" * 2000) for i in range(200)])
    parts = _parts(data, 16 * 1024)
    fetched: list[int] = []

    async def fetch(part: int) -> bytes | None:
        fetched.append(part)
        return parts[part] if part < len(parts) else None

    stream = ExportStream(str(uuid.uuid4()), fetch)
    first = await stream.take(0, 5)
    assert [i for i, _ in first] == [0, 1, 2, 3, 4] and first[2][1]["conversation_id"] == "s-2"
    assert max(fetched) < len(parts) // 4, "five conversations need only the first parts"
    nxt = await stream.take(5, 5)
    assert [raw["conversation_id"] for _, raw in nxt] == [f"s-{i}" for i in range(5, 10)]
    assert await stream.count() == 200
    # a restart at a checkpoint skips what was done
    fresh = ExportStream(stream.import_id, fetch)
    assert [i for i, _ in await fresh.take(190, 25)] == list(range(190, 200))
    # the object form and a zip read the same
    wrapped = json.dumps({"conversations": [linear("w", "y")]}).encode()
    for blob in (wrapped, zipped(wrapped), zipped(data)):
        pieces = _parts(blob, 1000)

        async def fetch_blob(part: int, pieces: list[bytes] = pieces) -> bytes | None:
            return pieces[part] if part < len(pieces) else None

        zipped_stream = ExportStream("z", fetch_blob)
        taken = await zipped_stream.take(0, 1)
        assert taken and taken[0][0] == 0
        zipped_stream.close()
    broken = b'[{"a": 1}, {"b": '

    async def fetch_broken(part: int) -> bytes | None:
        return broken if part == 0 else None

    with pytest.raises(ExportError, match="not valid JSON"):
        await ExportStream("b", fetch_broken).count()
