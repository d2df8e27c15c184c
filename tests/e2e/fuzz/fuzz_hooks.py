"""schemathesis hooks for the /api/v1 fuzz run: request bodies for application/x-ndjson, the backup
file `POST /api/v1/vaults/{vault}/restore` reads (docs/backup-format.md).

Raw bytes alone would stop at the first line; these are mostly files of the right shape (a header,
records of every kind with fields of any JSON type, and a manifest whose counts and sha256 match),
so the fuzzer reaches the checks of each record."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import schemathesis
from hypothesis import strategies as st

KINDS = ("settings", "guide", "guide_version", "batch", "exclusion", "memory", "embedding", "history", "audit")
FIELDS = (
    "id",
    "content",
    "content_hash",
    "type",
    "status",
    "tags",
    "version",
    "vector",
    "dimension",
    "model",
    "memory_id",
    "created_at",
    "updated_at",
    "valid_from",
    "confidence",
    "text",
    "approval_mode",
    "snapshot",
)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def backup_file(draw: st.DrawFn) -> bytes:
    header = {
        "kind": "header",
        "format": "memvault-backup",
        "version": 1,
        "vault": "default",
        "created_at": "2026-12-02T00:00:00Z",
        "embeddings": draw(st.booleans()),
    }
    records = draw(
        st.lists(
            st.builds(
                lambda kind, fields: {"kind": kind, **fields},
                st.sampled_from(KINDS),
                st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
            ),
            max_size=6,
        )
    )
    body = "".join(json.dumps(line) + "\n" for line in [header, *records]).encode()
    counts: dict[str, int] = {}
    for record in records:
        counts[record["kind"]] = counts.get(record["kind"], 0) + 1
    manifest = {"kind": "manifest", "counts": counts, "sha256": hashlib.sha256(body).hexdigest()}
    return body + (json.dumps(manifest) + "\n").encode()


schemathesis.openapi.media_type("application/x-ndjson", st.one_of(backup_file(), st.binary(max_size=512)))
