"""Claude.ai data exports, read without I/O: each conversation of `conversations.json` (a list of
`{uuid, name, created_at, updated_at, chat_messages: [...]}`) into the same messages a ChatGPT export
gives.

A message keeps its `content` blocks whole (`text`, `thinking`, `tool_use`, `tool_result`, and any
block type this parser does not know) and every other field of it (`text`, `sender`, `attachments`
with their `extracted_content`, `files`, times, unknown fields) in its metadata. The conversation's own
fields but the messages (`summary`, `account`, `project`, unknown ones) are kept on a first node
holding no message, as ChatGPT's root node is. Messages that name a `parent_message_uuid` keep their
tree, the path to the newest message marked active; otherwise they form one line, all active.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from memvault_vault.archive.chatgpt import ParsedConversation, conversation_ref
from memvault_vault.domain.archive import MessageInput

ROOT = "conversation"
"""The node id of the first node, which holds the conversation's own fields."""
ROLES = {"human": "user", "assistant": "assistant"}


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _strings(value: Any, depth: int = 0) -> list[str]:
    if depth > 6:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item, depth + 1)]
    if isinstance(value, dict):
        skip = {"type", "id", "uuid", "start_timestamp", "stop_timestamp", "tool_use_id", "is_error", "signature"}
        return [s for key, item in value.items() if key not in skip for s in _strings(item, depth + 1)]
    return []


def _block_text(block: Any) -> tuple[str, str]:
    """(block type, the text a reader and search see) of one content block."""
    if not isinstance(block, dict):
        return "unknown", " ".join(_strings(block))
    kind = block.get("type")
    kind = kind if isinstance(kind, str) and kind else "unknown"
    if kind == "text":
        text = block.get("text")
        return kind, text if isinstance(text, str) else ""
    if kind == "thinking":
        thinking = block.get("thinking")
        return kind, f"[thinking] {thinking}" if isinstance(thinking, str) and thinking else ""
    if kind == "tool_use":
        name = block.get("name") if isinstance(block.get("name"), str) else "tool"
        return kind, f"[tool_use {name}] {json.dumps(block.get('input'), ensure_ascii=False, default=str)}"
    return kind, "\n".join(s for s in _strings(block) if s.strip())


def message_text(message: dict[str, Any]) -> tuple[str, str]:
    """(content type, text) of one chat message: its blocks (or its `text`), then its attachments and files."""
    kinds: list[str] = []
    pieces: list[str] = []
    blocks = message.get("content")
    if isinstance(blocks, list) and blocks:
        for block in blocks:
            kind, text = _block_text(block)
            if kind not in kinds:
                kinds.append(kind)
            if text:
                pieces.append(text)
    elif isinstance(message.get("text"), str):
        kinds.append("text")
        pieces.append(message["text"])
    for attachment in message.get("attachments") or []:
        if isinstance(attachment, dict):
            name = attachment.get("file_name") or "attachment"
            extracted = attachment.get("extracted_content")
            pieces.append(f"[attachment: {name}]" + (f"\n{extracted}" if isinstance(extracted, str) else ""))
    for file in message.get("files") or []:
        if isinstance(file, dict):
            pieces.append(f"[file: {file.get('file_name') or file.get('file_uuid') or 'file'}]")
    return "+".join(kinds) or "text", "\n".join(p for p in pieces if p)


def parse_conversation(raw: Any, index: int) -> ParsedConversation:
    """One Claude conversation; raises ValueError when it cannot be read at all."""
    if not isinstance(raw, dict):
        raise ValueError("a conversation must be a JSON object")
    chat = raw.get("chat_messages")
    if not isinstance(chat, list):
        raise ValueError("the conversation has no chat_messages list (is this a Claude.ai export?)")
    rest = {k: v for k, v in raw.items() if k != "chat_messages"}
    messages = [
        MessageInput(
            node_id=ROOT,
            parent_node_id=None,
            role="none",
            content_type="conversation",
            text="",
            metadata=rest,
            created_at=_time(raw.get("created_at")),
        )
    ]
    ids: list[str] = []
    seen: set[str] = {ROOT}
    for position, message in enumerate(chat):
        if not isinstance(message, dict):
            raise ValueError(f"chat message #{position} is not a JSON object")
        node = message.get("uuid")
        node = node if isinstance(node, str) and node and node not in seen else f"#{position}"
        seen.add(node)
        ids.append(node)
    tree = any(isinstance(m.get("parent_message_uuid"), str) for m in chat)
    parents: dict[str, str] = {}
    for position, message in enumerate(chat):
        parent = message.get("parent_message_uuid")
        if tree:
            parents[ids[position]] = parent if isinstance(parent, str) and parent in seen else ROOT
        else:
            parents[ids[position]] = ids[position - 1] if position else ROOT
    active = {ROOT}
    current = ids[-1] if ids else None
    while current is not None and current not in active:
        active.add(current)
        current = parents.get(current)
    for position, message in enumerate(chat):
        sender = message.get("sender")
        kind, text = message_text(message)
        messages.append(
            MessageInput(
                node_id=ids[position],
                parent_node_id=parents[ids[position]],
                role=ROLES.get(sender, sender) if isinstance(sender, str) and sender else "unknown",
                content_type=kind,
                text=text,
                content=message.get("content"),
                metadata={k: v for k, v in message.items() if k != "content"},
                created_at=_time(message.get("created_at")),
                active=ids[position] in active,
            )
        )
    name = raw.get("name")
    return ParsedConversation(
        external_id=conversation_ref({"id": raw.get("uuid")}, index),
        title=name if isinstance(name, str) and name.strip() else None,
        created_at=_time(raw.get("created_at")),
        updated_at=_time(raw.get("updated_at")),
        messages=messages,
    )
