"""The owner's items over HTTP against a real vault: the streamed archive export (read back by restore),
the display name (API and account page, checked and audited), and deleting a vault with a grace period
(read-only meanwhile, cancellable), through /api/v1 and the dashboard's forms."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway, unique

pytestmark = pytest.mark.integration

ID_FIELDS = ("id", "conversation_id", "message_id", "import_id", "duplicate_of", "receipt", "derived_from")


async def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def owner(gateway: RunningGateway, vaults: int = 1) -> tuple[Browser, str, list[str]]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    names = []
    for _ in range(vaults):
        name = unique("notes")
        await ok(await browser.api("POST", "/api/v1/vaults", json={"name": name}), 201)
        names.append(name)
    return browser, username, names


def without_ids(data: bytes) -> list[str]:
    """The records between header and manifest, ids left out (a restore beside the original renews them)."""
    lines = [json.loads(line) for line in data.decode().splitlines()[1:-1]]
    return sorted(json.dumps({k: v for k, v in r.items() if k not in ID_FIELDS}, sort_keys=True) for r in lines)


async def test_the_archive_export_streams_and_restores_into_another_vault(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _, (vault, copy) = await owner(gateway, 2)
    messages = [{"role": "user", "text": "my cat is called Miso"}, {"role": "assistant", "text": "noted"}]
    first = await ok(
        await browser.api(
            "POST", f"/api/v1/vaults/{vault}/conversations", json={"title": "Pets", "messages": messages}
        ),
        201,
    )
    conversation = first["receipts"][0]["conversation_id"]
    await ok(
        await browser.api(
            "POST",
            f"/api/v1/vaults/{vault}/conversations/{conversation}/append",
            json={"base_revision": 1, "messages": [{"role": "user", "text": "and my dog is Rex"}]},
        )
    )
    await ok(
        await browser.api(
            "POST", f"/api/v1/vaults/{vault}/conversations", json={"title": "Second", "messages": messages}
        ),
        201,
    )
    async with browser.http.stream("GET", f"/api/v1/vaults/{vault}/archive/export") as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        assert f'filename="memvault-{vault}-archive-' in response.headers["content-disposition"]
        data = b"".join([chunk async for chunk in response.aiter_bytes()])
    header, manifest = json.loads(data.splitlines()[0]), json.loads(data.splitlines()[-1])
    assert header["scope"] == "archive" and manifest["counts"]["conversation"] == 2
    assert manifest["counts"]["revision"] == 3 and manifest["counts"]["memory"] == 0

    restored = await ok(await browser.api("POST", f"/api/v1/vaults/{copy}/restore", content=data))
    assert restored["restored"]["conversation"] == 2 and restored["restored"]["message"] == 5
    again = await browser.http.get(f"/api/v1/vaults/{copy}/archive/export")
    assert again.status_code == 200
    assert without_ids(again.content) == without_ids(data)
    refused = await browser.api("POST", f"/api/v1/vaults/{copy}/restore", content=data)
    assert refused.status_code == 409 and "holds conversations" in refused.json()["detail"]
    # the dashboard's link is the same export
    page = await browser.http.get(f"/dashboard/{vault}/backup")
    assert page.status_code == 200 and "archive-export" in page.text
    download = await browser.http.get(f"/dashboard/{vault}/backup/archive-export")
    assert download.status_code == 200 and without_ids(download.content) == without_ids(data)
    # restoring it on the Backup page of a vault with conversations asks first, naming the archive only
    files = {"file": ("archive.jsonl", data, "application/x-ndjson")}
    asked = await browser.http.post(
        f"/dashboard/{copy}/backup/restore", data={"csrf_token": await browser.csrf()}, files=files
    )
    assert asked.status_code == 200 and "conversation archive?</h2>" in asked.text
    assert "memories, the guide and settings stay as they are" in asked.text
    replaced = await browser.http.post(
        f"/dashboard/{copy}/backup/restore", data={"csrf_token": await browser.csrf(), "replace": "1"}, files=files
    )
    assert replaced.status_code == 303
    assert without_ids((await browser.http.get(f"/api/v1/vaults/{copy}/archive/export")).content) == without_ids(data)
    await browser.close()


async def test_the_owner_changes_their_display_name(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, username, (vault,) = await owner(gateway)
    for bad, words in (
        ("   ", "is empty"),
        ("A" * 101, "at most 100"),
        ("Ana\u0007Lima", "U+0007"),
        ("Ana\u202eLima", "U+202E"),
    ):
        refused = await browser.api("PATCH", "/api/v1/me", json={"display_name": bad})
        assert refused.status_code == 400 and words in refused.json()["detail"], refused.text
    changed = await ok(await browser.api("PATCH", "/api/v1/me", json={"display_name": "  Ana Lima  "}))
    assert changed["display_name"] == "Ana Lima"
    assert (await ok(await browser.http.get("/api/v1/me")))["display_name"] == "Ana Lima"
    members = await ok(await browser.http.get(f"/api/v1/vaults/{vault}/members"))
    assert [m["display_name"] for m in members["members"]] == ["Ana Lima"]

    csrf = await browser.csrf()
    wrong = await browser.http.post("/account/name", data={"display_name": "x" * 150, "csrf_token": csrf})
    assert wrong.status_code == 400 and "150 characters long; use at most 100" in wrong.text
    no_token = await browser.http.post("/account/name", data={"display_name": "Eve"})
    assert no_token.status_code == 403
    saved = await browser.http.post("/account/name", data={"display_name": "Ana 🌱 Lima", "csrf_token": csrf})
    assert saved.status_code == 303 and saved.headers["location"] == "/account?renamed=1"
    account = await browser.http.get("/account?renamed=1")
    assert "Your name is now Ana 🌱 Lima." in account.text
    dashboard = await browser.http.get(f"/dashboard/{vault}")
    assert "Ana 🌱 Lima" in dashboard.text
    entries = await ok(await browser.http.get("/api/v1/audit"))
    renames = [e for e in entries["entries"] if e["action"] == "account.rename"]
    assert len(renames) == 2 and renames[0]["details"] == {"from": "Ana Lima", "to": "Ana 🌱 Lima"}
    assert username  # the sign-in name is unchanged: only the display name moved
    await browser.close()


async def test_deleting_a_vault_waits_seven_days_read_only_and_can_be_cancelled(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, _, (vault, other) = await owner(gateway, 2)
    await ok(await browser.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"}))
    await ok(
        await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "The NAS is at 10.0.0.5."}), 201
    )
    body = {"name": unique("script"), "scopes": ["read", "write", "admin"], "vaults": [vault]}
    token = (await ok(await browser.api("POST", "/api/v1/service-tokens", json=body), 201))["token"]

    wrong = await browser.api("POST", f"/api/v1/vaults/{vault}/deletion", json={"confirm": other})
    assert wrong.status_code == 400 and "confirm must repeat" in wrong.json()["detail"]
    async with gateway.http(headers={"Authorization": f"Bearer {token}"}) as script:
        by_token = await script.post(f"/api/v1/vaults/{vault}/deletion", json={"confirm": vault})
        assert by_token.status_code == 401  # a browser session only: tokens never delete vaults
    scheduled = await ok(await browser.api("POST", f"/api/v1/vaults/{vault}/deletion", json={"confirm": vault}), 202)
    assert scheduled["scheduled"] is True and scheduled["delete_after"]
    listed = await ok(await browser.http.get("/api/v1/vaults"))
    states = {v["name"]: v["delete_after"] for v in listed["vaults"]}
    assert states[vault] == scheduled["delete_after"] and states[other] is None

    async with gateway.http(headers={"Authorization": f"Bearer {token}"}) as script:
        refused = await script.post(f"/api/v1/vaults/{vault}/memories", json={"content": "A new fact."})
        assert refused.status_code == 403, refused.text
        detail = refused.json()["detail"]
        assert "pending deletion" in detail and f"DELETE /api/v1/vaults/{vault}/deletion" in detail
        assert scheduled["delete_after"][:10] in detail
        found = await ok(await script.get(f"/api/v1/vaults/{vault}/recall", params={"q": "NAS"}))
        assert [r["content"] for r in found["results"]] == ["The NAS is at 10.0.0.5."]
    written = await browser.api("POST", f"/api/v1/vaults/{other}/memories", json={"content": "Other vaults write."})
    assert written.status_code == 201

    # the dashboard says so on every page of the vault, with the date and Cancel
    page = await browser.http.get(f"/dashboard/{vault}/memories")
    assert "This vault will be deleted on" in page.text and "settings#deletion" in page.text
    settings = await browser.http.get(f"/dashboard/{vault}/settings")
    assert settings.status_code == 200 and "Cancel the deletion" in settings.text
    cancel = await browser.http.post(
        f"/dashboard/{vault}/settings/deletion/cancel", data={"csrf_token": await browser.csrf()}
    )
    assert cancel.status_code == 303 and "deletion=cancelled" in cancel.headers["location"]
    assert (await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Back."})).status_code == 201
    again = await browser.http.post(
        f"/dashboard/{vault}/settings/deletion", data={"csrf_token": await browser.csrf(), "confirm": vault}
    )
    assert again.status_code == 303
    gone = await ok(await browser.api("DELETE", f"/api/v1/vaults/{vault}/deletion"))
    assert gone == {"vault": vault, "cancelled": True}
    assert (await ok(await browser.api("DELETE", f"/api/v1/vaults/{vault}/deletion")))["cancelled"] is False
    await browser.close()
