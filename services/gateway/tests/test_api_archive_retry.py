"""/api/v1 retries of the archive's failed jobs, in-process against a real vault and Postgres: an import
with a conversation that failed on a real Postgres error retried by its owner, a retry of an import that
did not fail refused with 409, another account and a viewer refused; failed message index jobs listed
and retried by id."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from gateway_helpers import StartGateway
from test_dashboard_http import signed_in

from memvault_vault.archive.service import ArchiveService
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.database import Database as VaultDatabase
from memvault_vault.index_feed.records import IndexReport
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration


def conversation(conversation_id: str, text: str) -> dict[str, object]:
    def node(node_id: str, parent: str | None, children: list[str], role: str, words: str) -> dict[str, object]:
        message = {"id": node_id, "author": {"role": role}, "content": {"content_type": "text", "parts": [words]}}
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    return {
        "title": conversation_id,
        "conversation_id": conversation_id,
        "current_node": "b",
        "mapping": {"a": node("a", None, ["b"], "user", text), "b": node("b", "a", [], "assistant", "Noted.")},
    }


async def run_jobs(database: VaultDatabase, import_id: str) -> None:
    """The vault's import job (it does not run beside the in-process test vault)."""
    archive = ArchiveService(ArchiveStore(database), VaultServices.build(database).accounts)
    while await archive.process_checkpoint(import_id):
        pass


async def test_owner_retries_a_failed_import_and_failed_message_index_jobs(
    start_gateway: StartGateway, vault_store: VaultDatabase
) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    stranger, stranger_vault = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)
    vault = "retry-" + uuid.uuid4().hex[:8]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    added = await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    assert added.status_code == 200, added.text

    flaky = "flaky-" + uuid.uuid4().hex[:8]
    trigger = flaky.replace("-", "_")
    pool = vault_store.pool
    await pool.execute(
        f"""
        CREATE FUNCTION memvault_test_{trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.external_id = '{flaky}' THEN RAISE EXCEPTION 'could not extend file: No space left'; END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER memvault_test_{trigger} BEFORE INSERT ON archive_conversation
            FOR EACH ROW EXECUTE FUNCTION memvault_test_{trigger}();
        """
    )
    try:
        data = json.dumps([conversation("steady-" + flaky, "The boiler was serviced."), conversation(flaky, "Key.")])
        raw = data.encode()
        started = await owner.api(
            "POST",
            f"/api/v1/vaults/{vault}/archive/imports",
            json={"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest(), "filename": "c.json"},
        )
        import_id = started.json()["id"]
        put = await owner.api("PUT", f"/api/v1/vaults/{vault}/archive/imports/{import_id}/parts/0", content=raw)
        assert put.status_code == 200, put.text
        assert (
            await owner.api("POST", f"/api/v1/vaults/{vault}/archive/imports/{import_id}/finish")
        ).status_code == 200
        await run_jobs(vault_store, import_id)
    finally:
        await pool.execute(
            f"DROP TRIGGER memvault_test_{trigger} ON archive_conversation; DROP FUNCTION memvault_test_{trigger}()"
        )
    url = f"/api/v1/vaults/{vault}/archive/imports/{import_id}"
    before = (await owner.api("GET", url)).json()
    assert (before["state"], before["imported"], before["failed"]) == ("done", 1, 1)
    assert "No space left" in before["failures"][0]["error"]

    # Another account, and a viewer of the vault, cannot retry it.
    assert (await stranger.api("POST", f"{url}/retry")).status_code in (403, 404)
    other = await stranger.api("POST", f"/api/v1/vaults/{stranger_vault}/archive/imports/{import_id}/retry")
    assert other.status_code == 404 and other.headers["content-type"] == "application/problem+json"
    assert (await viewer.api("POST", f"{url}/retry")).status_code == 403

    queued = await owner.api("POST", f"{url}/retry")
    assert queued.status_code == 200, queued.text
    assert (queued.json()["state"], queued.json()["retrying"]) == ("queued", 1)
    await run_jobs(vault_store, import_id)
    after = (await owner.api("GET", url)).json()
    assert (after["state"], after["imported"], after["failed"], after["failures"]) == ("done", 2, 0, [])
    again = await owner.api("POST", f"{url}/retry")
    assert again.status_code == 409 and "is done with no failed conversations" in again.json()["detail"]
    malformed = await owner.api("POST", f"/api/v1/vaults/{vault}/archive/imports/nope/retry")
    assert malformed.status_code == 400 and "import_id" in malformed.json()["detail"]

    # A message the indexer gave up on: listed with its error, retried by id, then no longer failed.
    created = await owner.api(
        "POST", f"/api/v1/vaults/{vault}/conversations", json={"messages": [{"role": "user", "text": "Oil in May."}]}
    )
    assert created.status_code == 201, created.text
    conversation_id = created.json()["receipts"][0]["conversation_id"]
    message_id = str(await pool.fetchval("SELECT id FROM archive_message WHERE conversation_id = $1", conversation_id))
    await IndexFeedStore(vault_store).report_messages(
        [IndexReport(message_id, "h", "test-model", "failed", "the model answered 503", kind="message")]
    )
    listed = (await owner.api("GET", f"/api/v1/vaults/{vault}/archive/index/failures")).json()
    assert listed["failed_total"] == 1
    assert listed["failures"][0] | {"failed_at": None} == {
        "message_id": message_id,
        "conversation_id": conversation_id,
        "error": "the model answered 503",
        "attempts": 1,
        "failed_at": None,
    }
    assert (await viewer.api("GET", f"/api/v1/vaults/{vault}/archive/index/failures")).status_code == 403
    retry = f"/api/v1/vaults/{vault}/archive/index/retry"
    bad = await owner.api("POST", retry, json={"message_ids": ["nope"]})
    assert bad.status_code == 400 and "message_ids" in bad.json()["detail"]
    foreign = await stranger.api(
        "POST", f"/api/v1/vaults/{stranger_vault}/archive/index/retry", json={"message_ids": [message_id]}
    )
    assert foreign.status_code == 404
    done = await owner.api("POST", retry, json={"message_ids": [message_id]})
    assert done.status_code == 200 and done.json() == {"retried": 1}
    refused = await owner.api("POST", retry, json={"message_ids": [message_id]})
    assert refused.status_code == 409 and "did not fail (it is pending" in refused.json()["detail"]
    assert (await owner.api("GET", f"/api/v1/vaults/{vault}/archive/index/failures")).json()["failed_total"] == 0
