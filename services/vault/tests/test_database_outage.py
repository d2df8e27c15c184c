"""The vault when Postgres is down, unreachable or migrated by a newer memvault: clear answers, not INTERNAL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from vault_helpers import SECRET, Caller, rpc_error_kind

from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_core.postgres import database_error, report_readiness
from memvault_devstack.ports import free_port
from memvault_devstack.postgres import EmbeddedPostgres, create_database, psql
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.schema import NewerDatabaseError, apply_migrations
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

SERVICE = "memvault.vault.v1.VaultService"


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[EmbeddedPostgres]:
    """A Postgres of this module's own, which the tests stop and start (never the shared one)."""
    directory = Path(tempfile.mkdtemp(prefix="memvault-test-outage-"))
    server = EmbeddedPostgres(directory / "data", port=free_port(), log_path=directory / "postgres.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest_asyncio.fixture
async def served(own_postgres: EmbeddedPostgres) -> AsyncIterator[tuple[Caller, health_pb2_grpc.HealthStub]]:
    dsn = own_postgres.dsn
    await asyncio.to_thread(apply_migrations, dsn)
    database = await Database.connect(dsn, 1, 2)
    port = free_port()
    server, health = build_server(f"127.0.0.1:{port}", translate_error=database_error(dsn))
    vault_pb2_grpc.add_VaultServiceServicer_to_server(
        VaultServicer(VaultServices.build(database), IdentitySigner(SECRET)), server
    )
    await server.start()
    readiness = asyncio.create_task(report_readiness(database.ping, health, [SERVICE], dsn, interval=0.2))
    channel = client_channel(f"127.0.0.1:{port}")
    subject = f"user-{uuid.uuid4().hex[:8]}"
    assert await AccountStore(database).ensure_owner(subject, "home")
    try:
        yield (
            Caller(vault_pb2_grpc.VaultServiceStub(channel), IdentitySigner(SECRET), subject, "home"),
            (health_pb2_grpc.HealthStub(channel)),
        )
    finally:
        readiness.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await readiness
        await channel.close()
        await server.stop(None)
        await database.close()


async def health_becomes(stub: health_pb2_grpc.HealthStub, status: int, deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if (await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE))).status == status:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"health did not become {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}")


async def test_calls_fail_unavailable_and_health_is_not_serving_while_postgres_is_down(
    own_postgres: EmbeddedPostgres, served: tuple[Caller, health_pb2_grpc.HealthStub]
) -> None:
    caller, health = served
    recall = vpb.RecallRequest(vault=caller.vault, query="router")
    await caller.stub.Recall(recall, metadata=caller.metadata())
    await health_becomes(health, health_pb2.HealthCheckResponse.SERVING)

    port = own_postgres.port
    await asyncio.to_thread(own_postgres.stop)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await caller.stub.Recall(recall, metadata=caller.metadata())
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        assert rpc_error_kind(failure.value) == "unavailable"
        assert f"the database at 127.0.0.1:{port} is unreachable" in (failure.value.details() or "")
        await health_becomes(health, health_pb2.HealthCheckResponse.NOT_SERVING)
    finally:
        await asyncio.to_thread(own_postgres.start)
    await health_becomes(health, health_pb2.HealthCheckResponse.SERVING)
    await caller.stub.Recall(recall, metadata=caller.metadata())


def run_vault(env: dict[str, str], *arguments: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault_vault", *arguments],
        env={**os.environ, "MEMVAULT_IDENTITY__SECRET": SECRET, "MEMVAULT_VAULT__RELAY": "false", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_database_migrated_by_a_newer_memvault_is_refused(own_postgres: EmbeddedPostgres) -> None:
    dsn = create_database(own_postgres.server_dsn, f"newer_{uuid.uuid4().hex[:8]}")
    apply_migrations(dsn)
    psql(
        dsn,
        "INSERT INTO _yoyo_migration (migration_hash, migration_id, applied_at_utc)"
        " VALUES ('f00d', '0099_from_the_future', now())",
    )
    with pytest.raises(NewerDatabaseError, match="0099_from_the_future; run that version or restore a backup"):
        apply_migrations(dsn)

    migrate = run_vault({"MEMVAULT_POSTGRES__DSN": dsn}, "migrate")
    assert migrate.returncode == 1
    assert migrate.stderr.strip() == (
        "memvault-vault: this database was migrated by a newer memvault: 0099_from_the_future; "
        "run that version or restore a backup"
    )
    serve = run_vault({"MEMVAULT_POSTGRES__DSN": dsn, "MEMVAULT_VAULT__LISTEN": f"127.0.0.1:{free_port()}"}, "serve")
    assert serve.returncode == 1
    assert "memvault-vault: this database was migrated by a newer memvault: 0099_from_the_future" in serve.stderr
    assert "Traceback" not in serve.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "no-such-host.invalid"])
def test_an_unreachable_database_at_start_is_one_line_naming_it(host: str) -> None:
    port = free_port()
    dsn = f"postgresql://postgres:hunter2@{host}:{port}/memvault"
    for command in ("serve", "migrate"):
        result = run_vault(
            {"MEMVAULT_POSTGRES__DSN": dsn, "MEMVAULT_VAULT__LISTEN": f"127.0.0.1:{free_port()}"}, command
        )
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"memvault-vault: cannot reach Postgres at {host}:{port} (MEMVAULT_POSTGRES__DSN): ")
        assert "hunter2" not in result.stderr + result.stdout


def test_without_an_indexer_the_vault_says_so_at_start(vault_dsn: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "memvault_vault", "serve"],
        env={
            **os.environ,
            "MEMVAULT_IDENTITY__SECRET": SECRET,
            "MEMVAULT_VAULT__RELAY": "false",
            "MEMVAULT_VAULT__INDEXER_ADDRESS": "",
            "MEMVAULT_POSTGRES__DSN": vault_dsn,
            "MEMVAULT_VAULT__LISTEN": f"127.0.0.1:{free_port()}",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            if '"serving"' in line:
                break
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    output = "".join(lines)
    assert "no indexer configured (MEMVAULT_VAULT__INDEXER_ADDRESS): recall is keyword-only" in output
    assert '"indexer": null' in output


async def test_recall_without_an_indexer_warns_the_agent(caller: Caller) -> None:
    found = await caller.stub.Recall(vpb.RecallRequest(vault=caller.vault, query="router"), metadata=caller.metadata())
    assert any("no indexer is configured" in warning for warning in found.warnings)
