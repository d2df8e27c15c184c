"""A large import with a known right outcome for every item, for the 10,000-item test and the import benchmark.

Each batch mixes new memories with exact repeats, near-duplicates (the same sentence with other
punctuation), updates (the same sentence with another number, so `similar`), secrets, invalid
items and texts forgotten earlier. Every new memory carries a number no other one has, so two
new memories never count as near-duplicates of each other, and a derived item knows exactly
which earlier item it repeats or updates.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from memvault_core import limits
from memvault_vault.domain.duplicates import SIMILAR_PER_TEXT

_PEOPLE = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena"]
_VERBS = ["keeps", "moved", "labelled", "repaired", "lent out", "ordered", "sold", "painted", "cleaned", "found"]
_THINGS = [
    "the blue bicycle", "the spare router", "the camping stove", "the old laptop", "the garden hose",
    "the label printer", "the ladder", "the winter tyres", "the sewing machine", "the projector",
    "the record player", "the toolbox", "the backup drive", "the tent", "the drone",
]  # fmt: skip
_PLACES = [
    "in the attic", "in the garage", "at the office", "in the basement", "at the cabin", "in the shed",
    "under the stairs", "in the hallway closet", "at grandma's house", "in storage unit 4",
]  # fmt: skip
_REASONS = ["for the summer", "until spring", "after the move", "for the repair", "before the trip", "for now"]
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class Item:
    content: str
    expect: str
    """new (stored or similar), duplicate, near, similar, secret, invalid, excluded"""
    origin: int | None = None
    """For duplicate, near and similar: the position of the item it repeats or updates."""


def _sentence(rng: random.Random, number: int) -> str:
    return (
        f"{rng.choice(_PEOPLE)} {rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_PLACES)} "
        f"{rng.choice(_REASONS)} (record {number})."
    )


def forgotten_texts(count: int, seed: int = 3) -> list[str]:
    """Texts to remember and forget before the import, so the import finds them excluded."""
    rng = random.Random(seed)
    return [_sentence(rng, 700_000 + i) for i in range(count)]


def build(total: int, *, seed: int = 5, forgotten: list[str] | None = None, batch: int = 500) -> list[Item]:
    """`total` items; in every batch of `batch`, 70% new and the rest derived or refused."""
    rng = random.Random(seed)
    forgotten = list(forgotten or [])
    items: list[Item] = []
    new_positions: list[int] = []
    number = 100_000 * seed
    for position in range(total):
        roll = rng.random()
        if not new_positions or roll < 0.70:
            number += 1
            items.append(Item(_sentence(rng, number), "new"))
            new_positions.append(position)
            continue
        origin = rng.choice(new_positions[-2 * batch :])
        base = items[origin].content
        if roll < 0.77:
            items.append(Item("  " + base.upper() + "  ", "duplicate", origin))
        elif roll < 0.84:
            items.append(Item(base[:-1] + "!", "near", origin))
        elif roll < 0.91:
            number += 1
            items.append(Item(re.sub(r"\(record \d+\)", f"(record {number})", base), "similar", origin))
        elif roll < 0.95:
            token = "ghp_" + "".join(rng.choice(_ALNUM) for _ in range(36))
            items.append(Item(f"The deploy token for job {position} is {token}", "secret"))
        elif roll < 0.98 or not forgotten:
            content = "" if rng.random() < 0.5 else "x" * (limits.MAX_CONTENT_CHARS + 1)
            items.append(Item(content, "invalid"))
        else:
            items.append(Item(forgotten.pop(), "excluded"))
    return items


def check(items: list[Item], outcomes: list[dict[str, object]]) -> list[str]:
    """Every way the outcomes differ from what each item should have got (empty when all are right)."""
    ids: dict[int, str] = {}
    wrong: list[str] = []
    for position, (item, outcome) in enumerate(zip(items, outcomes, strict=True)):
        got = outcome["outcome"]
        memory_id = str(outcome.get("id", ""))
        if item.expect == "new":
            if got not in ("stored", "similar"):
                wrong.append(f"{position}: new item got {got} ({outcome.get('message')})")
            ids[position] = memory_id
            continue
        if item.expect in ("secret", "invalid", "excluded"):
            if got != item.expect:
                wrong.append(f"{position}: expected {item.expect}, got {got}")
            continue
        assert item.origin is not None
        origin_id = ids.get(item.origin, "")
        if item.expect in ("duplicate", "near"):
            match = "exact" if item.expect == "duplicate" else "near"
            if got != "duplicate" or memory_id != origin_id or outcome.get("match") != match:
                wrong.append(f"{position}: expected {match} duplicate of {origin_id}, got {outcome}")
        elif item.expect == "similar":
            linked = list(outcome.get("similar_to", []))  # type: ignore[call-overload]
            # Linked to the nearest SIMILAR_PER_TEXT memories: in this templated data up to that many others
            # can be as close as the original (same words, another record number) and crowd it out.
            if got != "similar" or (origin_id not in linked and len(linked) < SIMILAR_PER_TEXT):
                wrong.append(f"{position}: expected similar to {origin_id}, got {outcome}")
            ids[position] = memory_id
    return wrong
