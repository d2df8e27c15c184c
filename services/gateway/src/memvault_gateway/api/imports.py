"""/api/v1 imports: `/bulk` (items, or markdown or plain text split into memories, as one undoable
batch), `/vaults/{vault}/imports` (a mem0 / OpenMemory export, a zipped basic-memory folder or a
memvault JSON Lines export, read by `memvault_core.interchange`, as one undoable batch), a vault's
batches and their undo. Acts as the caller, like `memories`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from starlette.requests import ClientDisconnect

from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import interchange, limits, wire
from memvault_core import vault_client as rpc
from memvault_core.errors import InvalidArgument
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.api.shapes import BulkIn, ListLimit, batch_json, vault_call
from memvault_gateway.context import Gateway

router = APIRouter(prefix="/api/v1")


@router.post("/bulk")
async def bulk(body: BulkIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Import `items`, or markdown / plain `text` split into memories, as one undoable batch."""
    if bool(body.items) == bool(body.text.strip()):
        raise InvalidArgument(
            "send items (a list of memories) or text (markdown or plain text), not both", field="text"
        )
    request = vpb.BulkRememberRequest(
        vault=body.vault,
        items=[item.draft() for item in body.items],
        text=body.text,
        text_type=wire.MEMORY_TYPES.value(body.type),
        source=body.source,
    )
    return await _bulk_answer(gw, request, caller)


async def _bulk_answer(gw: Gateway, request: vpb.BulkRememberRequest, caller: Caller) -> dict[str, Any]:
    response = await vault_call(gw, rpc.VaultClient.bulk_remember, request, caller)
    results = [wire.write_result_for_api(r) for r in response.results]
    summary: dict[str, int] = {}
    for result in results:
        summary[result["outcome"]] = summary.get(result["outcome"], 0) + 1
    return {
        "vault": response.vault,
        "batch_id": response.batch_id,
        "summary": summary,
        "duplicate_check": wire.DUPLICATE_CHECKS.name_or(response.duplicate_check, "semantic"),
        "notices": list(response.notices),
        "items": results,
    }


FileFormat = Literal["mem0", "basic-memory", "memvault-jsonl"]
_FILE_NAME = Annotated[
    str, Query(max_length=200, description="The file's name, shown in errors and as the batch's source")
]


def _draft(item: interchange.ImportItem) -> pb.MemoryDraft:
    return pb.MemoryDraft(
        content=item.content,
        type=wire.MEMORY_TYPES.value(item.type),
        key=item.key,
        scope=item.scope,
        tags=list(item.tags),
        source=item.source[: limits.MAX_SOURCE_CHARS],
        trust=pb.TRUST_STATED,
        valid_from=wire.to_timestamp(item.valid_from),
        valid_to=wire.to_timestamp(item.valid_to),
    )


async def import_file(
    gw: Gateway, caller: Caller, vault: str, file_format: FileFormat, name: str, data: bytes
) -> dict[str, Any]:
    """Read `data` as a file of `file_format` and import its memories as one undoable batch.

    A file that does not read as its format is refused whole (the error names the file, line and
    field) and nothing is written; each memory that reads is judged by the vault like a bulk item.
    """
    name = name.strip() or "upload"
    try:
        items = interchange.read(file_format, data, name)
    except interchange.InterchangeError as error:
        raise InvalidArgument(str(error), field="file") from None
    if not items:
        raise InvalidArgument(f"{name}: no memories in the file", field="file")
    if len(items) > limits.MAX_BULK_ITEMS:
        raise InvalidArgument(
            f"{name}: {len(items)} memories, more than the {limits.MAX_BULK_ITEMS} one import takes; split the file",
            field="file",
        )
    request = vpb.BulkRememberRequest(
        vault=vault, items=[_draft(item) for item in items], source=f"{file_format}: {name}"[: limits.MAX_SOURCE_CHARS]
    )
    answer = await _bulk_answer(gw, request, caller)
    answer["format"] = file_format
    for row, item in zip(answer["items"], items, strict=False):
        row["origin"] = item.origin
    return answer


@router.post(
    "/vaults/{vault}/imports",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {}},
                "application/x-ndjson": {"schema": {}},
                "application/zip": {"schema": {"type": "string", "format": "binary"}},
            },
        }
    },
)
async def import_upload(
    request: Request,
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    format: FileFormat,
    name: _FILE_NAME = "",
) -> dict[str, Any]:
    """Import a file sent as the request body, as one undoable batch: a mem0 / OpenMemory export
    (`format=mem0`), a zip of a basic-memory folder (`basic-memory`) or a memvault JSON Lines
    export (`memvault-jsonl`). Each item's outcome is in `items`, with `origin` (file:line)."""
    try:
        data = await request.body()
    except ClientDisconnect:
        raise InvalidArgument("the upload was cut off", field="file") from None
    return await import_file(gw, caller, vault, format, name, data)


@router.get("/vaults/{vault}/batches")
async def batches(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    cursor: Annotated[str, Query(max_length=2000)] = "",
) -> dict[str, Any]:
    request = vpb.ListImportBatchesRequest(vault=vault, limit=limit, cursor=cursor)
    response = await vault_call(gw, rpc.VaultClient.list_import_batches, request, caller)
    return {
        "vault": response.vault,
        "batches": [batch_json(b) for b in response.batches],
        "next_cursor": response.next_cursor or None,
    }


@router.post("/vaults/{vault}/batches/{batch_id}/undo")
async def undo(vault: Vault, batch_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Remove an import's memories and put back every memory it changed."""
    request = vpb.UndoImportBatchRequest(vault=vault, batch_id=batch_id)
    response = await vault_call(gw, rpc.VaultClient.undo_import_batch, request, caller)
    return {
        "vault": response.vault,
        "batch": batch_json(response.batch),
        "removed": response.removed,
        "restored": response.restored,
        "kept_changes": list(response.kept_changes),
    }
