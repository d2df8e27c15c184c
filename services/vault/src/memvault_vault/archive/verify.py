"""`memvault-vault archive verify`: is the archive what it says it is?

Recomputes, from what Postgres holds, every message's hash (role, content type, text, content), every
revision's hash over its ordered messages (and its message count), and every kept raw import's sha256
and size over its chunks in order. Reads with server-side cursors in one read-only snapshot, so memory
stays flat; says what is wrong, one line each, and never changes anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg

from memvault_vault.domain.archive import message_hash, revision_hash

FETCH = 1000

KEPT_STATES = ("queued", "running", "done")
"""Imports whose bytes are kept and were checked at upload (a duplicate keeps none; an upload in progress
or refused at its end is not whole)."""


@dataclass
class Findings:
    messages: int = 0
    revisions: int = 0
    imports: int = 0
    problems: list[str] = field(default_factory=list)


async def _messages(conn: asyncpg.Connection, vault_id: str | None) -> AsyncIterator[str]:
    async for row in conn.cursor(
        "SELECT m.id::text, m.conversation_id::text, m.role, m.content_type, m.text, m.content::text, m.content_hash"
        " FROM archive_message m WHERE $1::uuid IS NULL OR m.vault_id = $1 ORDER BY m.conversation_id, m.id",
        vault_id,
        prefetch=FETCH,
    ):
        content = None if row[5] is None else json.loads(row[5])
        actual = message_hash(row[2], row[3], row[4], content)
        ok = actual == row[6]
        yield (
            ""
            if ok
            else f"conversation {row[1]} message {row[0]}: stored hash {row[6]} but its content hashes to {actual}"
        )


async def _revisions(conn: asyncpg.Connection, vault_id: str | None) -> AsyncIterator[str]:
    current: tuple[str, int, str, int] | None = None
    rows: list[tuple[str, str | None, str, bool]] = []

    def judge() -> str:
        assert current is not None
        conversation, number, stated, count = current
        if len(rows) != count:
            return f"conversation {conversation} revision {number}: says {count} messages but holds {len(rows)}"
        actual = revision_hash(rows)
        if actual != stated:
            return f"conversation {conversation} revision {number}: content_sha256 {stated} but its messages hash to {actual}"
        return ""

    async for row in conn.cursor(
        "SELECT r.conversation_id::text, r.number, r.content_sha256, r.message_count,"
        " m.node_id, m.parent_node_id, m.content_hash, rm.active"
        " FROM archive_revision r"
        " LEFT JOIN archive_revision_message rm ON rm.conversation_id = r.conversation_id AND rm.revision = r.number"
        " LEFT JOIN archive_message m ON m.id = rm.message_id"
        " WHERE $1::uuid IS NULL OR r.vault_id = $1 ORDER BY r.conversation_id, r.number, rm.position",
        vault_id,
        prefetch=FETCH,
    ):
        key = (row[0], row[1], row[2], row[3])
        if key != current:
            if current is not None:
                yield judge()
            current, rows = key, []
        if row[4] is not None:
            rows.append((row[4], row[5], row[6], row[7]))
    if current is not None:
        yield judge()


async def _imports(conn: asyncpg.Connection, vault_id: str | None) -> AsyncIterator[str]:
    imports = await conn.fetch(
        "SELECT id::text, filename, size, sha256 FROM archive_import"
        " WHERE ($1::uuid IS NULL OR vault_id = $1) AND state = ANY($2::text[]) ORDER BY created_at, id",
        vault_id,
        list(KEPT_STATES),
    )
    for record in imports:
        digest, size = hashlib.sha256(), 0
        async for chunk in conn.cursor(
            "SELECT data FROM archive_import_chunk WHERE import_id = $1 ORDER BY part", record["id"], prefetch=4
        ):
            digest.update(chunk[0])
            size += len(chunk[0])
        name = f"import {record['id']} ({record['filename'] or 'no file name'})"
        if size != record["size"]:
            yield f"{name}: its chunks hold {size} bytes, not the {record['size']} uploaded"
        elif digest.hexdigest() != record["sha256"]:
            yield f"{name}: its chunks hash to {digest.hexdigest()}, not the sha256 {record['sha256']} uploaded"
        else:
            yield ""


async def vault_ids_named(pool: asyncpg.Pool, name: str) -> list[str]:
    """The vaults with this name (names are unique per account, so there may be several) or this id."""
    rows = await pool.fetch("SELECT id::text FROM vault WHERE name = $1 OR id::text = $1 ORDER BY created_at", name)
    return [row[0] for row in rows]


async def verify(pool: asyncpg.Pool, vault_id: str | None = None) -> Findings:
    """Check one vault's archive (or every vault's); nothing is written."""
    findings = Findings()
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        async for problem in _messages(conn, vault_id):
            findings.messages += 1
            if problem:
                findings.problems.append(problem)
        async for problem in _revisions(conn, vault_id):
            findings.revisions += 1
            if problem:
                findings.problems.append(problem)
        async for problem in _imports(conn, vault_id):
            findings.imports += 1
            if problem:
                findings.problems.append(problem)
    return findings
