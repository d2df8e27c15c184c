"""Archive operations a vault's owner calls (gRPC, `/api/v1`, the dashboard): retry a failed import, list
and retry failed message index jobs. Only an owner (with the `admin` scope) of the vault may; another
account's import or message answers `not found`, like a missing one. SQL in `retry_store`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memvault_core.errors import InvalidArgument
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.archive.records import ImportRecord, MessageIndexFailure
from memvault_vault.archive.retry_store import ArchiveRetryStore
from memvault_vault.archive.store import ArchiveStore

MAX_FAILURES_PAGE = 200
MAX_RETRY_MESSAGES = 1000


def parse_id(value: str, field: str, what: str) -> str:
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument(f"{field} must be {what} (a UUID)", field=field) from None


class ArchiveOperations:
    def __init__(self, store: ArchiveStore, retries: ArchiveRetryStore, accounts: AccountService) -> None:
        self._store = store
        self._retries = retries
        self._accounts = accounts

    async def retry_import(self, identity: Identity, vault_name: str, import_id: str) -> ImportRecord:
        """Queue a failed import again: it resumes from its checkpoint, then imports its failed
        conversations again; refused for an import that did not fail."""
        import_id = parse_id(import_id, "import_id", "an import's id")
        vault = await self._accounts.owner(identity, vault_name, write=True)
        await self._retries.retry_import(vault, identity.actor, import_id)
        return await self._store.get_import(vault, import_id)

    async def message_failures(
        self, identity: Identity, vault_name: str, limit: int
    ) -> tuple[list[MessageIndexFailure], int]:
        if not 0 <= limit <= MAX_FAILURES_PAGE:
            raise InvalidArgument(f"limit must be 1 to {MAX_FAILURES_PAGE}", field="limit")
        vault = await self._accounts.owner(identity, vault_name, write=False)
        return await self._retries.failed_messages(vault, limit or 50)

    async def retry_messages(self, identity: Identity, vault_name: str, message_ids: Sequence[str]) -> int:
        """Send failed messages to the indexer again (these, or with none every failed one of the vault)."""
        if len(message_ids) > MAX_RETRY_MESSAGES:
            raise InvalidArgument(
                f"at most {MAX_RETRY_MESSAGES} message_ids; none retries them all", field="message_ids"
            )
        ids = list(dict.fromkeys(parse_id(i, "message_ids", "an archived message's id") for i in message_ids))
        vault = await self._accounts.owner(identity, vault_name, write=True)
        return await self._retries.retry_messages(vault, identity.actor, ids or None)
