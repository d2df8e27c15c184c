"""The vault map's drawing (unit): the same data gives the same page byte for byte whatever order the
vault's answer lists it in; boxes do not overlap, items sit in their tag's box, links join drawn items."""

from __future__ import annotations

import random
import re
from typing import Any

from memvault.vault.v1 import archive_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_gateway.dashboard import map_layout, render

TAGS = ["home", "work", "cat", "travel", "books", "music", "garden"]


def answer(seed: int = 0) -> pb.GetVaultMapResponse:
    """A map answer with 7 tags, an untagged group, 5 memories and 2 conversations per tag, and links."""
    rng = random.Random(seed)
    groups = [
        pb.VaultMapGroup(
            tag=t, memories=40 - n * 5, conversations=10 - n, own_memories=30 - n * 4, own_conversations=9 - n
        )
        for n, t in enumerate(TAGS)
    ]
    groups.append(pb.VaultMapGroup(tag="", memories=3, conversations=1, own_memories=3, own_conversations=1))
    items = []
    for t in [*TAGS, ""]:
        for n in range(5):
            items.append(
                pb.VaultMapItem(
                    kind="memory",
                    id=f"m-{t or 'none'}-{n}",
                    label=f"{t} memory number {n} with quite a long text that will not fit in the box",
                    group=t,
                    tags=[t] if t else [],
                    sources=int(n % 3 == 0),
                )
            )
        for n in range(2):
            items.append(pb.VaultMapItem(kind="conversation", id=f"c-{t or 'none'}-{n}", label="", group=t))
    memory_ids = [i.id for i in items if i.kind == "memory"]
    links = [
        pb.VaultMapLink(kind=kind, from_id=a, to_id=b, to_label="x", to_drawn=True)
        for kind in ("similar", "replaces", "depends_on")
        for a, b in zip(rng.sample(memory_ids, 6), rng.sample(memory_ids, 6), strict=True)
        if a != b
    ]
    links.append(pb.VaultMapLink(kind="replaces", from_id=memory_ids[0], to_id="gone", to_label="old", to_drawn=False))
    return pb.GetVaultMapResponse(groups=groups, items=items, links=links, memories=300, conversations=60, other_tags=3)


def shuffled(original: pb.GetVaultMapResponse, seed: int) -> pb.GetVaultMapResponse:
    rng = random.Random(seed)
    groups, items, links = list(original.groups), list(original.items), list(original.links)
    for part in (groups, items, links):
        rng.shuffle(part)
    return pb.GetVaultMapResponse(
        groups=groups,
        items=items,
        links=links,
        memories=original.memories,
        conversations=original.conversations,
        other_tags=original.other_tags,
    )


class Viewer:
    role = "viewer"
    can_review = False
    is_owner = False
    delete_after = ""

    def url(self, section: str) -> str:
        return f"/dashboard/default/{section}"


def page(data: pb.GetVaultMapResponse) -> bytes:
    context: dict[str, Any] = {
        "owner": Viewer(),
        "user_name": "someone",
        "csrf": "token",
        "vault": vpb.VaultInfo(name="default", role="viewer"),
        "vaults": [vpb.VaultInfo(name="default", role="viewer")],
        "section": "archive",
        "sections": [],
        "here": "/dashboard/default/archive/map",
        "notice": "",
        "answer": data,
        "drawing": map_layout.layout(data),
        "links": [],
        "copies": [],
        "sources": [],
        "tags_shown": 12,
        "per_tag": 6,
    }
    return bytes(render.render("en", "vault_map.html", context).body)


def test_the_same_data_in_any_order_gives_the_same_page_byte_for_byte() -> None:
    data = answer()
    first = page(data)
    for seed in range(20):
        assert page(shuffled(data, seed)) == first
    assert page(answer(seed=1)) != first  # other links: another drawing (the test can fail)


def test_boxes_do_not_overlap_and_items_sit_in_their_tags_box() -> None:
    drawing = map_layout.layout(answer())
    boxes = drawing.boxes
    assert [b.tag for b in boxes] == [*TAGS, ""]
    for n, a in enumerate(boxes):
        assert a.x >= 0 and a.x + a.width <= drawing.width and a.y + a.height <= drawing.height
        for b in boxes[n + 1 :]:
            apart = a.x + a.width <= b.x or b.x + b.width <= a.x or a.y + a.height <= b.y or b.y + b.height <= a.y
            assert apart, (a.tag, b.tag)
        for node in a.nodes:
            assert a.x < node.x < a.x + a.width and a.y + map_layout.HEADER <= node.y <= a.y + a.height
            assert len(node.short) <= map_layout.LABEL_CHARS
        assert [node.kind for node in a.nodes] == ["memory"] * 5 + ["conversation"] * 2
    drawn = {(n.x, n.y) for b in boxes for n in b.nodes}
    for edge in drawing.edges:
        start, end = re.match(r"M(\d+) (\d+) C.* (\d+) (\d+)$", edge.path).groups()[:2], edge.path.split()[-2:]  # type: ignore[union-attr]
        assert (int(start[0]), int(start[1])) in drawn and (int(end[0]), int(end[1])) in drawn
    # The link to a memory not drawn is not a curve.
    assert len(drawing.edges) == len({(k.kind, *sorted((k.from_id, k.to_id))) for k in answer().links}) - 1


def test_labels_are_cut_at_a_word_with_an_ellipsis() -> None:
    assert map_layout.shorten("short one") == "short one"
    cut = map_layout.shorten("the  quick brown fox jumps over the lazy dog and keeps on running far", 30)
    assert cut == "the quick brown fox jumps…"
    assert map_layout.shorten("x" * 100, 10) == "x" * 9 + "…"


def test_an_empty_vault_draws_no_boxes() -> None:
    drawing = map_layout.layout(pb.GetVaultMapResponse())
    assert drawing.boxes == [] and drawing.edges == []
    assert b"Nothing to map yet" in page(pb.GetVaultMapResponse())
