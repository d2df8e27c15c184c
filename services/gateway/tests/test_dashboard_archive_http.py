"""The Archive pages over HTTP, in-process against a real vault: strict headers, CSRF on the upload and
delete forms, a viewer refused both by the server, the delete's exact confirmation, errors as pages."""

from __future__ import annotations

import json
import re

import pytest
from gateway_helpers import StartGateway
from test_dashboard_http import signed_in

pytestmark = pytest.mark.integration


def export() -> bytes:
    def node(node_id: str, parent: str | None, children: list[str], role: str, text: str) -> dict[str, object]:
        message = {"id": node_id, "author": {"role": role}, "content": {"content_type": "text", "parts": [text]}}
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    conversation = {
        "title": "Keys",
        "conversation_id": "conv-keys",
        "current_node": "b",
        "mapping": {
            "a": node("a", None, ["b"], "user", "The spare key is under the pot."),
            "b": node("b", "a", [], "assistant", "Noted."),
        },
    }
    return json.dumps([conversation]).encode()


async def test_archive_forms_need_the_token_a_writer_and_the_exact_id(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)
    vault = "archive-" + viewer_name[-6:]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    added = await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    assert added.status_code == 200, added.text

    page = await owner.http.get(f"/dashboard/{vault}/archive")
    assert page.status_code == 200 and "No conversations yet." in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert re.findall(r"<script(?![^>]*\bsrc=)", page.text) == []
    files = {"file": ("conversations.json", export(), "application/json")}
    no_token = await owner.http.post(f"/dashboard/{vault}/archive/imports", data={"format": "chatgpt"}, files=files)
    assert no_token.status_code == 403 and "Page out of date" in no_token.text
    csrf = await owner.csrf()
    wrong = await owner.http.post(
        f"/dashboard/{vault}/archive/imports", data={"csrf_token": csrf, "format": "gemini"}, files=files
    )
    assert wrong.status_code == 400 and "format must be one of" in wrong.text
    started = await owner.http.post(
        f"/dashboard/{vault}/archive/imports", data={"csrf_token": csrf, "format": "chatgpt"}, files=files
    )
    assert started.status_code == 303, started.text
    progress = await owner.http.get(started.headers["location"])
    assert progress.status_code == 200 and "conversations.json" in progress.text

    # The viewer reads but is refused an upload by the vault; no upload form is shown to them.
    seen = await viewer.http.get(f"/dashboard/{vault}/archive")
    assert seen.status_code == 200 and "Upload and import" not in seen.text
    viewer_csrf = await viewer.csrf()
    refused = await viewer.http.post(
        f"/dashboard/{vault}/archive/imports", data={"csrf_token": viewer_csrf, "format": "chatgpt"}, files=files
    )
    assert refused.status_code == 403 and "Not allowed" in refused.text

    # (No import job runs beside this in-process vault: the delete form is tried on an id of no conversation.)
    conversation_id = "00000000-0000-4000-8000-000000000000"
    gone_wrong = await owner.http.post(
        f"/dashboard/{vault}/archive/c/{conversation_id}/delete", data={"csrf_token": csrf, "confirm": "yes"}
    )
    assert gone_wrong.status_code == 400 and "id exactly to confirm deleting it" in gone_wrong.text
    viewer_delete = await viewer.http.post(
        f"/dashboard/{vault}/archive/c/{conversation_id}/delete",
        data={"csrf_token": viewer_csrf, "confirm": conversation_id},
    )
    assert viewer_delete.status_code == 403 and viewer_delete.headers["content-type"].startswith("text/html")
    missing = await owner.http.get(f"/dashboard/{vault}/archive/c/not-an-id")
    assert missing.status_code == 400 and missing.headers["content-type"].startswith("text/html")
    await owner.close()
    await viewer.close()


async def test_tag_edits_need_the_token_the_version_and_a_writer_and_the_map_is_for_readers(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)
    vault = "tags-" + viewer_name[-6:]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    added = await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    assert added.status_code == 200, added.text
    made = await owner.api(
        "POST",
        f"/api/v1/vaults/{vault}/conversations",
        json={"title": "Keys", "tags": ["home"], "messages": [{"role": "user", "text": "The key is under the pot."}]},
    )
    assert made.status_code == 201, made.text
    conversation_id = made.json()["receipts"][0]["conversation_id"]
    tags_url = f"/dashboard/{vault}/archive/c/{conversation_id}/tags"
    csrf = await owner.csrf()

    no_token = await owner.http.post(tags_url, data={"tags": "x", "tags_version": "1"})
    assert no_token.status_code == 403 and "Page out of date" in no_token.text
    saved = await owner.http.post(tags_url, data={"csrf_token": csrf, "tags": "Home, KEYS keys", "tags_version": "1"})
    assert saved.status_code == 303 and saved.headers["location"].endswith("?tags_saved=1")
    page = await owner.http.get(saved.headers["location"])
    assert "Tags saved." in page.text and 'value="home, keys"' in page.text
    stale = await owner.http.post(tags_url, data={"csrf_token": csrf, "tags": "other", "tags_version": "1"})
    assert stale.status_code == 409 and "Nothing was saved" in stale.text and 'value="home, keys"' in stale.text
    too_many = " ".join(f"t{i}" for i in range(21))
    many = await owner.http.post(tags_url, data={"csrf_token": csrf, "tags": too_many, "tags_version": "2"})
    assert many.status_code == 400 and "at most 20 tags" in many.text
    bad = await owner.http.post(tags_url, data={"csrf_token": csrf, "tags": "no!good", "tags_version": "2"})
    assert bad.status_code == 400 and "must be 1-64 of a-z" in bad.text
    no_version = await owner.http.post(tags_url, data={"csrf_token": csrf, "tags": "x", "tags_version": "many"})
    assert no_version.status_code == 400 and "tags_version must be a whole number" in no_version.text
    listed = await owner.http.get(f"/dashboard/{vault}/archive?tags=keys+nothing&match=any")
    assert listed.status_code == 200 and ">Keys</a>" in listed.text
    none = await owner.http.get(f"/dashboard/{vault}/archive?tags=keys+nothing&match=all")
    assert "No conversation has these tags." in none.text
    wrong_match = await owner.http.get(f"/dashboard/{vault}/archive?tags=keys&match=some")
    assert wrong_match.status_code == 400 and wrong_match.headers["content-type"].startswith("text/html")

    # The viewer sees the map and the tags, no edit form; a forged edit is refused by the vault.
    drawn = await viewer.http.get(f"/dashboard/{vault}/archive/map")
    assert drawn.status_code == 200 and "Conversation: Keys" in drawn.text
    policy = drawn.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy and " style=" not in drawn.text
    seen = await viewer.http.get(f"/dashboard/{vault}/archive/c/{conversation_id}")
    assert seen.status_code == 200 and "#keys" in seen.text and "Save tags" not in seen.text
    forged = await viewer.http.post(
        tags_url, data={"csrf_token": await viewer.csrf(), "tags": "mine", "tags_version": "2"}
    )
    assert forged.status_code == 403 and "Not allowed" in forged.text
    still = await owner.http.get(f"/dashboard/{vault}/archive/c/{conversation_id}")
    assert 'value="home, keys"' in still.text
    out_of_range = await owner.http.get(f"/dashboard/{vault}/archive/map?tags=99")
    assert out_of_range.status_code == 400
    await owner.close()
    await viewer.close()
