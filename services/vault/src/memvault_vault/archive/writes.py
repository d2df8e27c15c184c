"""The archive's keyed, in-place, batch and cross-vault writes and emptying a vault's archive:
validate everything, check access, write in one transaction, and answer with receipts whose
readback (with `verify`) stays within the receipt ceiling, naming the rest in `omitted`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from memvault_core.errors import InvalidArgument, NotFound
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.archive.records import Receipt
from memvault_vault.archive.store import ArchiveStore
from memvault_vault.archive.write_store import ArchiveWriteStore, BatchWrite, Entry, Kept
from memvault_vault.database import VaultAccess
from memvault_vault.domain import archive as rules
from memvault_vault.domain import archive_writes as limits

Keyed = tuple[str, str, str, str]
"""(key, role, text, content type) of one message upserted by its key."""

Edit = tuple[str, str]
"""(node id, new text) of one message edited in place."""

Draft = tuple[str, str, str, datetime | None]


def _chain(drafts: Sequence[Draft]) -> list[rules.MessageInput]:
    messages: list[rules.MessageInput] = []
    parent: str | None = None
    for role, text, content_type, created_at in drafts:
        node = uuid.uuid4().hex
        messages.append(rules.MessageInput(node, parent, role, content_type or "text", text, created_at=created_at))
        parent = node
    return messages


def _kept(row: asyncpg.Record) -> Kept:
    return Kept(row["id"], row["node_id"], row["parent_node_id"], row["content_hash"], row["active"])


def _revised(row: asyncpg.Record, role: str, text: str) -> rules.MessageInput:
    """The same message (node, parent, role, type, metadata, time, key) with new text; the source's
    structured content stays with the earlier revision."""
    return rules.MessageInput(
        node_id=row["node_id"],
        parent_node_id=row["parent_node_id"],
        role=role,
        content_type=row["content_type"],
        text=text,
        metadata=json.loads(row["metadata"]) if row["metadata"] else None,
        created_at=row["created_at"],
        active=row["active"],
        key=row["message_key"],
    )


def indexing(pending: int, failed: int) -> str:
    """What a receipt says of the vector index: messages are in full-text search at commit, and in the
    vector index once the indexer reports them."""
    return "failed" if failed else "pending" if pending else "indexed"


class ArchiveWrites:
    def __init__(self, store: ArchiveStore, accounts: AccountService) -> None:
        self._store = store
        self._writes = ArchiveWriteStore(store)
        self._accounts = accounts

    @staticmethod
    def _idempotency(key: str, operation: str, *parts: Any) -> tuple[str, str] | None:
        key = rules.validate_idempotency_key(key)
        return (key, rules.request_hash(operation, *parts)) if key else None

    async def finish(
        self, vault: VaultAccess, written: Sequence[tuple[Receipt, Sequence[int]]], verify: bool
    ) -> list[Receipt]:
        """Receipts as answered: durable, with the indexing state, and with `verify` the conversation
        and the messages written read back after the commit, within READBACK_BYTES in all."""
        sizes: list[list[tuple[int, int]]] = []
        if verify:
            for receipt, positions in written:
                sizes.append(
                    await self._writes.readback(vault, receipt.conversation_id, receipt.revision, positions)
                    if positions and not receipt.replayed
                    else []
                )
        admitted = limits.fit_readback([[limits.readback_bytes(size) for _, size in s] for s in sizes])
        states = await self._writes.index_states(vault, [(r.conversation_id, r.revision) for r, _ in written])
        answered: list[Receipt] = []
        for index, (receipt, _) in enumerate(written):
            readback: list[Any] = []
            omitted: list[Any] = []
            verified = None
            if verify:
                verified = await self._store.conversation(vault, receipt.conversation_id)
                keep = [p for p, _ in sizes[index][: admitted[index]]]
                if keep:
                    readback = await self._writes.messages_at(vault, receipt.conversation_id, receipt.revision, keep)
                rest = sizes[index][admitted[index] :]
                if rest:
                    omitted.append(limits.Shed(receipt.conversation_id, receipt.revision, rest[0][0] - 1, len(rest)))
            answered.append(
                Receipt(
                    receipt.conversation_id,
                    receipt.revision,
                    receipt.content_sha256,
                    receipt.message_count,
                    durable=True,
                    indexing=indexing(*states.get((receipt.conversation_id, receipt.revision), (0, 0))),
                    indexing_pending=states.get((receipt.conversation_id, receipt.revision), (0, 0))[0],
                    replayed=receipt.replayed,
                    verified=verified,
                    changes=receipt.changes,
                    derived_from=receipt.derived_from,
                    readback=readback,
                    omitted=omitted,
                )
            )
        return answered

    async def upsert(
        self,
        identity: Identity,
        vault_name: str,
        conversation_id: str,
        *,
        base_revision: int,
        messages: list[Keyed],
        idempotency_key: str = "",
        verify: bool = False,
    ) -> Receipt:
        """Messages written by stable key: a key the head holds gets the new text (same node, role, time
        and place), a new key is appended in request order; all unchanged is `no_change`, no revision."""
        conversation_id = rules.parse_conversation_id(conversation_id)
        base_revision = rules.parse_base_revision(base_revision)
        limits.check_count(len(messages), limits.MAX_KEYED_MESSAGES, "messages", "message")
        seen: set[str] = set()
        for index, (key, *_) in enumerate(messages):
            limits.validate_message_key(key, index)
            if key in seen:
                raise InvalidArgument(f"messages[{index}].key {key!r} is given twice; keys must be unique", field="key")
            seen.add(key)
        rules.validate_drafts([(role, text, ct, None) for _, role, text, ct in messages], allow_empty=False)
        vault = await self._accounts.access(identity, vault_name, write=True)

        def plan(rows: list[asyncpg.Record]) -> tuple[list[Entry] | None, dict[str, int], list[int]]:
            entries: list[Entry] = [_kept(r) for r in rows]
            where: dict[str, int] = {}
            for index, row in enumerate(rows):
                key = row["message_key"]
                if key is not None and key in where:
                    raise InvalidArgument(
                        f"conversation {conversation_id} holds key {key!r} twice; edit by node_id instead", field="key"
                    )
                if key is not None:
                    where[key] = index
            last = next((r["node_id"] for r in reversed(rows) if r["active"]), None)
            counts = {"added": 0, "updated": 0, "unchanged": 0}
            positions: list[int] = []
            now = datetime.now(UTC)
            for index, (key, role, text, content_type) in enumerate(messages):
                if key in where:
                    row = rows[where[key]]
                    if row["role"] != role:
                        raise InvalidArgument(
                            f"messages[{index}] has role {role!r} but key {key!r} is a {row['role']!r} message; "
                            "nothing was written",
                            field="messages.role",
                        )
                    if row["text"] == text:
                        counts["unchanged"] += 1
                        continue
                    entries[where[key]] = _revised(row, role, text)
                    counts["updated"] += 1
                    positions.append(where[key])
                else:
                    node = uuid.uuid4().hex
                    entries.append(
                        rules.MessageInput(node, last, role, content_type or "text", text, created_at=now, key=key)
                    )
                    last = node
                    counts["added"] += 1
                    positions.append(len(entries) - 1)
            return (entries if positions else None), counts, sorted(positions)

        idempotency = self._idempotency(idempotency_key, "upsert", conversation_id, base_revision, messages)
        receipt, positions = await self._writes.rewrite(
            vault, identity.actor, conversation_id, base_revision, "upsert", plan, idempotency, keys=sorted(seen)
        )
        return (await self.finish(vault, [(receipt, positions)], verify))[0]

    async def edit(
        self,
        identity: Identity,
        vault_name: str,
        conversation_id: str,
        *,
        base_revision: int,
        edits: list[Edit],
        idempotency_key: str = "",
        verify: bool = False,
    ) -> Receipt:
        """New text for known messages (by node id), in place: one new revision where each keeps its node,
        parent, role, time, key and place. Plain text only; edits that change nothing write nothing."""
        conversation_id = rules.parse_conversation_id(conversation_id)
        base_revision = rules.parse_base_revision(base_revision)
        limits.check_count(len(edits), limits.MAX_KEYED_MESSAGES, "edits", "edit")
        nodes = [node for node, _ in edits]
        if len(set(nodes)) != len(nodes):
            raise InvalidArgument("each node_id may be edited once per call", field="edits.node_id")
        for index, (node, text) in enumerate(edits):
            if not node or len(node) > 200:
                raise InvalidArgument(f"edits[{index}].node_id must name a message (1-200 characters)", field="edits")
            if not text.strip():
                raise InvalidArgument(f"edits[{index}].text is empty", field="edits.text")
            if len(text) > rules.MAX_MESSAGE_CHARS:
                raise InvalidArgument(
                    f"edits[{index}].text is over max_message_chars ({rules.MAX_MESSAGE_CHARS}); shorten it",
                    field="edits.text",
                )
        vault = await self._accounts.access(identity, vault_name, write=True)

        def plan(rows: list[asyncpg.Record]) -> tuple[list[Entry] | None, dict[str, int], list[int]]:
            where = {r["node_id"]: index for index, r in enumerate(rows)}
            missing = [node for node in nodes if node not in where]
            if missing:
                raise NotFound(
                    f"revision has no message with node_id {missing[0]!r}; read the conversation for node ids. "
                    "Nothing was written",
                    field="edits.node_id",
                )
            entries: list[Entry] = [_kept(r) for r in rows]
            positions: list[int] = []
            for node, text in edits:
                row = rows[where[node]]
                if row["text"] != text:
                    entries[where[node]] = _revised(row, row["role"], text)
                    positions.append(where[node])
            counts = {"updated": len(positions), "unchanged": len(edits) - len(positions)}
            return (entries if positions else None), counts, sorted(positions)

        idempotency = self._idempotency(idempotency_key, "edit", conversation_id, base_revision, edits)
        receipt, positions = await self._writes.rewrite(
            vault, identity.actor, conversation_id, base_revision, "edit", plan, idempotency, nodes=nodes
        )
        return (await self.finish(vault, [(receipt, positions)], verify))[0]

    async def commit(
        self,
        identity: Identity,
        vault_name: str,
        writes: list[tuple[str, str, int, list[Draft]]],
        *,
        idempotency_key: str = "",
        verify: bool = False,
    ) -> list[Receipt]:
        """Appends and replaces of 1-20 different conversations of one vault, all or nothing."""
        limits.check_count(len(writes), limits.MAX_BATCH_WRITES, "writes", "write")
        batch: list[BatchWrite] = []
        total = 0
        for index, (conversation_id, kind, base, drafts) in enumerate(writes):
            if kind not in ("append", "replace"):
                raise InvalidArgument(f"writes[{index}].kind must be append or replace", field="writes.kind")
            conversation_id = rules.parse_conversation_id(conversation_id, f"writes[{index}].conversation_id")
            rules.parse_base_revision(base)
            rules.validate_drafts(drafts, allow_empty=False)
            total += len(drafts)
            batch.append(BatchWrite(conversation_id, kind, base, _chain(drafts)))
        if total > rules.MAX_MESSAGES_PER_WRITE:
            raise InvalidArgument(
                f"a batch holds at most {rules.MAX_MESSAGES_PER_WRITE} messages in all (max_messages_per_write); "
                f"{total} given",
                field="writes",
            )
        if len({w.conversation_id for w in batch}) != len(batch):
            raise InvalidArgument("each conversation may appear once per batch", field="writes.conversation_id")
        vault = await self._accounts.access(identity, vault_name, write=True)
        idempotency = self._idempotency(idempotency_key, "commit", writes)
        receipts = await self._writes.commit(vault, identity.actor, batch, idempotency)
        written = [
            (r, range(r.message_count - len(w.messages) if w.kind == "append" else 0, r.message_count))
            for r, w in zip(receipts, batch, strict=True)
        ]
        return await self.finish(vault, written, verify)

    async def copy(
        self,
        identity: Identity,
        vault_name: str,
        target_vault: str,
        conversation_ids: list[str],
        *,
        idempotency_key: str,
        verify: bool = False,
    ) -> list[Receipt]:
        """1-20 conversations of `vault_name` copied whole into `target_vault` (read on the one, write on
        the other), each with `derived_from`; the idempotency key is required, so a retry never copies twice."""
        limits.check_count(len(conversation_ids), limits.MAX_COPY_CONVERSATIONS, "conversation_ids", "conversation")
        ids = [rules.parse_conversation_id(c, "conversation_ids") for c in conversation_ids]
        if len(set(ids)) != len(ids):
            raise InvalidArgument("each conversation may be copied once per call", field="conversation_ids")
        if not idempotency_key:
            raise InvalidArgument(
                "idempotency_key is required to copy: reuse it when you retry, so nothing is copied twice",
                field="idempotency_key",
            )
        if not target_vault.strip():
            raise InvalidArgument("target_vault is required: the vault to copy into", field="target_vault")
        source = await self._accounts.access(identity, vault_name)
        target = await self._accounts.access(identity, target_vault, write=True)
        if source.id == target.id:
            raise InvalidArgument(
                "target_vault is the vault the conversations are in; name another", field="target_vault"
            )
        idempotency = self._idempotency(idempotency_key, "copy", source.id, ids)
        receipts = await self._writes.copy(source, target, identity.actor, ids, idempotency)
        return await self.finish(target, [(r, range(r.message_count)) for r in receipts], verify)

    async def empty(self, identity: Identity, vault_name: str, confirm: str) -> dict[str, Any]:
        """One bounded step of deleting every conversation and upload of a vault's archive; `confirm`
        must repeat the vault's name. Repeat until `done` (each step is its own transaction)."""
        vault = await self._accounts.access(identity, vault_name, write=True)
        if confirm != vault.name:
            raise InvalidArgument(
                f"confirm must repeat the vault's name ({vault.name!r}) exactly; nothing was deleted", field="confirm"
            )
        step = await self._writes.empty_step(
            vault, identity.actor, limits.EMPTY_STEP_CONVERSATIONS, limits.EMPTY_STEP_IMPORTS
        )
        return {"vault": vault.name, **step}
