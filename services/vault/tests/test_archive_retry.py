"""Retrying the archive's failed jobs through gRPC, on real Postgres: a failed import resumes from its
checkpoint and never imports a committed conversation twice; failed conversations are imported again
(or fail again, with the new reason); failed message index jobs are listed and sent to the indexer
again; an import whose checkpoint keeps stopping is marked failed after three tries (later imports go
on) and finishes on retry; an import or index job that did not fail, or another account's, is refused clearly."""

from __future__ import annotations

import hashlib
import uuid

import grpc
import pytest
from chatgpt_export import dump, linear
from test_archive import archive_stub, create, run_import, status, stub, upload  # noqa: F401 (fixtures)
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.events.v1 import archive_events_pb2 as events
from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import archive_pb2_grpc
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.archive.service import ArchiveService
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.database import Database
from memvault_vault.domain.archive import IMPORT_CHECKPOINT_CONVERSATIONS
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration


async def new_caller(database: Database, archive: archive_pb2_grpc.ArchiveServiceStub) -> Caller:
    suffix = uuid.uuid4().hex[:10]
    assert await AccountStore(database).ensure_owner(f"user-{suffix}", f"vault-{suffix}")
    return Caller(archive, IdentitySigner(SECRET), f"user-{suffix}", f"vault-{suffix}")  # type: ignore[arg-type]


async def retry(caller: Caller, import_id: str, **identity: object) -> pb.ImportStatus:
    response = await stub(caller).RetryImport(
        pb.RetryImportRequest(vault=caller.vault, import_id=import_id), metadata=caller.metadata(**identity)
    )
    return getattr(response, "import")


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value


async def upload_in_parts(caller: Caller, data: bytes, parts: int) -> str:
    started = await stub(caller).StartImport(
        pb.StartImportRequest(
            vault=caller.vault, filename="parts.json", size=len(data), sha256=hashlib.sha256(data).hexdigest()
        ),
        metadata=caller.metadata(),
    )
    import_id = getattr(started, "import").id
    step = -(-len(data) // parts)
    for part in range(parts):
        await stub(caller).UploadImportPart(
            pb.UploadImportPartRequest(
                vault=caller.vault, import_id=import_id, part=part, data=data[part * step : (part + 1) * step]
            ),
            metadata=caller.metadata(),
        )
    await stub(caller).FinishImport(
        pb.FinishImportRequest(vault=caller.vault, import_id=import_id), metadata=caller.metadata()
    )
    return import_id


def service(database: Database) -> ArchiveService:
    """A new vault process's archive (nothing cached from an earlier one)."""
    return ArchiveService(ArchiveStore(database), VaultServices.build(database).accounts)


async def test_a_failed_import_resumes_from_its_checkpoint_and_imports_nothing_twice(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
) -> None:
    owner = await new_caller(database, archive_stub)
    count = IMPORT_CHECKPOINT_CONVERSATIONS + 15
    data = dump([linear(f"resume-{i}", f"resumed fact number {i}") for i in range(count)])
    import_id = await upload_in_parts(owner, data, 4)
    assert await service(database).process_checkpoint(import_id)  # counts the file, imports the first 25
    pool = database.pool
    last = await pool.fetchrow(
        "SELECT part, data FROM archive_import_chunk WHERE import_id = $1 ORDER BY part DESC", import_id
    )
    # The stored bytes are damaged before the next checkpoint reads them: the job fails there.
    await pool.execute(
        "UPDATE archive_import_chunk SET data = $3 WHERE import_id = $1 AND part = $2",
        import_id,
        last["part"],
        b"x" * len(last["data"]),
    )
    await run_import(database, import_id)
    failed = await status(owner, import_id)
    assert (failed.state, failed.done, failed.imported) == ("failed", IMPORT_CHECKPOINT_CONVERSATIONS, 25)
    assert "not valid JSON" in failed.error

    # Damaged bytes cannot be imported however often it is retried: refused, nothing changes.
    error = await refused(retry(owner, import_id))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS and rpc_error_kind(error) == "conflict"
    assert "upload the file again" in (error.details() or "")
    assert (await status(owner, import_id)).state == "failed"

    await pool.execute(
        "UPDATE archive_import_chunk SET data = $3 WHERE import_id = $1 AND part = $2",
        import_id,
        last["part"],
        last["data"],
    )
    queued = await retry(owner, import_id)
    assert (queued.state, queued.error, queued.done) == ("queued", "", IMPORT_CHECKPOINT_CONVERSATIONS)
    await run_import(database, import_id)
    done = await status(owner, import_id)
    assert (done.state, done.done, done.imported, done.updated, done.duplicates, done.failed) == (
        "done",
        count,
        count,
        0,
        0,
        0,
    )
    vault = await pool.fetchval("SELECT vault_id FROM archive_import WHERE id = $1", import_id)
    per_conversation = await pool.fetch(
        "SELECT c.external_id, count(r.*) AS revisions FROM archive_conversation c"
        " JOIN archive_revision r ON r.conversation_id = c.id WHERE c.vault_id = $1 GROUP BY c.external_id",
        vault,
    )
    assert len(per_conversation) == count and {r["revisions"] for r in per_conversation} == {1}
    audit = await pool.fetchval(
        "SELECT count(*) FROM audit_log WHERE vault_id = $1 AND action = 'archive.import.retry'", vault
    )
    assert audit == 1


async def test_failed_conversations_are_imported_again_and_a_lasting_failure_keeps_its_reason(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
) -> None:
    owner = await new_caller(database, archive_stub)
    flaky = f"flaky-{uuid.uuid4().hex[:8]}"
    pool = database.pool
    # A real Postgres failure for one conversation (as a lock timeout or a full disk would give).
    await pool.execute(
        f"""
        CREATE FUNCTION memvault_test_refuse_{flaky.replace("-", "_")}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.external_id = '{flaky}' THEN RAISE EXCEPTION 'disk full while writing %', NEW.external_id; END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_{flaky.replace("-", "_")} BEFORE INSERT ON archive_conversation
            FOR EACH ROW EXECUTE FUNCTION memvault_test_refuse_{flaky.replace("-", "_")}();
        """
    )
    try:
        data = dump(
            [
                linear("steady", "the boiler was serviced in May"),
                linear(flaky, "the spare key is under the blue pot"),
                {"conversation_id": "broken", "mapping": "not a mapping"},
            ]
        )
        first = await upload(owner, data)
        await run_import(database, first.id)
        done = await status(owner, first.id)
        assert (done.state, done.imported, done.failed) == ("done", 1, 2)
        assert "disk full" in {f.conversation_id: f.error for f in done.failures}[flaky]
    finally:
        await pool.execute(
            f"DROP TRIGGER refuse_{flaky.replace('-', '_')} ON archive_conversation;"
            f" DROP FUNCTION memvault_test_refuse_{flaky.replace('-', '_')}()"
        )

    queued = await retry(owner, first.id)
    assert (queued.state, queued.retrying) == ("queued", 2)
    await run_import(database, first.id)
    again = await status(owner, first.id)
    assert (again.state, again.done, again.imported, again.duplicates, again.failed, again.retrying) == (
        "done",
        3,
        2,
        0,
        1,
        0,
    )
    assert [f.conversation_id for f in again.failures] == ["broken"]
    assert "no mapping of messages" in again.failures[0].error
    attempts = await pool.fetchval(
        "SELECT attempts FROM archive_import_failure WHERE import_id = $1 AND conversation_ref = 'broken'", first.id
    )
    assert attempts == 2
    vault = await pool.fetchval("SELECT vault_id FROM archive_import WHERE id = $1", first.id)
    rows = await pool.fetch(
        "SELECT c.external_id, count(r.*) AS revisions FROM archive_conversation c"
        " JOIN archive_revision r ON r.conversation_id = c.id WHERE c.vault_id = $1 GROUP BY c.external_id",
        vault,
    )
    assert {r["external_id"]: r["revisions"] for r in rows} == {"steady": 1, flaky: 1}


async def test_retry_refuses_an_import_that_did_not_fail_and_another_accounts(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
) -> None:
    owner = await new_caller(database, archive_stub)
    stranger = await new_caller(database, archive_stub)
    data = dump([linear("clean", "all went well")])
    clean = await upload(owner, data)
    await run_import(database, clean.id)

    error = await refused(retry(owner, clean.id))
    assert rpc_error_kind(error) == "conflict"
    assert f"import {clean.id} is done with no failed conversations" in (error.details() or "")
    duplicate = await upload(owner, data)
    error = await refused(retry(owner, duplicate.id))
    assert f"import {duplicate.id} is duplicate, not failed" in (error.details() or "")

    # Another account: its own vault does not hold the import, and the owner's vault is not open to it.
    assert (await refused(retry(stranger, clean.id))).code() == grpc.StatusCode.NOT_FOUND
    foreign = stub(stranger).RetryImport(
        pb.RetryImportRequest(vault=owner.vault, import_id=clean.id), metadata=stranger.metadata()
    )
    assert (await refused(foreign)).code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)
    # A token without `admin` (an agent's) cannot retry; a malformed id is named.
    assert (await refused(retry(owner, clean.id, scopes=frozenset({"read", "write"})))).code() == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    malformed = await refused(retry(owner, "not-an-id"))
    assert malformed.code() == grpc.StatusCode.INVALID_ARGUMENT and "import_id" in (malformed.details() or "")


async def test_failed_message_index_jobs_are_listed_and_retried_by_id(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
) -> None:
    owner = await new_caller(database, archive_stub)
    stranger = await new_caller(database, archive_stub)
    receipt = await create(owner, ("user", "the router reboots at 4am"), ("assistant", "noted"))
    pool = database.pool
    ids = [
        str(r["id"])
        for r in await pool.fetch(
            "SELECT m.id FROM archive_message m JOIN archive_revision_message rm ON rm.message_id = m.id"
            " WHERE rm.conversation_id = $1 ORDER BY rm.position",
            receipt.conversation_id,
        )
    ]
    failed_id, indexed_id = ids
    # What the indexer reports (IndexFeedService.Report) when it gives up on one and embeds the other.
    await IndexFeedStore(database).report_messages(
        [
            IndexReport(failed_id, "h1", "test-model", "failed", "embedding endpoint answered 503", kind="message"),
            IndexReport(indexed_id, "h2", "test-model", "indexed", "", kind="message"),
        ]
    )
    listed = await stub(owner).ListMessageIndexFailures(
        pb.ListMessageIndexFailuresRequest(vault=owner.vault), metadata=owner.metadata()
    )
    assert listed.total == 1 and [f.message_id for f in listed.failures] == [failed_id]
    assert listed.failures[0].conversation_id == receipt.conversation_id
    assert listed.failures[0].error == "embedding endpoint answered 503" and listed.failures[0].attempts == 1

    def retrying(caller: Caller, *message_ids: str) -> object:
        return stub(caller).RetryMessageIndex(
            pb.RetryMessageIndexRequest(vault=caller.vault, message_ids=list(message_ids)), metadata=caller.metadata()
        )

    not_failed = await refused(retrying(owner, failed_id, indexed_id))
    assert rpc_error_kind(not_failed) == "conflict"
    assert f"message {indexed_id} did not fail (it is indexed)" in (not_failed.details() or "")
    missing = str(uuid.uuid4())
    assert (await refused(retrying(owner, missing))).code() == grpc.StatusCode.NOT_FOUND
    assert (await refused(retrying(stranger, failed_id))).code() == grpc.StatusCode.NOT_FOUND
    assert await pool.fetchval("SELECT state FROM archive_message_index WHERE message_id = $1", failed_id) == "failed"

    before = await pool.fetchval("SELECT now()")
    answer = await retrying(owner, failed_id)
    assert answer.retried == 1  # type: ignore[attr-defined]
    assert await pool.fetchval("SELECT count(*) FROM archive_message_index WHERE message_id = $1", failed_id) == 0
    sent = [
        events.MessageArchived.FromString(r["payload"])
        for r in await pool.fetch(
            "SELECT payload FROM outbox WHERE subject LIKE '%message.archived' AND created_at >= $1", before
        )
    ]
    mine = [e for e in sent if e.message_id == failed_id]
    assert len(mine) == 1 and mine[0].conversation_id == receipt.conversation_id and mine[0].revision == 1
    stats = await stub(owner).GetArchiveStats(pb.GetArchiveStatsRequest(vault=owner.vault), metadata=owner.metadata())
    assert (stats.failed, stats.indexed, stats.pending) == (0, 1, 1)
    # It is pending now, not failed: a second retry is refused.
    again = await refused(retrying(owner, failed_id))
    assert "did not fail (it is pending" in (again.details() or "")


async def test_a_checkpoint_that_keeps_stopping_marks_the_import_failed_and_a_retry_finishes_it(
    archive_stub: archive_pb2_grpc.ArchiveServiceStub,  # noqa: F811
    database: Database,
) -> None:
    owner = await new_caller(database, archive_stub)
    first = await upload(owner, dump([linear(f"stuck-{i}", f"stuck fact {i}") for i in range(3)]))
    name = f"memvault_test_stuck_{uuid.uuid4().hex[:8]}"
    pool = database.pool
    # The checkpoint's own write fails (as a full disk would) however often it is tried.
    await pool.execute(
        f"""
        CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.id = '{first.id}' AND NEW.state <> 'failed' AND NEW.next_index <> OLD.next_index THEN
                RAISE EXCEPTION 'could not extend file: No space left on device';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER {name} BEFORE UPDATE ON archive_import FOR EACH ROW EXECUTE FUNCTION {name}();
        """
    )
    try:
        archive = service(database)
        for _ in range(3):
            with pytest.raises(Exception, match="No space left"):
                await archive.process_checkpoint(first.id)
        stuck = await status(owner, first.id)
        assert stuck.state == "failed" and stuck.done == 0
        assert "stopped on an unexpected error (RaiseError) 3 times in a row" in stuck.error
        assert not await archive.process_checkpoint(first.id)  # no longer waiting: later imports go on
    finally:
        await pool.execute(f"DROP TRIGGER {name} ON archive_import; DROP FUNCTION {name}()")
    await retry(owner, first.id)
    await run_import(database, first.id)
    done = await status(owner, first.id)
    assert (done.state, done.imported, done.failed, done.error) == ("done", 3, 0, "")
    vault = await pool.fetchval("SELECT vault_id FROM archive_import WHERE id = $1", first.id)
    assert await pool.fetchval("SELECT count(*) FROM archive_revision WHERE vault_id = $1", vault) == 3
