"""The dashboard's side of tracked sources over HTTP, in-process against a real vault: the Sources page
(check now, stop tracking), source changes and flagged dependents in the review queue (accept with a
typed statement, dismiss, mark reviewed), source health on the overview; a viewer refused by the server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway) -> tuple[Browser, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    home = await browser.http.get("/dashboard")
    return browser, home.headers["location"].removeprefix("/dashboard/")


async def remember(browser: Browser, vault: str, content: str, **fields: object) -> str:
    stored = await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": content, **fields})
    assert stored.status_code == 201, stored.text
    return str(stored.json()["id"])


async def track(browser: Browser, vault: str, **body: object) -> str:
    tracked = await browser.api("POST", f"/api/v1/vaults/{vault}/sources", json=body)
    assert tracked.status_code == 201, tracked.text
    return str(tracked.json()["source"]["id"])


async def test_the_owner_reviews_source_changes_and_flagged_dependents_in_the_dashboard(
    start_gateway: StartGateway, source_root: Path
) -> None:
    gateway = await start_gateway()
    owner, vault = await signed_in(gateway)
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    budget = source_root / f"budget-{uuid.uuid4().hex[:8]}.json"
    budget.write_text(json.dumps({"budget": "$50,000"}))
    policy = source_root / f"policy-{uuid.uuid4().hex[:8]}.md"
    policy.write_text("Refunds within 30 days. SECRET-PROSE-MARKER")
    budget_id = await remember(owner, vault, "The budget is $50,000.")
    plan_id = await remember(owner, vault, "Paid search gets 40% of the budget.", depends_on=[budget_id])
    rule_id = await remember(owner, vault, "Refunds are accepted within 30 days.")
    json_source = await track(
        owner,
        vault,
        memory_id=budget_id,
        kind="json_file",
        location=str(budget),
        selector="/budget",
        statement_template="The budget is {{value}}.",
        mode="review",
    )
    text_source = await track(owner, vault, memory_id=rule_id, kind="text_file", location=str(policy))

    page = await owner.http.get(f"/dashboard/{vault}/sources")
    assert page.status_code == 200, page.text
    assert f'href="/dashboard/{vault}/sources" aria-current="page"' in page.text
    assert str(budget) in page.text and "/budget" in page.text and "up to date" in page.text

    budget.write_text(json.dumps({"budget": "$35,000"}))
    policy.write_text("Refunds within 14 days. SECRET-PROSE-MARKER-2")
    csrf = await owner.csrf()
    assert (
        await owner.http.post(f"/dashboard/{vault}/sources/sync", data={"source_id": json_source})
    ).status_code == 403
    for source_id in (json_source, text_source):
        checked = await owner.http.post(
            f"/dashboard/{vault}/sources/sync", data={"csrf_token": csrf, "source_id": source_id}
        )
        assert checked.status_code == 303
        assert checked.headers["location"].endswith("?done=synced&checked=1&changed=1&errors=0")
    page = await owner.http.get(f"/dashboard/{vault}/sources?done=synced&checked=1&changed=1&errors=0")
    assert "Checked 1: 1 changed, 0 failed." in page.text and "1 pending change" in page.text

    overview = await owner.http.get(f"/dashboard/{vault}")
    assert "Tracked sources" in overview.text and f'href="/dashboard/{vault}/sources"' in overview.text

    queue = await owner.http.get(f"/dashboard/{vault}/review")
    assert queue.status_code == 200
    assert "2 source changes waiting" in queue.text
    assert "&#34;$50,000&#34;" in queue.text and "&#34;$35,000&#34;" in queue.text  # old and new JSON values
    assert "The budget is $35,000." in queue.text  # the statement accepting it writes
    assert "SECRET-PROSE-MARKER" not in queue.text  # never the source's text
    changes = (await owner.api("GET", f"/api/v1/vaults/{vault}/sources/changes")).json()["changes"]
    by_kind = {c["kind"]: c["id"] for c in changes}
    assert 'name="statement"' in queue.text and f"source-changes/{by_kind['text_file']}" in queue.text

    resolve = f"/dashboard/{vault}/review/source-changes"
    empty = await owner.http.post(
        f"{resolve}/{by_kind['text_file']}", data={"csrf_token": csrf, "decision": "accept", "statement": ""}
    )
    assert empty.status_code == 400 and "replacement statement" in empty.text
    typed = await owner.http.post(
        f"{resolve}/{by_kind['text_file']}",
        data={"csrf_token": csrf, "decision": "accept", "statement": "Refunds are accepted within 14 days."},
    )
    assert typed.status_code == 303 and typed.headers["location"].endswith("?done=source_accepted")
    accepted = await owner.http.post(
        f"{resolve}/{by_kind['json_file']}", data={"csrf_token": csrf, "decision": "accept"}
    )
    assert accepted.status_code == 303
    rule = (await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{rule_id}")).json()["memory"]
    assert rule["status"] == "superseded"
    replacement = await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{rule['superseded_by']}")
    assert replacement.json()["memory"]["content"] == "Refunds are accepted within 14 days."

    queue = await owner.http.get(f"/dashboard/{vault}/review?done=source_accepted")
    assert "The source change was accepted: the memory is superseded." in queue.text
    assert "source-changes/" not in queue.text and "1 memory flagged for review" in queue.text
    assert f'id="f-{plan_id}"' in queue.text
    plan = (await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{plan_id}")).json()["memory"]
    cleared = await owner.http.post(
        f"/dashboard/{vault}/review/flagged/{plan_id}", data={"csrf_token": csrf, "version": str(plan["version"])}
    )
    assert cleared.status_code == 303
    plan = (await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{plan_id}")).json()["memory"]
    assert plan["flagged_reason"] is None and plan["status"] == "active"
    queue = await owner.http.get(f"/dashboard/{vault}/review")
    assert "Nothing is waiting for review." in queue.text

    # Dismissing: the memory stays; stopping tracking: the source is gone, the memory stays.
    budget.write_text(json.dumps({"budget": "$20,000"}))
    await owner.http.post(f"/dashboard/{vault}/sources/sync", data={"csrf_token": csrf, "source_id": json_source})
    [change] = (await owner.api("GET", f"/api/v1/vaults/{vault}/sources/changes")).json()["changes"]
    dismissed = await owner.http.post(f"{resolve}/{change['id']}", data={"csrf_token": csrf, "decision": "dismiss"})
    assert dismissed.headers["location"].endswith("?done=source_dismissed")
    bad = await owner.http.post(f"{resolve}/{change['id']}", data={"csrf_token": csrf, "decision": "maybe"})
    assert bad.status_code == 400 and "<html" in bad.text.lower()
    untracked = await owner.http.post(f"/dashboard/{vault}/sources/{json_source}/untrack", data={"csrf_token": csrf})
    assert untracked.status_code == 303 and untracked.headers["location"].endswith("?done=untracked")
    left = (await owner.api("GET", f"/api/v1/vaults/{vault}/sources")).json()["sources"]
    assert [s["id"] for s in left] == [text_source]
    await owner.close()


async def test_a_viewer_sees_sources_read_only_and_the_server_refuses_their_posts_an_editor_acts(
    start_gateway: StartGateway, source_root: Path
) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)
    vault = "src-" + viewer_name[-6:]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    path = source_root / f"hours-{uuid.uuid4().hex[:8]}.md"
    path.write_text("9-5")
    memory_id = await remember(owner, vault, "Office hours are nine to five.")
    source_id = await track(owner, vault, memory_id=memory_id, kind="text_file", location=str(path))
    path.write_text("8-4")
    await owner.api("POST", f"/api/v1/vaults/{vault}/sources/sync", json={"source_id": source_id})
    [change] = (await owner.api("GET", f"/api/v1/vaults/{vault}/sources/changes")).json()["changes"]

    page = await viewer.http.get(f"/dashboard/{vault}/sources")
    assert page.status_code == 200 and str(path) in page.text
    assert "Check now" not in page.text and "Stop tracking" not in page.text and 'class="readonly"' in page.text
    queue = await viewer.http.get(f"/dashboard/{vault}/review")
    assert "1 source change waiting" in queue.text and 'value="accept"' not in queue.text
    csrf = await viewer.csrf()
    attempts = {
        f"/dashboard/{vault}/sources": {"memory_id": memory_id, "kind": "text_file", "location": str(path)},
        f"/dashboard/{vault}/sources/sync": {"source_id": source_id},
        f"/dashboard/{vault}/sources/{source_id}/untrack": {},
        f"/dashboard/{vault}/review/source-changes/{change['id']}": {"decision": "dismiss"},
        f"/dashboard/{vault}/review/flagged/{memory_id}": {"version": "1"},
    }
    for url, form in attempts.items():
        refused = await viewer.http.post(url, data={**form, "csrf_token": csrf})
        assert refused.status_code == 403, (url, refused.text)
        assert "Not allowed" in refused.text
    still = (await owner.api("GET", f"/api/v1/vaults/{vault}/sources")).json()
    assert [s["id"] for s in still["sources"]] == [source_id] and still["pending_changes"] == 1

    # An editor decides on source changes and checks sources, as on the other pages.
    await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "editor"})
    page = await viewer.http.get(f"/dashboard/{vault}/sources")
    assert "Check now" in page.text and 'class="readonly"' not in page.text
    dismissed = await viewer.http.post(
        f"/dashboard/{vault}/review/source-changes/{change['id']}", data={"csrf_token": csrf, "decision": "dismiss"}
    )
    assert dismissed.status_code == 303, dismissed.text
    checked = await viewer.http.post(
        f"/dashboard/{vault}/sources/sync", data={"csrf_token": csrf, "source_id": source_id}
    )
    assert checked.headers["location"].endswith("checked=1&changed=0&errors=0")
    assert (await owner.api("GET", f"/api/v1/vaults/{vault}/sources")).json()["pending_changes"] == 0
    await owner.close()
    await viewer.close()


async def test_the_queue_shows_the_newest_changes_and_says_how_many_wait_in_all(
    start_gateway: StartGateway, source_root: Path
) -> None:
    gateway = await start_gateway()
    owner, vault = await signed_in(gateway)
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    folder = source_root / f"many-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    sources = []
    for index in range(27):
        path = folder / f"note-{index}.md"
        path.write_text(f"Note {index}.")
        memory_id = await remember(owner, vault, f"Note number {index} holds.")
        sources.append(await track(owner, vault, memory_id=memory_id, kind="text_file", location=str(path)))
        path.write_text(f"Note {index}, changed.")
    for source_id in sources:
        await owner.api("POST", f"/api/v1/vaults/{vault}/sources/sync", json={"source_id": source_id})
    queue = await owner.http.get(f"/dashboard/{vault}/review")
    assert "27 source changes waiting" in queue.text
    assert "The newest 25 of 27 are shown; decide on them to see the others." in queue.text
    assert queue.text.count('class="source-change"') == 25
    await owner.close()


async def test_the_owner_tracks_a_source_from_the_sources_page(start_gateway: StartGateway, source_root: Path) -> None:
    gateway = await start_gateway()
    owner, vault = await signed_in(gateway)
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    path = source_root / f"rent-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps({"rent": 900}))
    memory_id = await remember(owner, vault, "The rent is 900 euros.")
    page = await owner.http.get(f"/dashboard/{vault}/sources", params={"memory_id": memory_id})
    assert f'value="{memory_id}"' in page.text and 'name="statement_template"' in page.text
    csrf = await owner.csrf()
    form = {"csrf_token": csrf, "memory_id": memory_id, "kind": "json_file", "location": str(path), "selector": "/rent"}
    no_template = await owner.http.post(f"/dashboard/{vault}/sources", data=form)
    assert no_template.status_code == 400 and "{{value}}" in no_template.text and "<html" in no_template.text.lower()
    bad_kind = await owner.http.post(f"/dashboard/{vault}/sources", data={**form, "kind": "yaml"})
    assert bad_kind.status_code == 400 and "kind" in bad_kind.text
    bad_interval = await owner.http.post(f"/dashboard/{vault}/sources", data={**form, "interval_seconds": "soon"})
    assert bad_interval.status_code == 400 and "interval_seconds" in bad_interval.text
    tracked = await owner.http.post(
        f"/dashboard/{vault}/sources",
        data={**form, "statement_template": "The rent is {{value}} euros.", "mode": "", "interval_seconds": "60"},
    )
    assert tracked.status_code == 303 and tracked.headers["location"].endswith("?done=tracked"), tracked.text
    [source] = (await owner.api("GET", f"/api/v1/vaults/{vault}/sources")).json()["sources"]
    assert (source["memory_id"], source["mode"], source["interval_seconds"]) == (memory_id, "auto", 60)
    page = await owner.http.get(f"/dashboard/{vault}/sources?done=tracked")
    assert "The source is tracked; its content now is the baseline." in page.text and str(path) in page.text
    shown = await owner.http.get(f"/dashboard/{vault}/memories/{memory_id}")
    assert f'href="/dashboard/{vault}/sources#s-{source["id"]}"' in shown.text and "/rent" in shown.text
    other = await remember(owner, vault, "The deposit is two months of rent.")
    untracked = await owner.http.get(f"/dashboard/{vault}/memories/{other}")
    assert "This memory tracks no file or URL." in untracked.text
    assert f"sources?memory_id={other}#track" in untracked.text
    listed = await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{memory_id}/sources")
    assert [s["id"] for s in listed.json()["sources"]] == [source["id"]]
    await owner.close()
