"""/api/v1 memory routes: the owner reviews, imports and undoes, edits the guide and reads the audit log."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway, unique

pytestmark = pytest.mark.integration


async def owner_with_vault(gateway: RunningGateway) -> tuple[Browser, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    vault = unique("notes")
    created = await browser.api("POST", "/api/v1/vaults", json={"name": vault})
    assert created.status_code == 201, created.text
    return browser, vault


async def ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_review_queue_approve_reject_and_the_audit_log(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    first = await ok(await browser.api("POST", f"{base}/memories", json={"content": "Uses k3s at home."}), 201)
    assert first["outcome"] == "stored" and first["status"] == "proposed"
    assert first["duplicate_check"] == "exact-only"  # this test gateway's vault runs without an indexer
    second = await ok(
        await browser.api("POST", f"{base}/memories", json={"content": "Maybe likes jazz.", "propose": True}), 201
    )
    queue = await ok(await browser.api("GET", f"{base}/review-queue"))
    assert [i["memory"]["id"] for i in queue["items"]] == [first["id"], second["id"]] and queue["total"] == 2

    approved = await ok(await browser.api("POST", f"{base}/memories/{first['id']}/approve", json={}))
    assert approved["memory"]["status"] == "active"
    rejected = await ok(await browser.api("POST", f"{base}/memories/{second['id']}/reject", json={"reason": "a guess"}))
    assert rejected["memory"]["status"] == "rejected" and rejected["memory"]["status_reason"] == "a guess"
    explained = await ok(await browser.api("GET", f"{base}/memories/{first['id']}"))
    assert [h["change"] for h in explained["history"]] == ["created", "approved"]

    audit = await ok(await browser.api("GET", f"{base}/audit", params={"action": "memory."}))
    assert [e["action"] for e in audit["entries"]] == [
        "memory.reject",
        "memory.approve",
        "memory.remember",
        "memory.remember",
    ]
    only_reject = await ok(await browser.api("GET", f"{base}/audit", params={"target": second["id"]}))
    assert [e["action"] for e in only_reject["entries"]] == ["memory.reject", "memory.remember"]
    assert "a guess" not in str(audit)  # reasons stay with the memory, not in the audit log


async def test_bulk_text_import_and_undo(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    imported = await ok(
        await browser.api(
            "POST",
            "/api/v1/bulk",
            json={
                "vault": vault,
                "text": "- Prefers tea.\n- prefers TEA.\n- api_key = sk_live_"
                + "a1B2c3D4e5F6g7H8i9J0k1L2"
                + "\n\nLives in Lisbon.",
                "source": "notes.md",
            },
        )
    )
    assert [i["outcome"] for i in imported["items"]] == ["stored", "duplicate", "secret", "stored"]
    assert imported["summary"] == {"stored": 2, "duplicate": 1, "secret": 1}
    batches = await ok(await browser.api("GET", f"/api/v1/vaults/{vault}/batches"))
    assert batches["batches"][0]["id"] == imported["batch_id"]
    undone = await ok(await browser.api("POST", f"/api/v1/vaults/{vault}/batches/{imported['batch_id']}/undo"))
    assert undone["removed"] == 2 and undone["batch"]["undone_at"]
    left = await ok(await browser.api("GET", f"/api/v1/vaults/{vault}/memories"))
    assert left["memories"] == []


async def test_edge_validation_names_the_field(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    misspelt = await browser.api("POST", f"{base}/memories", json={"content": "x", "tag": ["a"]})
    assert misspelt.status_code == 422 and "tag" in misspelt.text
    both = await browser.api("POST", "/api/v1/bulk", json={"vault": vault, "text": "- a", "items": [{"content": "b"}]})
    assert both.status_code == 400 and "not both" in both.json()["detail"]
    bad_id = await browser.api("POST", f"{base}/memories/nope/approve", json={})
    assert bad_id.status_code == 400 and "is not a memory id" in bad_id.json()["detail"]
    secret = await browser.api(
        "POST", f"{base}/memories", json={"content": "the token is ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"}
    )
    assert secret.status_code == 400 and "looks like it contains a secret" in secret.json()["detail"]
    no_csrf = await browser.http.post(f"{base}/memories", json={"content": "x"})
    assert no_csrf.status_code == 403


async def test_settings_guide_and_a_read_only_token(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    settings = await ok(await browser.api("PUT", f"{base}/settings", json={"approval_mode": "auto"}))
    assert settings["approval_mode"] == "auto" and settings["rejected_retention_days"] == 30
    stored = await ok(await browser.api("POST", f"{base}/memories", json={"content": "Drinks oat milk."}), 201)
    assert stored["status"] == "active"

    guide = await ok(await browser.api("GET", f"{base}/guide", params={"include_default": "true"}))
    assert guide["version"] == 1 and guide["default_text"] == guide["text"]
    saved = await ok(await browser.api("PUT", f"{base}/guide", json={"text": "Recall first.", "expected_version": 1}))
    assert saved["version"] == 2
    stale = await browser.api("PUT", f"{base}/guide", json={"text": "Lost.", "expected_version": 1})
    assert stale.status_code == 409
    adopted = await ok(await browser.api("POST", f"{base}/guide/adopt-default", json={"expected_version": 2}))
    assert adopted["version"] == 3
    versions = await ok(await browser.api("GET", f"{base}/guide/versions"))
    assert [v["version"] for v in versions["versions"]] == [3, 2, 1]

    token = (
        await ok(
            await browser.api(
                "POST", "/api/v1/service-tokens", json={"name": "reader", "scopes": ["read"], "vaults": [vault]}
            ),
            201,
        )
    )["token"]
    async with gateway.http(headers={"Authorization": f"Bearer {token}"}) as script:
        found = await ok(await script.get(f"{base}/recall", params={"q": "oat milk"}))
        assert [r["id"] for r in found["results"]] == [stored["id"]]
        refused = await script.post(f"{base}/memories", json={"content": "A script write."})
        assert refused.status_code == 403 and "'write' scope" in refused.json()["detail"]
        audit = await script.get(f"{base}/audit")
        assert audit.status_code == 403


async def test_a_vault_shared_a_moment_ago_is_usable_at_once_and_not_after_it_is_taken_away(
    start_gateway: StartGateway,
) -> None:
    """The check of each vault route keeps the caller's vault names for a while (api/access.py); a vault
    not among them is asked about again, and one taken away is refused by the vault service itself."""
    gateway = await start_gateway()
    alice, vault = await owner_with_vault(gateway)
    bob_name, bob_password = await gateway.create_user()
    bob = Browser(gateway)
    assert (await bob.sign_in(bob_name, bob_password)).status_code == 303
    base = f"/api/v1/vaults/{vault}"
    assert (await bob.api("GET", f"{base}/memories")).status_code == 404  # not his: Bob's vaults are now kept
    shared = await alice.api("PUT", f"{base}/members/{bob_name}", json={"role": "viewer"})
    assert shared.status_code == 200, shared.text
    await ok(await bob.api("GET", f"{base}/memories"))  # at once, though his earlier list is still kept
    await ok(await bob.api("GET", f"{base}/memories"))
    assert (await alice.api("DELETE", f"{base}/members/{bob_name}")).status_code == 200
    gone = await bob.api("GET", f"{base}/memories")
    assert gone.status_code == 404 and "no vault named" in gone.text, gone.text


async def test_edit_in_place_keeps_the_id_and_the_previous_text_in_history(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    typo = await ok(
        await browser.api("POST", f"{base}/memories", json={"content": "Lives in Lisbn.", "tags": ["home"]}), 201
    )
    other = await ok(await browser.api("POST", f"{base}/memories", json={"content": "Prefers green tea."}), 201)
    memory = f"{base}/memories/{typo['id']}"

    fixed = await ok(await browser.api("PATCH", memory, json={"content": "Lives in Lisbon.", "expected_version": 1}))
    assert fixed["changed"] == ["content"] and fixed["memory"]["id"] == typo["id"]
    assert fixed["memory"]["content"] == "Lives in Lisbon." and fixed["memory"]["version"] == 2
    assert fixed["memory"]["tags"] == ["home"]
    stale = await browser.api("PATCH", memory, json={"content": "Lives in Porto.", "expected_version": 1})
    assert stale.status_code == 409 and "version" in stale.json()["detail"]

    tagged = await ok(await browser.api("PATCH", memory, json={"tags": ["Home", "city"], "expected_version": 2}))
    assert tagged["changed"] == ["tags"] and sorted(tagged["memory"]["tags"]) == ["city", "home"]
    assert tagged["memory"]["content"] == "Lives in Lisbon."

    explained = await ok(await browser.api("GET", memory))
    assert [h["change"] for h in explained["history"]] == ["created", "edited", "edited"]
    assert [h["content"] for h in explained["history"]][:2] == ["Lives in Lisbn.", "Lives in Lisbon."]

    duplicate = await browser.api("PATCH", memory, json={"content": "prefers  GREEN tea."})
    assert duplicate.status_code == 409 and other["id"] in duplicate.json()["detail"]
    secret = await browser.api("PATCH", memory, json={"content": "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"})
    assert secret.status_code == 400 and "secrets are never stored" in secret.text
    forgotten = await ok(await browser.api("DELETE", f"{base}/memories/{other['id']}"))
    assert forgotten
    excluded = await browser.api("PATCH", memory, json={"content": "Prefers green tea."})
    assert excluded.status_code == 409 and "refused from then on" in excluded.json()["detail"]
    empty = await browser.api("PATCH", memory, json={})
    assert empty.status_code == 400 and "nothing to change" in empty.text
    assert (await ok(await browser.api("GET", memory)))["memory"]["content"] == "Lives in Lisbon."
    found = await ok(await browser.api("GET", f"{base}/recall", params={"q": "Lisbon"}))  # the new text is searched
    assert [r["id"] for r in found["results"]] == [typo["id"]] and found["mode"] == "keyword-only"
    assert found["results"][0]["keyword_score"] == 1.0 and found["results"][0]["meaning_score"] is None
    assert (await ok(await browser.api("GET", f"{base}/recall", params={"q": "Lisbn"})))["results"] == []
    page = await browser.http.get(f"/dashboard/{vault}/memories", params={"q": "Lisbon"})
    assert "meaning not scored · keywords 1.0" in " ".join(page.text.split())

    audit = await ok(await browser.api("GET", f"{base}/audit", params={"target": typo["id"]}))
    edits = [e for e in audit["entries"] if e["action"] == "memory.edit"]
    assert len(edits) == 2 and all(not e["actor"].startswith("mcp:") for e in edits)
    assert "Lisbon" not in str(audit)


async def test_forgotten_texts_are_listed_checked_and_can_be_lifted(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    texts = ["Old phone number is 555-0100.", "Old address is Elm Street 4."]
    stored = [await ok(await browser.api("POST", f"{base}/memories", json={"content": t}), 201) for t in texts]
    for memory in stored:
        await ok(await browser.api("DELETE", f"{base}/memories/{memory['id']}"))
    listed = await ok(await browser.api("GET", f"{base}/exclusions"))
    assert listed["total"] == 2 and {e["reason"] for e in listed["exclusions"]} == {"forgotten"}
    assert all(len(e["content_hash"]) == 64 and e["created_at"] for e in listed["exclusions"])
    assert "555-0100" not in str(listed)
    page = await ok(await browser.api("GET", f"{base}/exclusions", params={"limit": 1, "offset": 1}))
    assert len(page["exclusions"]) == 1 and page["total"] == 2

    refused = await ok(await browser.api("POST", f"{base}/memories", json={"content": texts[0]}), 201)
    assert refused["outcome"] == "excluded"
    checked = await ok(
        await browser.api("POST", f"{base}/exclusions/check", json={"text": "old PHONE number is 555-0100."})
    )
    assert checked["excluded"] is True
    lifted = await ok(await browser.api("POST", f"{base}/exclusions/lift", json={"text": texts[0]}))
    assert lifted["lifted"] == checked["exclusion"]["content_hash"]
    again = await ok(await browser.api("POST", f"{base}/memories", json={"content": texts[0]}), 201)
    assert again["outcome"] == "stored"

    other_hash = next(e["content_hash"] for e in listed["exclusions"] if e["content_hash"] != lifted["lifted"])
    assert (await browser.api("DELETE", f"{base}/exclusions/{other_hash}")).status_code == 200
    gone = await browser.api("DELETE", f"{base}/exclusions/{other_hash}")
    assert gone.status_code == 404 and "has no exclusion" in gone.json()["detail"]
    bad = await browser.api("DELETE", f"{base}/exclusions/not-a-hash")
    assert bad.status_code == 400 and "64 hexadecimal" in bad.json()["detail"]
    assert (await ok(await browser.api("GET", f"{base}/exclusions")))["total"] == 0
    audit = await ok(await browser.api("GET", f"{base}/audit", params={"action": "exclusion."}))
    assert [e["action"] for e in audit["entries"]] == ["exclusion.lift", "exclusion.lift"]

    stranger, _ = await owner_with_vault(gateway)
    hidden = await stranger.api("GET", f"{base}/exclusions")
    assert hidden.status_code == 404


async def test_two_accounts_each_have_a_vault_of_the_same_name(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    name = unique("work")
    people = []
    for text in ("Ana's standup is at 9.", "Budi's standup is at 10."):
        username, password = await gateway.create_user()
        browser = Browser(gateway)
        assert (await browser.sign_in(username, password)).status_code == 303
        await ok(await browser.api("POST", "/api/v1/vaults", json={"name": name}), 201)
        await ok(await browser.api("POST", f"/api/v1/vaults/{name}/memories", json={"content": text}), 201)
        people.append((username, browser))
    (ana, ana_browser), (_, budi_browser) = people
    for browser, mine, theirs in ((ana_browser, "Ana", "Budi"), (budi_browser, "Budi", "Ana")):
        listed = await ok(await browser.api("GET", f"/api/v1/vaults/{name}/memories"))
        contents = [m["content"] for m in listed["memories"]]
        assert len(contents) == 1 and contents[0].startswith(mine) and theirs not in str(contents)
    again = await ana_browser.api("POST", "/api/v1/vaults", json={"name": name})
    assert again.status_code == 201, again.text  # her own vault already: nothing new is made, as before
    # Ana cannot also be a member of Budi's vault of the same name: names are unique among one's vaults.
    shared = await budi_browser.api("PUT", f"/api/v1/vaults/{name}/members/{ana}", json={"role": "viewer"})
    assert shared.status_code == 409 and "already has a vault named" in shared.json()["detail"]
    other = unique("team")
    await ok(await budi_browser.api("POST", "/api/v1/vaults", json={"name": other}), 201)
    await ok(await budi_browser.api("PUT", f"/api/v1/vaults/{other}/members/{ana}", json={"role": "viewer"}))
    taken = await ana_browser.api("POST", "/api/v1/vaults", json={"name": other})
    assert taken.status_code == 409 and "choose another name" in taken.json()["detail"]


async def test_list_and_recall_filter_by_key_scope_source_client_and_creation_time(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    browser, vault = await owner_with_vault(gateway)
    base = f"/api/v1/vaults/{vault}"
    written = {}
    for name, body in {
        "home": {"content": "The home NAS is a Synology DS920.", "key": "nas.model", "scope": "home"},
        "office": {"content": "The office NAS is a QNAP TS-453.", "key": "nas.model", "scope": "office"},
        "imported": {"content": "The NAS backs up to Backblaze nightly.", "source": "import:notes.md"},
    }.items():
        written[name] = (await ok(await browser.api("POST", f"{base}/memories", json=body), 201))["id"]

    async def listed(**params: Any) -> list[str]:
        answer = await ok(await browser.api("GET", f"{base}/memories", params=params))
        return sorted(m["id"] for m in answer["memories"])

    async def recalled(**params: Any) -> list[str]:
        answer = await ok(
            await browser.api("GET", f"{base}/recall", params={"q": "NAS", "status": "proposed", **params})
        )
        return sorted(r["id"] for r in answer["results"])

    for search in (listed, recalled):
        assert await search(key="nas.model") == sorted([written["home"], written["office"]])
        assert await search(key="nas.model", scope="office") == [written["office"]]
        assert await search(source="import:") == [written["imported"]]  # a prefix
        assert await search(source="notes.md") == []
        assert await search(created_from="2020-01-01", created_to="2021-01-01") == []
        assert len(await search(created_from="2020-01-01")) == 3
        assert await search(created_to="2020-01-01") == []
        assert await search(client="mcp:nobody") == []

    one = (await ok(await browser.api("GET", f"{base}/memories/{written['home']}")))["memory"]
    assert len(await listed(client=one["client"])) == 3  # all three came from this browser

    # A cursor belongs to its filters: asked for with others, it is refused.
    page = await ok(await browser.api("GET", f"{base}/memories", params={"limit": 1, "key": "nas.model"}))
    other = await browser.api("GET", f"{base}/memories", params={"limit": 1, "cursor": page["next_cursor"]})
    assert other.status_code == 400 and "cursor" in other.text

    # Refused at the edge, naming the field.
    backwards = await browser.api(
        "GET", f"{base}/memories", params={"created_from": "2026-02-01", "created_to": "2026-01-01"}
    )
    assert backwards.status_code == 400 and "created_from must be before created_to" in backwards.json()["detail"]
    not_a_time = await browser.api("GET", f"{base}/recall", params={"q": "NAS", "created_from": "yesterday"})
    assert not_a_time.status_code in (400, 422) and "created_from" in not_a_time.text
    too_long = await browser.api("GET", f"{base}/memories", params={"key": "k" * 201})
    assert too_long.status_code in (400, 422) and "key" in too_long.text
    # The dashboard's form: the same filters (its dates are days, both included), refused the same way.
    page = await browser.http.get(
        f"/dashboard/{vault}/memories", params={"key": "nas.model", "scope": "home", "created_to": "2099-12-31"}
    )
    assert page.status_code == 200 and "Synology" in page.text and "QNAP" not in page.text
    today = (await ok(await browser.api("GET", f"{base}/memories/{written['home']}")))["memory"]["created_at"][:10]
    same_day = await browser.http.get(
        f"/dashboard/{vault}/memories", params={"key": "nas.model", "created_from": today, "created_to": today}
    )
    assert "Synology" in same_day.text and "QNAP" in same_day.text
    for bad in ({"created_from": "31/12/2026"}, {"created_from": "2026-02-01", "created_to": "2026-01-01"}):
        refused = await browser.http.get(f"/dashboard/{vault}/memories", params=bad)
        assert refused.status_code == 400 and "created_" in refused.text
    spec = (await browser.http.get("/api/v1/openapi.json")).json()
    names = {p["name"] for p in spec["paths"]["/api/v1/vaults/{vault}/memories"]["get"]["parameters"]}
    assert {"key", "scope", "source", "client", "created_from", "created_to"} <= names
    names = {p["name"] for p in spec["paths"]["/api/v1/vaults/{vault}/recall"]["get"]["parameters"]}
    assert {"key", "scope", "source", "client", "created_from", "created_to"} <= names
