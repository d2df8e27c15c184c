"""`memvault import chatgpt` (and `claude`) against a running stack with a service token: the upload goes over
/api/v1 in parts, the vault's import job processes it, and the same export again is a duplicate."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_sdk_client import oauth_stack, signed_in_owner

from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e


def conversation(index: int, words: str) -> dict[str, Any]:
    def node(node_id: str, parent: str | None, children: list[str], role: str, text: str) -> dict[str, Any]:
        message = {
            "id": node_id,
            "author": {"role": role, "metadata": {}},
            "create_time": 1_700_000_000 + index,
            "content": {"content_type": "text", "parts": [text]},
            "metadata": {},
        }
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    return {
        "title": None if index == 0 else f"chat {index}",
        "create_time": 1_700_000_000 + index,
        "update_time": 1_700_000_000 + index,
        "conversation_id": f"conv-{index}",
        "current_node": "b",
        "mapping": {"a": node("a", None, ["b"], "user", words), "b": node("b", "a", [], "assistant", "noted")},
    }


def claude_conversation(index: int, words: str) -> dict[str, Any]:
    """One conversation in the Claude.ai export's shape."""
    at = f"2025-03-01T10:{index % 60:02d}:00Z"

    def message(uuid: str, sender: str, text: str) -> dict[str, Any]:
        block = {"type": "text", "text": text, "citations": []}
        return {"uuid": uuid, "text": text, "content": [block], "sender": sender, "created_at": at, "attachments": []}

    return {
        "uuid": f"claude-{index}",
        "name": f"claude chat {index}",
        "created_at": at,
        "updated_at": at,
        "chat_messages": [message(f"q{index}", "human", words), message(f"a{index}", "assistant", "noted")],
    }


def run_import(path: Path, url: str, token: str, vault: str, kind: str = "chatgpt") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memvault_gateway.client",
            "import",
            kind,
            str(path),
            "--url",
            url,
            "--vault",
            vault,
        ],
        env={**os.environ, "MEMVAULT_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_memvault_import_chatgpt_uploads_in_parts_and_reports_counts(
    fresh_stack: StackStarter, tmp_path: Path
) -> None:
    stack = await asyncio.to_thread(oauth_stack, fresh_stack)
    browser = await signed_in_owner(stack, "rina")
    me = (await browser.http.get("/api/v1/me")).json()
    (vault,) = [v["name"] for v in (await browser.http.get("/api/v1/vaults")).json()["vaults"]]
    created = await browser.http.post(
        "/api/v1/service-tokens",
        json={"name": "laptop import", "scopes": ["read", "write"], "vaults": [vault]},
        headers={"X-CSRF-Token": me["csrf_token"]},
    )
    token = created.json()["token"]
    # Padding makes the file larger than one 3 MiB part, so the upload goes in several.
    padding = "lorem ipsum " * 400
    export = [conversation(i, f"fact {i}: the locker code is {1000 + i}. {padding}") for i in range(700)]
    export.append({"conversation_id": "broken", "mapping": None})
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    assert path.stat().st_size > 3 * 1024 * 1024

    first = await asyncio.to_thread(run_import, path, stack.gateway_url, token, vault)
    assert first.returncode == 0, first.stderr
    assert "done; 701 of 701 conversations, 700 new, 0 updated, 0 unchanged, 1 failed" in first.stdout
    assert "failed broken:" in first.stdout
    assert "an owner retries it from its last checkpoint" in first.stdout and "/retry" in first.stdout
    assert "upload" in first.stderr and "import" in first.stderr  # the progress bars

    again = await asyncio.to_thread(run_import, path, stack.gateway_url, token, vault)
    assert again.returncode == 0 and "already imported" in again.stdout

    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps([claude_conversation(i, f"the bike lock code is {5000 + i}") for i in range(40)]))
    third = await asyncio.to_thread(run_import, claude, stack.gateway_url, token, vault, "claude")
    assert third.returncode == 0, third.stderr
    assert "done; 40 of 40 conversations, 40 new, 0 updated, 0 unchanged, 0 failed" in third.stdout
    assert "import" in third.stderr

    api = browser.http
    stats = (await api.get(f"/api/v1/vaults/{vault}/archive/stats")).json()
    assert stats["conversations"] == 740 and stats["by_source"] == {"chatgpt": 700, "claude": 40}
    assert (
        stats["imports_by_state"] == {"done": 2, "duplicate": 1}
        and stats["imports"] == 3
        and stats["raw_bytes"] > 3 * 1024 * 1024
    )
    imports = (await api.get(f"/api/v1/vaults/{vault}/archive/imports")).json()["imports"]
    assert [(i["format"], i["state"]) for i in imports] == [
        ("claude", "done"),
        ("chatgpt", "duplicate"),
        ("chatgpt", "done"),
    ]
    found = (await api.get(f"/api/v1/vaults/{vault}/archive/search", params={"q": "bike lock code 5007"})).json()
    assert found["hits"] and "5007" in found["hits"][0]["snippet"]
    found = (await api.get(f"/api/v1/vaults/{vault}/archive/search", params={"q": "locker code 1042"})).json()
    assert found["hits"] and "1042" in found["hits"][0]["snippet"]
    listed = (await api.get(f"/api/v1/vaults/{vault}/conversations", params={"limit": 100})).json()
    assert len(listed["conversations"]) == 100
    await browser.http.aclose()
