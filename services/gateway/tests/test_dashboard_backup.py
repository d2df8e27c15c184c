"""The dashboard's Backup page over HTTP, in-process against a real vault: download a backup and
exports, restore an uploaded file (asking before it replaces memories), and viewers refused by the
server."""

from __future__ import annotations

import hashlib
import json

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway) -> tuple[Browser, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    home = await browser.http.get("/dashboard")
    assert home.status_code == 303, home.text
    return browser, home.headers["location"].removeprefix("/dashboard/")


def manifest_of(data: bytes) -> dict[str, object]:
    body, _, last = data.rstrip(b"\n").rpartition(b"\n")
    manifest: dict[str, object] = json.loads(last)
    assert manifest["kind"] == "manifest"
    assert manifest["sha256"] == hashlib.sha256(body + b"\n").hexdigest()
    return manifest


async def test_the_owner_backs_up_exports_and_restores_with_a_confirmation(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    auto = await browser.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    assert auto.status_code == 200, auto.text
    stored = await browser.api(
        "POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Deploys go out on Tuesdays."}
    )
    assert stored.status_code in (200, 201), stored.text

    page = await browser.http.get(f"/dashboard/{vault}/backup")
    assert page.status_code == 200, page.text
    assert f'href="/dashboard/{vault}/backup"' in page.text  # in the navigation
    assert "backup/download?embeddings=0" in page.text and 'enctype="multipart/form-data"' in page.text

    download = await browser.http.get(f"/dashboard/{vault}/backup/download", params={"embeddings": "0"})
    assert download.status_code == 200, download.text
    assert download.headers["content-disposition"].startswith(f'attachment; filename="memvault-{vault}-')
    manifest = manifest_of(download.content)
    assert manifest["counts"]["memory"] == 1  # type: ignore[index]
    assert b'"embedding"' not in download.content.split(b"\n")[1]

    markdown = await browser.http.get(f"/dashboard/{vault}/backup/export", params={"format": "md"})
    assert markdown.status_code == 200 and "Deploys go out on Tuesdays." in markdown.text
    lines = await browser.http.get(f"/dashboard/{vault}/backup/export", params={"format": "jsonl"})
    assert lines.status_code == 200 and "Deploys go out on Tuesdays." in lines.text
    bad = await browser.http.get(f"/dashboard/{vault}/backup/export", params={"format": "pdf"})
    assert bad.status_code == 400 and "<html" in bad.text.lower()

    second = "restored-" + vault[-6:]
    assert (await browser.api("POST", "/api/v1/vaults", json={"name": second})).status_code == 201
    await browser.api("PUT", f"/api/v1/vaults/{second}/settings", json={"approval_mode": "auto"})
    await browser.api("POST", f"/api/v1/vaults/{second}/memories", json={"content": "Replaced soon."})
    csrf = await browser.csrf()
    upload = {"file": ("backup.jsonl", download.content, "application/x-ndjson")}
    no_token = await browser.http.post(f"/dashboard/{second}/backup/restore", files=upload)
    assert no_token.status_code == 403
    asked = await browser.http.post(f"/dashboard/{second}/backup/restore", data={"csrf_token": csrf}, files=upload)
    assert asked.status_code == 200, asked.text
    assert "Replace everything in this vault?" in asked.text and 'name="replace" value="1"' in asked.text
    still = await browser.api("GET", f"/api/v1/vaults/{second}/memories")
    assert "Replaced soon." in still.text

    done = await browser.http.post(
        f"/dashboard/{second}/backup/restore", data={"csrf_token": csrf, "replace": "1"}, files=upload
    )
    assert done.status_code == 303, done.text
    assert done.headers["location"] == f"/dashboard/{second}/backup?restored=1"
    after = await browser.api("GET", f"/api/v1/vaults/{second}/memories")
    assert "Deploys go out on Tuesdays." in after.text and "Replaced soon." not in after.text
    shown = await browser.http.get(done.headers["location"])
    assert "The backup was restored: 1 memories." in shown.text

    broken = {"file": ("backup.jsonl", download.content[:-40], "application/x-ndjson")}
    refused = await browser.http.post(
        f"/dashboard/{second}/backup/restore", data={"csrf_token": csrf, "replace": "1"}, files=broken
    )
    assert refused.status_code == 400, refused.text
    assert "Deploys go out on Tuesdays." in (await browser.api("GET", f"/api/v1/vaults/{second}/memories")).text
    await browser.close()


async def test_a_viewer_sees_why_not_and_the_server_refuses(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)
    vault = "shared-" + viewer_name[-6:]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    await owner.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"})
    added = await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    assert added.status_code == 200, added.text
    await owner.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Owners only."})
    backup = (await owner.http.get(f"/dashboard/{vault}/backup/download")).content

    page = await viewer.http.get(f"/dashboard/{vault}/backup")
    assert page.status_code == 200 and "owners back it up, restore or export it (your role: viewer)" in page.text
    assert "backup/download" not in page.text and "multipart" not in page.text
    for path in ("/backup/download", "/backup/export?format=md"):
        refused = await viewer.http.get(f"/dashboard/{vault}{path}")
        assert refused.status_code == 403 and "Owners only." not in refused.text
    csrf = await viewer.csrf()
    posted = await viewer.http.post(
        f"/dashboard/{vault}/backup/restore",
        data={"csrf_token": csrf, "replace": "1"},
        files={"file": ("b.jsonl", backup, "application/x-ndjson")},
    )
    assert posted.status_code == 403 and "Not allowed" in posted.text
    await owner.close()
    await viewer.close()
