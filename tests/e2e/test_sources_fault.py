"""The vault process SIGKILLed in the middle of a sync of tracked sources (vault, mcp and gateway as
processes), then started again: every change is applied exactly once, none is lost.

Twice: once while the vault waits for a slow URL in the middle of its due sources (so some are applied
and some are not), once as soon as the first change of a new round is recorded (anywhere between a
supersede and the next source). After each restart a sync through the MCP tools finishes the work; then
each tracked fact has exactly one active memory, its chain of replacements has one link per value,
one applied change record per value, and a further check changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import asyncpg
import pytest
from e2e_helpers import call, mcp_session
from test_lifecycle_flow import set_mode

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.source_server import source_server
from memvault_devstack.stack import Stack

pytestmark = pytest.mark.e2e

FILES = 8
SLOW_AFTER = 4
"""The slow URL is checked after this many files (sources are due in the order the test sets)."""
FETCH_TIMEOUT = 8.0
SLOW_SECONDS = 3.0
CLAIM_SECONDS = 10.0


def statement(index: int, value: int) -> str:
    return f"Budget line {index} is {value} euros."


def write_line(root: Path, index: int, value: int) -> str:
    path = root / f"line-{index}.json"
    path.write_text(json.dumps({"value": value}))
    return str(path)


async def make_all_due(dsn: str) -> None:
    """Every source due now, in a fixed order (the files, with the slow URL after SLOW_AFTER of them)."""
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(
            "UPDATE tracked_source SET next_check_at = now() - make_interval(secs => 600)"
            " + make_interval(secs => CASE WHEN kind = 'json_url' THEN $1::int"
            " ELSE 2 * (regexp_match(location, 'line-(\\d+)'))[1]::int END)",
            2 * SLOW_AFTER - 1,
        )
    finally:
        await connection.close()


async def applied_changes(dsn: str) -> int:
    connection = await asyncpg.connect(dsn)
    try:
        return int(await connection.fetchval("SELECT count(*) FROM source_change WHERE status = 'applied'"))
    finally:
        await connection.close()


async def kill_and_restart(stack: Stack) -> None:
    await asyncio.to_thread(stack.stop_service, "vault", kill=True)
    await asyncio.to_thread(stack.restart, "vault")


async def finish_syncing(stack: Stack, dsn: str, expected_applied: int) -> None:
    """Sync through the tools until every change is applied (a source whose check died with the process is
    held for CLAIM_SECONDS, then checked again); bounded in time."""
    deadline = time.monotonic() + 60
    async with mcp_session(stack.mcp_url) as client:
        while True:
            await make_all_due(dsn)
            checks = (await call(client, "sources", action="sync"))["checks"]
            assert all(c["outcome"] != "error" for c in checks), checks
            if await applied_changes(dsn) >= expected_applied and all(c["outcome"] != "busy" for c in checks):
                return
            assert time.monotonic() < deadline, checks
            await asyncio.sleep(1)


async def assert_each_value_applied_once(stack: Stack, dsn: str, values: list[list[int]]) -> None:
    """`values[i]` is the history of line i's value; its memory chain must be exactly that, once each."""
    connection = await asyncpg.connect(dsn)
    try:
        for index, history in enumerate(values):
            rows = await connection.fetch(
                "SELECT content, status FROM memory WHERE content LIKE $1 ORDER BY created_at",
                f"Budget line {index} is %",
            )
            assert [r["content"] for r in rows] == [statement(index, v) for v in history], (index, rows)
            assert [r["status"] for r in rows] == ["superseded"] * (len(history) - 1) + ["active"], (index, rows)
        per_source = await connection.fetch(
            "SELECT s.location, count(c.id) FILTER (WHERE c.status = 'applied') AS applied,"
            " count(c.id) FILTER (WHERE c.status = 'pending') AS pending"
            " FROM tracked_source s LEFT JOIN source_change c ON c.source_id = s.id GROUP BY s.location"
        )
        assert len(per_source) == len(values)
        for row in per_source:
            assert (row["applied"], row["pending"]) == (len(values[0]) - 1, 0), dict(row)
    finally:
        await connection.close()
    async with mcp_session(stack.mcp_url) as client:
        health = await call(client, "sources", action="status")
        assert health["errors"] == 0 and health["pending_changes"] == 0, health
        for source in health["sources"]:
            # The vault's own scheduler may be checking the same source right now ("busy": it holds the
            # claim); ask again until this check runs.
            deadline = time.monotonic() + 30
            while True:
                [check] = (await call(client, "sources", action="sync", source_id=source["source_id"]))["checks"]
                if check["outcome"] != "busy" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert check["outcome"] == "unchanged", check


async def test_a_vault_killed_mid_sync_applies_every_change_exactly_once(
    fresh_stack: StackStarter, tmp_path: Path
) -> None:
    root = tmp_path / "sources"
    root.mkdir()
    with source_server() as http:
        env = {
            "MEMVAULT_SOURCES__FILE_ROOTS": json.dumps([str(root)]),
            "MEMVAULT_SOURCES__URL_HOSTS": json.dumps(["127.0.0.1"]),
            "MEMVAULT_SOURCES__PRIVATE_NETWORKS": json.dumps(["127.0.0.1/32"]),
            "MEMVAULT_SOURCES__FETCH_TIMEOUT_SECONDS": str(FETCH_TIMEOUT),
            "MEMVAULT_SOURCES__CLAIM_SECONDS": str(CLAIM_SECONDS),
            "MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS": "0",
        }
        stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"), service_env={"vault": env})
        dsn = stack.postgres_dsn
        await set_mode(stack, "auto")
        values: list[list[int]] = [[100 + i] for i in range(FILES)] + [[1000]]
        slow = http.set("/slow.json", json.dumps({"value": 1000}))
        async with mcp_session(stack.mcp_url) as client:
            for index in range(FILES + 1):
                is_url = index == FILES
                memory = await call(client, "remember", content=statement(index, values[index][0]))
                location = slow if is_url else write_line(root, index, values[index][0])
                await call(
                    client,
                    "track_source",
                    memory_id=memory["id"],
                    kind="json_url" if is_url else "json_file",
                    location=location,
                    selector="/value",
                    statement_template=f"Budget line {index} is {{{{value}}}} euros.",
                    mode="auto",
                )

        def change_every_value(step: int) -> None:
            for index in range(FILES + 1):
                values[index].append(values[index][-1] + step)
                if index == FILES:
                    http.set("/slow.json", json.dumps({"value": values[index][-1]}), delay=SLOW_SECONDS)
                else:
                    write_line(root, index, values[index][-1])

        async def sync_in_flight() -> None:
            async with mcp_session(stack.mcp_url) as client:
                await call(client, "sources", action="sync")

        # Round 1: killed while the vault waits for the slow URL, after the first SLOW_AFTER files.
        change_every_value(10)
        await make_all_due(dsn)
        http.hits.clear()
        in_flight = asyncio.create_task(sync_in_flight())
        deadline = time.monotonic() + 30
        while "/slow.json" not in http.hits:
            assert time.monotonic() < deadline and not in_flight.done(), "the sync never reached the slow URL"
            await asyncio.sleep(0.05)
        assert await applied_changes(dsn) == SLOW_AFTER  # the files before it are applied, none after it
        await kill_and_restart(stack)
        await asyncio.gather(in_flight, return_exceptions=True)  # it died with the process, or answered late
        await finish_syncing(stack, dsn, expected_applied=FILES + 1)
        await assert_each_value_applied_once(stack, dsn, values)

        # Round 2: killed as soon as the first change of the round is recorded.
        change_every_value(5)
        http.set("/slow.json", json.dumps({"value": values[FILES][-1]}))
        await make_all_due(dsn)
        before = await applied_changes(dsn)
        in_flight = asyncio.create_task(sync_in_flight())
        deadline = time.monotonic() + 30
        while await applied_changes(dsn) == before:
            assert time.monotonic() < deadline and not in_flight.done(), "the sync applied nothing"
            await asyncio.sleep(0.01)
        await kill_and_restart(stack)
        await asyncio.gather(in_flight, return_exceptions=True)
        await finish_syncing(stack, dsn, expected_applied=2 * (FILES + 1))
        await assert_each_value_applied_once(stack, dsn, values)
