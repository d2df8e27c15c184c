"""Index maintenance as a vault's owner calls it: failed index jobs and their retry (this vault's),
and the indexer's rebuild / re-embed job (the whole index; the gateway offers it to administrators)."""

from __future__ import annotations

from collections.abc import Sequence

from memvault.index.v1 import index_pb2
from memvault_core.errors import InvalidArgument, Unavailable
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.domain.inputs import parse_memory_id
from memvault_vault.index_admin.records import IndexFailure
from memvault_vault.index_admin.store import IndexAdminStore
from memvault_vault.index_client import IndexClient

MAX_FAILURES_PAGE = 200
MAX_RETRY_IDS = 1000


class IndexAdminService:
    def __init__(self, store: IndexAdminStore, accounts: AccountService, index: IndexClient | None) -> None:
        self._store = store
        self._accounts = accounts
        self._index = index

    async def failures(self, identity: Identity, vault_name: str, limit: int) -> tuple[list[IndexFailure], int]:
        if not 0 <= limit <= MAX_FAILURES_PAGE:
            raise InvalidArgument(f"limit must be 1 to {MAX_FAILURES_PAGE}", field="limit")
        vault = await self._accounts.owner(identity, vault_name, write=False)
        return await self._store.failures(vault, limit or 50)

    async def retry(self, identity: Identity, vault_name: str, memory_ids: Sequence[str]) -> int:
        if len(memory_ids) > MAX_RETRY_IDS:
            raise InvalidArgument(f"at most {MAX_RETRY_IDS} memory_ids; none retries them all", field="memory_ids")
        ids = [parse_memory_id(i, "memory_ids") for i in memory_ids]
        vault = await self._accounts.owner(identity, vault_name, write=True)
        return await self._store.retry(vault, ids or None, identity.subject)

    def _indexer(self) -> IndexClient:
        if self._index is None:
            raise Unavailable("this vault runs without an indexer (MEMVAULT_VAULT__INDEXER_ADDRESS is empty)")
        return self._index

    async def start_job(
        self, identity: Identity, vault_name: str, kind: index_pb2.IndexJobKind.ValueType
    ) -> index_pb2.IndexJob:
        if kind not in (index_pb2.INDEX_JOB_KIND_REBUILD, index_pb2.INDEX_JOB_KIND_REEMBED):
            raise InvalidArgument("kind must be REBUILD or REEMBED", field="kind")
        await self._accounts.owner(identity, vault_name, write=True)
        return await self._indexer().start_job(kind)

    async def job(self, identity: Identity, vault_name: str) -> index_pb2.IndexJob | None:
        await self._accounts.owner(identity, vault_name, write=False)
        return await self._indexer().get_job()
