"""The vault map's layout: where each tag's box, each item and each link go, with no I/O.

A pure function of the vault's answer (`GetVaultMap`): the vault hands its groups, items and links
over in a fixed order, and the layout sorts them again by their own keys, so the same data gives the
same drawing byte for byte, whatever order it arrives in. Boxes go into three columns, each into the
shortest column so far (ties: the leftmost); items are rows in their box; a link between two drawn
items is a curve from one to the other, links to items not drawn are listed under the map.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memvault.vault.v1 import archive_pb2 as pb

COLUMNS = 3
COLUMN_WIDTH = 380
GAP = 20
HEADER = 48
ROW = 26
FOOTER = 26
LABEL_CHARS = 42
WIDTH = COLUMNS * COLUMN_WIDTH + (COLUMNS + 1) * GAP


@dataclass(frozen=True)
class Node:
    kind: str
    id: str
    label: str
    short: str
    x: int
    y: int
    sources: int
    copied: bool


@dataclass(frozen=True)
class Box:
    tag: str
    x: int
    y: int
    width: int
    height: int
    memories: int
    conversations: int
    own_memories: int
    own_conversations: int
    drawn_memories: int
    drawn_conversations: int
    nodes: list[Node]

    @property
    def more_memories(self) -> int:
        return max(0, self.own_memories - self.drawn_memories)

    @property
    def more_conversations(self) -> int:
        return max(0, self.own_conversations - self.drawn_conversations)

    @property
    def footer_y(self) -> int:
        return self.y + self.height - 9


@dataclass(frozen=True)
class Edge:
    kind: str
    path: str


@dataclass
class Drawing:
    width: int = WIDTH
    height: int = 0
    boxes: list[Box] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    """One line of at most `limit` characters, cut at a word where it can be, with an ellipsis."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def _group_key(group: pb.VaultMapGroup) -> tuple[int, int, str]:
    # Largest first, then by tag; the untagged group ("") last.
    return (1 if group.tag == "" else 0, -(group.memories + group.conversations), group.tag)


def layout(answer: pb.GetVaultMapResponse) -> Drawing:
    groups = sorted(answer.groups, key=_group_key)
    rank = {g.tag: n for n, g in enumerate(groups)}
    # Within a group: memories before conversations, then by label and id (a total order on the data
    # itself, not on the order it came in).
    items = sorted(
        (i for i in answer.items if i.group in rank),
        key=lambda i: (rank[i.group], i.kind != "memory", " ".join(i.label.split()).casefold(), i.id),
    )
    by_group: dict[str, list[pb.VaultMapItem]] = {}
    for item in items:
        by_group.setdefault(item.group, []).append(item)
    heights = [GAP] * COLUMNS
    drawing = Drawing()
    where: dict[str, Node] = {}
    for group in groups:
        members = by_group.get(group.tag, [])
        more = group.own_memories > sum(i.kind == "memory" for i in members) or group.own_conversations > sum(
            i.kind == "conversation" for i in members
        )
        height = HEADER + ROW * max(1, len(members)) + (FOOTER if more else 8)
        column = min(range(COLUMNS), key=lambda c: (heights[c], c))
        x, y = GAP + column * (COLUMN_WIDTH + GAP), heights[column]
        nodes = []
        for n, item in enumerate(members):
            node = Node(
                kind=item.kind,
                id=item.id,
                label=" ".join(item.label.split()),
                short=shorten(item.label),
                x=x + 18,
                y=y + HEADER + ROW * n + ROW // 2,
                sources=item.sources,
                copied=item.HasField("derived_from") and bool(item.derived_from.conversation_id),
            )
            nodes.append(node)
            where[item.id] = node
        drawing.boxes.append(
            Box(
                tag=group.tag,
                x=x,
                y=y,
                width=COLUMN_WIDTH,
                height=height,
                memories=group.memories,
                conversations=group.conversations,
                own_memories=group.own_memories,
                own_conversations=group.own_conversations,
                drawn_memories=sum(i.kind == "memory" for i in members),
                drawn_conversations=sum(i.kind == "conversation" for i in members),
                nodes=nodes,
            )
        )
        heights[column] = y + height + GAP
    drawing.height = max(heights) if groups else GAP * 2
    seen = set()
    for link in sorted(answer.links, key=lambda k: (k.from_id, k.kind, k.to_id)):
        a, b = where.get(link.from_id), where.get(link.to_id)
        pair = (link.kind, *sorted((link.from_id, link.to_id)))
        if a is None or b is None or pair in seen:
            continue
        seen.add(pair)
        drawing.edges.append(Edge(link.kind, _curve(a, b)))
    return drawing


def _curve(a: Node, b: Node) -> str:
    """A curve from a to b: across columns it leaves sideways, within one it bows out to the left."""
    if a.x == b.x:
        bow = a.x - 14 - min(60, abs(b.y - a.y) // 4)
        return f"M{a.x} {a.y} C{bow} {a.y} {bow} {b.y} {b.x} {b.y}"
    middle = (a.x + b.x) // 2
    return f"M{a.x} {a.y} C{middle} {a.y} {middle} {b.y} {b.x} {b.y}"
