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
