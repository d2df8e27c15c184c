"""Small Claude.ai data exports in the shape of the real `conversations.json` (a list of conversations
with `chat_messages`; sender human/assistant; content blocks; attachments with extracted text; files),
for tests."""

from __future__ import annotations

from typing import Any


def message(uuid: str, sender: str, blocks: list[dict[str, Any]], at: str, **extra: Any) -> dict[str, Any]:
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    return {
        "uuid": uuid,
        "text": text,
        "content": blocks,
        "sender": sender,
        "created_at": at,
        "updated_at": at,
        "attachments": [],
        "files": [],
        **extra,
    }


def block(text: str) -> dict[str, Any]:
    return {
        "start_timestamp": "2025-03-01T10:00:00.000000Z",
        "stop_timestamp": "2025-03-01T10:00:01.000000Z",
        "type": "text",
        "text": text,
        "citations": [],
    }


def rich(uuid: str, name: str, fact: str) -> dict[str, Any]:
    """A conversation with every block type the export carries, an attachment, a file, and a field nobody
    knows yet (at the conversation, message and block level)."""
    return {
        "uuid": uuid,
        "name": name,
        "summary": "",
        "created_at": "2025-03-01T10:00:00.000000Z",
        "updated_at": "2025-03-01T10:05:00.000000Z",
        "account": {"uuid": "acc-1"},
        "future_field": {"kept": True},
        "chat_messages": [
            message(
                "m1",
                "human",
                [block(f"Remember this: {fact}")],
                "2025-03-01T10:00:00.000000Z",
                attachments=[
                    {
                        "file_name": "notes.txt",
                        "file_size": 42,
                        "file_type": "text/plain",
                        "extracted_content": "the boiler was serviced in May",
                    }
                ],
                files=[{"file_name": "photo.png"}],
            ),
            message(
                "m2",
                "assistant",
                [
                    {"type": "thinking", "thinking": "the user wants me to keep a fact", "summaries": []},
                    {"type": "tool_use", "name": "web_search", "input": {"query": "boiler service interval"}},
                    {"type": "tool_result", "name": "web_search", "content": [{"type": "text", "text": "yearly"}]},
                    block("Noted."),
                    {"type": "hologram", "payload": {"words": "from the future"}},
                ],
                "2025-03-01T10:00:05.000000Z",
                stop_reason="stop_sequence",
            ),
        ],
    }


def plain(uuid: str, words: str) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "name": f"chat {uuid}",
        "created_at": "2025-03-02T09:00:00Z",
        "updated_at": "2025-03-02T09:00:00Z",
        "chat_messages": [
            message(f"{uuid}-q", "human", [block(words)], "2025-03-02T09:00:00Z"),
            message(f"{uuid}-a", "assistant", [block("noted")], "2025-03-02T09:00:01Z"),
        ],
    }
