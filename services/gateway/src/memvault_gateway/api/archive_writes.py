"""/api/v1 writes to the conversation archive (the same calls as the MCP tool `archive_write`),
context packs, and the capabilities answer. Acts as the caller: writes need the `write` scope,
which the vault checks. Receipts are shaped and kept under the receipt ceiling by
`memvault_core.archive_answers`, as for MCP."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits
from memvault_core import vault_client as rpc
from memvault_core.archive_answers import fit_receipts, pack_json, receipt_json
from memvault_gateway.api.access import Caller, GatewayDep, Vault

router = APIRouter(prefix="/api/v1", tags=["conversation archive"])

PROTOCOL_VERSIONS = ("2025-11-25", "2026-07-28")
"""The MCP protocol versions the mcp service speaks (both eras of the official SDK v2)."""

Role = Literal["user", "assistant", "system", "tool"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(Strict):
    role: Role
    text: str = Field(min_length=1, max_length=100_000)
    content_type: str = Field("", max_length=64)


class KeyedIn(Strict):
    key: str = Field(min_length=1, max_length=128)
    role: Role
    text: str = Field(min_length=1, max_length=100_000)


class EditIn(Strict):
    node_id: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=100_000)


class WriteOptions(Strict):
    idempotency_key: str = Field("", max_length=200)
    verify: bool = False


class CreateIn(WriteOptions):
    title: str = Field("", max_length=500)
    tags: list[str] = Field([], max_length=20)
    messages: list[MessageIn] = Field(min_length=1, max_length=500)


class ReviseIn(WriteOptions):
    base_revision: int = Field(ge=1, le=limits.MAX_INT32)
    messages: list[MessageIn] = Field(min_length=1, max_length=500)


class UpsertIn(WriteOptions):
    base_revision: int = Field(ge=1, le=limits.MAX_INT32)
    messages: list[KeyedIn] = Field(min_length=1, max_length=100)


class EditsIn(WriteOptions):
    base_revision: int = Field(ge=1, le=limits.MAX_INT32)
    edits: list[EditIn] = Field(min_length=1, max_length=100)


class RestoreIn(WriteOptions):
    revision: int = Field(ge=1, le=limits.MAX_INT32)
    base_revision: int = Field(ge=1, le=limits.MAX_INT32)


class TagsIn(Strict):
    tags: list[str] = Field(max_length=20)
    tags_version: int = Field(ge=1, le=limits.MAX_INT32)


class BatchWriteIn(Strict):
    conversation_id: str = Field(max_length=64)
    kind: Literal["append", "replace"]
    base_revision: int = Field(ge=1, le=limits.MAX_INT32)
    messages: list[MessageIn] = Field(min_length=1, max_length=500)


class CommitIn(WriteOptions):
    writes: list[BatchWriteIn] = Field(min_length=1, max_length=20)


class CopyIn(WriteOptions):
    target_vault: str = Field(min_length=1, max_length=63)
    conversation_ids: list[str] = Field(min_length=1, max_length=20)
    idempotency_key: str = Field(min_length=1, max_length=200)


class EmptyIn(Strict):
    confirm: str = Field(max_length=63, description="The vault's name, exactly.")


class PackConversationIn(Strict):
    conversation_id: str = Field(max_length=64)
    revision: int = Field(0, ge=0, le=limits.MAX_INT32, description="0: the head, pinned now.")
    tail: int = Field(0, ge=0, le=200, description="0: the whole active timeline; n: its last n messages.")


class PackSearchIn(Strict):
    query: str = Field(min_length=1, max_length=1000)
    limit: int = Field(0, ge=0, le=20)


class PackIn(Strict):
    conversations: list[PackConversationIn] = Field(min_length=1, max_length=20)
    searches: list[PackSearchIn] = Field([], max_length=8)
    max_tokens: int = Field(0, ge=0, le=32_000)
    max_bytes: int = Field(0, ge=0, le=49_152)


def _drafts(messages: list[MessageIn]) -> list[pb.MessageDraft]:
    return [pb.MessageDraft(role=m.role, text=m.text, content_type=m.content_type) for m in messages]


def _receipts(op: str, receipts: list[pb.WriteReceipt], **extra: Any) -> dict[str, Any]:
    return fit_receipts({"op": op, **extra, "receipts": [receipt_json(r) for r in receipts]})


@router.get("/capabilities")
async def capabilities(caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Protocol and capabilities versions, every limit the server enforces (the constants it checks), and
    feature flags. The MCP tool get_operating_guide answers the same under `limits` and `capabilities`."""
    caps = await gw.vault.call(rpc.VaultClient.get_capabilities, vpb.GetCapabilitiesRequest(), caller.identity())
    return {
        "capabilities_version": caps.capabilities_version,
        "protocol_versions": list(PROTOCOL_VERSIONS),
        "limits": {field.name: value for field, value in caps.limits.ListFields()}
        | dict(sorted(caps.more_limits.items())),
        "features": dict(sorted(caps.features.items())),
    }


@router.post("/vaults/{vault}/conversations", status_code=201)
async def create_conversation(vault: Vault, body: CreateIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """A new conversation at revision 1; answers its receipt."""
    request = pb.CreateConversationRequest(
        vault=vault,
        title=body.title,
        tags=body.tags,
        messages=_drafts(body.messages),
        idempotency_key=body.idempotency_key,
        verify=body.verify,
    )
    response = await gw.vault.archive_call("CreateConversation", request, caller.identity())
    return _receipts("create", [response.receipt])


async def _revise(
    kind: str, vault: str, conversation_id: str, body: ReviseIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "vault": vault,
        "conversation_id": conversation_id,
        "base_revision": body.base_revision,
        "messages": _drafts(body.messages),
        "idempotency_key": body.idempotency_key,
        "verify": body.verify,
    }
    if kind == "append":
        response = await gw.vault.archive_call("AppendMessages", pb.AppendMessagesRequest(**fields), caller.identity())
    else:
        response = await gw.vault.archive_call(
            "ReplaceTranscript", pb.ReplaceTranscriptRequest(**fields), caller.identity()
        )
    return _receipts(kind, [response.receipt])


@router.post("/vaults/{vault}/conversations/{conversation_id}/append")
async def append_messages(
    vault: Vault, conversation_id: str, body: ReviseIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """Messages added to the end of the active timeline, on top of `base_revision` (the head)."""
    return await _revise("append", vault, conversation_id, body, caller, gw)


@router.post("/vaults/{vault}/conversations/{conversation_id}/replace")
async def replace_transcript(
    vault: Vault, conversation_id: str, body: ReviseIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """The whole transcript replaced, on top of `base_revision` (the head)."""
    return await _revise("replace", vault, conversation_id, body, caller, gw)


@router.post("/vaults/{vault}/conversations/{conversation_id}/messages/upsert")
async def upsert_messages(
    vault: Vault, conversation_id: str, body: UpsertIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """Messages by stable key: a known key gets the new text in place, a new key is appended."""
    request = pb.UpsertMessagesRequest(
        vault=vault,
        conversation_id=conversation_id,
        base_revision=body.base_revision,
        messages=[pb.KeyedMessage(key=m.key, role=m.role, text=m.text) for m in body.messages],
        idempotency_key=body.idempotency_key,
        verify=body.verify,
    )
    response = await gw.vault.archive_call("UpsertMessages", request, caller.identity())
    return _receipts("upsert", [response.receipt], no_change=response.no_change)


@router.post("/vaults/{vault}/conversations/{conversation_id}/messages/edit")
async def edit_messages(
    vault: Vault, conversation_id: str, body: EditsIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """New text for known messages (by node id), in place, as one new revision."""
    request = pb.EditMessagesRequest(
        vault=vault,
        conversation_id=conversation_id,
        base_revision=body.base_revision,
        edits=[pb.MessageEdit(node_id=e.node_id, text=e.text) for e in body.edits],
        idempotency_key=body.idempotency_key,
        verify=body.verify,
    )
    response = await gw.vault.archive_call("EditMessages", request, caller.identity())
    return _receipts("edit", [response.receipt], no_change=response.no_change)


@router.post("/vaults/{vault}/conversations/{conversation_id}/restore")
async def restore_revision(
    vault: Vault, conversation_id: str, body: RestoreIn, caller: Caller, gw: GatewayDep
) -> dict[str, Any]:
    """Move the head back to an earlier revision (no revision is written)."""
    request = pb.RestoreRevisionRequest(
        vault=vault,
        conversation_id=conversation_id,
        revision=body.revision,
        base_revision=body.base_revision,
        idempotency_key=body.idempotency_key,
        verify=body.verify,
    )
    response = await gw.vault.archive_call("RestoreRevision", request, caller.identity())
    return _receipts("restore", [response.receipt])


@router.put("/vaults/{vault}/conversations/{conversation_id}/tags")
async def set_tags(vault: Vault, conversation_id: str, body: TagsIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replace the tags; `tags_version` must be the current one."""
    request = pb.SetTagsRequest(
        vault=vault, conversation_id=conversation_id, tags=body.tags, expected_tags_version=body.tags_version
    )
    response = await gw.vault.archive_call("SetTags", request, caller.identity())
    return {
        "durable": True,
        "conversation_id": conversation_id,
        "tags": list(response.tags),
        "tags_version": response.tags_version,
    }


@router.delete("/vaults/{vault}/conversations/{conversation_id}")
async def delete_conversation(
    vault: Vault,
    conversation_id: str,
    caller: Caller,
    gw: GatewayDep,
    confirm: Annotated[str, Query(max_length=64, description="The conversation id, again.")] = "",
) -> dict[str, Any]:
    request = pb.DeleteConversationRequest(vault=vault, conversation_id=conversation_id, confirm=confirm)
    response = await gw.vault.archive_call("DeleteConversation", request, caller.identity())
    return {
        "durable": True,
        "conversation_id": conversation_id,
        "revisions_deleted": response.revisions_deleted,
        "messages_deleted": response.messages_deleted,
    }


@router.post("/vaults/{vault}/archive/commit")
async def commit_batch(vault: Vault, body: CommitIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Appends and replaces of 1-20 conversations in one transaction; a stale base revision refuses them all."""
    request = pb.CommitBatchRequest(
        vault=vault,
        writes=[
            pb.BatchWrite(
                conversation_id=w.conversation_id,
                kind=w.kind,
                base_revision=w.base_revision,
                messages=_drafts(w.messages),
            )
            for w in body.writes
        ],
        idempotency_key=body.idempotency_key,
        verify=body.verify,
    )
    response = await gw.vault.archive_call("CommitBatch", request, caller.identity())
    return _receipts("commit", list(response.receipts))


@router.post("/vaults/{vault}/archive/copy")
async def copy_conversations(vault: Vault, body: CopyIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Copy 1-20 conversations whole into `target_vault` (write access there), each with `derived_from`."""
    request = pb.CopyConversationsRequest(
        vault=vault,
        target_vault=body.target_vault,
        conversation_ids=body.conversation_ids,
        idempotency_key=body.idempotency_key,
        verify=body.verify,
    )
    response = await gw.vault.archive_call("CopyConversations", request, caller.identity())
    return _receipts("copy", list(response.receipts))


@router.post("/vaults/{vault}/archive/empty")
async def empty_archive(vault: Vault, body: EmptyIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """One bounded step of deleting the vault's whole archive; repeat until `done`."""
    request = pb.EmptyArchiveRequest(vault=vault, confirm=body.confirm)
    step = await gw.vault.archive_call("EmptyArchive", request, caller.identity())
    return {
        "durable": True,
        "deleted_conversations": step.deleted_conversations,
        "deleted_imports": step.deleted_imports,
        "remaining_conversations": step.remaining_conversations,
        "remaining_imports": step.remaining_imports,
        "done": step.done,
    }


@router.post("/vaults/{vault}/archive/packs")
async def build_pack(vault: Vault, body: PackIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """A context pack (reading only): required conversations pinned at a revision plus optional searches,
    whole messages fitted to `max_tokens` and `max_bytes`; when the required part alone does not fit,
    `fits: false` with the minimum budgets."""
    request = pb.BuildContextPackRequest(
        vault=vault,
        conversations=[
            pb.PackConversation(conversation_id=c.conversation_id, revision=c.revision, tail=c.tail)
            for c in body.conversations
        ],
        searches=[pb.PackSearch(query=s.query, limit=s.limit) for s in body.searches],
        max_tokens=body.max_tokens,
        max_bytes=body.max_bytes,
    )
    return pack_json(await gw.vault.archive_call("BuildContextPack", request, caller.identity()))
