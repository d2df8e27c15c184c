"""A migrated database and an in-process VaultService on a free port, shared by the vault's tests."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from vault_helpers import SECRET, Caller

from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import build_server, client_channel
from memvault_core.identity import IdentitySigner
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.schema import apply_migrations
from memvault_vault.services import VaultServices


@pytest.fixture(scope="session")
def vault_dsn(postgres_dsn: str) -> str:
    apply_migrations(postgres_dsn)
    return postgres_dsn


@pytest_asyncio.fixture(scope="session")
async def database(vault_dsn: str) -> AsyncIterator[Database]:
    database = await Database.connect(vault_dsn, 1, 5)
    yield database
    await database.close()


@pytest_asyncio.fixture(scope="session")
async def vault_stub(database: Database) -> AsyncIterator[vault_pb2_grpc.VaultServiceStub]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = build_server(f"127.0.0.1:{port}")
    vault_pb2_grpc.add_VaultServiceServicer_to_server(
        VaultServicer(VaultServices.build(database), IdentitySigner(SECRET)), server
    )
    await server.start()
    channel = client_channel(f"127.0.0.1:{port}")
    yield vault_pb2_grpc.VaultServiceStub(channel)
    await channel.close()
    await server.stop(None)


@pytest_asyncio.fixture
async def caller(database: Database, vault_stub: vault_pb2_grpc.VaultServiceStub) -> Caller:
    """A fresh account and vault for each test, so tests run in any order."""
    suffix = uuid.uuid4().hex[:10]
    subject, vault = f"user-{suffix}", f"vault-{suffix}"
    assert await AccountStore(database).ensure_owner(subject, vault)
    return Caller(vault_stub, IdentitySigner(SECRET), subject, vault)
