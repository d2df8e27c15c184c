"""archive_write: every write to the conversation archive in one tool, chosen by `op`. Each answer
is the durable receipt(s) under the 48 KiB receipt ceiling (`memvault_core.archive_answers`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core import limits
from memvault_core.archive_answers import fit_receipts, pack_json, receipt_json
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools import fitting
from memvault_mcp.tools.arguments import VaultArg
from memvault_mcp.tools.registry import ask_vault, tool

Role = Literal["user", "assistant", "system", "tool"]

WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
"""Replace, delete and empty destroy; append without an idempotency key adds again when repeated."""


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=100_000)
    role: Role = "user"
    key: str = Field("", max_length=128, description="upsert")
    node_id: str = Field("", max_length=200, description="edit")


class WriteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    conversation_id: str = Field(max_length=64)
    op: Literal["append", "replace"]
    base_revision: int = Field(ge=1, le=limits.MAX_INT32)
    messages: list[MessageIn] = Field(min_length=1, max_length=500)


class PackIn(BaseModel):
    """archive_read mode=pack."""

    model_config = ConfigDict(extra="forbid")
    conversations: list[str] = Field(
        min_length=1, max_length=20, description="Ids, 'id@revision' to pin, '~N' suffix for the last N only."
    )
    queries: list[str] = Field([], max_length=8, description="Optional searches whose hits fill the rest.")
    max_tokens: int = Field(0, ge=0, le=32_000)
    max_bytes: int = Field(0, ge=0, le=49_152)


def _drafts(messages: list[MessageIn]) -> list[pb.MessageDraft]:
    return [pb.MessageDraft(role=m.role, text=m.text) for m in messages]


def _required(spec: str) -> pb.PackConversation:
    """'id', 'id@3' (revision 3), 'id~20' (the last 20 messages) or 'id@3~20'."""
    rest, _, tail = spec.partition("~")
    conversation_id, _, revision = rest.partition("@")
    try:
        return pb.PackConversation(
            conversation_id=conversation_id.strip(), revision=int(revision or 0), tail=int(tail or 0)
        )
    except ValueError:
        raise ToolError(f"conversations entry {spec[:80]!r} must be 'id', 'id@revision' or 'id~tail'") from None


async def build_pack(ctx: Context, vault: str, pack: PackIn) -> dict[str, Any]:
    request = pb.BuildContextPackRequest(
        vault=vault,
        conversations=[_required(c) for c in pack.conversations],
        searches=[pb.PackSearch(query=q) for q in pack.queries],
        max_tokens=pack.max_tokens,
        max_bytes=pack.max_bytes,
    )
    return pack_json(await ask_vault(ctx, VaultClient.build_context_pack, request))


@tool(
    "Write conversations",
    "Write the archive; op picks what. create: title, tags, messages. append|replace: conversation_id, "
    "base_revision (the head you read; stale writes nothing), messages. upsert: messages with key (known key: "
    "new text in place; new: appended). edit: messages with node_id. commit: writes, all or nothing. restore: "
    "revision. tags: tags, tags_version. copy: conversation_ids to target_vault. delete: confirm=conversation_id. "
    "empty: confirm=vault name; repeat until done. Same idempotency_key and content: the first result. Returns "
    "receipts; verify=true reads back, the rest in omitted.",
    WRITES,
)
async def archive_write(
    ctx: Context,
    op: Literal[
        "create", "append", "replace", "upsert", "edit", "commit", "restore", "tags", "copy", "delete", "empty"
    ],
    conversation_id: Annotated[str, Field(max_length=64)] = "",
    base_revision: Annotated[int, Field(ge=0, le=limits.MAX_INT32)] = 0,
    messages: Annotated[list[MessageIn], Field(max_length=500)] = [],  # noqa: B006
    writes: Annotated[list[WriteIn], Field(max_length=20)] = [],  # noqa: B006
    title: Annotated[str, Field(max_length=500)] = "",
    tags: Annotated[list[str], Field(max_length=20)] = [],  # noqa: B006
    tags_version: Annotated[int, Field(ge=0, le=limits.MAX_INT32)] = 0,
    revision: Annotated[int, Field(ge=0, le=limits.MAX_INT32)] = 0,
    conversation_ids: Annotated[list[str], Field(max_length=20)] = [],  # noqa: B006
    target_vault: Annotated[str, Field(max_length=63)] = "",
    confirm: Annotated[str, Field(max_length=64)] = "",
    idempotency_key: Annotated[str, Field(max_length=200)] = "",
    verify: bool = False,
    vault: VaultArg = "",
) -> dict[str, Any]:
    key, check = idempotency_key, verify
    receipts: list[pb.WriteReceipt]
    if op == "create":
        made = await ask_vault(
            ctx,
            VaultClient.create_conversation,
            pb.CreateConversationRequest(
                vault=vault, title=title, tags=tags, messages=_drafts(messages), idempotency_key=key, verify=check
            ),
        )
        receipts = [made.receipt]
    elif op in ("append", "replace"):
        fields = {
            "vault": vault,
            "conversation_id": conversation_id,
            "base_revision": base_revision,
            "messages": _drafts(messages),
            "idempotency_key": key,
            "verify": check,
        }
        if op == "append":
            receipts = [
                (await ask_vault(ctx, VaultClient.append_messages, pb.AppendMessagesRequest(**fields))).receipt  # type: ignore[arg-type]
            ]
        else:
            receipts = [
                (await ask_vault(ctx, VaultClient.replace_transcript, pb.ReplaceTranscriptRequest(**fields))).receipt  # type: ignore[arg-type]
            ]
    elif op == "upsert":
        keyed = [pb.KeyedMessage(key=m.key, role=m.role, text=m.text) for m in messages]
        upserted = await ask_vault(
            ctx,
            VaultClient.upsert_messages,
            pb.UpsertMessagesRequest(
                vault=vault,
                conversation_id=conversation_id,
                base_revision=base_revision,
                messages=keyed,
                idempotency_key=key,
                verify=check,
            ),
        )
        receipts = [upserted.receipt]
    elif op == "edit":
        edited = await ask_vault(
            ctx,
            VaultClient.edit_messages,
            pb.EditMessagesRequest(
                vault=vault,
                conversation_id=conversation_id,
                base_revision=base_revision,
                edits=[pb.MessageEdit(node_id=m.node_id, text=m.text) for m in messages],
                idempotency_key=key,
                verify=check,
            ),
        )
        receipts = [edited.receipt]
    elif op == "commit":
        batch = [
            pb.BatchWrite(
                conversation_id=w.conversation_id,
                kind=w.op,
                base_revision=w.base_revision,
                messages=_drafts(w.messages),
            )
            for w in writes
        ]
        committed = await ask_vault(
            ctx,
            VaultClient.commit_batch,
            pb.CommitBatchRequest(vault=vault, writes=batch, idempotency_key=key, verify=check),
        )
        receipts = list(committed.receipts)
    elif op == "restore":
        restored = await ask_vault(
            ctx,
            VaultClient.restore_revision,
            pb.RestoreRevisionRequest(
                vault=vault,
                conversation_id=conversation_id,
                revision=revision,
                base_revision=base_revision,
                idempotency_key=key,
                verify=check,
            ),
        )
        receipts = [restored.receipt]
    elif op == "copy":
        copied = await ask_vault(
            ctx,
            VaultClient.copy_conversations,
            pb.CopyConversationsRequest(
                vault=vault,
                target_vault=target_vault,
                conversation_ids=conversation_ids,
                idempotency_key=key,
                verify=check,
            ),
        )
        receipts = list(copied.receipts)
    elif op == "tags":
        tagged = await ask_vault(
            ctx,
            VaultClient.set_conversation_tags,
            pb.SetTagsRequest(
                vault=vault, conversation_id=conversation_id, tags=tags, expected_tags_version=tags_version
            ),
        )
        return {
            "op": op,
            "durable": True,
            "conversation_id": conversation_id,
            "tags": list(tagged.tags),
            "tags_version": tagged.tags_version,
        }
    elif op == "delete":
        deleted = await ask_vault(
            ctx,
            VaultClient.delete_conversation,
            pb.DeleteConversationRequest(vault=vault, conversation_id=conversation_id, confirm=confirm),
        )
        return {
            "op": op,
            "durable": True,
            "conversation_id": conversation_id,
            "revisions_deleted": deleted.revisions_deleted,
            "messages_deleted": deleted.messages_deleted,
        }
    else:  # empty
        step = await ask_vault(ctx, VaultClient.empty_archive, pb.EmptyArchiveRequest(vault=vault, confirm=confirm))
        return {
            "op": op,
            "durable": True,
            "deleted_conversations": step.deleted_conversations,
            "deleted_imports": step.deleted_imports,
            "remaining_conversations": step.remaining_conversations,
            "remaining_imports": step.remaining_imports,
            "done": step.done,
        }
    return fit_receipts({"op": op, "receipts": [receipt_json(r) for r in receipts]}, size=fitting.size)
