"""Archive write receipts and context packs as JSON, the same for the MCP tools and /api/v1: a
receipt answer never grows past the receipt ceiling; readback that does not fit is moved, whole
messages from the end, into `omitted` as ready-made `archive_read` requests. Identity, durability
and status fields are never shed, so a committed write never turns into a size error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core import wire

MAX_RECEIPT_BYTES: Final = 48 * 1024
"""The vault's max_receipt_bytes (memvault_vault.domain.archive_writes), which capabilities report."""


def size_of(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON, as /api/v1 sends it (the MCP tools pass their own measure)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _read(conversation_id: str, revision: int, after_position: int) -> dict[str, Any]:
    return {
        "tool": "archive_read",
        "mode": "conversation",
        "conversation_id": conversation_id,
        "revision": revision,
        "after_position": after_position,
    }


def message_json(m: pb.ArchivedMessage) -> dict[str, Any]:
    created = wire.from_timestamp(m, "created_at")
    return {
        "position": m.position,
        "message_id": m.id,
        "node_id": m.node_id,
        "key": m.key or None,
        "role": m.role,
        "text": m.text,
        "created_at": created.isoformat() if created else None,
    }


def receipt_json(r: pb.WriteReceipt) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "conversation_id": r.conversation_id,
        "revision": r.revision,
        "durable": r.durable,
        "indexing": r.indexing,
        "indexing_pending": r.indexing_pending,
        "replayed": r.replayed,
        "content_sha256": r.content_sha256,
        "message_count": r.message_count,
    }
    if r.changes:
        answer["changes"] = dict(sorted(r.changes.items()))
    if r.HasField("derived_from"):
        d = r.derived_from
        answer["derived_from"] = {"vault": d.vault, "conversation_id": d.conversation_id, "revision": d.revision}
    if r.HasField("verified"):
        v = r.verified
        answer["verified"] = {
            "head_revision": v.head_revision,
            "message_count": v.message_count,
            "content_sha256": v.content_sha256,
            "title": v.title if v.has_title else None,
            "tags": list(v.tags),
        }
        answer["readback"] = [message_json(m) for m in r.readback]
        answer["omitted"] = [
            {"path": "readback", "count": o.count, "read": _read(o.conversation_id, o.revision, o.after_position)}
            for o in r.omitted
        ]
    return answer


def fit_receipts(
    answer: dict[str, Any], ceiling: int = MAX_RECEIPT_BYTES, size: Callable[[Any], int] = size_of
) -> dict[str, Any]:
    """Shed readback messages, last receipt and last message first, until `answer` (holding
    `receipts`) is under `ceiling` as `size` measures it; each shed run is named in its receipt's `omitted`."""
    receipts: list[dict[str, Any]] = answer["receipts"]
    for receipt in reversed(receipts):
        while size(answer) >= ceiling and receipt.get("readback"):
            shed = receipt["readback"].pop()
            omitted = receipt.setdefault("omitted", [])
            earlier = next((o for o in omitted if o["read"]["after_position"] == shed["position"]), None)
            if earlier is not None:
                earlier["count"] += 1
                earlier["read"]["after_position"] = shed["position"] - 1
            else:
                omitted.append(
                    {
                        "path": "readback",
                        "count": 1,
                        "read": _read(receipt["conversation_id"], receipt["revision"], shed["position"] - 1),
                    }
                )
    return answer


def pack_json(p: pb.BuildContextPackResponse) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "pack_id": p.pack_id,
        "fits": p.fits,
        "max_tokens": p.max_tokens,
        "max_bytes": p.max_bytes,
        "pins": [{"conversation_id": x.conversation_id, "revision": x.revision} for x in p.pins],
    }
    if not p.fits:
        answer["min_max_tokens"] = p.min_max_tokens
        answer["min_max_bytes"] = p.min_max_bytes
        answer["required"] = [
            {
                "conversation_id": s.conversation_id,
                "revision": s.revision,
                "messages": s.messages,
                "tokens": s.tokens,
                "bytes": s.bytes,
            }
            for s in p.shortfall
        ]
        return answer
    answer["tokens"] = p.tokens
    answer["left_out"] = p.left_out
    answer["duplicates"] = p.duplicates
    answer["messages"] = [
        {
            "conversation_id": m.conversation_id,
            "revision": m.revision,
            "message_id": m.message_id,
            "position": m.position,
            "node_id": m.node_id or None,
            "key": m.key or None,
            "role": m.role,
            "authority": m.authority,
            "score": round(m.score, 4) if m.authority == "retrieved" else None,
            "query": m.query_index if m.query_index >= 0 else None,
            "text": m.text,
        }
        for m in p.messages
    ]
    return answer
