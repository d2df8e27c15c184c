"""The `archive` track's input: a LoCoMo conversation as a ChatGPT data export.

Each session becomes one conversation of the export (title `<sample id> session <n>`), its turns one
linear chain of messages in order; a turn's node id is its dia_id, so a hit maps back to the turn.
The first speaker of the conversation is the `user`, the other the `assistant`; every message's text
is the turn track's memory text (`"<speaker>: <text>"`, plus the shared image's caption), with the
session date as its `create_time`.
"""

from __future__ import annotations

import json
from typing import Any

from tests.eval.locomo import Conversation


def chatgpt_export(conversation: Conversation) -> bytes:
    """`conversations.json` for one LoCoMo conversation: one ChatGPT conversation per session."""
    first = conversation.turns[0].speaker if conversation.turns else ""
    exported: list[dict[str, Any]] = []
    for session in sorted({t.session for t in conversation.turns}):
        turns = [t for t in conversation.turns if t.session == session]
        moment = turns[0].date.timestamp() if turns[0].date else None
        mapping: dict[str, Any] = {}
        for index, turn in enumerate(turns):
            mapping[turn.dia_id] = {
                "id": turn.dia_id,
                "parent": turns[index - 1].dia_id if index else None,
                "children": [turns[index + 1].dia_id] if index + 1 < len(turns) else [],
                "message": {
                    "id": turn.dia_id,
                    "author": {"role": "user" if turn.speaker == first else "assistant", "name": None},
                    "create_time": moment,
                    "content": {"content_type": "text", "parts": [turn.content]},
                    "status": "finished_successfully",
                    "metadata": {},
                },
            }
        exported.append(
            {
                "title": f"{conversation.sample_id} session {session}",
                "conversation_id": f"{conversation.sample_id}-{session}",
                "create_time": moment,
                "update_time": moment,
                "current_node": turns[-1].dia_id,
                "mapping": mapping,
            }
        )
    return json.dumps(exported, ensure_ascii=False).encode()
