"""Index maintenance for a vault's owner: failed index jobs listed with their error and retried
through the outbox (one or all, audited), only in the owner's own vault."""

from __future__ import annotations

import uuid

import pytest
from vault_helpers import outbox_created

from memvault_core.errors import InvalidArgument, NotFound, PermissionDenied, Unavailable
from memvault_core.identity import SCOPES, Identity
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration


async def owned_vault(database: Database, count: int) -> tuple[Identity, str, list[str]]:
    subject, name = f"user-{uuid.uuid4().hex[:10]}", f"vault-{uuid.uuid4().hex[:10]}"
    assert await AccountStore(database).ensure_owner(subject, name)
    vault = await AccountStore(database).vault_of(subject, name)
    assert vault is not None
    rows = await database.pool.fetch(
        "INSERT INTO memory (vault_id, content, content_hash, type, trust, status)"
        " SELECT $1, 'fact ' || n, md5('fact ' || n), 'fact', 'imported', 'active' FROM generate_series(1, $2) n"
        " RETURNING id::text",
        vault.id,
        count,
    )
    return Identity(subject=subject, scopes=frozenset(SCOPES)), name, sorted(r["id"] for r in rows)


async def test_failed_index_jobs_are_listed_and_retried_through_the_outbox(database: Database) -> None:
    services = VaultServices.build(database)
    owner, vault, ids = await owned_vault(database, 4)
    await IndexFeedStore(database).report_indexed(
        [IndexReport(i, "h", "minilm", "failed", "EmbeddingError") for i in ids[:3]]
    )
    failures, total = await services.index_admin.failures(owner, vault, 2)
    assert total == 3 and len(failures) == 2
    assert all(f.error == "EmbeddingError" and f.attempts == 1 for f in failures)

    assert await services.index_admin.retry(owner, vault, [ids[0]]) == 1
    assert (await outbox_created(database.pool)).count(ids[0]) == 1  # the indexer gets it again, as after a write
    assert (await services.index_admin.failures(owner, vault, 50))[1] == 2
    assert await services.index_admin.retry(owner, vault, []) == 2  # all the rest
    assert await services.index_admin.retry(owner, vault, []) == 0
    assert (await services.index_admin.failures(owner, vault, 50))[1] == 0
    audit = await database.pool.fetch(
        "SELECT details FROM audit_log WHERE action = 'index.retry' AND actor = $1 ORDER BY id", owner.subject
    )
    assert len(audit) == 2


async def test_only_the_owner_of_the_vault_with_the_admin_scope_may(database: Database) -> None:
    services = VaultServices.build(database)
    owner, vault, ids = await owned_vault(database, 1)
    await IndexFeedStore(database).report_indexed([IndexReport(ids[0], "h", "m", "failed", "E")])
    stranger, _, _ = await owned_vault(database, 1)
    with pytest.raises(NotFound):
        await services.index_admin.failures(stranger, vault, 10)
    with pytest.raises(NotFound):
        await services.index_admin.retry(stranger, vault, [])
    agent = Identity(subject=owner.subject, scopes=frozenset({"read", "write"}))
    with pytest.raises(PermissionDenied):
        await services.index_admin.retry(agent, vault, [])
    with pytest.raises(InvalidArgument):
        await services.index_admin.retry(owner, vault, ["not-a-uuid"])
    with pytest.raises(Unavailable, match="without an indexer"):
        await services.index_admin.job(owner, vault)
    assert (await services.index_admin.failures(owner, vault, 10))[1] == 1  # nothing retried by the refusals
