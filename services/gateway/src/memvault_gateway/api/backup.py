"""/api/v1 backup, restore and export of a vault: each route is one streamed BackupService call.

A backup or export is sent on as the vault produces it, and a restore's upload is passed on as it
arrives, so the gateway holds a chunk at a time however large the vault. Backup and restore are
for the vault's owners with the admin scope (the owner's session, or a service token with
`admin`); the vault checks that, as for every call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import grpc
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.requests import ClientDisconnect

from memvault.vault.v1 import backup_pb2 as pb
from memvault.vault.v1 import backup_pb2_grpc
from memvault_core.errors import InvalidArgument
from memvault_core.grpc import error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY, Identity
from memvault_core.validation import Between
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.context import Gateway

log = logging.getLogger("memvault_gateway")

router = APIRouter(prefix="/api/v1")

Flag = Annotated[int, Query(), Between(0, 1)]

_MEDIA = {"md": "text/markdown; charset=utf-8", "json": "application/json", "jsonl": "application/x-ndjson"}
_EXPORT_FORMATS = {
    "md": pb.EXPORT_FORMAT_MARKDOWN,
    "json": pb.EXPORT_FORMAT_JSON,
    "jsonl": pb.EXPORT_FORMAT_JSONL,
}


def _stub(gw: Gateway) -> backup_pb2_grpc.BackupServiceStub:
    return backup_pb2_grpc.BackupServiceStub(gw.vault.channel)


def _metadata(gw: Gateway, identity: Identity) -> tuple[tuple[str, str], ...]:
    return ((GRPC_METADATA_KEY, gw.signer.sign(identity)),)


def file_name(vault: str, extension: str) -> str:
    """`memvault-<vault>-<UTC time>.<extension>`: what a download is saved as."""
    return f"memvault-{vault}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.{extension}"


async def _stream(call: Any, what: str) -> AsyncIterator[bytes]:
    """The call's chunks; the first is awaited here, so a refusal is an HTTP error, not an empty file."""
    try:
        first = await call.read()
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None

    async def body() -> AsyncIterator[bytes]:
        message = first
        while message is not grpc.aio.EOF:
            yield message.data
            try:
                message = await call.read()
            except grpc.aio.AioRpcError as error:
                # Headers are sent: the client gets a cut-off file, which its manifest check refuses.
                log.error(f"{what} stopped part-way", extra={"error": error_from_rpc(error).kind})
                raise

    return body()


# The calls behind the routes, for any page of the gateway that offers the same (the owner's dashboard):
# each acts as `identity`, and the vault checks roles and scopes as for every call.


async def backup_chunks(gw: Gateway, identity: Identity, vault: str, *, embeddings: bool) -> AsyncIterator[bytes]:
    """The vault's backup file in chunks; a refusal is raised before the first chunk."""
    request = pb.BackupRequest(vault=vault, omit_embeddings=not embeddings)
    return await _stream(_stub(gw).Backup(request, metadata=_metadata(gw, identity)), "backup")


async def archive_export_chunks(gw: Gateway, identity: Identity, vault: str) -> AsyncIterator[bytes]:
    """The vault's archive export (a backup file with only the conversation archive) in chunks."""
    request = pb.BackupRequest(vault=vault, omit_embeddings=True, archive_only=True)
    return await _stream(_stub(gw).Backup(request, metadata=_metadata(gw, identity)), "archive export")


async def export_chunks(gw: Gateway, identity: Identity, vault: str, export_format: str) -> AsyncIterator[bytes]:
    """Active memories grouped by type, `md` or `json`, in chunks; a refusal is raised before the first."""
    if export_format not in _EXPORT_FORMATS:
        raise InvalidArgument("format must be md or json", field="format")
    request = pb.ExportRequest(vault=vault, format=_EXPORT_FORMATS[export_format])
    return await _stream(_stub(gw).Export(request, metadata=_metadata(gw, identity)), "export")


async def restore_file(
    gw: Gateway, identity: Identity, vault: str, chunks: AsyncIterator[bytes], *, replace: bool
) -> dict[str, Any]:
    """Restore a backup file from its chunks, in one transaction; what it wrote, as the API answers it."""

    async def messages() -> AsyncIterator[pb.RestoreRequest]:
        yield pb.RestoreRequest(options=pb.RestoreOptions(vault=vault, replace=replace))
        async for chunk in chunks:
            if chunk:
                yield pb.RestoreRequest(data=chunk)

    try:
        reply = await _stub(gw).Restore(messages(), metadata=_metadata(gw, identity))
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None
    return {
        "vault": reply.vault,
        "restored": {c.kind: c.count for c in reply.counts},
        "embeddings_kept": reply.embeddings_kept,
        "reembedding": reply.reembedding,
        "notices": list(reply.notices),
    }


_BACKUP_FILE = {
    "description": "The backup file: JSON Lines ending in a manifest (docs/backup-format.md, docs/backup.schema.json)",
    "content": {"application/x-ndjson": {"schema": {"type": "string", "format": "binary"}}},
}


@router.get("/vaults/{vault}/backup", response_class=StreamingResponse, responses={200: _BACKUP_FILE})
async def backup(vault: Vault, caller: Caller, gw: GatewayDep, embeddings: Flag = 1) -> StreamingResponse:
    """The vault's backup file (docs/backup-format.md), streamed; `embeddings=0` leaves out the vectors."""
    body = await backup_chunks(gw, caller.identity(), vault, embeddings=bool(embeddings))
    return StreamingResponse(
        body,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{file_name(vault, "jsonl")}"'},
    )


@router.get("/vaults/{vault}/archive/export", response_class=StreamingResponse, responses={200: _BACKUP_FILE})
async def archive_export(vault: Vault, caller: Caller, gw: GatewayDep) -> StreamingResponse:
    """The conversation archive, lossless and streamed: every conversation with every revision and message,
    idempotency keys and the raw imports byte for byte, as a backup file whose header says `"scope":
    "archive"` (docs/backup-format.md). `POST .../restore` reads it back into a vault's archive."""
    body = await archive_export_chunks(gw, caller.identity(), vault)
    return StreamingResponse(
        body,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{file_name(vault + "-archive", "jsonl")}"'},
    )


@router.post(
    "/vaults/{vault}/restore",
    openapi_extra={"requestBody": {"required": True, "content": _BACKUP_FILE["content"]}},
)
async def restore(request: Request, vault: Vault, caller: Caller, gw: GatewayDep, replace: Flag = 0) -> dict[str, Any]:
    """Restore a backup file sent as the request body: all of it in one transaction, or nothing."""

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in request.stream():
                yield chunk
        except ClientDisconnect:
            return  # the vault sees a cut-off file and refuses it

    return await restore_file(gw, caller.identity(), vault, body(), replace=bool(replace))


@router.get(
    "/vaults/{vault}/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Active memories grouped by type",
            "content": {
                "text/markdown": {"schema": {"type": "string"}},
                "application/json": {"schema": {}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
        }
    },
)
async def export(
    vault: Vault, caller: Caller, gw: GatewayDep, format: Literal["md", "json", "jsonl"] = "md"
) -> StreamingResponse:
    """The vault's active memories grouped by type, as markdown or JSON: readable, not a backup; or
    `jsonl`, the interchange format (one memory per line) that `POST .../imports?format=memvault-jsonl`
    reads back."""
    body = await export_chunks(gw, caller.identity(), vault, format)
    return StreamingResponse(
        body,
        media_type=_MEDIA[format],
        headers={"Content-Disposition": f'attachment; filename="{file_name(vault, format)}"'},
    )
