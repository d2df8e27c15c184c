"""Backup, restore and export of one vault, between the wire (rpc/backup.py, the CLI) and the SQL (store.py).

Backing up and restoring are for a vault's owners acting with the admin scope (the owner's session,
or a service token with `admin`); an export is readable by anyone who can read the vault.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from memvault_core import interchange
from memvault_core.errors import Conflict, InvalidArgument, PermissionDenied, Unavailable
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.backup import format as backup_format
from memvault_vault.backup import later_kinds
from memvault_vault.backup.records import BackupChunk, ExportRow, RestoreReport, VaultRef
from memvault_vault.backup.restore_store import RestoreSession
from memvault_vault.backup.store import BackupStore
from memvault_vault.index_client import IndexClient

log = logging.getLogger(__name__)

CHUNK_BYTES = 256 * 1024
"""Bytes per message of a backup or export stream."""
STAGE_RECORDS = 1000
"""Records of a restore staged per round trip..."""
STAGE_BYTES = 8 * 1024 * 1024
"""...or fewer, when they add up to this many characters (a raw import's slice is 1 MiB, base64)."""
EXPORT_FORMATS = ("md", "json", "jsonl")
VECTOR_BYTES_PER_CALL = 2 * 1024 * 1024
"""Vectors moved per call to the indexer, in bytes: half of what one gRPC message may carry."""


def vectors_per_call(dimension: int) -> int:
    """How many vectors of this dimension one GetVectors or PutVectors call carries (at most 500)."""
    return max(1, min(500, VECTOR_BYTES_PER_CALL // (4 * max(1, dimension))))


TYPE_TITLES = {
    "fact": "Facts",
    "preference": "Preferences",
    "decision": "Decisions",
    "constraint": "Constraints",
    "assumption": "Assumptions",
    "observation": "Observations",
    "instruction": "Instructions",
}


class BackupService:
    def __init__(self, store: BackupStore, accounts: AccountService | None, index: IndexClient | None) -> None:
        self._store = store
        self._accounts = accounts
        self._index = index

    async def owned_vault(self, identity: Identity, vault_name: str, *, write: bool = True) -> VaultRef:
        """The vault, if this identity is one of its owners acting with the admin scope (`write`: to change it,
        which a vault pending deletion refuses; a backup only reads)."""
        identity.require("admin")  # first: this is what a token without it should hear about
        vault = await self._access().access(identity, vault_name, write=write)
        if vault.role != "owner":
            raise PermissionDenied(
                f"only an owner of vault '{vault.name}' can back it up or restore it (your role: {vault.role})"
            )
        return VaultRef(vault.id, vault.name)

    def _access(self) -> AccountService:
        if self._accounts is None:  # the maintenance commands act on vaults by name, never for a caller
            raise PermissionDenied("this backup service acts for no caller")
        return self._accounts

    # --- backup ----------------------------------------------------------------------------------------

    async def backup(
        self, identity: Identity, vault_name: str, *, embeddings: bool, archive_only: bool = False
    ) -> AsyncIterator[BackupChunk]:
        vault = await self.owned_vault(identity, vault_name, write=False)
        async for chunk in self.backup_vault(
            vault, embeddings=embeddings, actor=identity.actor, archive_only=archive_only
        ):
            yield chunk

    async def backup_vault(
        self, vault: VaultRef, *, embeddings: bool, actor: str, archive_only: bool = False
    ) -> AsyncIterator[BackupChunk]:
        """The vault's backup file in chunks, from one consistent snapshot; with `archive_only`, the archive
        export: the same format with only the conversation archive's kinds (`later_kinds.ARCHIVE_KINDS`)."""
        if archive_only:
            async for chunk in self._archive_export(vault, actor):
                yield chunk
            return
        model, dimension = "", 0
        if embeddings:
            if self._index is None:
                raise Unavailable(
                    "no indexer is configured, so there are no embeddings to back up; ask for embeddings=0 "
                    "(restore embeds the memories again)"
                )
            try:
                model, dimension = await self._index.model()
            except Unavailable as error:
                raise Unavailable(f"{error.message}; back up without embeddings (embeddings=0) or try again") from None
        writer = backup_format.BackupWriter()
        out = bytearray()
        done = 0
        async with self._store.snapshot(vault.id) as snapshot:
            total = await snapshot.count_memories()
            head = backup_format.header(vault.name, datetime.now(UTC).isoformat(), embeddings=embeddings)
            if embeddings:
                head |= {"embedding_model": model, "embedding_dimension": dimension}
            out += writer.line(head)
            for kind in ("settings", "guide", "guide_version", "batch", "exclusion"):
                async for text in snapshot.lines(kind):
                    out += writer.raw(text, kind)
                    if len(out) >= CHUNK_BYTES:
                        yield BackupChunk(bytes(out), done, total)
                        out.clear()
            async for batch in snapshot.memories():
                for _, _, text in batch:
                    out += writer.raw(text, "memory")
                if embeddings:
                    for line in await self._embedding_lines(vault, batch, model, dimension):
                        out += writer.line(line)
                done += len(batch)
                if len(out) >= CHUNK_BYTES:
                    yield BackupChunk(bytes(out), done, total)
                    out.clear()
            for kind in ("history", "audit", *later_kinds.LINES):
                async for text in snapshot.lines(kind):
                    out += writer.raw(text, kind)
                    if len(out) >= CHUNK_BYTES:
                        yield BackupChunk(bytes(out), done, total)
                        out.clear()
        out += writer.manifest()
        yield BackupChunk(bytes(out), done, total)
        await self._store.audit(vault, actor, "vault.backup", {"counts": dict(writer.counts)})
        log.info("vault backed up", extra={"vault": vault.name, "memories": done, "embeddings": embeddings})

    async def _archive_export(self, vault: VaultRef, actor: str) -> AsyncIterator[BackupChunk]:
        """The archive export in chunks; `done`/`total` count conversations' records for a progress line."""
        writer = backup_format.BackupWriter()
        out = bytearray()
        async with self._store.snapshot(vault.id) as snapshot:
            total = await snapshot.count_conversations()
            head = backup_format.header(vault.name, datetime.now(UTC).isoformat(), embeddings=False, archive_only=True)
            out += writer.line(head)
            for kind in later_kinds.ARCHIVE_KINDS:
                async for text in snapshot.lines(kind):
                    out += writer.raw(text, kind)
                    if len(out) >= CHUNK_BYTES:
                        yield BackupChunk(bytes(out), writer.counts["conversation"], total)
                        out.clear()
        out += writer.manifest()
        yield BackupChunk(bytes(out), writer.counts["conversation"], total)
        await self._store.audit(vault, actor, "archive.export", {"counts": dict(writer.counts)})
        log.info("archive exported", extra={"vault": vault.name, "conversations": total})

    async def _embedding_lines(
        self, vault: VaultRef, batch: Sequence[tuple[str, str, str]], model: str, dimension: int
    ) -> list[dict[str, Any]]:
        assert self._index is not None
        current = {memory_id: index_hash for memory_id, index_hash, _ in batch}
        ids, per_call = list(current), vectors_per_call(dimension)
        vectors = []
        for start in range(0, len(ids), per_call):
            vectors += (await self._index.vectors(vault.id, ids[start : start + per_call]))[2]
        return [
            {
                "kind": "embedding",
                "memory_id": v.memory_id,
                "model": model,
                "dimension": dimension,
                "content_hash": v.content_hash,
                "vector": [round(x, 7) for x in v.vector],
            }
            for v in vectors
            # a point made from an older text is not this memory's embedding (the indexer is catching up)
            if current.get(v.memory_id) == v.content_hash
        ]

    # --- restore ---------------------------------------------------------------------------------------

    async def restore(
        self, identity: Identity, vault_name: str, chunks: AsyncIterable[bytes], *, replace: bool
    ) -> RestoreReport:
        vault = await self.owned_vault(identity, vault_name)
        return await self.restore_vault(vault, chunks, replace=replace, actor=identity.actor)

    async def restore_vault(
        self, vault: VaultRef, chunks: AsyncIterable[bytes], *, replace: bool, actor: str
    ) -> RestoreReport:
        """Read the whole file into a staging table, check it, then write it in the same transaction."""
        async with self._store.restore_session(vault) as session:
            reader = backup_format.BackupReader()
            staged: list[tuple[str, uuid.UUID | None, str]] = []
            archive_only: bool | None = None  # known once the header is read: before anything else is staged
            staged_bytes = 0
            async for chunk in chunks:
                for record in reader.feed(chunk):
                    staged.append((record.kind, record.ref, record.raw))
                    staged_bytes += len(record.raw)
                    if len(staged) >= STAGE_RECORDS or staged_bytes >= STAGE_BYTES:
                        await session.stage(staged)
                        staged.clear()
                        staged_bytes = 0
                if archive_only is None and reader.header is not None:
                    archive_only = reader.header.get("scope") == backup_format.ARCHIVE_SCOPE
                    if not replace:
                        await _refuse_unless_empty(vault, session, archive_only=archive_only)
            reader.finish()
            if staged:
                await session.stage(staged)
            archive_only = bool(archive_only)
            if archive_only:
                unknown = set(reader.counts) - set(later_kinds.ARCHIVE_KINDS)
                if unknown:
                    raise backup_format.BackupRefused(
                        "an archive export holds only the conversation archive, but this file also holds "
                        + ", ".join(sorted(unknown))
                    )
            counts = await session.apply(replace=replace, archive_only=archive_only)
            kept, notices = await self._keep_embeddings(vault, session, counts.get("embedding", 0))
            await session.audit(actor, "vault.restore", {"counts": counts, "replace": replace, "embeddings_kept": kept})
        reembedding = counts.get("memory", 0) - kept
        if reembedding:
            notices.append(
                f"{reembedding} restored memories are being embedded again; until the indexer has reached them, "
                "recall finds them by keyword only"
            )
        notices.append("OAuth grants and service tokens are not part of a backup: reconnect apps to a new deployment")
        log.info("vault restored", extra={"vault": vault.name, "counts": counts, "embeddings_kept": kept})
        return RestoreReport(vault.name, counts, kept, reembedding, notices)

    async def _keep_embeddings(self, vault: VaultRef, session: RestoreSession, count: int) -> tuple[int, list[str]]:
        if count == 0:
            return 0, []
        if self._index is None:
            return 0, ["no indexer is configured: the file's embeddings were not used"]
        index = self._index
        try:
            model, dimension = await index.model()

            async def put(vectors: list[tuple[str, str, list[float]]]) -> None:
                await index.put_vectors(vault.id, model, vectors)

            return await session.keep_embeddings(model, dimension, put, batch_size=vectors_per_call(dimension)), []
        except Unavailable as error:
            return 0, [f"the file's embeddings were not used ({error.message}); the indexer embeds the memories again"]

    # --- export ----------------------------------------------------------------------------------------

    async def export(self, identity: Identity, vault_name: str, export_format: str) -> AsyncIterator[bytes]:
        """Active memories grouped by type, as markdown, JSON or interchange JSON Lines, in chunks."""
        if export_format not in EXPORT_FORMATS:
            raise InvalidArgument(f"format must be one of: {', '.join(EXPORT_FORMATS)}", field="format")
        access = await self._access().access(identity, vault_name, write=False)
        rows = self._store.export_rows(access.id)
        writers = {"md": _markdown, "json": _json, "jsonl": _jsonl}
        pieces = writers[export_format](access.name, rows)
        out = bytearray()
        async for piece in pieces:
            out += piece.encode()
            if len(out) >= CHUNK_BYTES:
                yield bytes(out)
                out.clear()
        yield bytes(out)


async def _refuse_unless_empty(vault: VaultRef, session: RestoreSession, *, archive_only: bool) -> None:
    """Without `replace`, a restore goes only into a vault holding none of what it would replace: memories or
    conversations for a backup, conversations for an archive export."""
    if archive_only:
        if await session.holds_conversations():
            raise Conflict(
                f"vault '{vault.name}' holds conversations; restoring an archive export replaces its archive only "
                "when asked to (replace=1, or --replace); export it first if you may want them back",
                field="replace",
            )
    elif await session.holds_memories():
        raise Conflict(
            f"vault '{vault.name}' holds memories or conversations; a restore replaces them only when asked to "
            "(replace=1, or --replace); back it up first if you may want them back",
            field="replace",
        )


def _day(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d") if moment else ""


async def _markdown(vault: str, rows: AsyncIterator[ExportRow]) -> AsyncIterator[str]:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    yield (
        f"# Memories of vault {vault}\n\nExported {now}: the active memories, grouped by type. "
        "This is a readable export, not a backup.\n"
    )
    current = None
    async for row in rows:
        if row.type != current:
            current = row.type
            yield f"\n## {TYPE_TITLES.get(row.type, row.type)}\n\n"
        text = row.content.strip().replace("\n", "\n  ")
        lines = [f"- {text}"]
        if row.key:
            lines.append(f"  - key: `{row.key}`" + (f", scope: `{row.scope}`" if row.scope else ""))
        if row.tags:
            lines.append("  - tags: " + ", ".join(f"`{t}`" for t in row.tags))
        origin = row.source or "(no source)"
        if row.client:
            origin += f", written by {row.client}"
        lines.append(f"  - source: {origin} ({row.trust})")
        dates = f"  - created {_day(row.created_at)}, updated {_day(row.updated_at)}, valid from {_day(row.valid_from)}"
        lines.append(dates + (f" to {_day(row.valid_to)}" if row.valid_to else ""))
        lines.append(f"  - id: `{row.id}`")
        yield "\n".join(lines) + "\n"


async def _jsonl(vault: str, rows: AsyncIterator[ExportRow]) -> AsyncIterator[str]:
    yield interchange.jsonl_header(vault, datetime.now(UTC))
    async for row in rows:
        yield interchange.jsonl_line(
            id=row.id,
            content=row.content,
            type=row.type,
            key=row.key,
            scope=row.scope,
            tags=row.tags,
            source=row.source,
            created_at=row.created_at,
            valid_from=row.valid_from,
            valid_to=row.valid_to,
        )


async def _json(vault: str, rows: AsyncIterator[ExportRow]) -> AsyncIterator[str]:
    now = datetime.now(UTC).isoformat()
    yield f'{{"format":"memvault-export","version":1,"vault":{json.dumps(vault)},"exported_at":"{now}","types":{{'
    current = None
    first = True
    async for row in rows:
        if row.type != current:
            yield ("]," if current is not None else "") + f"{json.dumps(row.type)}:["
            current, first = row.type, True
        item = {
            "id": row.id,
            "content": row.content,
            "key": row.key,
            "scope": row.scope,
            "tags": row.tags,
            "source": row.source,
            "client": row.client,
            "trust": row.trust,
            "created_at": row.created_at.isoformat(),
            "updated_at": row.updated_at.isoformat(),
            "valid_from": row.valid_from.isoformat(),
            "valid_to": row.valid_to.isoformat() if row.valid_to else None,
        }
        yield ("" if first else ",") + json.dumps(item, ensure_ascii=False)
        first = False
    yield ("]" if current is not None else "") + "}}\n"
