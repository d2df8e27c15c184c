"""What the archive's fault test and its pipeline bench share: an owner with a service token, the
`memvault import` command run as a process, the import's progress read from Postgres, and the check
that the vector store holds every archived message exactly once.

The bench imports it as `tests.e2e.archive_checks`, the tests as `archive_checks`.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from memvault_devstack.stack import Stack

PASSWORD = "correct horse battery staple"
OWNER_ENV = {"MEMVAULT_GATEWAY__DEV_MODE": "false"}
"""The gateway's environment for a stack whose owner signs in and makes service tokens (not dev mode)."""


def _csrf(page: str) -> str:
    found = re.search(r"name='csrf_token' value='([^']+)'", page)
    assert found, "no CSRF token in the page"
    return found.group(1)


async def owner_token(stack: Stack, username: str = "owner") -> tuple[str, str]:
    """Sign the owner up through a setup link, then make a read/write service token for their one vault:
    (token, vault name), as a person does before `memvault import` on a laptop."""
    link = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memvault_gateway",
        "setup-link",
        "--username",
        username,
        env={**os.environ, **stack.env_for("gateway")},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await link.communicate()
    assert link.returncode == 0, "setup-link failed"
    path = out.decode().strip().removeprefix(stack.gateway_url)
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as browser:
        page = await browser.get(path)
        form = {"password": PASSWORD, "password_again": PASSWORD, "csrf_token": _csrf(page.text)}
        assert (await browser.post(path, data=form)).status_code == 303
        me = (await browser.get("/api/v1/me")).json()
        (vault,) = [v["name"] for v in (await browser.get("/api/v1/vaults")).json()["vaults"]]
        created = await browser.post(
            "/api/v1/service-tokens",
            json={"name": "archive import", "scopes": ["read", "write"], "vaults": [vault]},
            headers={"X-CSRF-Token": me["csrf_token"]},
        )
        assert created.status_code in (200, 201), created.text
        return str(created.json()["token"]), str(vault)


async def start_cli_import(stack: Stack, path: Path, token: str, vault: str) -> asyncio.subprocess.Process:
    """`memvault import chatgpt PATH` against the stack's gateway, as a process (output piped)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memvault_gateway.client",
        "import",
        "chatgpt",
        str(path),
        "--url",
        stack.gateway_url,
        "--vault",
        vault,
        env={**os.environ, "MEMVAULT_TOKEN": token},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@dataclass
class Progress:
    state: str = ""
    total: int = 0
    done: int = 0
    imported: int = 0
    updated: int = 0
    duplicates: int = 0
    failed: int = 0
    indexed: int = 0
    index_failed: int = 0


async def progress(connection: asyncpg.Connection) -> Progress:
    """The newest import's counters and how many archived messages the indexer has reported indexed
    (on a connection the caller keeps open: polled often, a new connection each time costs a process)."""
    row = await connection.fetchrow(
        "SELECT state, coalesce(total, 0) AS total, next_index, imported, updated, duplicates, failed"
        " FROM archive_import ORDER BY created_at DESC LIMIT 1"
    )
    indexed = await connection.fetchrow(
        "SELECT count(*) FILTER (WHERE state = 'indexed') AS indexed,"
        " count(*) FILTER (WHERE state = 'failed') AS failed FROM archive_message_index"
    )
    found = Progress(indexed=int(indexed["indexed"]), index_failed=int(indexed["failed"]))
    if row is not None:
        found.state, found.total, found.done = row["state"], int(row["total"]), int(row["next_index"])
        found.imported, found.updated = int(row["imported"]), int(row["updated"])
        found.duplicates, found.failed = int(row["duplicates"]), int(row["failed"])
    return found


@dataclass
class ArchiveCounts:
    conversations: int
    distinct_sources: int
    revisions: int
    messages: int


async def archive_counts(dsn: str) -> ArchiveCounts:
    """What Postgres holds: conversations, distinct source conversation ids, revisions, messages with text."""
    connection = await asyncpg.connect(dsn)
    try:
        row = await connection.fetchrow(
            "SELECT (SELECT count(*) FROM archive_conversation) AS conversations,"
            " (SELECT count(DISTINCT (vault_id, source, external_id)) FROM archive_conversation) AS sources,"
            " (SELECT count(*) FROM archive_revision) AS revisions,"
            " (SELECT count(*) FROM archive_message WHERE text <> '') AS messages"
        )
    finally:
        await connection.close()
    return ArchiveCounts(int(row["conversations"]), int(row["sources"]), int(row["revisions"]), int(row["messages"]))


@dataclass
class PointCheck:
    """The vector store against Postgres: one point per archived message, at its current text."""

    messages: int = 0
    points: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return self.points == self.messages and not (self.missing or self.extra or self.stale)

    def __str__(self) -> str:
        return (
            f"{self.points} points for {self.messages} messages: {len(self.missing)} missing, "
            f"{len(self.extra)} extra, {len(self.stale)} at another text"
        )


async def points_against_messages(stack: Stack) -> PointCheck:
    """Every point of the stopped indexer's embedded store against every archived message, as the indexer's
    feed reads them (the same SQL, so the same content hash). Stop the indexer first: it owns the store."""
    from memvault_indexer.embedder import BUNDLED_DIMENSION, BUNDLED_MODEL_NAME
    from memvault_indexer.store import EdgeVectorStore
    from memvault_vault.database import Database
    from memvault_vault.index_feed.store import IndexFeedStore

    database = await Database.connect(stack.postgres_dsn, 1, 2)
    expected: dict[str, str] = {}
    try:
        feed = IndexFeedStore(database)
        after: str | None = None
        while page := await feed.message_documents_after(after, 2000):
            expected.update((d.memory_id, d.content_hash) for d in page)
            after = page[-1].memory_id
    finally:
        await database.close()
    store = EdgeVectorStore(stack.data_dir / "qdrant", model=BUNDLED_MODEL_NAME, dimension=BUNDLED_DIMENSION)
    await store.ensure_collection()
    held: dict[str, str] = {}
    points = 0
    try:
        async for point in store.scan():
            points += 1
            held[point.memory_id] = point.content_hash
    finally:
        await store.close()
    return PointCheck(
        messages=len(expected),
        points=points,
        missing=[i for i in expected if i not in held],
        extra=[i for i in held if i not in expected],
        stale=[i for i, digest in held.items() if i in expected and expected[i] != digest],
    )


async def sample_messages(dsn: str, count: int) -> list[tuple[str, str]]:
    """(message id, text) of `count` messages spread evenly over the archive."""
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT id::text, text FROM (SELECT id, text, row_number() OVER (ORDER BY created_at, id) AS n,"
            " count(*) OVER () AS total FROM archive_message WHERE text <> '') m"
            " WHERE n % greatest(1, total / $1) = 0 ORDER BY n LIMIT $1",
            count,
        )
    finally:
        await connection.close()
    return [(row["id"], row["text"]) for row in rows]


async def found_first(stack: Stack, token: str, vault: str, samples: list[tuple[str, str]]) -> dict[str, Any]:
    """Archive search over /api/v1 for each sampled message's own opening words: how many came back first,
    and the modes answered (hybrid: the vector index took part)."""
    first, modes = 0, set()
    async with httpx.AsyncClient(
        base_url=stack.gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as api:
        for message_id, text in samples:
            query = text.split(" runs on host", 1)[0]
            answer = await api.get(f"/api/v1/vaults/{vault}/archive/search", params={"q": query, "limit": 5})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            modes.add(body["mode"])
            first += bool(body["hits"]) and body["hits"][0]["message_id"] == message_id
    return {"first": first, "asked": len(samples), "modes": sorted(modes)}
