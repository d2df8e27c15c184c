"""The interchange readers on small files written in each format, including broken ones."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime

import pytest

from memvault_core import interchange
from memvault_core.interchange import InterchangeError

pytestmark = pytest.mark.unit

MEM0_EXPORT = {
    "count": 2,
    "results": [
        {
            "id": "a1b2",
            "memory": "Dev works at TechCorp as a senior engineer",
            "user_id": "dev",
            "metadata": {"type": "professional"},
            "categories": ["work", "career"],
            "created_at": "2025-03-01T10:00:00.123456-08:00",
            "updated_at": "2025-03-02T10:00:00-08:00",
        },
        {"id": "c3d4", "memory": "Prefers async communication", "metadata": {"type": "preference"}},
    ],
}

NOTE = """---
title: Coffee Brewing Methods
type: note
tags: [coffee, brewing]
permalink: coffee-brewing-methods
---

# Coffee Brewing Methods

Pour over is my usual morning brew.

## Observations
- [method] Pour over provides more #flavor clarity than French press
- [technique] Water at 205F extracts best #temperature (from testing)
- [decision] Buy a burr grinder

## Relations
- relates_to [[Coffee Bean Origins]]
- requires [[Proper Grinding Technique]]
"""


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_mem0_export_maps_categories_metadata_and_date() -> None:
    items = interchange.read("mem0", json.dumps(MEM0_EXPORT).encode(), "export.json")
    assert [i.content for i in items] == ["Dev works at TechCorp as a senior engineer", "Prefers async communication"]
    first, second = items
    assert first.tags == ("work", "career", "type:professional")
    assert first.source == "mem0:a1b2"
    assert first.valid_from == datetime(2025, 3, 1, 18, 0, 0, 123456, tzinfo=UTC)
    assert second.type == "preference" and second.tags == ()


def test_mem0_bare_list_and_json_lines() -> None:
    records = MEM0_EXPORT["results"]
    assert isinstance(records, list)
    as_list = interchange.read_mem0(json.dumps(records).encode(), "list.json")
    as_lines = interchange.read_mem0("\n".join(json.dumps(r) for r in records).encode(), "lines.jsonl")
    assert as_list == as_lines
    assert as_lines[1].origin == "lines.jsonl:2"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"results": [{"memory": "ok"}, {"id": "x"}]}', "bad.json: memory 2.memory: missing"),
        (b'{"memory": "a"}\n{"memory": 5}\n', "bad.json, line 2: memory: must be a string"),
        (b'{"memory": "a"}\n{"memory": \n', "bad.json, line 2: not JSON"),
        (b'[{"memory": "a", "created_at": "yesterday"}]', "bad.json: memory 1.created_at: 'yesterday' is not"),
        (b'{"results": [{"memory": "a", "metadata": [1]}]}', "memory 1.metadata: must be an object"),
        (b'{"results": {"memory": "a"}}', "bad.json, line 1: results: must be a list"),
        (b"\xff\xfe", "bad.json, line 1: not UTF-8"),
        (b'[\n{"memory": "a"},\n{"memory": "b",,}\n]', "bad.json, line 3: not JSON"),
    ],
)
def test_mem0_malformed_names_file_line_and_field(data: bytes, message: str) -> None:
    with pytest.raises(InterchangeError) as caught:
        interchange.read("mem0", data, "bad.json")
    assert message in str(caught.value)


def test_basic_memory_note_observations_relations_and_prose() -> None:
    items = interchange.read_basic_memory_zip(zipped({"kb/coffee.md": NOTE, "kb/.obsidian/x.md": "skip"}), "kb.zip")
    contents = [i.content for i in items]
    assert contents == [
        "Coffee Brewing Methods\n\nPour over is my usual morning brew.",
        "Coffee Brewing Methods: Pour over provides more flavor clarity than French press",
        "Coffee Brewing Methods: Water at 205F extracts best (from testing)",
        "Coffee Brewing Methods: Buy a burr grinder",
        "Coffee Brewing Methods relates to Coffee Bean Origins",
        "Coffee Brewing Methods requires Proper Grinding Technique",
    ]
    method, technique, decision = items[1:4]
    assert method.type == "observation" and method.tags == ("coffee", "brewing", "flavor", "method")
    assert technique.tags == ("coffee", "brewing", "temperature", "technique")
    assert decision.type == "decision"
    assert {i.source for i in items} == {"basic-memory:coffee-brewing-methods"}
    assert items[4].tags == ("coffee", "brewing", "relation")
    assert items[2].origin == "kb/coffee.md:14"


def test_basic_memory_without_frontmatter_uses_the_file_name() -> None:
    items = interchange.read_basic_memory_zip(zipped({"Tea.md": "- [fact] Green tea at 80C\n"}), "kb.zip")
    assert [(i.content, i.type, i.source) for i in items] == [("Tea: Green tea at 80C", "fact", "basic-memory:Tea")]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.md": "---\ntitle: [unclosed\n---\n- [fact] x\n"}, "a.md, line 2: frontmatter: not valid YAML"),
        ({"a.md": "---\ntitle: x\n- [fact] x\n"}, "a.md, line 1: frontmatter: starts with --- but never ends"),
        ({"a.md": "---\ntags: {a: 1}\n---\n"}, "a.md, line 2: tags: must be a list of strings"),
        ({"readme.txt": "hello"}, "kb.zip: no .md notes"),
    ],
)
def test_basic_memory_malformed(files: dict[str, str], message: str) -> None:
    with pytest.raises(InterchangeError) as caught:
        interchange.read("basic-memory", zipped(files), "kb.zip")
    assert message in str(caught.value)


def test_basic_memory_corrupt_member() -> None:
    data = bytearray(zipped({"a.md": "- [fact] " + "x" * 200}))
    start = data.index(b"- [fact]") if b"- [fact]" in data else 40
    data[start : start + 20] = b"\0" * 20
    with pytest.raises(InterchangeError, match=r"kb\.zip/a\.md: cannot be unpacked"):
        interchange.read("basic-memory", bytes(data), "kb.zip")


def test_basic_memory_not_a_zip() -> None:
    with pytest.raises(InterchangeError, match=r"kb\.zip: not a zip file"):
        interchange.read("basic-memory", b"# just markdown", "kb.zip")


def test_jsonl_round_trip() -> None:
    created = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    text = interchange.jsonl_header("notes", created) + interchange.jsonl_line(
        id="m1",
        content="Deploys go out on Tuesdays",
        type="decision",
        key="deploy-day",
        scope="team",
        tags=["ops"],
        source="meeting",
        created_at=created,
        valid_from=created,
        valid_to=None,
    )
    (item,) = interchange.read("memvault-jsonl", text.encode(), "notes.jsonl")
    assert item == interchange.ImportItem(
        content="Deploys go out on Tuesdays",
        type="decision",
        key="deploy-day",
        scope="team",
        tags=("ops",),
        source="meeting",
        valid_from=created,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "memvault-jsonl", "version": 2}\n', "x.jsonl, line 1: version: 2 is newer"),
        ('{"format": "other", "version": 1}\n', "x.jsonl, line 1: format: is 'other'"),
        ('{"content": "a"}\n{"type": "fact"}\n', "x.jsonl, line 2: content: missing"),
        ('{"content": "a", "type": "wish"}\n', "x.jsonl, line 1: type: 'wish' is not one of"),
        ('{"content": "a", "tags": "x"}\n[1]\n', "x.jsonl, line 2: each line must be a JSON object"),
        (
            '{"content": "a", "valid_to": "2025-01-01T00:00:00"}\n',
            "line 1: valid_to: '2025-01-01T00:00:00' has no time zone",
        ),
    ],
)
def test_jsonl_malformed(text: str, message: str) -> None:
    with pytest.raises(InterchangeError) as caught:
        interchange.read("memvault-jsonl", text.encode(), "x.jsonl")
    assert message in str(caught.value)


def test_unknown_format() -> None:
    with pytest.raises(InterchangeError, match="format: unknown format 'csv'"):
        interchange.read("csv", b"", "x.csv")
