"""Fixtures: the gateway in-process against real Postgres, a real VaultService and the real mcp service.

The conftest.py of services/gateway/tests and of tests/cross_service import them (both folders are
on pytest's pythonpath).

`start_gateway(**settings)` starts a gateway on a free loopback port with the given setting
groups overridden; vault and mcp are shared by the session. Each test makes its own people and
vaults (random names), so tests run in any order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from gateway_helpers import SECRET, RunningGateway, StartGateway, free_port, serve_asgi, stop_asgi

from memvault.vault.v1 import (
    accounts_pb2_grpc,
    archive_pb2_grpc,
    backup_pb2_grpc,
    retention_pb2_grpc,
    sources_pb2_grpc,
    vault_pb2_grpc,
)
from memvault_core.grpc import build_server
from memvault_core.identity import IdentitySigner
from memvault_core.settings import IdentitySettings, PostgresSettings
from memvault_core.vault_client import VaultClient as McpVaultClient
from memvault_gateway.app import create_app
from memvault_gateway.settings import GatewayGroup, Settings
from memvault_gateway.store import MIGRATIONS as GATEWAY_MIGRATIONS
from memvault_mcp.app import build_app as build_mcp_app
from memvault_vault.database import Database as VaultDatabase
from memvault_vault.rpc.accounts import AccountServicer
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.rpc.backup import BackupServicer
from memvault_vault.rpc.retention import RetentionServicer
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.rpc.sources import SourcesServicer
from memvault_vault.schema import apply_migrations as apply_vault_migrations
from memvault_vault.services import VaultServices
from memvault_vault.settings import SourcesGroup
from memvault_vault.sources.reader import SourceRules


@pytest_asyncio.fixture(scope="session")
async def gateway_dsn(postgres_dsn: str) -> str:
    await asyncio.to_thread(apply_vault_migrations, postgres_dsn)
    await asyncio.to_thread(GATEWAY_MIGRATIONS.apply, postgres_dsn)
    return postgres_dsn


@pytest_asyncio.fixture(scope="session")
async def vault_store(gateway_dsn: str) -> AsyncIterator[VaultDatabase]:
    database = await VaultDatabase.connect(gateway_dsn, 1, 5)
    yield database
    await database.close()


@pytest.fixture(scope="session")
def source_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one folder the session's vault may read tracked files from (it also reads http://127.0.0.1)."""
    return tmp_path_factory.mktemp("sources")


@pytest_asyncio.fixture(scope="session")
async def vault_address(vault_store: VaultDatabase, source_root: Path) -> AsyncIterator[str]:
    address = f"127.0.0.1:{free_port()}"
    signer = IdentitySigner(SECRET)
    server, _ = build_server(address)
    rules = SourceRules.from_settings(
        SourcesGroup(
            file_roots=[str(source_root)],
            url_hosts=["127.0.0.1"],
            private_networks=["127.0.0.1/32"],
            fetch_timeout_seconds=2,
        )
    )
    services = VaultServices.build(vault_store, source_rules=rules)
    vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(services, signer), server)
    accounts_pb2_grpc.add_AccountServiceServicer_to_server(
        AccountServicer(services.accounts, services.audit, signer), server
    )
    backup_pb2_grpc.add_BackupServiceServicer_to_server(BackupServicer(services.backup, signer), server)
    archive_pb2_grpc.add_ArchiveServiceServicer_to_server(ArchiveServicer(services.archive, signer), server)
    retention_pb2_grpc.add_RetentionServiceServicer_to_server(RetentionServicer(services.retention, signer), server)
    sources_pb2_grpc.add_SourcesServiceServicer_to_server(SourcesServicer(services, signer), server)
    await server.start()
    yield address
    await server.stop(None)


@pytest_asyncio.fixture(scope="session")
async def mcp_url(vault_address: str) -> AsyncIterator[str]:
    client = McpVaultClient(vault_address, 10.0)
    port = free_port()
    server, task = await serve_asgi(build_mcp_app(client, IdentitySigner(SECRET)), port)
    yield f"http://127.0.0.1:{port}/mcp"
    await stop_asgi(server, task)
    await client.close()


@pytest_asyncio.fixture
async def start_gateway(gateway_dsn: str, vault_address: str, mcp_url: str) -> AsyncIterator[StartGateway]:
    """Start a gateway: `await start_gateway(gateway={...}, oauth={...}, ...)` overrides setting groups
    (`postgres=PostgresSettings(...)` another way to its database)."""
    running: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []

    async def start(**groups: dict[str, Any]) -> RunningGateway:
        port = free_port()
        gateway_fields: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": port,
            "public_url": f"http://127.0.0.1:{port}",
            "mcp_url": mcp_url,
            "vault_address": vault_address,
            **groups.pop("gateway", {}),
        }
        settings = Settings(
            gateway=GatewayGroup(**gateway_fields),
            identity=IdentitySettings(secret=SECRET),  # type: ignore[arg-type]
            postgres=groups.pop("postgres", PostgresSettings(dsn=gateway_dsn, pool_max_size=4)),
            **groups,  # type: ignore[arg-type]
        )
        server, task = await serve_asgi(create_app(settings, IdentitySigner(SECRET)), port)
        running.append((server, task))
        return RunningGateway(f"http://127.0.0.1:{port}", settings, gateway_dsn)

    yield start
    for server, task in reversed(running):
        await stop_asgi(server, task)
