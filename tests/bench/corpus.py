"""Synthetic but plausible memories and queries for benchmarks (deterministic for a seed)."""

from __future__ import annotations

import random
import re

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


# Distinct facts for counting false near-duplicates: each template is said once per combination of its
# slots, and most slots are names (people, places, organisations, products, emails, URLs, hosts, paths),
# so the corpus holds many pairs that differ in nothing but one name.
FIRST_NAMES = [
    "Xavier", "Marco", "Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun",
    "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Ursula", "Vera",
    "Wanda", "Yusuf", "Zoe", "Amara", "Bastian", "Carmen", "Dmitri", "Elif", "Felix", "Greta", "Hugo",
    "Ingrid", "Jonas", "Keiko", "Luca", "Maya", "Niko", "Olga", "Pavel", "Rania", "Stefan", "Tomas",
    "Uma", "Viktor", "Wen", "Yara",
]  # fmt: skip
LAST_NAMES = [
    "Eriksen", "Larsen", "Okafor", "Mensah", "Novak", "Kowalski", "Silva", "Costa", "Tanaka", "Sato",
    "Nguyen", "Haddad", "Fischer", "Weber", "Moreau", "Dubois", "Rossi", "Bianchi", "Jensen", "Berg",
    "Petrov", "Ivanova", "Osei", "Adeyemi", "Khan", "Iqbal", "Garcia", "Lopez", "Murphy", "Walsh",
]  # fmt: skip
CITIES = [
    "Lisbon", "Porto", "Madrid", "Valencia", "Berlin", "Hamburg", "Munich", "Vienna", "Prague", "Krakow",
    "Oslo", "Bergen", "Stockholm", "Malmo", "Copenhagen", "Aarhus", "Helsinki", "Tallinn", "Dublin", "Cork",
    "Leeds", "Bristol", "Lyon", "Nantes", "Turin", "Milan", "Ghent", "Utrecht", "Zurich", "Geneva",
]  # fmt: skip
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne", "Cyberdyne", "Tyrell"]
DRINKS = [
    "an oat flat white", "a soy latte", "a double espresso", "a green tea", "a black coffee", "a chai latte",
    "a cortado", "an americano", "a matcha latte", "a hot chocolate",
]  # fmt: skip
ROLES = [
    "a platform engineer",
    "a data analyst",
    "a product designer",
    "a nurse",
    "a teacher",
    "an accountant",
    "an architect",
]
SERVICES = ["Grafana", "Kibana", "Jenkins", "Sentry", "Prometheus", "Metabase", "Airflow", "Superset"]
TEAMS = ["payments", "search", "billing", "mobile", "infra", "growth", "support", "security"]
SUBDOMAINS = ["wiki", "docs", "dash", "ops", "status", "intranet", "portal", "tools"]
DOMAINS = ["acme.example", "globex.example", "initech.example", "hooli.example", "home.arpa", "lab.internal"]
PAGES = ["start", "overview", "oncall", "runbooks", "metrics", "alerts"]
HOSTS = ["ci-alpha", "ci-beta", "ci-gamma", "build-north", "build-south", "runner-red", "runner-blue", "forge"]
APPS = ["nginx", "postgres", "restic", "caddy", "grafana", "syncthing", "borg", "haproxy"]
FILES = ["main", "backup", "local", "prod", "staging", "override", "defaults", "extra"]
CARS = ["Toyota Corolla", "Volkswagen Golf", "Skoda Octavia", "Renault Clio", "Volvo V60", "Kia Niro"]
STREETS = ["Elm", "Oak", "Maple", "Cedar", "Birch", "Willow", "Aspen", "Chestnut"]
LAPTOPS = ["ThinkPad X1 Carbon", "MacBook Air", "Dell XPS", "Framework Laptop", "Surface Laptop", "HP EliteBook"]
ROOMS = ["Helios", "Orion", "Vega", "Lyra", "Draco", "Atlas", "Juno", "Rigel"]
ALLERGENS = ["peanuts", "shellfish", "penicillin", "bee stings", "sesame", "latex"]
PROJECTS = ["billing", "website", "mobile app", "data pipeline", "design system", "CLI"]
ORGS = ["acme", "globex", "initech", "hooli", "vandelay"]
EDITORS = ["Neovim", "Emacs", "VS Code", "Helix", "Zed", "Sublime Text"]
THEMES = ["Dracula", "Solarized", "Gruvbox", "Nord", "Monokai"]
LANGUAGES = ["Python", "Rust", "Go", "TypeScript", "Kotlin"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
EVENTS = ["family reunion", "team offsite", "conference", "ski trip"]


NAME_LISTS = (
    FIRST_NAMES, LAST_NAMES, CITIES, COMPANIES, SERVICES, SUBDOMAINS, DOMAINS, PAGES, HOSTS, APPS, FILES, CARS,
    STREETS, LAPTOPS, ROOMS, ORGS, EDITORS, THEMES, LANGUAGES,
)  # fmt: skip
"""The slots that hold a name or identifier; the others (drinks, roles, teams, ...) hold ordinary words."""


def name_words() -> set[str]:
    """Every word of every name the corpus uses, lower case: what tells 'differs in a name' from the generator's side."""
    return {word for names in NAME_LISTS for name in names for word in re.findall(r"\w+", name.lower())}


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def _fact(rng: random.Random) -> str:
    kind = rng.randrange(13)
    person, first = _person(rng), rng.choice(FIRST_NAMES)
    if kind == 0:
        return f"{person} always orders {rng.choice(DRINKS)}, {rng.randint(1, 4)} cups a day."
    if kind == 1:
        return f"{person} lives in {rng.choice(CITIES)} and works at {rng.choice(COMPANIES)} as {rng.choice(ROLES)}."
    if kind == 2:
        last = rng.choice(LAST_NAMES)
        return f"{first} {last}'s work email is {first.lower()}.{last.lower()}@{rng.choice(DOMAINS)}."
    if kind == 3:
        return (
            f"The {rng.choice(SERVICES)} dashboard of the {rng.choice(TEAMS)} team is at "
            f"https://{rng.choice(SUBDOMAINS)}.{rng.choice(DOMAINS)}/{rng.choice(PAGES)}."
        )
    if kind == 4:
        return f"The nightly {rng.choice(TEAMS)} build runs on {rng.choice(HOSTS)}.{rng.choice(DOMAINS)}."
    if kind == 5:
        app = rng.choice(APPS)
        return f"The {app} config on {first}'s server lives at /etc/{app}/{rng.choice(FILES)}.conf."
    if kind == 6:
        return f"{person} drives a {rng.choice(CARS)} and parks it on {rng.choice(STREETS)} Street."
    if kind == 7:
        return f"{person}'s laptop is a {rng.choice(LAPTOPS)} with {rng.choice([8, 16, 32, 64])} GB of RAM."
    if kind == 8:
        return (
            f"The {rng.choice(TEAMS)} team's standup is at {rng.randint(8, 10):02d}:{rng.choice(['00', '15', '30'])} "
            f"in the {rng.choice(ROOMS)} room."
        )
    if kind == 9:
        return f"{person} is allergic to {rng.choice(ALLERGENS)} and sees Dr. {rng.choice(LAST_NAMES)} about it."
    if kind == 10:
        return f"The {rng.choice(PROJECTS)} code of {first}'s team lives at github.com/{rng.choice(ORGS)}/{rng.choice(APPS)}."
    if kind == 11:
        origin, destination = rng.sample(CITIES, 2)
        return f"{person} flies from {origin} to {destination} every {rng.choice(MONTHS)} for the {rng.choice(EVENTS)}."
    return f"{person} writes {rng.choice(LANGUAGES)} in {rng.choice(EDITORS)} with the {rng.choice(THEMES)} theme."


def distinct_facts(count: int, seed: int = 19) -> list[str]:
    """`count` different short facts (deterministic for a seed): no two say the same thing."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = _fact(rng)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
