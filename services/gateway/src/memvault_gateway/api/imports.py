"""/api/v1 imports: `/bulk` (items, or markdown or plain text split into memories, as one undoable
batch), a vault's batches and their undo. Acts as the caller, like `memories`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core import vault_client as rpc
from memvault_core.errors import InvalidArgument
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.api.shapes import BulkIn, ListLimit, batch_json, vault_call

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
