"""The ChatGPT parser keeps what an export says beyond the messages: the conversation's own fields on
the first node (as the Claude parser keeps its conversation's), and a parent id that names no node."""

from __future__ import annotations

import pytest
from chatgpt_export import branched, linear, node, text

from memvault_vault.archive.chatgpt import parse_conversation

pytestmark = pytest.mark.unit


def test_the_conversations_own_fields_are_kept_on_its_first_node() -> None:
    raw = branched("conv-1", "Wifi", "the wifi password is on the fridge")
    raw |= {
        "moderation_results": [{"flagged": False, "blocked": False}],
        "gizmo_id": "g-abc",
        "default_model_slug": "gpt-4o",
        "safe_urls": ["https://example.org"],
        "a_field_nobody_knows_yet": {"nested": [1, 2]},
    }
    parsed = parse_conversation(raw, 0)
    first, *others = parsed.messages
    assert first.node_id == "root" and first.role == "none"
    kept = first.metadata["conversation"]
    assert kept["moderation_results"] == [{"flagged": False, "blocked": False}]
    assert kept["gizmo_id"] == "g-abc" and kept["default_model_slug"] == "gpt-4o"
    assert kept["safe_urls"] == ["https://example.org"]
    assert kept["a_field_nobody_knows_yet"] == {"nested": [1, 2]}
    assert (kept["current_node"], kept["conversation_id"], kept["plugin_ids"]) == ("z1", "conv-1", None)
    # What became the conversation's columns, and the messages, are not kept a second time.
    assert not {"mapping", "title", "create_time", "update_time"} & set(kept)
    assert parsed.title == "Wifi" and parsed.created_at is not None and parsed.updated_at is not None
    assert all("conversation" not in (m.metadata or {}) for m in others)


def test_a_first_node_holding_a_message_keeps_the_fields_beside_the_message_metadata() -> None:
    raw = linear("conv-2", "hello") | {"moderation_results": [], "create_time": "not a time"}
    first = parse_conversation(raw, 0).messages[0]
    assert first.node_id == "a" and first.text == "hello"
    assert first.metadata["author"]["role"] == "user"
    # A time the parser could not read stays as the export wrote it.
    assert first.metadata["conversation"]["moderation_results"] == []
    assert first.metadata["conversation"]["create_time"] == "not a time"


def test_a_parent_the_mapping_does_not_hold_is_kept_as_written() -> None:
    t = 1_700_000_000.0
    raw = {
        "title": "cut",
        "current_node": "b",
        "conversation_id": "conv-3",
        "mapping": {
            "a": node("a", "gone-node", ["b", "also-gone"], "user", text("first"), t),
            "b": node("b", "a", [], "assistant", text("second"), t + 1),
        },
    }
    a, b = parse_conversation(raw, 0).messages
    assert (a.node_id, a.parent_node_id) == ("a", None)
    assert a.metadata["node"]["parent"] == "gone-node"
    assert a.metadata["node"]["children"] == ["b", "also-gone"]
    assert a.active and b.active and b.parent_node_id == "a"
    # A parent the tree holds is the tree's, not repeated in the metadata.
    assert "parent" not in b.metadata.get("node", {}) and "children" not in b.metadata.get("node", {})
