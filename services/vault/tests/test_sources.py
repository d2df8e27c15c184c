"""Tracked sources against a real Postgres, local files and a local HTTP server: what a caller notices."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from secret_corpus import fake
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import sources_pb2 as spb
from memvault.vault.v1 import sources_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import Identity, IdentitySigner
from memvault_devstack.source_server import SourceServer, source_server
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.rpc.sources import SourcesServicer
from memvault_vault.services import VaultServices
from memvault_vault.settings import SourcesGroup
from memvault_vault.sources.reader import SourceRules

pytestmark = pytest.mark.integration

JSON_FILE, JSON_URL, TEXT_FILE, TEXT_URL = (
    spb.SOURCE_KIND_JSON_FILE,
    spb.SOURCE_KIND_JSON_URL,
    spb.SOURCE_KIND_TEXT_FILE,
    spb.SOURCE_KIND_TEXT_URL,
)


@dataclass
class Setup:
    services: VaultServices
    vault: vault_pb2_grpc.VaultServiceStub
    sources: sources_pb2_grpc.SourcesServiceStub
    root: Path
    outside: Path
    http: SourceServer


@pytest.fixture(scope="module")
def http() -> Iterator[SourceServer]:
    with source_server() as server:
        yield server


@pytest_asyncio.fixture(scope="module")
async def setup(
    database: Database, tmp_path_factory: pytest.TempPathFactory, http: SourceServer
) -> AsyncIterator[Setup]:
    root = tmp_path_factory.mktemp("sources-root")
    outside = tmp_path_factory.mktemp("sources-outside")
    rules = SourceRules.from_settings(
        SourcesGroup(
            file_roots=[str(root)],
            url_hosts=["127.0.0.1", "10.1.2.3"],
            private_networks=["127.0.0.0/8"],
            fetch_timeout_seconds=1.0,
            max_redirects=2,
        )
    )
    services = VaultServices.build(database, source_rules=rules)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    signer = IdentitySigner(SECRET)
    vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(services, signer), server)
    sources_pb2_grpc.add_SourcesServiceServicer_to_server(SourcesServicer(services, signer), server)
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield Setup(
        services,
        vault_pb2_grpc.VaultServiceStub(channel),
        sources_pb2_grpc.SourcesServiceStub(channel),
        root,
        outside,
        http,
    )
    await channel.close()
    await server.stop(None)


@dataclass
class Owner:
    caller: Caller
    setup: Setup

    @property
    def vault(self) -> str:
        return self.caller.vault

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self.caller.metadata(client="TestAgent", scopes=frozenset({"read", "write"}))


@pytest_asyncio.fixture
async def owner(database: Database, setup: Setup) -> Owner:
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    await database.pool.execute(
        "UPDATE vault_settings SET approval_mode = 'auto' FROM vault v WHERE v.id = vault_id AND v.name = $1", vault
    )
    return Owner(Caller(setup.vault, IdentitySigner(SECRET), subject, vault), setup)


async def remember(owner: Owner, content: str, **fields: object) -> str:
    request = vpb.RememberRequest(vault=owner.vault, memory=pb.MemoryDraft(content=content, **fields))  # type: ignore[arg-type]
    response = await owner.setup.vault.Remember(request, metadata=owner.metadata())
    assert response.result.memory_id, response.result.message
    return str(response.result.memory_id)


async def explain(owner: Owner, memory_id: str) -> vpb.ExplainMemoryResponse:
    request = vpb.ExplainMemoryRequest(vault=owner.vault, memory_id=memory_id)
    response: vpb.ExplainMemoryResponse = await owner.setup.vault.ExplainMemory(request, metadata=owner.metadata())
    return response


async def track(owner: Owner, memory_id: str, kind: int, location: str, **fields: object) -> spb.TrackedSource:
    request = spb.TrackSourceRequest(vault=owner.vault, memory_id=memory_id, kind=kind, location=location, **fields)  # type: ignore[arg-type]
    response = await owner.setup.sources.TrackSource(request, metadata=owner.metadata())
    return response.source


async def sync(owner: Owner, source_id: str = "") -> list[spb.SourceCheck]:
    request = spb.SyncSourcesRequest(vault=owner.vault, source_id=source_id)
    response = await owner.setup.sources.SyncSources(request, metadata=owner.metadata())
    return list(response.checks)


async def pending(owner: Owner) -> list[spb.SourceChange]:
    response = await owner.setup.sources.ListSourceChanges(
        spb.ListSourceChangesRequest(vault=owner.vault), metadata=owner.metadata()
    )
    return list(response.changes)


async def status(owner: Owner) -> spb.GetSourceStatusResponse:
    response: spb.GetSourceStatusResponse = await owner.setup.sources.GetSourceStatus(
        spb.GetSourceStatusRequest(vault=owner.vault), metadata=owner.metadata()
    )
    return response


def write_json(path: Path, budget: object) -> None:
    path.write_text(json.dumps({"campaign": {"budget": budget, "name": "Spring"}}))


async def budget_memory(owner: Owner, mode: int = spb.SOURCE_MODE_AUTO) -> tuple[str, spb.TrackedSource, Path]:
    path = owner.setup.root / f"campaign-{uuid.uuid4().hex[:8]}.json"
    write_json(path, "$50,000")
    memory_id = await remember(owner, "The campaign budget is $50,000.", key="campaign.budget")
    source = await track(
        owner,
        memory_id,
        JSON_FILE,
        str(path),
        selector="/campaign/budget",
        statement_template="The campaign budget is {{value}}.",
        mode=mode,
    )
    return memory_id, source, path


async def test_an_exact_json_change_in_auto_mode_supersedes_the_memory_and_flags_dependents(owner: Owner) -> None:
    memory_id, source, path = await budget_memory(owner)
    dependent = await remember(owner, "Paid search gets 40% of the spring campaign money.", depends_on=[memory_id])
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]

    write_json(path, "$35,000")
    [check] = await sync(owner, source.id)
    assert check.outcome == "superseded", check.message
    assert list(check.flagged_dependents) == [dependent]

    new = (await explain(owner, check.replacement_id)).memory
    assert new.content == "The campaign budget is $35,000."
    assert new.trust == pb.TRUST_SYNCED
    assert new.key == "campaign.budget"
    old = await explain(owner, memory_id)
    assert old.memory.status == pb.MEMORY_STATUS_SUPERSEDED
    assert old.memory.superseded_by == check.replacement_id
    assert [h.change for h in old.history][-1] == "superseded"
    assert (await explain(owner, dependent)).memory.flagged_reason

    # The source moved to the replacement; the change record holds hashes and the value, no text.
    [tracked] = (await status(owner)).sources
    assert tracked.memory_id == check.replacement_id
    history = await owner.setup.sources.ListSourceChanges(
        spb.ListSourceChangesRequest(vault=owner.vault, include_resolved=True), metadata=owner.metadata()
    )
    [change] = history.changes
    assert change.status == spb.SOURCE_CHANGE_STATUS_APPLIED
    assert json.loads(change.new_value_json) == "$35,000"
    assert json.loads(change.old_value_json) == "$50,000"
    assert change.old_hash != change.new_hash

    # Nothing changed since: quiet.
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]


async def test_review_mode_makes_a_pending_change_that_accepting_applies(owner: Owner) -> None:
    memory_id, source, path = await budget_memory(owner, spb.SOURCE_MODE_REVIEW)
    write_json(path, 35000)
    [check] = await sync(owner, source.id)
    assert check.outcome == "pending"
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_ACTIVE
    [change] = await pending(owner)
    assert change.proposed_statement == "The campaign budget is 35000."
    assert (json.loads(change.old_value_json), json.loads(change.new_value_json)) == ("$50,000", 35000)
    assert (await status(owner)).pending_changes == 1
    assert json.loads((await status(owner)).sources[0].baseline_value_json) == "$50,000"

    # A second check of the same content adds nothing.
    assert [c.outcome for c in await sync(owner, source.id)] == ["already_pending"]
    resolved = await owner.setup.sources.ResolveSourceChange(
        spb.ResolveSourceChangeRequest(vault=owner.vault, change_id=change.id, accept=True), metadata=owner.metadata()
    )
    assert resolved.result.outcome == "superseded"
    assert (await explain(owner, resolved.result.replacement_id)).memory.content == "The campaign budget is 35000."
    assert await pending(owner) == []


async def test_a_text_change_always_waits_and_needs_the_statement_from_whoever_reads_it(owner: Owner) -> None:
    path = owner.setup.root / f"policy-{uuid.uuid4().hex[:8]}.md"
    path.write_text("Refunds are accepted within 30 days.\n")
    memory_id = await remember(owner, "Refunds are accepted within 30 days of purchase.")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await track(owner, memory_id, TEXT_FILE, str(path), mode=spb.SOURCE_MODE_AUTO)
    assert rpc_error_kind(refused.value) == "invalid_argument"
    assert "never interprets prose" in (refused.value.details() or "")
    source = await track(owner, memory_id, TEXT_FILE, str(path))
    assert source.mode == spb.SOURCE_MODE_REVIEW

    path.write_text("Refunds are accepted within 14 days.\n")
    [check] = await sync(owner, source.id)
    assert check.outcome == "pending"
    [change] = await pending(owner)
    assert change.new_value_json == change.old_value_json == "" and change.proposed_statement == ""
    assert "14 days" not in str(change)

    with pytest.raises(grpc.aio.AioRpcError) as no_statement:
        await owner.setup.sources.ResolveSourceChange(
            spb.ResolveSourceChangeRequest(vault=owner.vault, change_id=change.id, accept=True),
            metadata=owner.metadata(),
        )
    assert "give the replacement statement" in (no_statement.value.details() or "")
    resolved = await owner.setup.sources.ResolveSourceChange(
        spb.ResolveSourceChangeRequest(
            vault=owner.vault, change_id=change.id, accept=True, statement="Refunds are accepted within 14 days."
        ),
        metadata=owner.metadata(),
    )
    assert resolved.result.outcome == "superseded"
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_SUPERSEDED
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]


async def test_a_source_back_at_its_baseline_dismisses_its_pending_change(owner: Owner) -> None:
    _, source, path = await budget_memory(owner, spb.SOURCE_MODE_REVIEW)
    write_json(path, "$1")
    assert [c.outcome for c in await sync(owner, source.id)] == ["pending"]
    write_json(path, "$50,000")
    assert [c.outcome for c in await sync(owner, source.id)] == ["reverted"]
    assert await pending(owner) == []


async def test_dismissing_keeps_the_memory_and_takes_the_new_content_as_baseline(owner: Owner) -> None:
    memory_id, source, path = await budget_memory(owner, spb.SOURCE_MODE_REVIEW)
    write_json(path, "$2")
    await sync(owner, source.id)
    [change] = await pending(owner)
    resolved = await owner.setup.sources.ResolveSourceChange(
        spb.ResolveSourceChangeRequest(vault=owner.vault, change_id=change.id, accept=False), metadata=owner.metadata()
    )
    assert resolved.result.outcome == "dismissed"
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_ACTIVE
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]


async def test_a_source_that_disappears_or_breaks_is_an_error_and_the_memory_stays(owner: Owner) -> None:
    memory_id, source, path = await budget_memory(owner)
    path.unlink()
    [check] = await sync(owner, source.id)
    assert check.outcome == "error" and "does not exist" in check.message
    health = await status(owner)
    assert health.errors == 1 and health.sources[0].last_error
    path.write_text("{not json")
    [check] = await sync(owner, source.id)
    assert check.outcome == "error" and "not valid JSON" in check.message
    path.write_text(json.dumps({"campaign": {}}))
    [check] = await sync(owner, source.id)
    assert check.outcome == "error" and "no value at '/campaign/budget'" in check.message
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_ACTIVE
    write_json(path, "$50,000")
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]
    assert (await status(owner)).errors == 0


async def test_a_source_that_now_holds_a_secret_is_refused_and_says_so(owner: Owner) -> None:
    memory_id, source, path = await budget_memory(owner)
    write_json(path, "ghp_" + fake(36))
    [check] = await sync(owner, source.id)
    assert check.outcome == "error"
    assert "was not applied" in check.message and "secret" in check.message.lower()
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_ACTIVE


async def test_a_value_that_repeats_another_memory_is_refused_by_the_duplicate_rule(owner: Owner) -> None:
    memory_id, source, path = await budget_memory(owner)
    await remember(owner, "The campaign budget is $70,000.")
    write_json(path, "$70,000")
    [check] = await sync(owner, source.id)
    assert check.outcome == "error" and "already stored" in check.message
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_ACTIVE


async def test_files_outside_the_roots_and_symlinks_leaving_them_are_refused(owner: Owner) -> None:
    memory_id = await remember(owner, "The office wifi is called Harbour.")
    secret = owner.setup.outside / "elsewhere.json"
    secret.write_text('{"a": 1}')
    link = owner.setup.root / f"link-{uuid.uuid4().hex[:6]}.json"
    link.symlink_to(secret)
    for location in (str(secret), str(link), "relative.json", str(owner.setup.root / ".." / secret.name)):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await track(owner, memory_id, JSON_FILE, location, selector="/a", statement_template="A is {{value}}.")
        assert rpc_error_kind(refused.value) == "invalid_argument", location


async def test_json_and_text_urls_are_tracked_through_the_local_server(owner: Owner) -> None:
    http = owner.setup.http
    path = f"/budget-{uuid.uuid4().hex[:6]}.json"
    url = http.set(path, json.dumps({"budget": 100}))
    memory_id = await remember(owner, "The ads budget is 100 euros.")
    source = await track(
        owner, memory_id, JSON_URL, url, selector="/budget", statement_template="The ads budget is {{value}} euros."
    )
    http.set(path, json.dumps({"budget": 80}))
    [check] = await sync(owner, source.id)
    assert check.outcome == "superseded"
    assert (await explain(owner, check.replacement_id)).memory.content == "The ads budget is 80 euros."

    text_path = f"/policy-{uuid.uuid4().hex[:6]}.txt"
    text_url = http.set(text_path, "Deploys freeze on Fridays.", content_type="text/plain")
    text_memory = await remember(owner, "Deploys are frozen on Fridays.")
    text_source = await track(owner, text_memory, TEXT_URL, text_url)
    http.set(text_path, "Deploys freeze on Thursdays and Fridays.", content_type="text/plain")
    assert [c.outcome for c in await sync(owner, text_source.id)] == ["pending"]


async def test_failing_redirected_large_and_slow_urls_are_source_errors(owner: Owner) -> None:
    http = owner.setup.http
    path = f"/flaky-{uuid.uuid4().hex[:6]}.json"
    url = http.set(path, json.dumps({"v": 1}))
    memory_id = await remember(owner, "The flaky value is 1.")
    source = await track(
        owner, memory_id, JSON_URL, url, selector="/v", statement_template="The flaky value is {{value}}."
    )

    cases = [
        (dict(body=b"oops", status=500), "answered HTTP 500"),
        (dict(status=302, location="http://10.1.2.3/internal.json"), "private address"),
        (dict(body=b"[" + b"1," * (3 * 1024 * 1024) + b"1]"), "larger than 5 MiB"),
        (dict(body=json.dumps({"v": 2}).encode(), delay=2.0), "within 1 seconds"),
        (dict(status=302, location=url), "redirects more than 2 times"),
    ]
    for fields, expected in cases:
        body = fields.pop("body", b"")
        http.set(path, body, **fields)
        [check] = await sync(owner, source.id)
        assert check.outcome == "error", expected
        assert expected in check.message, (expected, check.message)
    assert (await explain(owner, memory_id)).memory.status == pb.MEMORY_STATUS_ACTIVE

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await track(
            owner, memory_id, JSON_URL, "http://example.org/x.json", selector="/v", statement_template="{{value}}"
        )
    assert "not on the allowed list" in (refused.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await track(owner, memory_id, JSON_URL, "file:///etc/passwd", selector="/v", statement_template="{{value}}")
    assert "http or https" in (refused.value.details() or "")


async def test_another_accounts_sources_and_changes_are_invisible(owner: Owner, database: Database) -> None:
    _, source, path = await budget_memory(owner, spb.SOURCE_MODE_REVIEW)
    write_json(path, "$3")
    await sync(owner, source.id)
    [change] = await pending(owner)
    suffix = uuid.uuid4().hex[:10]
    assert await AccountStore(database).ensure_owner(f"user-{suffix}", f"vault-{suffix}")
    other = Owner(Caller(owner.setup.vault, IdentitySigner(SECRET), f"user-{suffix}", f"vault-{suffix}"), owner.setup)
    assert (await status(other)).sources == []
    assert await pending(other) == []
    for call in (
        lambda: sync(other, source.id),
        lambda: other.setup.sources.ResolveSourceChange(
            spb.ResolveSourceChangeRequest(vault=other.vault, change_id=change.id, accept=False),
            metadata=other.metadata(),
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as hidden:
            await call()
        assert rpc_error_kind(hidden.value) == "not_found"


async def test_a_check_interrupted_after_its_supersede_is_not_applied_twice_nor_lost(
    owner: Owner, database: Database
) -> None:
    memory_id, source, path = await budget_memory(owner)
    write_json(path, "$35,000")
    service = owner.setup.services.sources
    store = service._store
    real_rebase = store.rebase

    class Crash(Exception):
        pass

    async def crash(*args: object, **kwargs: object) -> str:
        raise Crash

    identity = Identity(subject=owner.caller.subject, client="TestAgent", scopes=frozenset({"read", "write"}))
    store.rebase = crash  # type: ignore[method-assign]
    try:
        with pytest.raises(Crash):
            await service.sync(identity, owner.vault, source.id)
    finally:
        store.rebase = real_rebase  # type: ignore[method-assign]
    # The process died between the supersede and the record; its claim runs out.
    await database.pool.execute(
        "UPDATE tracked_source SET claimed_until = NULL, next_check_at = now() WHERE id = $1::uuid", source.id
    )
    [check] = await sync(owner, source.id)
    assert check.outcome == "superseded"
    rows = await database.pool.fetch(
        "SELECT m.id FROM memory m JOIN vault v ON v.id = m.vault_id WHERE v.name = $1 AND m.content = $2",
        owner.vault,
        "The campaign budget is $35,000.",
    )
    assert len(rows) == 1 and str(rows[0]["id"]) == check.replacement_id
    assert (await explain(owner, memory_id)).memory.superseded_by == check.replacement_id
    changes = await database.pool.fetch("SELECT status FROM source_change WHERE source_id = $1::uuid", source.id)
    assert [r["status"] for r in changes] == ["applied"]
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]


async def test_memories_carry_size_capped_json_metadata_that_explain_shows(owner: Owner) -> None:
    memory_id = await remember(owner, "The campaign launches on 1 March.", metadata_json='{"owner":"ads","n":[1,2]}')
    shown = (await explain(owner, memory_id)).memory
    assert json.loads(shown.metadata_json) == {"owner": "ads", "n": [1, 2]}
    for bad, message in (
        ("[1]", "must be a JSON object"),
        ("{", "not valid JSON"),
        ('{"x":"' + "y" * 9000 + '"}', "larger than"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await remember(owner, f"Another fact {uuid.uuid4().hex}.", metadata_json=bad)
        assert message in (refused.value.details() or "")
    # A synced replacement keeps the metadata of the memory it replaces.
    path = owner.setup.root / f"launch-{uuid.uuid4().hex[:6]}.json"
    path.write_text('{"launch": "1 March"}')
    source = await track(
        owner,
        memory_id,
        JSON_FILE,
        str(path),
        selector="/launch",
        statement_template="The campaign launches on {{value}}.",
    )
    path.write_text('{"launch": "8 March"}')
    [check] = await sync(owner, source.id)
    assert json.loads((await explain(owner, check.replacement_id)).memory.metadata_json)["owner"] == "ads"


async def test_a_check_that_died_after_its_supersede_is_finished_without_applying_it_again(
    owner: Owner, database: Database
) -> None:
    """The state a vault killed between the supersede's commit and the change's record leaves: the memory
    already says the new value, the source's baseline is still the old one. The next check records it."""
    memory_id, source, path = await budget_memory(owner)
    write_json(path, "$35,000")
    done = await owner.setup.vault.SupersedeMemory(
        vpb.SupersedeMemoryRequest(
            vault=owner.vault,
            memory_id=memory_id,
            replacement=pb.MemoryDraft(content="The campaign budget is $35,000.", key="campaign.budget"),
        ),
        metadata=owner.metadata(),
    )
    replacement = done.result.memory_id
    [check] = await sync(owner, source.id)
    assert (check.outcome, check.message, check.replacement_id) == ("superseded", "already applied", replacement)
    assert (await explain(owner, replacement)).memory.status == pb.MEMORY_STATUS_ACTIVE
    count = await database.pool.fetchval(
        "SELECT count(*) FROM memory WHERE content = 'The campaign budget is $35,000.'"
        " AND vault_id = (SELECT id FROM vault WHERE name = $1)",
        owner.vault,
    )
    assert count == 1
    history = await owner.setup.sources.ListSourceChanges(
        spb.ListSourceChangesRequest(vault=owner.vault, include_resolved=True), metadata=owner.metadata()
    )
    assert [c.status for c in history.changes] == [spb.SOURCE_CHANGE_STATUS_APPLIED]
    [tracked] = (await status(owner)).sources
    assert tracked.memory_id == replacement and json.loads(tracked.baseline_value_json) == "$35,000"
    assert [c.outcome for c in await sync(owner, source.id)] == ["unchanged"]
