"""The backup file, with no I/O: JSON Lines, a header first, a manifest last (docs/backup-format.md).

Writing: `BackupWriter` turns records into lines and keeps the counts and the SHA-256 that the
manifest states. Reading: `BackupReader` takes the file in chunks of any size and yields one
checked record at a time, so neither side holds more than a line in memory; a file without its
manifest, with lines that do not parse, with counts or a hash that do not match, or written by a
newer format version is refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memvault_core.errors import InvalidArgument
from memvault_vault.domain.archive import message_hash
from memvault_vault.domain.memory import content_hash

FORMAT = "memvault-backup"
VERSION = 2
"""Version 2 added the conversation archive and tracked sources; a version 1 file still reads (it has none)."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line a reader accepts: a memory with the longest text or a guide fits many times over."""

HEADER = "header"
MANIFEST = "manifest"
KINDS = (
    "settings",
    "guide",
    "guide_version",
    "batch",
    "exclusion",
    "memory",
    "embedding",
    "history",
    "audit",
    "source",
    "source_change",
    "conversation",
    "revision",
    "message",
    "revision_message",
    "archive_key",
    "import",
    "import_chunk",
    "import_failure",
)
"""Record kinds between the header and the manifest, in the order a backup writes them."""

_REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "settings": {"approval_mode": str},
    "guide": {"text": str, "version": int},
    "guide_version": {"version": int, "text": str, "updated_by": str, "updated_at": str},
    "batch": {"id": str, "actor": str, "item_count": int, "stored_count": int, "created_at": str},
    "exclusion": {"content_hash": str, "created_at": str},
    "memory": {
        "id": str,
        "content": str,
        "content_hash": str,
        "type": str,
        "trust": str,
        "status": str,
        "version": int,
        "created_at": str,
        "updated_at": str,
    },
    "embedding": {"memory_id": str, "model": str, "dimension": int, "content_hash": str, "vector": list},
    "history": {"memory_id": str, "version": int, "change": str, "snapshot": dict, "actor": str, "changed_at": str},
    "audit": {"actor": str, "action": str, "at": str},
    "source": {"id": str, "memory_id": str, "source_kind": str, "location": str, "mode": str, "baseline_hash": str},
    "source_change": {"id": str, "source_id": str, "memory_id": str, "status": str, "new_hash": str},
    "conversation": {"id": str, "head_revision": int, "tags": list, "source": str, "created_at": str},
    "revision": {
        "conversation_id": str,
        "number": int,
        "revision_kind": str,
        "message_count": int,
        "content_sha256": str,
    },
    "message": {"id": str, "conversation_id": str, "node_id": str, "role": str, "text": str, "content_hash": str},
    "revision_message": {"conversation_id": str, "revision": int, "position": int, "message_id": str, "active": bool},
    "archive_key": {"key": str, "request_hash": str, "receipt": dict},
    "import": {"id": str, "format": str, "sha256": str, "state": str, "size": int},
    "import_chunk": {"import_id": str, "part": int, "offset": int, "data": str},
    "import_failure": {"import_id": str, "conversation_ref": str, "error": str},
}


class BackupRefused(InvalidArgument):
    """The file is not a complete, untouched backup this version can read; nothing was written."""

    def __init__(self, message: str) -> None:
        super().__init__(f"backup refused, nothing was restored: {message}", field="backup")


ARCHIVE_SCOPE = "archive"
"""The header's `scope` of an archive export: only the conversation archive's kinds (no `scope`: the whole vault)."""


def header(vault: str, created_at: str, *, embeddings: bool, archive_only: bool = False) -> dict[str, Any]:
    return {
        "kind": HEADER,
        "format": FORMAT,
        "version": VERSION,
        "vault": vault,
        "created_at": created_at,
        "embeddings": embeddings,
        **({"scope": ARCHIVE_SCOPE} if archive_only else {}),
    }


class BackupWriter:
    """Lines of one backup file; `manifest()` is the last one."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.counts: Counter[str] = Counter()

    def line(self, record: dict[str, Any]) -> bytes:
        """One record as a line; `record["kind"]` names it."""
        return self.raw(json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str), record["kind"])

    def raw(self, text: str, kind: str) -> bytes:
        """A record already encoded as one line of JSON (e.g. by Postgres)."""
        data = text.encode() + b"\n"
        self._sha.update(data)
        if kind != HEADER:
            self.counts[kind] += 1
        return data

    def manifest(self) -> bytes:
        record = {
            "kind": MANIFEST,
            "counts": {kind: self.counts.get(kind, 0) for kind in KINDS},
            "sha256": self._sha.hexdigest(),
        }
        return json.dumps(record, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class Record:
    kind: str
    body: dict[str, Any]
    line: int
    raw: str
    """The line as it was in the file (what a restore stages)."""
    ref: uuid.UUID | None = None
    """The memory (memory, embedding, history) or batch (batch) the record is about."""


def _check_fields(kind: str, body: dict[str, Any], line: int) -> None:
    for name, expected in _REQUIRED[kind].items():
        value = body.get(name)
        # bool is an int in Python; a count or version written as true is still wrong
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            expected_name = expected.__name__ if isinstance(expected, type) else "/".join(t.__name__ for t in expected)
            raise BackupRefused(f"line {line}: a {kind} record needs {name!r} as {expected_name}")
    if kind == "memory" and content_hash(body["content"]) != body["content_hash"]:
        raise BackupRefused(
            f"line {line}: memory {body['id']} has a content_hash that does not match its text (edited by hand?)"
        )
    if kind == "message" and (
        message_hash(body["role"], body.get("content_type", ""), body["text"], body.get("content"))
        != body["content_hash"]
    ):
        raise BackupRefused(
            f"line {line}: message {body['id']} has a content_hash that does not match its text (edited by hand?)"
        )
    if kind == "embedding":
        vector = body["vector"]
        if len(vector) != body["dimension"] or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise BackupRefused(f"line {line}: embedding of {body['memory_id']} is not {body['dimension']} numbers")


_REF_FIELD = {
    "memory": "id",
    "batch": "id",
    "embedding": "memory_id",
    "history": "memory_id",
    "source": "id",
    "source_change": "id",
    "conversation": "id",
    "revision": "conversation_id",
    "message": "id",
    "revision_message": "message_id",
    "import": "id",
    "import_chunk": "import_id",
    "import_failure": "import_id",
}
OWN_IDS = ("memory", "batch", "source", "source_change", "conversation", "message", "import")
"""Kinds whose `ref` is the record's own id: the ids a restore beside the original vault must renew."""


def _ref(kind: str, body: dict[str, Any], line: int) -> uuid.UUID | None:
    name = _REF_FIELD.get(kind)
    if name is None:
        return None
    try:
        return uuid.UUID(body[name])
    except ValueError:
        raise BackupRefused(f"line {line}: {kind} {name} {body[name][:40]!r} is not a UUID") from None


class BackupReader:
    """Feed the file in chunks (`feed`, yielding checked records in file order), then call `finish()`.

    The manifest is checked in `finish()`: only when it returns is the file known to be whole.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._sha = hashlib.sha256()
        self._counts: Counter[str] = Counter()
        self._line = 0
        self._manifest: dict[str, Any] | None = None
        self.header: dict[str, Any] | None = None

    def feed(self, chunk: bytes) -> Iterator[Record]:
        self._buffer += chunk
        start = 0
        while (end := self._buffer.find(b"\n", start)) != -1:
            record = self._take(bytes(self._buffer[start : end + 1]))
            start = end + 1
            if record is not None:
                yield record
        del self._buffer[:start]
        if len(self._buffer) > MAX_LINE_BYTES:
            raise BackupRefused(f"line {self._line + 1} is longer than {MAX_LINE_BYTES} bytes: not a memvault backup")

    @property
    def counts(self) -> dict[str, int]:
        """Records read so far, by kind (header and manifest not counted)."""
        return {kind: n for kind, n in self._counts.items() if n}

    def finish(self) -> None:
        """Check that the file was whole: every line ended, the manifest last, its counts and hash right."""
        rest = bytes(self._buffer).strip()
        self._buffer.clear()
        if rest:
            if self._manifest is not None:
                raise BackupRefused("there is data after the manifest")
            raise BackupRefused("the file ends in the middle of a line: it is truncated (an interrupted download?)")
        if self.header is None:
            raise BackupRefused("the file is empty")
        if self._manifest is None:
            raise BackupRefused("the file ends before its manifest: it is truncated (an interrupted download?)")
        counts = self._manifest.get("counts")
        if not isinstance(counts, dict):
            raise BackupRefused("the manifest has no counts")
        for kind in KINDS:
            stated = counts.get(kind, 0)
            if stated != self._counts.get(kind, 0):
                raise BackupRefused(
                    f"the manifest counts {stated} {kind} records but the file holds {self._counts.get(kind, 0)}"
                )
        if self._manifest.get("sha256") != self._sha.hexdigest():
            raise BackupRefused("the manifest's sha256 does not match the file: it was changed after it was written")

    def _take(self, data: bytes) -> Record | None:
        self._line += 1
        if self._manifest is not None:
            if data.strip():
                raise BackupRefused(f"line {self._line}: there is data after the manifest")
            return None
        try:
            body = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            raise BackupRefused(f"line {self._line} is not JSON: the file is corrupt") from None
        if self.header is None:
            self._check_header(body)
            self._sha.update(data)
            return None
        if not isinstance(body, dict) or not isinstance(body.get("kind"), str):
            raise BackupRefused(f"line {self._line} is not a record with a kind: the file is corrupt")
        kind = body["kind"]
        if kind == MANIFEST:
            self._manifest = body
            return None
        self._sha.update(data)
        if kind not in _REQUIRED:
            raise BackupRefused(f"line {self._line}: unknown record kind {kind[:40]!r}")
        _check_fields(kind, body, self._line)
        self._counts[kind] += 1
        return Record(kind, body, self._line, data.decode(), _ref(kind, body, self._line))

    def _check_header(self, body: object) -> None:
        if not isinstance(body, dict) or body.get("kind") != HEADER or body.get("format") != FORMAT:
            raise BackupRefused(f"the first line is not a {FORMAT} header: this is not a memvault backup")
        version = body.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise BackupRefused("the header has no valid format version")
        if version > VERSION:
            raise BackupRefused(
                f"the file is {FORMAT} version {version}, newer than this memvault reads ({VERSION}); "
                "restore it with a newer memvault"
            )
        self.header = body
