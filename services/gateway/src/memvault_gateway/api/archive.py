"""/api/v1 conversation archive: uploading an export (in parts when it is over the direct limit),
its progress and its retry, failed message index jobs and their retry, and reading and searching
archived conversations. Acts as the caller (retries and failed index jobs: the vault's owners)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_core.identity import Identity
from memvault_core.validation import Between
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.context import Gateway

router = APIRouter(prefix="/api/v1")

MAX_PART_BYTES = 3 * 1024 * 1024
"""Bytes in one uploaded part (the vault's max_import_part_bytes)."""


class ImportIn(BaseModel):
    format: str = Field("chatgpt", max_length=20, description="chatgpt or claude")
    filename: str = Field("", max_length=200)
    size: Annotated[int, Between(1, limits.MAX_INT64)]
    sha256: str = Field(min_length=64, max_length=64)


def import_json(status: pb.ImportStatus) -> dict[str, Any]:
    return {
        "id": status.id,
        "state": status.state,
        "filename": status.filename,
        "size": status.size,
        "sha256": status.sha256,
        "parts": status.parts,
        "total": status.total,
        "done": status.done,
        "remaining": status.remaining,
        "imported": status.imported,
        "updated": status.updated,
        "duplicates": status.duplicates,
        "failed": status.failed,
        "failures": [{"conversation_id": f.conversation_id, "error": f.error} for f in status.failures],
        "duplicate_of": status.duplicate_of or None,
        "error": status.error or None,
        "retrying": status.retrying,
        "part_bytes": MAX_PART_BYTES,
    }


@router.post("/vaults/{vault}/archive/imports", status_code=201)
async def start_import(vault: Vault, body: ImportIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Announce an upload (size and sha256); send its bytes with PUT .../parts/{n}, then POST .../finish."""
    request = pb.StartImportRequest(
        vault=vault, format=body.format, filename=body.filename, size=body.size, sha256=body.sha256
    )
    response = await gw.vault.archive_call("StartImport", request, caller.identity())
    return import_json(getattr(response, "import"))


@router.put("/vaults/{vault}/archive/imports/{import_id}/parts/{part}")
async def upload_part(
    vault: Vault,
    import_id: str,
    part: Annotated[int, Path(), Between(0, limits.MAX_INT32)],
    request: Request,
    caller: Caller,
    gw: GatewayDep,
) -> dict[str, Any]:
    """One part of the file as the raw request body (application/octet-stream), parts in order from 0."""
    data = await request.body()
    if len(data) > MAX_PART_BYTES:
        raise LimitExceeded(f"a part holds at most {MAX_PART_BYTES} bytes; send smaller parts", field="body")
    if not data:
        raise InvalidArgument("the part is empty", field="body")
    message = pb.UploadImportPartRequest(vault=vault, import_id=import_id, part=part, data=data)
    response = await gw.vault.archive_call("UploadImportPart", message, caller.identity())
    return {"import_id": import_id, "part": part, "received": response.received}


@router.post("/vaults/{vault}/archive/imports/{import_id}/finish")
async def finish_import(vault: Vault, import_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Check the whole upload's size and sha256 and queue it; an export already imported is a duplicate."""
    request = pb.FinishImportRequest(vault=vault, import_id=import_id)
    response = await gw.vault.archive_call("FinishImport", request, caller.identity())
    return import_json(getattr(response, "import"))


@router.get("/vaults/{vault}/archive/imports")
async def list_imports(
    vault: Vault, caller: Caller, gw: GatewayDep, limit: Annotated[int, Query(ge=0, le=100)] = 0
) -> dict[str, Any]:
    """The vault's imports with their progress, newest first (failures: GET one import)."""
    request = pb.ListImportsRequest(vault=vault, limit=limit)
    response = await gw.vault.archive_call("ListImports", request, caller.identity())
    return {
        "imports": [
            import_json(i)
            | {"format": i.format, "created_at": i.created_at.ToJsonString() if i.HasField("created_at") else None}
            for i in response.imports
        ]
    }


@router.get("/vaults/{vault}/archive/stats")
async def archive_stats(vault: Vault, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Totals: conversations (and by source), revisions, messages (and their index health), tags, imports
    (and by state), raw bytes kept; the same counts as the `archive_read` tool's stats."""
    stats = await gw.vault.archive_call("GetArchiveStats", pb.GetArchiveStatsRequest(vault=vault), caller.identity())
    return {
        "conversations": stats.conversations,
        "by_source": dict(stats.by_source),
        "revisions": stats.revisions,
        "messages": stats.messages,
        "index": {
            "indexed": stats.indexed,
            "pending": stats.pending,
            "failed": stats.failed,
            "model": stats.index_model or None,
            "last_errors": list(stats.last_errors),
        },
        "tags": stats.tags,
        "imports": stats.imports,
        "imports_running": stats.imports_running,
        "imports_by_state": dict(stats.imports_by_state),
        "raw_bytes": stats.raw_bytes,
    }


@router.get("/vaults/{vault}/archive/imports/{import_id}")
async def get_import(vault: Vault, import_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Progress: done, remaining, duplicates, failures with the conversation id."""
    request = pb.GetImportRequest(vault=vault, import_id=import_id)
    response = await gw.vault.archive_call("GetImport", request, caller.identity())
    return import_json(getattr(response, "import"))


async def retry_import(gw: Gateway, identity: Identity, vault: str, import_id: str) -> pb.ImportStatus:
    """RetryImport as `identity` (shared with the dashboard's import page)."""
    request = pb.RetryImportRequest(vault=vault, import_id=import_id)
    return getattr(await gw.vault.archive_call("RetryImport", request, identity), "import")  # type: ignore[no-any-return]


@router.post("/vaults/{vault}/archive/imports/{import_id}/retry")
async def retry_import_route(vault: Vault, import_id: str, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Retry a failed import (owners): it resumes from its last checkpoint (conversations committed before
    it are not read again), then imports its failed conversations again. An import that did not fail,
    or a done one without failed conversations, is refused with 409."""
    return import_json(await retry_import(gw, caller.identity(), vault, import_id))


@router.get("/vaults/{vault}/archive/index/failures")
async def message_index_failures(
    vault: Vault, caller: Caller, gw: GatewayDep, limit: Annotated[int, Query(ge=1, le=200)] = 50
) -> dict[str, Any]:
    """Failed message index jobs (owners): archived messages the indexer gave up on, newest first, with
    the error; `failed_total` counts them all."""
    request = pb.ListMessageIndexFailuresRequest(vault=vault, limit=limit)
    reply = await gw.vault.archive_call("ListMessageIndexFailures", request, caller.identity())
    return {
        "failed_total": reply.total,
        "failures": [
            {
                "message_id": f.message_id,
                "conversation_id": f.conversation_id,
                "error": f.error,
                "attempts": f.attempts,
                "failed_at": f.failed_at.ToJsonString() if f.HasField("failed_at") else None,
            }
            for f in reply.failures
        ],
    }


class MessageRetryIn(BaseModel):
    message_ids: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=1000)
    """The failed messages to retry; empty retries every failed one of the vault. A message whose index
    job did not fail refuses the whole call (409)."""


@router.post("/vaults/{vault}/archive/index/retry")
async def retry_message_index(vault: Vault, body: MessageRetryIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Send failed message index jobs to the indexer again (owners); they are pending until it reports."""
    request = pb.RetryMessageIndexRequest(vault=vault, message_ids=body.message_ids)
    reply = await gw.vault.archive_call("RetryMessageIndex", request, caller.identity())
    return {"retried": reply.retried}


@router.get("/vaults/{vault}/conversations")
async def list_conversations(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: Annotated[int, Query(ge=0, le=100)] = 0,
    cursor: Annotated[str, Query(max_length=2000)] = "",
    tag: Annotated[list[str] | None, Query(max_length=20, description="Only with every one of these tags.")] = None,
    tags_any: Annotated[list[str] | None, Query(max_length=20, description="Only with any of these tags.")] = None,
) -> dict[str, Any]:
    """Conversations' metadata and tags, newest first; filter by every `tag` and/or any of `tags_any`
    (each repeated, up to 20); continue with `next_cursor` and the same filters."""
    request = pb.ListConversationsRequest(
        vault=vault, tags_all=tag or [], tags_any=tags_any or [], limit=limit, cursor=cursor
    )
    response = await gw.vault.archive_call("ListConversations", request, caller.identity())
    return {
        "conversations": [
            {
                "id": c.id,
                "title": c.title if c.has_title else None,
                "tags": list(c.tags),
                "head_revision": c.head_revision,
                "message_count": c.message_count,
                "source": c.source,
            }
            for c in response.conversations
        ],
        "next_cursor": response.next_cursor or None,
    }


@router.get("/vaults/{vault}/conversations/{conversation_id}/messages")
async def get_messages(
    vault: Vault,
    conversation_id: Annotated[str, Path(max_length=64)],
    caller: Caller,
    gw: GatewayDep,
    revision: Annotated[
        int, Query(description="0: the head; the answer names the revision read."), Between(0, limits.MAX_INT32)
    ] = 0,
    node_id: Annotated[list[str] | None, Query(max_length=100, description="Source node ids (repeat).")] = None,
    key: Annotated[list[str] | None, Query(max_length=100, description="Stable message keys (repeat).")] = None,
    message_id: Annotated[
        list[str] | None, Query(max_length=100, description="The archive's message ids (repeat).")
    ] = None,
) -> dict[str, Any]:
    """Messages of one conversation by source node id, stable key or message id (1-100 together) at a
    pinned revision, in position order, each whole (the read an MCP answer names for a message over its
    own) while they fit one answer of about 3.5 MiB: the ids of those left out are listed in `not_read`
    to ask for again by `message_id`; the ids and keys that revision does not hold are in `missing`."""
    request = pb.GetMessagesRequest(
        vault=vault,
        conversation_id=conversation_id,
        revision=revision,
        node_ids=node_id or [],
        keys=key or [],
        message_ids=message_id or [],
    )
    body = await gw.vault.archive_call("GetMessages", request, caller.identity())
    return {
        "conversation_id": body.conversation.id,
        "title": body.conversation.title if body.conversation.has_title else None,
        "revision": body.revision,
        "head_revision": body.conversation.head_revision,
        "messages": [
            {
                "position": m.position,
                "message_id": m.id,
                "node_id": m.node_id,
                "parent_node_id": m.parent_node_id or None,
                "key": m.key or None,
                "role": m.role,
                "content_type": m.content_type,
                "text": m.text,
                "content": json.loads(m.content_json) if m.content_json else None,
                "created_at": m.created_at.ToJsonString() if m.HasField("created_at") else None,
                "active": m.active,
            }
            for m in body.messages
        ],
        "missing": {
            "node_ids": list(body.missing_node_ids),
            "keys": list(body.missing_keys),
            "message_ids": list(body.missing_message_ids),
        },
        "not_read": list(body.not_read_message_ids),
    }


@router.get("/vaults/{vault}/archive/search")
async def search(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    q: Annotated[str, Query(max_length=1000, description="The query; omit it with a cursor.")] = "",
    limit: Annotated[int, Query(ge=0, le=50)] = 0,
    cursor: Annotated[str, Query(max_length=4000, description="next_cursor of the previous page.")] = "",
) -> dict[str, Any]:
    request = pb.SearchMessagesRequest(vault=vault, query=q, limit=limit, cursor=cursor)
    response = await gw.vault.archive_call("SearchMessages", request, caller.identity())
    return {
        "mode": response.mode,
        "next_cursor": response.next_cursor or None,
        "hits": [
            {
                "conversation_id": h.conversation_id,
                "revision": h.revision,
                "message_id": h.message_id,
                "role": h.role,
                "snippet": h.snippet,
                "score": h.score,
            }
            for h in response.hits
        ],
    }
