"""/api/v1 for tracked sources, in-process against a real vault: track, list with health, sync, changes
with old and new values (never the source's text), resolve, untrack; the same argument limits as the
MCP tools; viewers and strangers refused by the server; every route in the OpenAPI document."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway

from memvault_core import limits

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway) -> tuple[Browser, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    home = await browser.http.get("/dashboard")
    return browser, home.headers["location"].removeprefix("/dashboard/")


async def active_memory(browser: Browser, vault: str, content: str, **fields: object) -> str:
    stored = await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": content, **fields})
    assert stored.status_code == 201 and stored.json()["status"] == "active", stored.text
    return str(stored.json()["id"])


async def test_track_sync_review_resolve_and_untrack_over_the_api(
    start_gateway: StartGateway, source_root: Path
) -> None:
    gateway = await start_gateway()
    owner, vault = await signed_in(gateway)
    assert (await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})).is_success
    budget = source_root / f"budget-{uuid.uuid4().hex[:8]}.json"
    budget.write_text(json.dumps({"campaign": {"budget": "$50,000"}}))
    policy = source_root / f"policy-{uuid.uuid4().hex[:8]}.md"
    policy.write_text("Refunds within 30 days.")
    memory_id = await active_memory(owner, vault, "The campaign budget is $50,000.")
    plan = await active_memory(owner, vault, "Paid search gets 40% of the campaign money.", depends_on=[memory_id])
    rule = await active_memory(owner, vault, "Refunds are accepted within 30 days.")
    base = f"/api/v1/vaults/{vault}/sources"

    tracked = await owner.api(
        "POST",
        base,
        json={
            "memory_id": memory_id,
            "kind": "json_file",
            "location": str(budget),
            "selector": "/campaign/budget",
            "statement_template": "The campaign budget is {{value}}.",
            "mode": "review",
        },
    )
    assert tracked.status_code == 201, tracked.text
    source = tracked.json()["source"]
    assert tracked.json()["current_statement"] == "The campaign budget is $50,000."
    assert source["baseline_value"] == "$50,000" and source["mode"] == "review" and source["interval_seconds"] == 300
    text = await owner.api("POST", base, json={"memory_id": rule, "kind": "text_file", "location": str(policy)})
    assert text.status_code == 201, text.text
    assert text.json()["source"]["mode"] == "review" and text.json()["source"]["baseline_value"] is None

    budget.write_text(json.dumps({"campaign": {"budget": "$35,000"}}))
    policy.write_text("Refunds within 14 days.")
    for tracked_id in (source["id"], text.json()["source"]["id"]):
        synced = await owner.api("POST", f"{base}/sync", json={"source_id": tracked_id})
        assert synced.status_code == 200 and synced.json()["checks"][0]["outcome"] == "pending", synced.text
    listed = await owner.api("GET", base)
    assert listed.json()["pending_changes"] == 2 and listed.json()["errors"] == 0

    changes = (await owner.api("GET", f"{base}/changes")).json()["changes"]
    assert "14 days" not in json.dumps(changes)  # hashes and JSON values only, never the text
    by_kind = {c["kind"]: c for c in changes}
    json_change, text_change = by_kind["json_file"], by_kind["text_file"]
    assert (json_change["old_value"], json_change["new_value"]) == ("$50,000", "$35,000")
    assert json_change["proposed_statement"] == "The campaign budget is $35,000." and not json_change["needs_statement"]
    assert text_change["needs_statement"] and text_change["new_value"] is None and text_change["old_value"] is None
    assert text_change["old_hash"] != text_change["new_hash"]

    no_statement = await owner.api("POST", f"{base}/changes/{text_change['id']}/resolve", json={"accept": True})
    assert no_statement.status_code == 400 and "replacement statement" in no_statement.json()["detail"]
    accepted = await owner.api(
        "POST",
        f"{base}/changes/{text_change['id']}/resolve",
        json={"accept": True, "statement": "Refunds are accepted within 14 days."},
    )
    assert accepted.status_code == 200 and accepted.json()["outcome"] == "superseded", accepted.text
    again = await owner.api("POST", f"{base}/changes/{text_change['id']}/resolve", json={"accept": False})
    assert again.status_code == 409

    applied = await owner.api("POST", f"{base}/changes/{json_change['id']}/resolve", json={"accept": True})
    assert applied.json()["outcome"] == "superseded" and applied.json()["flagged_dependents"] == [plan]
    replacement = await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{applied.json()['replacement_id']}")
    assert replacement.json()["memory"]["content"] == "The campaign budget is $35,000."
    history = (await owner.api("GET", f"{base}/changes", params={"include_resolved": "true"})).json()["changes"]
    assert {c["status"] for c in history} == {"accepted"}

    gone = await owner.api("DELETE", f"{base}/{source['id']}")
    assert gone.status_code == 200 and gone.json()["untracked"] == source["id"]
    assert (await owner.api("DELETE", f"{base}/{source['id']}")).status_code == 404
    assert [s["id"] for s in (await owner.api("GET", base)).json()["sources"]] == [text.json()["source"]["id"]]
    await owner.close()


async def test_the_api_validates_like_the_tools_and_the_vault_refuses_what_its_rules_refuse(
    start_gateway: StartGateway, source_root: Path
) -> None:
    gateway = await start_gateway()
    owner, vault = await signed_in(gateway)
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    memory_id = await active_memory(owner, vault, "The ads budget is 100 euros.")
    base = f"/api/v1/vaults/{vault}/sources"
    good = {"memory_id": memory_id, "kind": "json_file", "location": str(source_root / "ads.json")}
    refused_here = {
        "kind": {**good, "kind": "yaml_file"},
        "location": {**good, "location": "/" + "x" * limits.MAX_SOURCE_LOCATION_CHARS},
        "interval_seconds": {**good, "interval_seconds": -1},
        "mode": {**good, "mode": "sometimes"},
        "extra": {**good, "colour": "blue"},
        "statement": {**good, "interval_seconds": "300"},
    }
    for name, body in refused_here.items():
        answer = await owner.api("POST", base, json=body)
        assert answer.status_code == 422, (name, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
    (source_root / "ads.json").write_text(json.dumps({"ads": 100}))
    no_template = await owner.api("POST", base, json={**good, "selector": "/ads"})
    assert no_template.status_code == 400 and "{{value}}" in no_template.json()["detail"]
    outside = await owner.api("POST", base, json={**good, "location": "/etc/hostname", "kind": "text_file"})
    assert outside.status_code == 400 and "outside the configured file roots" in outside.json()["detail"]
    not_allowed = await owner.api(
        "POST", base, json={**good, "kind": "text_url", "location": "http://example.invalid/a.json"}
    )
    assert not_allowed.status_code == 400 and "not on the allowed list" in not_allowed.json()["detail"]
    bad_id = await owner.api("POST", f"{base}/sync", json={"source_id": "not-a-uuid"})
    assert bad_id.status_code == 400
    long_statement = await owner.api(
        "POST",
        f"{base}/changes/{uuid.uuid4()}/resolve",
        json={"accept": True, "statement": "x" * (limits.MAX_CONTENT_CHARS + 1)},
    )
    assert long_statement.status_code == 422
    missing = await owner.api("POST", f"{base}/changes/{uuid.uuid4()}/resolve", json={"accept": False})
    assert missing.status_code == 404
    await owner.close()


async def test_a_viewer_reads_sources_but_every_change_is_refused_and_strangers_see_nothing(
    start_gateway: StartGateway, source_root: Path
) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)
    stranger, _ = await signed_in(gateway)
    vault = "shared-" + viewer_name[-6:]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    memory_id = await active_memory(owner, vault, "Office hours are nine to five.")
    path = source_root / f"hours-{uuid.uuid4().hex[:8]}.md"
    path.write_text("9-5")
    base = f"/api/v1/vaults/{vault}/sources"
    source = (
        await owner.api("POST", base, json={"memory_id": memory_id, "kind": "text_file", "location": str(path)})
    ).json()["source"]
    path.write_text("8-4")
    await owner.api("POST", f"{base}/sync", json={"source_id": source["id"]})
    [change] = (await owner.api("GET", f"{base}/changes")).json()["changes"]

    assert (await viewer.api("GET", base)).json()["sources"][0]["id"] == source["id"]
    assert (await viewer.api("GET", f"{base}/changes")).status_code == 200
    attempts = [
        ("POST", base, {"memory_id": memory_id, "kind": "text_file", "location": str(path)}),
        ("POST", f"{base}/sync", {"source_id": source["id"]}),
        ("POST", f"{base}/changes/{change['id']}/resolve", {"accept": False}),
        ("DELETE", f"{base}/{source['id']}", None),
    ]
    for method, path_, body in attempts:
        refused = await viewer.api(method, path_, json=body) if body is not None else await viewer.api(method, path_)
        assert refused.status_code == 403, (method, path_, refused.text)
        hidden = await stranger.api(method, path_, json=body) if body is not None else await stranger.api(method, path_)
        assert hidden.status_code == 404, (method, path_, hidden.text)
    assert (await stranger.api("GET", base)).status_code == 404
    assert (await owner.api("GET", f"{base}/changes")).json()["changes"][0]["status"] == "pending"
    no_csrf = await owner.http.post(f"{base}/sync", json={})
    assert no_csrf.status_code == 403
    for browser in (owner, viewer, stranger):
        await browser.close()


async def test_every_sources_route_is_in_the_openapi_document(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        document = (await http.get("/api/v1/openapi.json")).json()
    paths = document["paths"]
    expected = {
        "/api/v1/vaults/{vault}/sources": {"get", "post"},
        "/api/v1/vaults/{vault}/sources/sync": {"post"},
        "/api/v1/vaults/{vault}/sources/changes": {"get"},
        "/api/v1/vaults/{vault}/sources/changes/{change_id}/resolve": {"post"},
        "/api/v1/vaults/{vault}/sources/{source_id}": {"delete"},
        "/api/v1/vaults/{vault}/memories/{memory_id}/sources": {"get"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
        for method in methods:
            responses = paths[path][method]["responses"]
            assert {"401", "403", "404", "422"} <= set(responses), (path, method)
    track = document["components"]["schemas"]["TrackIn"]["properties"]
    assert track["kind"]["enum"] == ["json_file", "json_url", "text_file", "text_url"]
    assert track["location"]["maxLength"] == limits.MAX_SOURCE_LOCATION_CHARS
