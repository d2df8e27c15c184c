"""Retention against a real Postgres: what each vault's settings stop keeping is deleted, and nothing else."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from lifecycle_helpers import FakeIndex, agent, fake_index, fake_index_and_stub, get, owner, remember, set_mode
from vault_helpers import Caller

from memvault.events.v1 import memory_events_pb2 as events_pb
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_vault.__main__ import main
from memvault_vault.accounts.service import AccountService
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database, VaultAccess
from memvault_vault.domain.memory import MemoryType
from memvault_vault.retention import records as retention_records
from memvault_vault.retention import store as retention
from memvault_vault.retention.records import RetentionPlan
from memvault_vault.retention.service import RetentionService
from memvault_vault.retention.store import RetentionStore
from memvault_vault.settings import VaultGroup

pytestmark = pytest.mark.integration
__all__ = ["fake_index", "fake_index_and_stub", "owner"]  # fixtures used here

OLD = "The staging cluster runs Kubernetes 1.29."
NEW = "The staging cluster runs Kubernetes 1.31."
WRONG = "The backup target is the old Drobo."
REJECTED = "Probably likes tabs over spaces."
LINKED = "Staging and production run the same Kubernetes version."


async def age(database: Database, caller: Caller, days: int) -> None:
    """Make every memory and audit entry of the caller's vault `days` older."""
    vault_id = await database.pool.fetchval("SELECT id FROM vault WHERE name = $1", caller.vault)
    await database.pool.execute(
        "UPDATE memory SET updated_at = updated_at - make_interval(days => $2) WHERE vault_id = $1", vault_id, days
    )
    await database.pool.execute(
        "UPDATE audit_log SET at = at - make_interval(days => $2) WHERE vault_id = $1", vault_id, days
    )


def mine(report: list[retention_records.Purged] | None, caller: Caller) -> retention_records.Purged | None:
    assert report is not None
    return next((p for p in report if p.vault == caller.vault), None)


async def retire_three(caller: Caller, fake_index: FakeIndex) -> dict[str, str]:
    """One superseded (with a similar memory linked to it), one invalidated, one rejected memory."""
    await set_mode(caller, "auto")
    old = await remember(caller, OLD)
    fake_index.set(OLD, LINKED, 0.85)
    linked = await remember(caller, LINKED)
    assert list(linked.result.similar_to) == [old.result.memory_id]
    new = await caller.stub.SupersedeMemory(
        vpb.SupersedeMemoryRequest(
            vault=caller.vault, memory_id=old.result.memory_id, replacement=pb.MemoryDraft(content=NEW)
        ),
        metadata=agent(caller),
    )
    wrong = await remember(caller, WRONG)
    await caller.stub.InvalidateMemory(
        vpb.InvalidateMemoryRequest(vault=caller.vault, memory_id=wrong.result.memory_id, reason="it was sold"),
        metadata=agent(caller),
    )
    await set_mode(caller, "review")
    rejected = await remember(caller, REJECTED)
    await caller.stub.RejectMemory(
        vpb.RejectMemoryRequest(vault=caller.vault, memory_id=rejected.result.memory_id, reason="a guess"),
        metadata=caller.metadata(),
    )
    return {
        "old": old.result.memory_id,
        "linked": linked.result.memory_id,
        "new": new.result.memory_id,
        "wrong": wrong.result.memory_id,
        "rejected": rejected.result.memory_id,
    }


async def test_purge_deletes_what_retention_no_longer_keeps(
    owner: Caller, fake_index: FakeIndex, database: Database
) -> None:
    ids = await retire_three(owner, fake_index)
    assert mine(await RetentionStore(database).purge(), owner) is None  # nothing is old enough yet

    await age(database, owner, 40)  # past the rejected period (30 days), not the superseded one (365)
    dry = mine(await RetentionStore(database).purge(dry_run=True), owner)
    assert dry == retention_records.Purged(owner.vault, rejected=1)
    assert (await get(owner, ids["rejected"])).status == pb.MEMORY_STATUS_REJECTED  # a dry run deletes nothing

    await age(database, owner, 400)
    purged = mine(await RetentionStore(database).purge(), owner)
    assert purged is not None
    assert (purged.rejected, purged.superseded, purged.invalidated) == (1, 1, 1)
    assert purged.audit_entries >= 8  # every entry so far (the writes, the settings changes, the reviews)

    for gone in ("old", "wrong", "rejected"):
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await get(owner, ids[gone])
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
    history = await database.pool.fetchval(
        "SELECT count(*) FROM memory_history WHERE memory_id = ANY($1::uuid[])",
        [ids["old"], ids["wrong"], ids["rejected"]],
    )
    assert history == 0
    replacement = await get(owner, ids["new"])
    assert replacement.status == pb.MEMORY_STATUS_ACTIVE and not replacement.supersedes
    assert not (await get(owner, ids["linked"])).similar_to  # the link to the deleted memory is dropped
    rows = await database.pool.fetch("SELECT payload FROM outbox WHERE subject = 'events.v1.memory.forgotten'")
    forgotten = {events_pb.MemoryForgotten.FromString(r["payload"]).memory_id for r in rows}
    assert forgotten >= {ids["old"], ids["wrong"], ids["rejected"]}  # the indexer is told to drop their points

    again = await remember(owner, REJECTED)
    assert again.result.outcome == vpb.WRITE_OUTCOME_EXCLUDED  # the owner's rejection still stands
    refused = await owner.stub.ListExclusions(
        vpb.ListExclusionsRequest(vault=owner.vault, text=REJECTED), metadata=owner.metadata()
    )
    assert [e.reason for e in refused.exclusions] == ["rejected"]  # the owner sees why it is refused
    back = await remember(owner, OLD)
    assert back.result.outcome == vpb.WRITE_OUTCOME_SIMILAR  # stored again: a superseded fact may become true again
    assert list(back.result.similar_to) == [ids["linked"]]

    audit = await owner.stub.ListVaultAudit(
        vpb.ListVaultAuditRequest(vault=owner.vault, action="retention.purge"), metadata=owner.metadata()
    )
    assert [(e.actor, e.target) for e in audit.entries] == [(retention.ACTOR, owner.vault)]
    assert '"superseded": 1' in audit.entries[0].details_json


async def test_zero_keeps_forever_and_one_purge_runs_at_a_time(
    owner: Caller, fake_index: FakeIndex, database: Database
) -> None:
    await owner.stub.UpdateSettings(
        vpb.UpdateSettingsRequest(
            vault=owner.vault, superseded_retention_days=0, rejected_retention_days=0, audit_retention_days=0
        ),
        metadata=owner.metadata(),
    )
    ids = await retire_three(owner, fake_index)
    await age(database, owner, 5000)
    assert mine(await RetentionStore(database).purge(), owner) is None
    assert (await get(owner, ids["old"])).status == pb.MEMORY_STATUS_SUPERSEDED

    async with database.pool.acquire() as other:
        await other.execute("SELECT pg_advisory_lock($1)", retention.RETENTION_LOCK_KEY)
        try:
            assert await RetentionStore(database).purge() is None
        finally:
            await other.execute("SELECT pg_advisory_unlock($1)", retention.RETENTION_LOCK_KEY)


def test_the_command_reports_what_it_would_delete(
    vault_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMVAULT_POSTGRES__DSN", vault_dsn)
    # The command sets up the service's logging on the root logger, bound to this test's captured
    # stderr; put pytest's handlers back so later tests do not log into a closed stream.
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    with pytest.raises(SystemExit) as exit_code:
        main(["retention", "--dry-run"])
    assert exit_code.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("nothing to delete") or " would delete " in out


async def test_the_stats_say_what_retention_removes_next_and_when_it_runs(
    owner: Caller, fake_index: FakeIndex, database: Database
) -> None:
    ids = await retire_three(owner, fake_index)
    stats = await owner.stub.GetStats(
        vpb.GetStatsRequest(vault=owner.vault, include_overview=True), metadata=owner.metadata()
    )
    assert sum(stats.memories_by_type.values()) == sum(stats.memories.values()) == len(ids)
    assert set(stats.memories_by_type) <= {t.value for t in MemoryType}
    assert (stats.search_mode, stats.embedding_model) == ("hybrid", "fake-model")
    plain = await owner.stub.GetStats(vpb.GetStatsRequest(vault=owner.vault), metadata=owner.metadata())
    assert not plain.search_mode and not plain.HasField("retention")  # only when asked for
    outlook = stats.retention
    assert outlook.runner == "off" and not outlook.HasField("next_run")  # this test's services have no plan
    assert (outlook.due_rejected, outlook.due_superseded, outlook.due_invalidated) == (0, 0, 0)
    soon = outlook.next_due_at.ToDatetime(tzinfo=UTC) - datetime.now(UTC)
    assert timedelta(days=29) < soon <= timedelta(days=30)  # the rejected one, 30 days after it was rejected

    await age(database, owner, 40)
    outlook = (
        await owner.stub.GetStats(
            vpb.GetStatsRequest(vault=owner.vault, include_overview=True), metadata=owner.metadata()
        )
    ).retention
    assert (outlook.due_rejected, outlook.due_superseded, outlook.due_invalidated) == (1, 0, 0)
    assert not outlook.due_audit_entries_capped
    soon = outlook.next_due_at.ToDatetime(tzinfo=UTC) - datetime.now(UTC)
    assert timedelta(days=324) < soon <= timedelta(days=325)  # then the superseded, invalidated and audit ones

    fake_index.down = True
    stats = await owner.stub.GetStats(
        vpb.GetStatsRequest(vault=owner.vault, include_overview=True), metadata=owner.metadata()
    )
    assert stats.search_mode == "keyword-only" and "down" in stats.search_mode_reason and not stats.embedding_model

    # A whole-installation run is recorded as the last run; the plan says when the next comes.
    store = RetentionStore(database)
    assert await store.purge(runner="in-process") is not None
    vault = VaultAccess(
        await database.pool.fetchval("SELECT id::text FROM vault WHERE name = $1", owner.vault),
        owner.vault,
        "owner",
        "",
    )
    accounts = AccountService(AccountStore(database))
    loop = await RetentionService(store, accounts, RetentionPlan(interval_seconds=3600)).outlook(vault)
    assert loop.runner == "in-process" and loop.last_run is not None and loop.next_run is not None
    assert loop.next_run - loop.last_run == timedelta(hours=1)
    assert datetime.now(UTC) - loop.last_run < timedelta(minutes=1)
    assert loop.due.rejected == 0  # that run removed it
    cron = await RetentionService(store, accounts, RetentionPlan(schedule="20 * * * *")).outlook(vault)
    assert cron.runner == "cronjob" and cron.next_run is not None
    assert cron.next_run.minute == 20 and timedelta(0) < cron.next_run - datetime.now(UTC) <= timedelta(hours=1)


def test_a_retention_schedule_that_is_not_cron_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="is not a cron schedule"):
        VaultGroup(retention_schedule="every hour")
    assert VaultGroup(retention_schedule=" 20 * * * * ").retention_schedule == "20 * * * *"
