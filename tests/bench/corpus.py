"""Synthetic but plausible memories and queries for benchmarks (deterministic for a seed)."""

from __future__ import annotations

import random

PEOPLE = [
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ivan",
    "Jun",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
]
VERBS = [
    "prefers",
    "uses",
    "maintains",
    "replaced",
    "configured",
    "bought",
    "upgraded",
    "monitors",
    "backs-up",
    "retired",
    "moved",
    "tested",
    "documented",
]
THINGS = [
    "router",
    "switch",
    "NAS",
    "laptop",
    "printer",
    "camera",
    "thermostat",
    "firewall",
    "VPN",
    "backup-drive",
    "UPS",
    "access-point",
    "server",
    "cluster",
    "database",
    "dashboard",
    "calendar",
    "notebook",
    "editor",
    "keyboard",
    "monitor",
    "phone",
    "tablet",
    "scanner",
    "projector",
]
PLACES = [
    "office",
    "garage",
    "attic",
    "basement",
    "kitchen",
    "studio",
    "lab",
    "datacenter",
    "cabin",
    "workshop",
    "hallway",
    "balcony",
]
DETAILS = [
    "running Debian 12",
    "with 32 GB of RAM",
    "on VLAN 20",
    "behind Tailscale",
    "with nightly snapshots",
    "on a 2 Gbps link",
    "with ZFS mirrors",
    "since March",
    "under warranty until 2028",
    "with dark mode",
    "using British spelling",
    "on the 5 GHz band",
    "with IPv6 enabled",
    "in rack slot 4",
    "with a 30 minute battery",
]


def memories(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = (
            f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} the {rng.choice(THINGS)} in the {rng.choice(PLACES)} "
            f"{rng.choice(DETAILS)} (note {rng.randrange(10**6)})."
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def queries(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        f"which {rng.choice(THINGS)} does {rng.choice(PEOPLE)} have in the {rng.choice(PLACES)}?" for _ in range(count)
    ]
