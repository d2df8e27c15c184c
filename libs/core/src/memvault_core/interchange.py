"""Open interchange: read a mem0 / OpenMemory export, a basic-memory markdown folder (zipped) or
memvault's own JSON Lines export into memories to import, and write that JSON Lines format.

Pure: bytes in, `ImportItem`s out, no I/O. A file that cannot be read as its format raises
`InterchangeError` naming the file, the line and the field, so nothing is imported from it; an item
that reads but breaks a vault rule (too long, too many tags) is left to the vault, which reports it
as `invalid` in the batch's per-item outcomes.

Formats (see docs/interchange.md):
- mem0: the JSON `get_all` / export answer (`{"results": [...]}` or `{"memories": [...]}`), a bare
  list, or JSON Lines, each memory with `memory` (or `content` / `text`), optional `id`,
  `categories`, `metadata`, `created_at`, `updated_at`.
- basic-memory: markdown notes with YAML frontmatter (`title`, `type`, `tags`, `permalink`);
  observations `- [category] text #tag (context)` become memories, relations
  `- relation_type [[Target]]` become one memory each stating the relation, and the note's other
  prose becomes one memory.
- memvault-jsonl: one JSON object per line; an optional first line
  `{"format": "memvault-jsonl", "version": 1, ...}`, then memories with `content`, `type`, `key`,
  `scope`, `tags`, `source`, `valid_from`, `valid_to`, `created_at`, `id`.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, Final, Literal

import yaml

FormatName = Literal["mem0", "basic-memory", "memvault-jsonl"]
FORMATS: Final[tuple[FormatName, ...]] = ("mem0", "basic-memory", "memvault-jsonl")
JSONL_FORMAT: Final = "memvault-jsonl"
JSONL_VERSION: Final = 1
MEMORY_TYPES: Final = frozenset(
    {"fact", "preference", "decision", "constraint", "assumption", "observation", "instruction"}
)
MAX_ZIP_FILES: Final = 10_000
MAX_ZIP_BYTES: Final = 50_000_000
"""Uncompressed bytes a basic-memory zip may hold (a guard against zip bombs)."""


class InterchangeError(ValueError):
    """A file that is not what its format says: where (file, line, field) and what is wrong."""

    def __init__(self, file: str, line: int, field: str, message: str) -> None:
        self.file, self.line, self.field = file, line, field
        where = f"{file}, line {line}" if line else file
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


@dataclass(frozen=True)
class ImportItem:
    """One memory read from a file, before the vault's rules are applied."""

    content: str
    type: str = "fact"
    key: str = ""
    scope: str = ""
    tags: tuple[str, ...] = ()
    source: str = ""
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    origin: str = field(default="", compare=False)
    """Where in the file it came from (`notes/a.md:7`), for people reading the outcomes."""


def read(format_name: str, data: bytes, file_name: str) -> list[ImportItem]:
    """The memories in `data`, a file of `format_name`; `InterchangeError` if it is not one."""
    if format_name == "mem0":
        return read_mem0(data, file_name)
    if format_name == "basic-memory":
        return read_basic_memory_zip(data, file_name)
    if format_name == "memvault-jsonl":
        return read_jsonl(data, file_name)
    raise InterchangeError(file_name, 0, "format", f"unknown format {format_name!r}; use one of {', '.join(FORMATS)}")


# --- shared ----------------------------------------------------------------------------------------


def _text(data: bytes, file_name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InterchangeError(file_name, line, "", "not UTF-8 text") from None


def _time(value: Any, file_name: str, line: int, name: str) -> datetime | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise InterchangeError(file_name, line, name, "must be an ISO 8601 date-time string")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise InterchangeError(file_name, line, name, f"{value[:40]!r} is not an ISO 8601 date-time") from None
    if parsed.tzinfo is None:
        raise InterchangeError(file_name, line, name, f"{value[:40]!r} has no time zone")
    return parsed


def _string(value: Any, file_name: str, line: int, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InterchangeError(file_name, line, name, "must be a string")
    return value


def _tags(value: Any, file_name: str, line: int, name: str) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list) or not all(isinstance(t, str | int | float) for t in value):
        raise InterchangeError(file_name, line, name, "must be a list of strings")
    return [str(t).strip() for t in value if str(t).strip()]


def _unique(tags: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t for t in tags if t))


def _json_lines(text: str, file_name: str) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield number, json.loads(raw)
        except json.JSONDecodeError as error:
            raise InterchangeError(file_name, number, "", f"not JSON ({error.msg}, column {error.colno})") from None


# --- mem0 / OpenMemory -----------------------------------------------------------------------------


def read_mem0(data: bytes, file_name: str) -> list[ImportItem]:
    """A mem0 `get_all` / export answer, a list of its memories, or JSON Lines of them."""
    text = _text(data, file_name)
    try:
        document = json.loads(text)
        records: list[tuple[int, Any]] = []
        if isinstance(document, dict):
            for name in ("results", "memories", "items"):
                if name in document:
                    listed = document[name]
                    break
            else:
                if "memory" in document or "content" in document:
                    listed = [document]  # JSON Lines with one line
                else:
                    raise InterchangeError(
                        file_name, 1, "results", "a mem0 export is a list of memories or an object with `results`"
                    )
            if not isinstance(listed, list):
                raise InterchangeError(file_name, 1, "results", "must be a list of memories")
        elif isinstance(document, list):
            listed = document
        else:
            raise InterchangeError(file_name, 1, "", "a mem0 export is a JSON list or object")
        records = [(0, record) for record in listed]
    except json.JSONDecodeError as whole:
        if whole.msg != "Extra data":  # one JSON document, broken
            raise InterchangeError(
                file_name, whole.lineno, "", f"not JSON ({whole.msg}, column {whole.colno})"
            ) from None
        records = list(_json_lines(text, file_name))
    items = []
    for position, (line, record) in enumerate(records, start=1):
        where = line or 0
        label = f"memory {position}" if not line else ""
        items.append(_mem0_item(record, file_name, where, label))
    return items


def _mem0_item(record: Any, file_name: str, line: int, label: str) -> ImportItem:
    def name(field_name: str) -> str:
        return f"{label}.{field_name}" if label else field_name

    if not isinstance(record, dict):
        raise InterchangeError(file_name, line, label, "a memory must be a JSON object")
    for text_field in ("memory", "content", "text"):
        if text_field in record:
            content = _string(record[text_field], file_name, line, name(text_field))
            break
    else:
        raise InterchangeError(file_name, line, name("memory"), "missing (the memory's text)")
    if not content.strip():
        raise InterchangeError(file_name, line, name("memory"), "is empty")
    tags = _tags(record.get("categories"), file_name, line, name("categories"))
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InterchangeError(file_name, line, name("metadata"), "must be an object")
    memory_type = "fact"
    for key, value in metadata.items():
        if isinstance(value, str) and key in ("type", "memory_type") and value.lower() in MEMORY_TYPES:
            memory_type = value.lower()
        elif isinstance(value, list):
            tags.extend(str(v) for v in value if isinstance(v, str | int | float) and not isinstance(v, bool))
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            tags.append(f"{key}:{value}")
    created = _time(record.get("created_at"), file_name, line, name("created_at"))
    memory_id = record.get("id")
    source = f"mem0:{memory_id}" if isinstance(memory_id, str | int) and str(memory_id) else "mem0"
    return ImportItem(
        content=content.strip(),
        type=memory_type,
        tags=_unique(tags),
        source=source,
        valid_from=created,
        origin=f"{file_name}:{line}" if line else f"{file_name} {label}",
    )


# --- basic-memory ----------------------------------------------------------------------------------

_OBSERVATION = re.compile(r"^\s*[-*]\s+\[(?P<category>[^\]\[]+)\]\s+(?P<text>.+?)\s*$")
_RELATION = re.compile(r"^\s*[-*]\s+(?P<kind>[\w\- ]+?)\s+\[\[(?P<target>[^\]]+)\]\]\s*(?P<context>\(.*\))?\s*$")
_TAG = re.compile(r"(?<![\w&])#([\w\-/]+)")
_TRAILING_TAGS = re.compile(r"(\s+#[\w\-/]+)+\s*$")
_CONTEXT = re.compile(r"\s*\(([^()]*)\)\s*$")


def read_basic_memory_zip(data: bytes, file_name: str) -> list[ImportItem]:
    """Every `.md` note in a zip of a basic-memory folder, in path order."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise InterchangeError(file_name, 0, "", "not a zip file (zip the basic-memory folder)") from None
    with archive:
        notes = [i for i in archive.infolist() if not i.is_dir() and i.filename.lower().endswith(".md")]
        notes = [i for i in notes if not any(p.startswith(".") for p in PurePosixPath(i.filename).parts)]
        if len(notes) > MAX_ZIP_FILES:
            raise InterchangeError(file_name, 0, "", f"more than {MAX_ZIP_FILES} notes")
        if sum(i.file_size for i in notes) > MAX_ZIP_BYTES:
            raise InterchangeError(file_name, 0, "", f"notes larger than {MAX_ZIP_BYTES} bytes unpacked")
        if not notes:
            raise InterchangeError(file_name, 0, "", "no .md notes in the zip")
        items: list[ImportItem] = []
        for info in sorted(notes, key=lambda i: i.filename):
            try:
                data = archive.read(info)
            except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError) as error:
                raise InterchangeError(f"{file_name}/{info.filename}", 0, "", f"cannot be unpacked ({error})") from None
            items.extend(read_basic_memory_note(data, info.filename))
    return items


def read_basic_memory_note(data: bytes, file_name: str) -> list[ImportItem]:
    """The memories in one basic-memory note."""
    lines = _text(data, file_name).splitlines()
    front: Mapping[str, Any] = {}
    body_start = 0
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() == "---":
                break
        else:
            raise InterchangeError(file_name, 1, "frontmatter", "starts with --- but never ends")
        try:
            loaded = yaml.safe_load("\n".join(lines[1:end]))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            line = mark.line + 2 if mark is not None else 1
            raise InterchangeError(file_name, line, "frontmatter", "not valid YAML") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise InterchangeError(file_name, 2, "frontmatter", "must be a mapping of fields")
        front = loaded or {}
        body_start = end + 1
    stem = PurePosixPath(file_name).stem
    title = front.get("title", stem)
    if not isinstance(title, str | int | float) or not str(title).strip():
        raise InterchangeError(file_name, 2, "title", "must be a non-empty string")
    title = str(title).strip()
    permalink = front.get("permalink", "")
    if not isinstance(permalink, str):
        raise InterchangeError(file_name, 2, "permalink", "must be a string")
    note_tags = _tags(front.get("tags"), file_name, 2, "tags")
    note_type = front.get("type", "note")
    if isinstance(note_type, str) and note_type.strip() and note_type.strip().lower() != "note":
        note_tags.append(note_type.strip().lower())
    source = f"basic-memory:{permalink or stem}"

    items: list[ImportItem] = []
    prose: list[str] = []
    prose_line = 0
    for index in range(body_start, len(lines)):
        line, number = lines[index], index + 1
        observation = _OBSERVATION.match(line)
        relation = None if observation else _RELATION.match(line)
        if observation:
            category = observation["category"].strip().lower()
            text = observation["text"]
            tags = list(note_tags) + _TAG.findall(text)
            context = _CONTEXT.search(text)
            context_text = context.group(1).strip() if context and context.start() > 0 else ""
            if context_text and context:
                text = text[: context.start()]
            text = _TAG.sub(lambda m: m.group(1), _TRAILING_TAGS.sub("", text)).strip()
            if context_text:
                text = f"{text} ({context_text})"
            memory_type = category if category in MEMORY_TYPES else "observation"
            if category not in MEMORY_TYPES:
                tags.append(category)
            if not text.strip():
                raise InterchangeError(file_name, number, "observation", "has a category but no text")
            items.append(
                ImportItem(
                    content=f"{title}: {text}",
                    type=memory_type,
                    tags=_unique(tags),
                    source=source,
                    origin=f"{file_name}:{number}",
                )
            )
        elif relation:
            kind = relation["kind"].strip().replace("_", " ")
            context_text = f" {relation['context']}" if relation["context"] else ""
            items.append(
                ImportItem(
                    content=f"{title} {kind} {relation['target'].strip()}{context_text}",
                    type="fact",
                    tags=_unique([*note_tags, "relation"]),
                    source=source,
                    origin=f"{file_name}:{number}",
                )
            )
        elif not _heading(line) and (line.strip() or prose):
            prose_line = prose_line or number
            prose.append(line.rstrip())
    text = "\n".join(prose).strip()
    if text:
        items.insert(
            0,
            ImportItem(
                content=f"{title}\n\n{text}",
                type="fact",
                tags=_unique(note_tags),
                source=source,
                origin=f"{file_name}:{prose_line}",
            ),
        )
    return items


def _heading(line: str) -> bool:
    return re.match(r"^\s*#{1,6}\s", line) is not None


# --- memvault JSON Lines ---------------------------------------------------------------------------


def read_jsonl(data: bytes, file_name: str) -> list[ImportItem]:
    """memvault's JSON Lines export (or any file of its memory lines)."""
    items = []
    for number, record in _json_lines(_text(data, file_name), file_name):
        if not isinstance(record, dict):
            raise InterchangeError(file_name, number, "", "each line must be a JSON object")
        if "format" in record:
            if record["format"] != JSONL_FORMAT:
                raise InterchangeError(file_name, number, "format", f"is {record['format']!r}, not {JSONL_FORMAT!r}")
            version = record.get("version")
            if not isinstance(version, int) or version > JSONL_VERSION:
                raise InterchangeError(
                    file_name, number, "version", f"{version!r} is newer than this reader (version {JSONL_VERSION})"
                )
            continue
        if "content" not in record:
            raise InterchangeError(file_name, number, "content", "missing")
        content = _string(record["content"], file_name, number, "content")
        if not content.strip():
            raise InterchangeError(file_name, number, "content", "is empty")
        memory_type = _string(record.get("type"), file_name, number, "type") or "fact"
        if memory_type not in MEMORY_TYPES:
            raise InterchangeError(
                file_name, number, "type", f"{memory_type[:40]!r} is not one of {', '.join(sorted(MEMORY_TYPES))}"
            )
        items.append(
            ImportItem(
                content=content,
                type=memory_type,
                key=_string(record.get("key"), file_name, number, "key"),
                scope=_string(record.get("scope"), file_name, number, "scope"),
                tags=_unique(_tags(record.get("tags"), file_name, number, "tags")),
                source=_string(record.get("source"), file_name, number, "source"),
                valid_from=_time(record.get("valid_from"), file_name, number, "valid_from"),
                valid_to=_time(record.get("valid_to"), file_name, number, "valid_to"),
                origin=f"{file_name}:{number}",
            )
        )
    return items


def jsonl_header(vault: str, exported_at: datetime) -> str:
    """The first line of a memvault JSON Lines export."""
    header = {"format": JSONL_FORMAT, "version": JSONL_VERSION, "vault": vault, "exported_at": exported_at.isoformat()}
    return json.dumps(header, ensure_ascii=False) + "\n"


def jsonl_line(
    *,
    id: str,
    content: str,
    type: str,
    key: str | None,
    scope: str | None,
    tags: Iterable[str],
    source: str,
    created_at: datetime,
    valid_from: datetime,
    valid_to: datetime | None,
) -> str:
    """One memory as a line of a memvault JSON Lines export (what `read_jsonl` reads back)."""
    record = {
        "id": id,
        "content": content,
        "type": type,
        "key": key or "",
        "scope": scope or "",
        "tags": list(tags),
        "source": source,
        "created_at": created_at.isoformat(),
        "valid_from": valid_from.isoformat(),
        "valid_to": valid_to.isoformat() if valid_to else None,
    }
    return json.dumps(record, ensure_ascii=False) + "\n"
