"""ChatGPT data exports, read without I/O: `conversations.json` (or the export's zip) into
conversations holding every node of the `mapping` tree, the `current_node` path marked active.

Nothing a real export carries is dropped: each message keeps its content object and the rest of
its node whole (`content`, `metadata`), so content types this parser does not know still arrive
intact; their text is whatever strings they hold. A `parent` (or `children`) naming a node the
mapping does not hold is kept as the export wrote it. The conversation's own fields besides the
mapping and those read into columns (`moderation_results`, `current_node`, `gizmo_id`,
`default_model_slug`, `safe_urls`, unknown ones) are kept under `conversation` in the metadata of
the first node, which in real exports is the root holding no message (as the Claude parser keeps
them on its first node)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memvault_vault.domain.archive import MessageInput

ZIP_MAGIC = b"PK\x03\x04"
MAX_TEXT_DEPTH = 6


class ExportError(ValueError):
    """The upload is not a ChatGPT export this parser can read."""


@dataclass(frozen=True)
class ParsedConversation:
    external_id: str
    title: str | None
    created_at: datetime | None
    updated_at: datetime | None
    messages: list[MessageInput]


def conversation_ref(raw: Any, index: int) -> str:
    """The id a failure report names: the export's own, else the position in the file."""
    if isinstance(raw, dict):
        for key in ("conversation_id", "id", "uuid"):
            value = raw.get(key)
            if isinstance(value, str) and value:
                return value[:200]
    return f"#{index}"


def _time(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _strings(value: Any, depth: int = 0) -> list[str]:
    """Every string inside a content object of an unknown type, in order."""
    if depth > MAX_TEXT_DEPTH:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item, depth + 1)]
    if isinstance(value, dict):
        skip = {"content_type", "asset_pointer", "language", "response_format_name"}
        return [s for key, item in value.items() if key not in skip for s in _strings(item, depth + 1)]
    return []


def content_text(content: Any) -> tuple[str, str]:
    """(content type, the text a reader and search see) of one message's content object."""
    if not isinstance(content, dict):
        return "unknown", ""
    kind = content.get("content_type")
    kind = kind if isinstance(kind, str) and kind else "unknown"
    if kind in ("text", "multimodal_text"):
        pieces = []
        for part in content.get("parts") or []:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                pointer = part.get("asset_pointer")
                label = part.get("content_type") or "attachment"
                pieces.append(f"[{label}: {pointer}]" if pointer else " ".join(_strings(part)))
        return kind, "\n".join(p for p in pieces if p)
    if kind in ("code", "execution_output"):
        text = content.get("text")
        return kind, text if isinstance(text, str) else ""
    if kind == "tether_quote":
        fields = [content.get(k) for k in ("title", "text", "url")]
        return kind, "\n".join(f for f in fields if isinstance(f, str) and f)
    return kind, "\n".join(s for s in _strings(content) if s.strip())


def parse_conversation(raw: Any, index: int) -> ParsedConversation:
    """One conversation with every node; raises ValueError when it cannot be read at all."""
    if not isinstance(raw, dict):
        raise ValueError("a conversation must be a JSON object")
    mapping = raw.get("mapping")
    if "chat_messages" in raw and mapping is None:
        raise ValueError("this is a Claude.ai conversation, not a ChatGPT one: import the file as format claude")
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError("the conversation has no mapping of messages")
    nodes = {str(key): node for key, node in mapping.items() if isinstance(node, dict)}
    if not nodes:
        raise ValueError("the conversation's mapping holds no nodes")

    def parent_of(node_id: str) -> str | None:
        parent = nodes[node_id].get("parent")
        return str(parent) if isinstance(parent, str) and parent in nodes else None

    active: set[str] = set()
    current = raw.get("current_node")
    seen: set[str] = set()
    while isinstance(current, str) and current in nodes and current not in seen:
        seen.add(current)
        active.add(current)
        current = parent_of(current)

    # Depth-first from every root in the order the export lists children, so branches stay together.
    ordered: list[str] = []
    placed: set[str] = set()
    roots = [node_id for node_id in nodes if parent_of(node_id) is None]
    stack = list(reversed(roots))
    while stack:
        node_id = stack.pop()
        if node_id in placed:
            continue
        placed.add(node_id)
        ordered.append(node_id)
        children = [str(c) for c in nodes[node_id].get("children") or [] if isinstance(c, str) and c in nodes]
        stack.extend(reversed(children))
    ordered.extend(node_id for node_id in nodes if node_id not in placed)  # cycles: kept, not lost

    title = raw.get("title")
    created_at, updated_at = _time(raw.get("create_time")), _time(raw.get("update_time"))
    read = {"mapping", "title"} | {k for k, v in (("create_time", created_at), ("update_time", updated_at)) if v}
    own = {k: v for k, v in raw.items() if k not in read}
    messages = []
    for node_id in ordered:
        node = nodes[node_id]
        message = node.get("message")
        rest = {k: v for k, v in node.items() if k not in ("message", "parent", "children", "id")}
        if node.get("parent") is not None and parent_of(node_id) is None:
            rest["parent"] = node["parent"]  # dangling: the tree cannot hold it, the metadata does
        listed = node.get("children")
        if isinstance(listed, list) and any(not isinstance(c, str) or c not in nodes for c in listed):
            rest["children"] = listed
        first = {"conversation": own} if node_id == ordered[0] and own else {}
        if isinstance(message, dict):
            author = message.get("author")
            role = author.get("role") if isinstance(author, dict) else None
            content = message.get("content")
            kind, text = content_text(content)
            meta = {k: v for k, v in message.items() if k != "content"}
            if rest:
                meta["node"] = rest
            meta.update(first)
            messages.append(
                MessageInput(
                    node_id=node_id,
                    parent_node_id=parent_of(node_id),
                    role=role if isinstance(role, str) and role else "unknown",
                    content_type=kind,
                    text=text,
                    content=content,
                    metadata=meta,
                    created_at=_time(message.get("create_time")),
                    active=node_id in active,
                )
            )
        else:
            messages.append(
                MessageInput(
                    node_id=node_id,
                    parent_node_id=parent_of(node_id),
                    role="none",
                    content_type="empty",
                    text="",
                    content=None,
                    metadata=({"node": rest} if rest else {}) | first or None,
                    active=node_id in active,
                )
            )
    return ParsedConversation(
        external_id=conversation_ref(raw, index),
        title=title if isinstance(title, str) and title.strip() else None,
        created_at=created_at,
        updated_at=updated_at,
        messages=messages,
    )
