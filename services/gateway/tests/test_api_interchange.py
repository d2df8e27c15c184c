"""/api/v1 interchange over HTTP with a service token: a mem0 export, a zipped basic-memory folder and
memvault JSON Lines imported as one undoable batch each, broken files refused with nothing written,
and the JSON Lines export read back into another vault."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway, unique

pytestmark = pytest.mark.integration

MEM0 = {
    "count": 2,
    "results": [
        {
            "id": "0b6f7d52",
            "memory": "Dev works at TechCorp as a senior engineer",
            "user_id": "dev",
            "metadata": {"team": "platform"},
            "categories": ["work"],
            "created_at": "2025-03-01T10:00:00-08:00",
            "updated_at": "2025-03-01T10:00:00-08:00",
        },
        {
            "id": "9c1e2a33",
            "memory": "Dev prefers morning meetings and async communication",
            "metadata": {"type": "preference"},
            "categories": ["meetings"],
            "created_at": "2025-04-11T08:30:00Z",
        },
    ],
}

NOTE = """---
title: Home Network
type: note
tags: [network]
permalink: home-network
---

# Home Network

## Observations
- [fact] The router runs OpenWrt #router
- [decision] Guests get their own VLAN

## Relations
- depends_on [[ISP Contract]]
"""


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
        await ok(await browser.api("PUT", f"/api/v1/vaults/{vault}/settings", json={"approval_mode": "auto"}))
        vaults.append(vault)
    return browser, vaults


async def token(browser: Browser, vaults: list[str], scopes: tuple[str, ...] = ("read", "write")) -> str:
    body = {"name": unique("interchange"), "scopes": list(scopes), "vaults": vaults}
    return str((await ok(await browser.api("POST", "/api/v1/service-tokens", json=body), 201))["token"])


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


async def test_mem0_and_basic_memory_imports_are_undoable_batches(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, (vault,) = await owner_with_vaults(gateway, 1)
    script_token = await token(browser, [vault], ("read", "write", "admin"))  # undo takes admin
    async with gateway.http(headers={"Authorization": f"Bearer {script_token}"}) as script:
        url = f"/api/v1/vaults/{vault}/imports"
        mem0 = await ok(
            await script.post(url, params={"format": "mem0", "name": "mem0.json"}, content=json.dumps(MEM0))
        )
        assert mem0["summary"] == {"stored": 2} and mem0["format"] == "mem0"
        assert [i["origin"] for i in mem0["items"]] == ["mem0.json memory 1", "mem0.json memory 2"]
        listed = await ok(await script.get(f"/api/v1/vaults/{vault}/memories", params={"limit": 50}))
        by_content = {m["content"]: m for m in listed["memories"]}
        dev = by_content["Dev works at TechCorp as a senior engineer"]
        assert sorted(dev["tags"]) == ["team:platform", "work"] and dev["source"].startswith("mem0:0b6f7d52")
        assert dev["valid_from"].startswith("2025-03-01T18:00:00")
        assert by_content["Dev prefers morning meetings and async communication"]["type"] == "preference"

        again = await ok(
            await script.post(url, params={"format": "mem0", "name": "mem0.json"}, content=json.dumps(MEM0))
        )
        assert again["summary"] == {"duplicate": 2}

        folder = zipped({"kb/home-network.md": NOTE})
        notes = await ok(await script.post(url, params={"format": "basic-memory", "name": "kb.zip"}, content=folder))
        assert notes["summary"] == {"stored": 3}
        found = await ok(await script.get(f"/api/v1/vaults/{vault}/recall", params={"q": "OpenWrt router"}))
        assert found["results"][0]["content"] == "Home Network: The router runs OpenWrt"
        listed = await ok(await script.get(f"/api/v1/vaults/{vault}/memories", params={"limit": 50}))
        assert "Home Network depends on ISP Contract" in {m["content"] for m in listed["memories"]}

        undone = await ok(await script.post(f"/api/v1/vaults/{vault}/batches/{notes['batch_id']}/undo"))
        assert undone["removed"] == 3
        listed = await ok(await script.get(f"/api/v1/vaults/{vault}/memories", params={"limit": 50}))
        assert len(listed["memories"]) == 2


async def test_broken_files_are_refused_with_nothing_written(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, (vault,) = await owner_with_vaults(gateway, 1)
    script_token = await token(browser, [vault])
    broken = json.dumps({"results": [{"memory": "A fine memory"}, {"id": "x", "text_missing": True}]})
    cases = [
        ("mem0", "mem0.json", broken.encode(), "mem0.json: memory 2.memory: missing"),
        ("mem0", "lines.jsonl", b'{"memory": "ok"}\n{"memory": \n', "lines.jsonl, line 2: not JSON"),
        ("basic-memory", "kb.zip", zipped({"a.md": "---\ntitle: [x\n---\n- [fact] y\n"}), "a.md, line 2: frontmatter"),
        ("basic-memory", "kb.zip", b"not a zip", "kb.zip: not a zip file"),
        ("memvault-jsonl", "x.jsonl", b'{"content": "a", "type": "wish"}\n', "x.jsonl, line 1: type:"),
    ]
    async with gateway.http(headers={"Authorization": f"Bearer {script_token}"}) as script:
        url = f"/api/v1/vaults/{vault}/imports"
        for file_format, name, data, message in cases:
            refused = await script.post(url, params={"format": file_format, "name": name}, content=data)
            assert refused.status_code == 400, refused.text
            assert message in refused.json()["detail"], refused.json()
        unknown = await script.post(url, params={"format": "csv"}, content=b"a,b")
        assert unknown.status_code == 422 and "format" in unknown.text and "memvault-jsonl" in unknown.text
        batches = await ok(await script.get(f"/api/v1/vaults/{vault}/batches"))
        assert batches["batches"] == []
        listed = await ok(await script.get(f"/api/v1/vaults/{vault}/memories"))
        assert listed["memories"] == []


async def test_jsonl_export_reads_back_into_another_vault(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, (vault, copy) = await owner_with_vaults(gateway, 2)
    memories = [
        {"content": "Deploys go out on Tuesdays", "type": "decision", "key": "deploy-day", "scope": "team"},
        {"content": "The staging database is Postgres 17", "tags": ["infra", "db"], "source": "runbook"},
    ]
    for memory in memories:
        await ok(await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json=memory), 201)
    script_token = await token(browser, [vault, copy])
    async with gateway.http(headers={"Authorization": f"Bearer {script_token}"}) as script:
        exported = await script.get(f"/api/v1/vaults/{vault}/export", params={"format": "jsonl"})
        assert exported.status_code == 200, exported.text
        assert exported.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert lines[0]["format"] == "memvault-jsonl" and lines[0]["vault"] == vault and len(lines) == 3

        url = f"/api/v1/vaults/{copy}/imports"
        imported = await ok(
            await script.post(url, params={"format": "memvault-jsonl", "name": "x.jsonl"}, content=exported.content)
        )
        assert imported["summary"] == {"stored": 2}

        def shape(listed: dict[str, Any]) -> list[tuple[Any, ...]]:
            return sorted(
                (
                    m["content"],
                    m["type"],
                    m["key"] or "",
                    m["scope"] or "",
                    sorted(m["tags"]),
                    m["valid_from"],
                )
                for m in listed["memories"]
            )

        original = await ok(await script.get(f"/api/v1/vaults/{vault}/memories"))
        copied = await ok(await script.get(f"/api/v1/vaults/{copy}/memories"))
        assert shape(copied) == shape(original)
        sources = {m["content"]: m["source"] for m in original["memories"]}
        assert all(m["source"].startswith(sources[m["content"]]) for m in copied["memories"])


async def test_another_account_cannot_import_into_the_vault(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    _, (vault,) = await owner_with_vaults(gateway, 1)
    other, (own,) = await owner_with_vaults(gateway, 1)
    other_token = await token(other, [own])
    async with gateway.http(headers={"Authorization": f"Bearer {other_token}"}) as script:
        refused = await script.post(
            f"/api/v1/vaults/{vault}/imports", params={"format": "mem0"}, content=json.dumps(MEM0)
        )
        assert refused.status_code in (403, 404), refused.text


IMPORT_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "import.sh"


async def run_import(*args: str, token: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MEMVAULT_TOKEN": token}
    return await asyncio.to_thread(
        subprocess.run, ["bash", str(IMPORT_SCRIPT), *args], env=environment, capture_output=True, text=True
    )


async def test_import_script_takes_a_basic_memory_folder(start_gateway: StartGateway, tmp_path: Path) -> None:
    gateway = await start_gateway()
    browser, (vault,) = await owner_with_vaults(gateway, 1)
    script_token = await token(browser, [vault])
    folder = tmp_path / "kb"
    (folder / "home").mkdir(parents=True)
    (folder / "home" / "network.md").write_text(NOTE, encoding="utf-8")
    done = await run_import(gateway.url, vault, "basic-memory", str(folder), token=script_token)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["summary"] == {"stored": 3} and answer["items"][0]["origin"] == "home/network.md:11"

    broken = tmp_path / "mem0.json"
    broken.write_text('{"results": [{"id": "x"}]}', encoding="utf-8")
    refused = await run_import(gateway.url, vault, "mem0", str(broken), token=script_token)
    assert refused.returncode == 1
    assert (
        refused.stderr.strip()
        == "import.sh: the gateway answered 400: mem0.json: memory 1.memory: missing (the memory's text)"
    )
