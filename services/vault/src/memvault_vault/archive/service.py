"""What the archive calls do: validate, check access, page, and hand a receipt back for every write."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import uuid
from datetime import datetime
from typing import Any

from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.archive.records import (
    ArchiveStats,
    ConversationRecord,
    ImportRecord,
    MessageHit,
    MessageRecord,
    Receipt,
    RevisionRecord,
)
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.archive.stream import ExportStream
from memvault_vault.database import VaultAccess
from memvault_vault.domain import archive as rules
from memvault_vault.domain import cursor

log = logging.getLogger("memvault_vault.archive")

Draft = tuple[str, str, str, datetime | None]
"""(role, text, content type, created at) of one message a caller writes."""

INDEXING = "full_text"
"""What a receipt says of indexing: archived messages are in Postgres full-text search at commit."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
FORMATS = ("chatgpt", "claude")


def _inputs(drafts: list[Draft]) -> list[rules.MessageInput]:
    messages: list[rules.MessageInput] = []
    parent: str | None = None
    for role, text, content_type, created_at in drafts:
        node = uuid.uuid4().hex
        messages.append(
            rules.MessageInput(
                node_id=node,
                parent_node_id=parent,
                role=role,
                content_type=content_type or "text",
                text=text,
                created_at=created_at,
            )
        )
        parent = node
    return messages


def _page(limit: int, default: int, most: int) -> int:
    if limit < 0:
        raise InvalidArgument("limit must not be negative", field="limit")
    if limit > most:
        raise LimitExceeded(f"limit is at most {most}", field="limit")
    return limit or default


class ArchiveService:
    def __init__(self, store: ArchiveStore, accounts: AccountService) -> None:
        self._store = store
        self._accounts = accounts
        self._stream: ExportStream | None = None
        """The import being worked through, kept open between its checkpoints."""

    async def _finish(self, vault: VaultAccess, receipt: Receipt, verify: bool) -> Receipt:
        verified: ConversationRecord | None = None
        if verify:
            verified = await self._store.conversation(vault, receipt.conversation_id)
        return Receipt(
            receipt.conversation_id,
            receipt.revision,
            receipt.content_sha256,
            receipt.message_count,
            durable=True,
            indexing=INDEXING,
            replayed=receipt.replayed,
            verified=verified,
        )

    @staticmethod
    def _idempotency(key: str, operation: str, *parts: Any) -> tuple[str, str] | None:
        key = rules.validate_idempotency_key(key)
        return (key, rules.request_hash(operation, *parts)) if key else None

    async def create(
        self,
        identity: Identity,
        vault_name: str,
        *,
        title: str,
        tags: list[str],
        drafts: list[Draft],
        idempotency_key: str = "",
        verify: bool = False,
    ) -> Receipt:
        clean_title = rules.validate_title(title)
        clean_tags = rules.normalize_tags(tags)
        rules.validate_drafts(drafts, allow_empty=False)
        vault = await self._accounts.access(identity, vault_name, write=True)
        receipt = await self._store.write(
            vault,
            identity.actor,
            kind="create",
            conversation_id=None,
            base_revision=0,
            messages=_inputs(drafts),
            title=clean_title,
            tags=clean_tags,
            idempotency=self._idempotency(idempotency_key, "create", clean_title, clean_tags, drafts),
        )
        return await self._finish(vault, receipt, verify)

    async def revise(
        self,
        identity: Identity,
        vault_name: str,
        conversation_id: str,
        *,
        kind: str,
        base_revision: int,
        drafts: list[Draft],
        idempotency_key: str = "",
        verify: bool = False,
    ) -> Receipt:
        """Append to, or replace, the transcript on top of `base_revision`, which must be the head."""
        conversation_id = rules.parse_conversation_id(conversation_id)
        base_revision = rules.parse_base_revision(base_revision)
        rules.validate_drafts(drafts, allow_empty=False)
        vault = await self._accounts.access(identity, vault_name, write=True)
        receipt = await self._store.write(
            vault,
            identity.actor,
            kind=kind,
            conversation_id=conversation_id,
            base_revision=base_revision,
            messages=_inputs(drafts),
            idempotency=self._idempotency(idempotency_key, kind, conversation_id, base_revision, drafts),
        )
        return await self._finish(vault, receipt, verify)

    async def restore(
        self,
        identity: Identity,
        vault_name: str,
        conversation_id: str,
        *,
        revision: int,
        base_revision: int,
        idempotency_key: str = "",
        verify: bool = False,
    ) -> Receipt:
        conversation_id = rules.parse_conversation_id(conversation_id)
        base_revision = rules.parse_base_revision(base_revision)
        if revision < 1:
            raise InvalidArgument("revision must name an earlier revision (list_revisions)", field="revision")
        vault = await self._accounts.access(identity, vault_name, write=True)
        receipt = await self._store.restore(
            vault,
            identity.actor,
            conversation_id,
            revision,
            base_revision,
            self._idempotency(idempotency_key, "restore", conversation_id, revision, base_revision),
        )
        return await self._finish(vault, receipt, verify)

    async def set_tags(
        self, identity: Identity, vault_name: str, conversation_id: str, tags: list[str], expected_version: int
    ) -> tuple[list[str], int]:
        conversation_id = rules.parse_conversation_id(conversation_id)
        clean = rules.normalize_tags(tags)
        if expected_version < 1:
            raise InvalidArgument(
                "expected_tags_version is required: the tags_version you last read", field="expected_tags_version"
            )
        vault = await self._accounts.access(identity, vault_name, write=True)
        return await self._store.set_tags(vault, identity.actor, conversation_id, clean, expected_version)

    async def delete(self, identity: Identity, vault_name: str, conversation_id: str, confirm: str) -> tuple[int, int]:
        conversation_id = rules.parse_conversation_id(conversation_id)
        if confirm != conversation_id:
            raise InvalidArgument(
                "confirm must repeat the conversation id exactly; nothing was deleted", field="confirm"
            )
        vault = await self._accounts.access(identity, vault_name, write=True)
        return await self._store.delete(vault, identity.actor, conversation_id)

    async def conversations(
        self,
        identity: Identity,
        vault_name: str,
        *,
        tags_all: list[str],
        tags_any: list[str],
        limit: int,
        page: str,
    ) -> tuple[list[ConversationRecord], str]:
        limit = _page(limit, rules.DEFAULT_LIST_RESULTS, rules.MAX_LIST_RESULTS)
        all_tags, any_tags = rules.normalize_tags(tags_all), rules.normalize_tags(tags_any)
        vault = await self._accounts.access(identity, vault_name)
        request = cursor.fingerprint("conversations", vault.id, all_tags, any_tags, limit)
        offset = cursor.offset_of(cursor.decode(page, "archive", request))
        rows = await self._store.conversations(vault, all_tags, any_tags, limit, offset)
        more = cursor.encode("archive", request, {"offset": offset + limit}) if len(rows) == limit else ""
        return rows, more

    async def revisions(
        self, identity: Identity, vault_name: str, conversation_id: str, *, limit: int, page: str
    ) -> tuple[list[RevisionRecord], str]:
        conversation_id = rules.parse_conversation_id(conversation_id)
        limit = _page(limit, rules.DEFAULT_LIST_RESULTS, rules.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        request = cursor.fingerprint("revisions", vault.id, conversation_id, limit)
        position = cursor.decode(page, "archive", request)
        before = cursor.offset_of(position)
        rows = await self._store.revisions(vault, conversation_id, limit, before)
        more = cursor.encode("archive", request, {"offset": rows[-1].number}) if len(rows) == limit else ""
        return rows, more

    async def conversation(
        self,
        identity: Identity,
        vault_name: str,
        conversation_id: str,
        *,
        revision: int,
        graph: bool,
        limit: int,
        page: str,
        start: int = 0,
    ) -> tuple[ConversationRecord, int, list[MessageRecord], str]:
        """One conversation at a pinned revision (the head unless given); a cursor keeps that revision."""
        conversation_id = rules.parse_conversation_id(conversation_id)
        limit = _page(limit, rules.DEFAULT_PAGE_MESSAGES, rules.MAX_PAGE_MESSAGES)
        if revision < 0:
            raise InvalidArgument("revision must be 0 (the head) or a revision number", field="revision")
        vault = await self._accounts.access(identity, vault_name)
        summary = await self._store.conversation(vault, conversation_id)
        request = cursor.fingerprint("conversation", vault.id, conversation_id, graph, limit)
        position = cursor.decode(page, "archive", request)
        if start < 0:
            raise InvalidArgument("start_position must not be negative", field="start_position")
        after = start - 1
        if position is not None:
            pinned, last = position.get("revision"), position.get("after")
            if not isinstance(pinned, int) or not isinstance(last, int):
                raise InvalidArgument("cursor is not one this vault made; omit it to start again", field="cursor")
            after = last
            if revision and revision != pinned:
                raise InvalidArgument("cursor belongs to another revision; omit it or the revision", field="cursor")
            revision = pinned
        revision = revision or summary.head_revision
        if not await self._store.has_revision(vault, conversation_id, revision):
            raise InvalidArgument(f"conversation {conversation_id} has no revision {revision}", field="revision")
        messages = await self._store.messages(
            vault, conversation_id, revision, active_only=not graph, after=after, limit=limit
        )
        more = (
            cursor.encode("archive", request, {"revision": revision, "after": messages[-1].position})
            if len(messages) == limit
            else ""
        )
        return summary, revision, messages, more

    async def search(
        self, identity: Identity, vault_name: str, query: str, *, tags_any: list[str], limit: int
    ) -> list[MessageHit]:
        query = query.strip()
        if not query:
            raise InvalidArgument("query is empty", field="query")
        if len(query) > rules.MAX_QUERY_CHARS:
            raise LimitExceeded(f"query is longer than {rules.MAX_QUERY_CHARS} characters", field="query")
        limit = _page(limit, rules.DEFAULT_SEARCH_RESULTS, rules.MAX_SEARCH_RESULTS)
        tags = rules.normalize_tags(tags_any)
        vault = await self._accounts.access(identity, vault_name)
        return await self._store.search(vault, query, tags, limit)

    # --- imports -----------------------------------------------------------------------------------

    async def start_import(
        self,
        identity: Identity,
        vault_name: str,
        *,
        fmt: str,
        filename: str,
        size: int,
        sha256: str,
        data: bytes,
    ) -> ImportRecord:
        fmt = fmt or "chatgpt"
        if fmt not in FORMATS:
            raise InvalidArgument(f"format must be one of: {', '.join(FORMATS)}", field="format")
        sha256 = sha256.strip().lower()
        if data and not size:
            size = len(data)
        if data and not sha256:
            sha256 = hashlib.sha256(data).hexdigest()
        if not _SHA256.match(sha256):
            raise InvalidArgument("sha256 must be the file's hex sha256 (64 characters)", field="sha256")
        if size < 1:
            raise InvalidArgument("size must be the file's size in bytes", field="size")
        if size > rules.MAX_IMPORT_BYTES:
            raise LimitExceeded(f"an export may hold at most {rules.MAX_IMPORT_BYTES} bytes", field="size")
        if len(data) > rules.MAX_IMPORT_PART_BYTES:
            raise LimitExceeded(
                f"data holds at most {rules.MAX_IMPORT_PART_BYTES} bytes; send larger files in parts",
                field="data",
            )
        vault = await self._accounts.access(identity, vault_name, write=True)
        record = await self._store.start_import(vault, identity.actor, fmt, filename[:200], size, sha256)
        if data:
            await self._store.upload_part(vault, record.id, 0, data)
            record = await self._store.finish_import(vault, identity.actor, record.id)
        return record

    async def upload_part(self, identity: Identity, vault_name: str, import_id: str, part: int, data: bytes) -> int:
        import_id = rules.parse_conversation_id(import_id, "import_id")
        if not data:
            raise InvalidArgument("data is empty", field="data")
        if len(data) > rules.MAX_IMPORT_PART_BYTES:
            raise LimitExceeded(f"a part holds at most {rules.MAX_IMPORT_PART_BYTES} bytes", field="data")
        if part < 0:
            raise InvalidArgument("part numbers start at 0", field="part")
        vault = await self._accounts.access(identity, vault_name, write=True)
        return await self._store.upload_part(vault, import_id, part, data)

    async def finish_import(self, identity: Identity, vault_name: str, import_id: str) -> ImportRecord:
        import_id = rules.parse_conversation_id(import_id, "import_id")
        vault = await self._accounts.access(identity, vault_name, write=True)
        return await self._store.finish_import(vault, identity.actor, import_id)

    async def get_import(self, identity: Identity, vault_name: str, import_id: str) -> ImportRecord:
        import_id = rules.parse_conversation_id(import_id, "import_id")
        vault = await self._accounts.access(identity, vault_name)
        return await self._store.get_import(vault, import_id)

    async def list_imports(self, identity: Identity, vault_name: str, limit: int) -> list[ImportRecord]:
        limit = _page(limit, rules.DEFAULT_LIST_RESULTS, rules.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        return await self._store.list_imports(vault, limit)

    async def stats(self, identity: Identity, vault_name: str) -> ArchiveStats:
        vault = await self._accounts.access(identity, vault_name)
        return await self._store.stats(vault)

    async def process_checkpoint(self, only: str | None = None) -> bool:
        """Run one checkpoint of the oldest waiting import (or of `only`); False when nothing waits."""
        waiting = await self._store.next_import(only)
        if waiting is None:
            return False
        import_id, vault_id, vault_name = waiting
        vault = VaultAccess(vault_id, vault_name, "owner", "")

        if self._stream is None or self._stream.import_id != import_id:
            self._close_stream()

            async def fetch(part: int) -> bytes | None:
                return await self._store.raw_part(vault_id, import_id, part)

            self._stream = ExportStream(import_id, fetch)
        return await self._store.checkpoint(import_id, vault, self._stream, rules.IMPORT_CHECKPOINT_CONVERSATIONS)

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    async def run_imports(self, idle_seconds: float = 2.0) -> None:
        """Work through waiting imports for ever, a checkpoint at a time (the serve command runs this)."""
        while True:
            try:
                busy = await self.process_checkpoint()
            except Exception:
                log.exception("archive import checkpoint failed; it will be retried")
                busy = False
            if not busy:
                self._close_stream()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.sleep(idle_seconds)
