"""Small ChatGPT data exports in the real `conversations.json` shape, for tests."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any


def node(node_id: str, parent: str | None, children: list[str], role: str | None, content: Any, t: float) -> Any:
    message = None
    if role is not None:
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": t,
            "update_time": None,
            "content": content,
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {},
            "recipient": "all",
        }
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def text(*parts: Any) -> dict[str, Any]:
    return {"content_type": "text", "parts": list(parts)}


def branched(conversation_id: str, title: str | None, fact: str) -> dict[str, Any]:
    """root -> system -> user -> (assistant A | assistant B, the current one) -> code -> execution_output;
    plus a multimodal message, a tether_quote and a type this parser has never seen."""
    t = 1_700_000_000.0
    mapping = {
        "root": node("root", None, ["sys"], None, None, t),
        "sys": node("sys", "root", ["u1"], "system", text(""), t),
        "u1": node("u1", "sys", ["a1", "a2"], "user", text(f"Remember: {fact}"), t + 1),
        "a1": node("a1", "u1", [], "assistant", text("first answer, later regenerated"), t + 2),
        "a2": node("a2", "u1", ["c1"], "assistant", text("second answer"), t + 3),
        "c1": node(
            "c1", "a2", ["x1"], "assistant", {"content_type": "code", "language": "python", "text": "print(42)"}, t + 4
        ),
        "x1": node("x1", "c1", ["m1"], "tool", {"content_type": "execution_output", "text": "42"}, t + 5),
        "m1": node(
            "m1",
            "x1",
            ["q1"],
            "user",
            {
                "content_type": "multimodal_text",
                "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-abc", "width": 10},
                    "what is in this picture",
                ],
            },
            t + 6,
        ),
        "q1": node(
            "q1",
            "m1",
            ["z1"],
            "tool",
            {
                "content_type": "tether_quote",
                "url": "https://example.org",
                "domain": "example.org",
                "text": "quoted words",
                "title": "Example",
            },
            t + 7,
        ),
        "z1": node(
            "z1",
            "q1",
            [],
            "assistant",
            {"content_type": "brand_new_kind", "thoughts": [{"summary": "deep thought"}]},
            t + 8,
        ),
    }
    return {
        "title": title,
        "create_time": t,
        "update_time": t + 8,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": "z1",
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "id": conversation_id,
    }


def linear(conversation_id: str, words: str) -> dict[str, Any]:
    t = 1_700_000_000.0
    return {
        "title": f"chat {conversation_id}",
        "create_time": t,
        "update_time": t,
        "current_node": "b",
        "conversation_id": conversation_id,
        "mapping": {
            "a": node("a", None, ["b"], "user", text(words), t),
            "b": node("b", "a", [], "assistant", text("noted"), t + 1),
        },
    }


def dump(conversations: list[Any]) -> bytes:
    return json.dumps(conversations).encode()


def zipped(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations.json", data)
    return buffer.getvalue()
