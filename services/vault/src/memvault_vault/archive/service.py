"""What the archive calls do: validate, check access, page, and hand a receipt back for every write."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import uuid
from datetime import datetime
from typing import Any

from memvault_core.errors import InvalidArgument, LimitExceeded, Unavailable
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.archive.operations import ArchiveOperations
from memvault_vault.archive.packs import ContextPacks
from memvault_vault.archive.reads import ArchiveReads
from memvault_vault.archive.records import (
    ConversationRecord,
    ImportRecord,
    MessageHit,
    MessageRecord,
    Receipt,
    RevisionRecord,
    VaultMap,
)
from memvault_vault.archive.retry_store import ArchiveRetryStore
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.archive.stream import ExportStream
from memvault_vault.archive.vault_map import VaultMapStore, bounds
from memvault_vault.archive.write_store import ArchiveWriteStore
from memvault_vault.archive.writes import ArchiveWrites
from memvault_vault.database import VaultAccess
from memvault_vault.domain import archive as rules
from memvault_vault.domain import cursor
from memvault_vault.domain.signed_cursor import CursorSigner

log = logging.getLogger("memvault_vault.archive")

Draft = tuple[str, str, str, datetime | None]
"""(role, text, content type, created at) of one message a caller writes."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
FORMATS = ("chatgpt", "claude")
CHECKPOINT_STRIKES = 3
"""An import whose checkpoint stops on an unexpected error this many times in a row is marked failed
(so the imports after it go on); its owner retries it once the cause is fixed."""


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
    def __init__(
        self,
        store: ArchiveStore,
        accounts: AccountService,
        *,
        cursors: CursorSigner | None = None,
        reads: ArchiveReads | None = None,
    ) -> None:
        self._store = store
        self._accounts = accounts
        self._stream: ExportStream | None = None
        """The import being worked through, kept open between its checkpoints."""
        self._retries = ArchiveRetryStore(store._pool)  # the archive's one pool
        self._strikes: tuple[str, int] = ("", 0)
        """(import id, errors in a row) of the checkpoint that last stopped on an unexpected error."""
        # Retrying failed imports and failed message index jobs (the owner's operations).
        self.operations = ArchiveOperations(store, self._retries, accounts)
        # Without a configured secret (tests), cursors hold for this process only.
        self._cursors = cursors or CursorSigner(os.urandom(32))
        self._reads = reads
        # Keyed, in-place, batch and cross-vault writes, emptying, and context packs (their own modules).
        self.writes = ArchiveWrites(store, accounts)
        self.packs = ContextPacks(
            store,
            ArchiveWriteStore(store),
            accounts,
            self._pack_search,
        )
        self._map = VaultMapStore(store._pool)  # the archive's one pool

    @property
    def reads(self) -> ArchiveReads:
        """Search, context, batch reads, titles and counts (VaultServices.build wires them)."""
        if self._reads is None:
            raise Unavailable("archive reads are not wired in this process")
        return self._reads

    async def _pack_search(
        self, identity: Identity, vault_name: str, query: str, tags: list[str], limit: int
    ) -> list[MessageHit]:
        """A context pack's optional search: the agents' hybrid search, first page."""
        page = await self.reads.search(
            identity, vault_name, query, tags_all=[], tags_any=tags, limit=limit, max_bytes=0, page="", continued=False
        )
        return page.hits

    def _seal(self, identity: Identity, request: str, position: dict[str, Any]) -> str:
        return self._cursors.seal(
            "archive", CursorSigner.caller_of(identity.subject, identity.client), request, position
        )

    def _open(self, identity: Identity, page: str, request: str) -> dict[str, Any] | None:
        return self._cursors.open(page, "archive", CursorSigner.caller_of(identity.subject, identity.client), request)

    async def _finish(self, vault: VaultAccess, receipt: Receipt, verify: bool, written: int = 0) -> Receipt:
        """The receipt as answered; with `verify`, the last `written` messages are read back (writes.py)."""
        positions = range(receipt.message_count - written, receipt.message_count)
        return (await self.writes.finish(vault, [(receipt, positions)], verify))[0]

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
        return await self._finish(vault, receipt, verify, len(drafts))

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
        return await self._finish(vault, receipt, verify, len(drafts))

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

    async def vault_map(self, identity: Identity, vault_name: str, max_tags: int, per_tag: int) -> VaultMap:
        """The vault's map (`vault_map`): anyone who may read the vault may read its map."""
        max_tags, per_tag = bounds(max_tags, per_tag)
        vault = await self._accounts.access(identity, vault_name)
        return await self._map.read(vault, max_tags, per_tag)

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
        offset = cursor.offset_of(self._open(identity, page, request))
        rows = await self._store.conversations(vault, all_tags, any_tags, limit, offset)
        more = self._seal(identity, request, {"offset": offset + limit}) if len(rows) == limit else ""
        return rows, more

    async def revisions(
        self, identity: Identity, vault_name: str, conversation_id: str, *, limit: int, page: str
    ) -> tuple[list[RevisionRecord], str]:
        conversation_id = rules.parse_conversation_id(conversation_id)
        limit = _page(limit, rules.DEFAULT_LIST_RESULTS, rules.MAX_LIST_RESULTS)
        vault = await self._accounts.access(identity, vault_name)
        request = cursor.fingerprint("revisions", vault.id, conversation_id, limit)
        before = cursor.offset_of(self._open(identity, page, request))
        rows = await self._store.revisions(vault, conversation_id, limit, before)
        more = self._seal(identity, request, {"offset": rows[-1].number}) if len(rows) == limit else ""
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
        position = self._open(identity, page, request)
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
            self._seal(identity, request, {"revision": revision, "after": messages[-1].position})
            if len(messages) == limit
            else ""
        )
        return summary, revision, messages, more

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
        try:
            busy = await self._store.checkpoint(import_id, vault, self._stream, rules.IMPORT_CHECKPOINT_CONVERSATIONS)
        except Exception as error:
            self._close_stream()
            strikes = self._strikes[1] + 1 if self._strikes[0] == import_id else 1
            self._strikes = (import_id, strikes)
            if strikes >= CHECKPOINT_STRIKES:
                self._strikes = ("", 0)
                await self._retries.fail_import(
                    import_id,
                    f"the import job stopped on an unexpected error ({type(error).__name__}) {strikes} times in a"
                    " row; retry the import once the cause is fixed: it resumes from its last checkpoint",
                )
            raise
        self._strikes = ("", 0)
        return busy

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
