"""/api/v1 backup, restore and export over HTTP, as a script would call them with a service token."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway, unique

pytestmark = pytest.mark.integration


async def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def owner_with_vaults(gateway: RunningGateway, count: int) -> tuple[Browser, list[str]]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    vaults = []
    for _ in range(count):
        vault = unique("notes")
        assert (await browser.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
        vaults.append(vault)
    return browser, vaults


async def token(browser: Browser, scopes: list[str], vaults: list[str]) -> str:
    body = {"name": unique("backup"), "scopes": scopes, "vaults": vaults}
    return str((await ok(await browser.api("POST", "/api/v1/service-tokens", json=body), 201))["token"])


def manifest_checks(data: bytes) -> dict[str, Any]:
    body, last = data[: data.rindex(b"\n", 0, len(data) - 1) + 1], data.splitlines()[-1]
    manifest: dict[str, Any] = json.loads(last)
    assert manifest["kind"] == "manifest" and manifest["sha256"] == hashlib.sha256(body).hexdigest()
    return manifest


async def test_backup_restore_and_export_with_a_service_token(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, (vault, copy) = await owner_with_vaults(gateway, 2)
    await ok(await browser.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"}))
    for text in ("Prefers oat milk in coffee.", "The router runs OpenWrt.", "Deploys never happen on Fridays."):
        await ok(await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": text}), 201)
    admin = await token(browser, ["read", "write", "admin"], [vault, copy])
    async with gateway.http(headers={"Authorization": f"Bearer {admin}"}) as script:
        response = await script.get(f"/api/v1/vaults/{vault}/backup", params={"embeddings": 0})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/x-ndjson"
        assert f'filename="memvault-{vault}-' in response.headers["content-disposition"]
        data = response.content
        manifest = manifest_checks(data)
        assert manifest["counts"]["memory"] == 3

        refused = await script.post(f"/api/v1/vaults/{copy}/restore", content=data[:-40])
        assert refused.status_code == 400 and "truncated" in refused.json()["detail"]
        restored = await ok(await script.post(f"/api/v1/vaults/{copy}/restore", content=data))
        assert restored["restored"]["memory"] == 3 and restored["reembedding"] == 3
        again = await script.post(f"/api/v1/vaults/{copy}/restore", content=data)
        assert again.status_code == 409 and "replace=1" in again.json()["detail"]
        replaced = await ok(await script.post(f"/api/v1/vaults/{copy}/restore", params={"replace": 1}, content=data))
        assert replaced["restored"]["memory"] == 3

        found = await ok(await script.get(f"/api/v1/vaults/{copy}/recall", params={"q": "oat milk"}))
        assert [r["content"] for r in found["results"]][:1] == ["Prefers oat milk in coffee."]

        markdown = await script.get(f"/api/v1/vaults/{copy}/export", params={"format": "md"})
        assert markdown.status_code == 200 and markdown.headers["content-type"].startswith("text/markdown")
        assert "## Facts" in markdown.text and "- The router runs OpenWrt." in markdown.text
        exported = await ok(await script.get(f"/api/v1/vaults/{copy}/export", params={"format": "json"}))
        assert sorted(m["content"] for m in exported["types"]["fact"]) == sorted(
            ["Prefers oat milk in coffee.", "The router runs OpenWrt.", "Deploys never happen on Fridays."]
        )
        bad_format = await script.get(f"/api/v1/vaults/{copy}/export", params={"format": "pdf"})
        assert bad_format.status_code in (400, 422)

    reader = await token(browser, ["read", "write"], [vault])
    async with gateway.http(headers={"Authorization": f"Bearer {reader}"}) as script:
        denied = await script.get(f"/api/v1/vaults/{vault}/backup", params={"embeddings": 0})
        assert denied.status_code == 403 and "admin" in denied.json()["detail"]
        denied = await script.post(f"/api/v1/vaults/{vault}/restore", params={"replace": 1}, content=data)
        assert denied.status_code == 403
        # an export is for anyone who may read the vault
        assert (await script.get(f"/api/v1/vaults/{vault}/export")).status_code == 200
        hidden = await script.get(f"/api/v1/vaults/{copy}/backup", params={"embeddings": 0})
        assert hidden.status_code == 404
