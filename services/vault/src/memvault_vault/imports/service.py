"""What imports do: write many items as one undoable batch, list batches, undo one."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded, NotFound
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.database import VaultAccess
from memvault_vault.domain import cursor
from memvault_vault.domain.imports import split_text
from memvault_vault.domain.inputs import check_secret, validate_items, validate_page_size
from memvault_vault.domain.memory import Draft, MemoryType, Trust
from memvault_vault.imports.records import BatchInfo, UndoReport
from memvault_vault.imports.store import ImportStore
from memvault_vault.memories.records import WriteSummary
from memvault_vault.memories.writes import Writer


class ImportService:
    def __init__(self, store: ImportStore, writer: Writer, accounts: AccountService) -> None:
        self._store = store
        self._writer = writer
        self._accounts = accounts

    async def bulk_remember(
        self,
        identity: Identity,
        vault_name: str,
        drafts: Sequence[Draft],
        source: str,
        *,
        text: str = "",
        text_type: MemoryType = MemoryType.FACT,
        sequence: bool = False,
    ) -> tuple[VaultAccess, WriteSummary]:
        """Import items (or text split into items) as one undoable batch, with an outcome per item."""
        source = source.strip()
        if len(source) > limits.MAX_SOURCE_CHARS:
            raise LimitExceeded(
                f"source is {len(source)} characters; the limit is {limits.MAX_SOURCE_CHARS} (max_source_chars). "
                "Name the app and the date, e.g. 'ChatGPT memories, 2026-11-30'",
                field="source",
                limit=limits.MAX_SOURCE_CHARS,
            )
        if text.strip() and drafts:
            raise InvalidArgument("send either items or text, not both", field="text")
        if text.strip():
            drafts = [Draft(content=item, type=text_type) for item in split_text(text)]
        checked = validate_items(list(drafts))
        vault = await self._accounts.access(identity, vault_name, write=True)
        if source:
            check_secret(source, field_name="source")
        items: list[Draft | InvalidArgument] = [
            d if isinstance(d, InvalidArgument) or d.source else Draft(**{**d.__dict__, "source": source})
            for d in checked
        ]
        if sequence:
            items = with_context(items)
        summary = await self._writer.write(
            identity, vault, items, propose=False, default_trust=Trust.IMPORTED, batch_source=source
        )
        return vault, summary

    async def batches(
        self, identity: Identity, vault_name: str, *, limit: int = 0, page_cursor: str = ""
    ) -> tuple[VaultAccess, list[BatchInfo], str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        request = cursor.fingerprint("batches", vault.id)
        position = cursor.decode(page_cursor, "batches", request)
        before = cursor.keyset_of(position)
        found = await self._store.batches(vault, limit + 1, before)
        page = found[:limit]
        next_cursor = (
            cursor.encode("batches", request, {"created_at": page[-1].created_at.isoformat(), "id": page[-1].id})
            if len(found) > limit
            else ""
        )
        return vault, page, next_cursor

    async def undo_batch(self, identity: Identity, vault_name: str, batch_id: str) -> tuple[VaultAccess, UndoReport]:
        try:
            batch_id = str(uuid.UUID(batch_id.strip()))
        except ValueError:
            raise InvalidArgument(
                f"batch_id {batch_id[:60]!r} is not an import id; list imports to find it", field="batch_id"
            ) from None
        vault = await self._accounts.reviewer(identity, vault_name)
        report = await self._store.undo_batch(vault, batch_id, identity.actor)
        if report is None:
            raise NotFound(f"no import {batch_id} in vault '{vault.name}'; list imports to find it", field="batch_id")
        return vault, report


def with_context(items: list[Draft | InvalidArgument]) -> list[Draft | InvalidArgument]:
    """Each valid item of a sequence import with the text of the item before it as its context."""
    out: list[Draft | InvalidArgument] = []
    previous = ""
    for item in items:
        if isinstance(item, InvalidArgument):
            out.append(item)
            continue
        out.append(Draft(**{**item.__dict__, "context": previous}))
        previous = item.content
    return out
