"""The archive export: a backup file of the conversation archive's kinds only (`"scope": "archive"`).

Lossless, proved by a round trip: export, restore into an empty vault of another deployment, export
again, and compare every record byte for byte (and every archive row) with the first. A restore of an
archive export touches the archive only: memories, the guide and settings stay as they were.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tracemalloc

import grpc
import jsonschema
import pytest
from chatgpt_export import dump, linear
from test_backup import SCHEMA, Deployment, _backup, _restore, elsewhere, here  # noqa: F401 (fixtures)
from test_backup_archive import TABLES, fill_archive, rows, vault_id
from vault_helpers import Caller

from memvault.vault.v1 import backup_pb2 as bpb
from memvault.vault.v1 import memory_pb2 as mpb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.backup import later_kinds
from memvault_vault.backup.service import CHUNK_BYTES
from memvault_vault.database import VaultAccess
from memvault_vault.domain import archive as rules

pytestmark = pytest.mark.integration

ARCHIVE_TABLES = {t: spec for t, spec in TABLES.items() if t.startswith("archive_")}


async def archive_rows(deployment: Deployment, vault: str) -> dict[str, object]:
    found = await rows(deployment.database, await vault_id(deployment, vault))
    return {t: found[t] for t in ARCHIVE_TABLES}


async def export(caller: Caller, deployment: Deployment) -> bytes:
    return await _backup(caller, deployment.backups, omit_embeddings=True, archive_only=True)


def records(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in data.decode().splitlines()]


async def test_export_restore_export_gives_the_same_archive_byte_for_byte(
    here: Deployment,  # noqa: F811
    elsewhere: Deployment,  # noqa: F811
) -> None:
    source = await here.caller()
    await fill_archive(here, source)
    before = await archive_rows(here, source.vault)
    first = await export(source, here)
    lines = records(first)
    header, manifest = lines[0], lines[-1]
    assert header["scope"] == "archive" and header["version"] == 2 and header["embeddings"] is False
    kinds = {str(r["kind"]) for r in lines[1:-1]}
    assert kinds <= set(later_kinds.ARCHIVE_KINDS)
    assert {"conversation", "revision", "message", "revision_message", "archive_key", "import"} <= kinds
    assert {"import_chunk", "import_failure"} <= kinds  # raw imports and their outcomes travel too
    assert not kinds & {"memory", "settings", "guide", "audit", "source"}
    counts = manifest["counts"]
    assert isinstance(counts, dict) and counts["memory"] == 0 and counts["conversation"] == 3
    validator = jsonschema.Draft202012Validator(
        json.loads(SCHEMA.read_text()), format_checker=jsonschema.FormatChecker()
    )
    for record in lines:
        assert not [e.message for e in validator.iter_errors(record)], record["kind"]

    # into an empty vault of another deployment (the ids are free there, so they are kept)
    target = Caller(elsewhere.vaults, source.signer, source.subject, source.vault)
    assert await elsewhere.ensure_owner(source.subject, source.vault)
    report = await _restore(target, elsewhere.backups, first, chunk=65536)
    restored = {c.kind: c.count for c in report.counts}
    assert restored["conversation"] == 3 and restored["import_chunk"] == counts["import_chunk"]
    assert await archive_rows(elsewhere, target.vault) == before

    second = await export(target, elsewhere)
    first_lines, second_lines = first.splitlines(), second.splitlines()
    assert first_lines[1:-1] == second_lines[1:-1]  # every record, byte for byte
    assert json.loads(second_lines[-1])["counts"] == counts
    assert json.loads(second_lines[0])["created_at"] >= header["created_at"]  # type: ignore[operator]
    # the raw export bytes came back whole: the same sha256 as when they were uploaded
    imports = await elsewhere.database.pool.fetch(
        "SELECT i.sha256, (SELECT encode(sha256(string_agg(c.data, ''::bytea ORDER BY c.part)), 'hex')"
        " FROM archive_import_chunk c WHERE c.import_id = i.id) AS got FROM archive_import i"
        " JOIN vault v ON v.id = i.vault_id WHERE v.name = $1 AND i.duplicate_of IS NULL",
        target.vault,
    )
    assert imports and all(r["sha256"] == r["got"] for r in imports)


async def test_restoring_an_archive_export_touches_only_the_archive(here: Deployment) -> None:  # noqa: F811
    source = await here.caller()
    await fill_archive(here, source)
    data = await export(source, here)
    target = await here.caller()  # same deployment: the ids are taken, so the restore gives new ones
    stub, meta = target.stub, target.metadata()
    kept = await stub.Remember(
        vpb.RememberRequest(vault=target.vault, memory=mpb.MemoryDraft(content="Memories stay as they were")),
        metadata=meta,
    )
    guide_before = await stub.GetOperatingGuide(vpb.GetOperatingGuideRequest(vault=target.vault), metadata=meta)
    report = await _restore(target, here.backups, data)  # no replace needed: the vault holds no conversations
    assert {c.kind: c.count for c in report.counts}["conversation"] == 3
    listed = await stub.ListMemories(vpb.ListMemoriesRequest(vault=target.vault), metadata=meta)
    assert [m.id for m in listed.memories] == [kept.result.memory_id]
    guide_after = await stub.GetOperatingGuide(vpb.GetOperatingGuideRequest(vault=target.vault), metadata=meta)
    assert guide_after.text == guide_before.text and guide_after.version == guide_before.version
    after = await archive_rows(here, target.vault)
    assert len(after["archive_message"]) == len((await archive_rows(here, source.vault))["archive_message"])  # type: ignore[arg-type]

    with pytest.raises(grpc.aio.AioRpcError) as refused:  # now it holds conversations: only with replace
        await _restore(target, here.backups, data)
    assert refused.value.code() == grpc.StatusCode.ABORTED or "holds conversations" in str(refused.value.details())
    assert "holds conversations" in str(refused.value.details())
    await _restore(target, here.backups, data, replace=True)
    assert len((await archive_rows(here, target.vault))["archive_conversation"]) == 3  # type: ignore[arg-type]
    listed = await stub.ListMemories(vpb.ListMemoriesRequest(vault=target.vault), metadata=meta)
    assert [m.id for m in listed.memories] == [kept.result.memory_id]


async def test_an_archive_export_holding_other_kinds_is_refused(here: Deployment) -> None:  # noqa: F811
    source = await here.caller()
    await fill_archive(here, source)
    whole = records(await _backup(source, here.backups, omit_embeddings=True))
    assert any(r["kind"] == "memory" for r in whole)
    whole[0]["scope"] = "archive"  # a whole backup relabelled: a restore must not half-apply it
    body = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in whole[:-1])
    manifest = {**whole[-1], "sha256": hashlib.sha256(body).hexdigest()}
    data = body + json.dumps(manifest).encode() + b"\n"
    target = await here.caller()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _restore(target, here.backups, data)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "holds only the conversation archive" in str(refused.value.details())


@pytest.mark.parametrize("filler", [2000, 16000])
async def test_the_export_streams_a_large_raw_import_in_bounded_memory(
    here: Deployment,  # noqa: F811
    filler: int,
) -> None:
    """9 and 51 MB of raw export go out in chunks of about CHUNK_BYTES while the vault (served in this process)
    and the reader together allocate the same few MB, well under the file's size: nothing holds it whole."""
    source = await here.caller()
    vault = VaultAccess(await vault_id(here, source.vault), source.vault, "owner", "auto")
    store = ArchiveStore(here.database)
    data = dump([linear(f"c{i}", f"conversation {i} {'x' * filler}") for i in range(3000)])
    assert len(data) > 6_000_000
    started = await store.start_import(
        vault, "user:me", "chatgpt", "big.json", len(data), hashlib.sha256(data).hexdigest()
    )
    for part, start in enumerate(range(0, len(data), rules.MAX_IMPORT_PART_BYTES)):
        await store.upload_part(vault, started.id, part, data[start : start + rules.MAX_IMPORT_PART_BYTES])
    await store.finish_import(vault, "user:me", started.id)

    request = bpb.BackupRequest(vault=source.vault, omit_embeddings=True, archive_only=True)
    chunks, biggest, raw, rest = 0, 0, hashlib.sha256(), b""
    tracemalloc.start()
    try:
        async for chunk in here.backups.Backup(request, metadata=source.metadata()):
            chunks, biggest = chunks + 1, max(biggest, len(chunk.data))
            lines = (rest + chunk.data).split(b"\n")
            rest = lines.pop()
            for line in lines:
                record = json.loads(line)
                if record["kind"] == "import_chunk":  # in part and offset order
                    raw.update(base64.b64decode(record["data"]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert raw.hexdigest() == hashlib.sha256(data).hexdigest()  # the upload, byte for byte
    assert chunks >= len(data) // 1_500_000 and biggest <= CHUNK_BYTES + 2 * later_kinds.SLICE_BYTES
    print(f"archive export: {len(data)} bytes raw, {chunks} chunks, peak {peak} bytes allocated")
    assert peak < 16_000_000, f"{peak} bytes allocated at the peak for a {len(data)}-byte archive"
