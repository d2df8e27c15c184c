"""/api/v1 backup, restore and export over HTTP, as a script would call them with a service token."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from pathlib import Path
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


SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "backup.sh"


async def run_script(*args: str, token: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MEMVAULT_TOKEN": token, **env}
    return await asyncio.to_thread(
        subprocess.run, ["bash", str(SCRIPT), *args], env=environment, capture_output=True, text=True
    )


def files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.iterdir()) if folder.exists() else []


def read(path: str) -> bytes:
    return Path(path).read_bytes()


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


async def test_backup_script_downloads_checks_and_keeps_the_newest(start_gateway: StartGateway, tmp_path: Path) -> None:
    gateway = await start_gateway()
    browser, (vault,) = await owner_with_vaults(gateway, 1)
    await ok(await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Prefers tea."}), 201)
    admin = await token(browser, ["read", "admin"], [vault])
    made = []
    for _ in range(3):
        done = await run_script(gateway.url, vault, str(tmp_path), "2", token=admin, MEMVAULT_EMBEDDINGS="0")
        assert done.returncode == 0, done.stderr
        made.append(done.stdout.strip())
    assert files(tmp_path) == made[1:]  # the newest two
    newest = read(made[-1])
    manifest_checks(newest)
    assert (await run_script("--check", str(made[-1]))).returncode == 0

    refused = await run_script("--check", write(tmp_path / "cut.jsonl", newest[:-30]))
    assert refused.returncode == 1 and "truncated" in refused.stderr and len(refused.stderr.splitlines()) == 1
    refused = await run_script("--check", write(tmp_path / "edited.jsonl", newest.replace(b"tea.", b"tee.")))
    assert refused.returncode == 1 and "sha256" in refused.stderr

    wrong = await run_script(gateway.url, vault, str(tmp_path / "x"), token="not-a-token")
    assert wrong.returncode == 1 and len(wrong.stderr.splitlines()) == 1
    assert wrong.stderr.startswith("backup.sh: the gateway answered 401")
    reader = await token(browser, ["read"], [vault])
    denied = await run_script(gateway.url, vault, str(tmp_path / "x"), token=reader)
    assert denied.returncode == 1 and "403" in denied.stderr and "'admin' scope" in denied.stderr
    assert files(tmp_path / "x") == []
