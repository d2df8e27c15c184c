"""When a new memory repeats, updates or may contradict one already stored: every threshold in one place.

A write is compared with the vault's active, proposed and superseded memories and with the
earlier items of the same import, by the cosine similarity of their embeddings (the indexer's
Similar call):

- near-duplicate: cosine >= NEAR_DUPLICATE_COSINE *and* the same facts (numbers, versions, IP
  addresses, dates, month and day names, negations, and names and other identifiers: people,
  places, products, emails, URLs, hostnames, paths) *and* not the same sentence with a word
  changed or two parts swapped (`wording`): skipped, naming the memory it repeats;
- similar: cosine >= SIMILAR_COSINE: stored and linked (`similar_to`), because it may be an
  update or a contradiction ("1 Gbps" vs "2 Gbps" scores like a rewording; only the facts differ),
  or a fact about someone or something else ("Xavier Eriksen orders oat flat white" vs "Marco
  Eriksen orders oat flat white": 0.92 and more, only the name differs; "the support team's
  standup" vs "the infra team's standup"; "flies from Lisbon to Porto" vs "from Porto to Lisbon").

The numbers were calibrated on the bundled all-MiniLM-L6-v2 embedder with the pairs in
`tests/bench/similarity_pairs.py` (`python -m tests.bench.lifecycle similarity`, table in
docs/benchmarks.md); `python -m tests.bench.lifecycle duplicates` counts the distinct facts the rule
skips in 50,600 generated ones. Another embedding model needs its own calibration.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from memvault_vault.domain import wording
from memvault_vault.domain.memory import Status
from memvault_vault.domain.wording import NUMBER_WORDS, PERIODS

NEAR_DUPLICATE_COSINE = 0.93
SIMILAR_COSINE = 0.80
NEGATED_SIMILAR_COSINE = 0.70
"""A pair where one text negates what the other says scores lower than a changed number does
("Sam drinks coffee" / "Sam does not drink coffee": 0.74), so it is linked from here."""
SIMILAR_PER_TEXT = 10
"""Nearest memories asked for per text; enough that rejected and invalidated ones cannot crowd out the rest."""
PENDING_TO_COMPARE = 600
"""Newest memories not yet in the index that are compared from their text (the indexer's cap). More than one
full import (MAX_BULK_ITEMS), so an import need not wait while the index takes in the one before it."""
PENDING_TEXT_BYTES = 1_000_000
"""At most this much of their text is sent along, which keeps the indexer call well under gRPC's message limit."""
INDEX_CATCH_UP_SECONDS = 10.0
"""How long an import waits, at most, until few enough memories wait for the index to compare them from their text."""
INDEX_RETRY_SECONDS = 0.5
"""When the indexer does not answer, a write asks once more after this long before checking exact duplicates only."""


def sendable(pending: Sequence[tuple[str, str]], budget: int = PENDING_TEXT_BYTES) -> list[tuple[str, str]]:
    """The newest of these (id, text) pairs whose texts together fit in `budget` bytes."""
    kept: list[tuple[str, str]] = []
    size = 0
    for memory_id, text in pending:
        size += len(text.encode())
        if size > budget:
            break
        kept.append((memory_id, text))
    return kept


_NAMED_DATES = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow",
    "yesterday", "morning", "afternoon", "evening", "noon", "midnight", "am", "pm", "hour", "night", "day",
    "week", "fortnight", "month", "quarter", "year",
}  # fmt: skip
# Negations, and the verbs that turn a statement around the same way ("likes" / "dislikes").
NEGATIONS = {
    "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "nowhere", "cannot", "without",
    "stopped", "quit", "dropped", "disabled", "removed", "avoid", "avoids", "dislikes", "hates",
}  # fmt: skip
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?\b|\b[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){2,7}\b", re.I)
_VERSION = re.compile(r"\bv?\d+(?:\.\d+)+[a-z0-9\-+]*\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _number(text: str) -> str:
    """'02' and '2' are the same number; '1,450' and '1450' too."""
    text = text.replace(",", "")
    whole, dot, fraction = text.partition(".")
    return (whole.lstrip("0") or "0") + dot + fraction


# Names and other identifiers: which person, place, product, address or file a text is about.
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"'`]+", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_HOST = re.compile(r"(?:[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?\.)+[a-z][a-z0-9-]*[a-z0-9]", re.I)
_UNIT = re.compile(r"\d+(?:[.,:]\d+)*[a-z]*", re.I)
"""'8TB', '2nd', '10am': a number with its unit, which the values already compare."""
_TRAILING = ".,;:!?)]}>'\"”’"
_STRIP = "\"'`“”‘’()[]{}<>,.;:!?*•"
_POSSESSIVE = re.compile(r"['’]s$", re.I)
_PARTS = re.compile(r"[^\w]+")
_ABBREVIATIONS = {"dr", "mr", "mrs", "ms", "prof", "st", "mt", "sr", "jr", "e.g", "i.e", "vs", "approx", "ca", "cf"}
"""Their full stop does not end the sentence: the name after "Dr." is not a sentence start (nor an initial's)."""
_FIRST_PERSON = {"i", "i'm", "i've", "i'd", "i'll", "i’m", "i’ve", "i’d", "i’ll"}
# Words a sentence often starts with: capitalised there, never a name.
_NOT_NAMES = {
    "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "its", "their",
    "every", "each", "all", "some", "any", "no", "both", "either", "neither", "another", "other", "such",
    "many", "most", "few", "several", "much", "more", "less", "i", "we", "you", "he", "she", "it", "they",
    "me", "us", "him", "them", "one", "someone", "everyone", "everybody", "nobody", "none", "there", "here",
    "in", "on", "at", "by", "for", "from", "to", "with", "without", "of", "about", "after", "before",
    "during", "since", "until", "till", "over", "under", "between", "through", "via", "per", "as", "like",
    "into", "onto", "within", "across", "around", "behind", "near", "and", "or", "but", "so", "yet", "if",
    "when", "whenever", "while", "because", "although", "though", "unless", "whether", "once", "then",
    "also", "only", "just", "always", "never", "usually", "often", "sometimes", "now", "currently", "still",
    "what", "which", "who", "whom", "whose", "where", "why", "how", "is", "are", "was", "were", "be", "do",
    "does", "did", "don't", "doesn't", "has", "have", "had", "will", "would", "can", "could", "should",
    "may", "might", "must", "shall", "not", "please", "note", "yes", "ok", "okay",
}  # fmt: skip


@dataclass(frozen=True)
class Identifiers:
    """The names in a text, and every word it uses (to see a name the other text writes in lower case)."""

    names: frozenset[str]
    """Capitalised words not at a sentence start (but not "I"), words with inner capitals or with letters
    and digits (products: DS920+, OpenWrt), emails, URLs, hostnames, paths; lower case."""
    initial: frozenset[str]
    """Capitalised words starting a sentence, other than the usual sentence starters: a name ("Xavier
    orders ...") or a verb ("Uses Tailscale ...") that cannot be told apart without a dictionary."""
    words: frozenset[str]


def _product(core: str, letters: bool) -> bool:
    """Letters and digits (DS920+, ci01), or capitals inside the word (OpenWrt, iPhone, NAS)."""
    return (letters and any(c.isdigit() for c in core)) or (len(core) > 1 and any(c.isupper() for c in core[1:]))


@functools.lru_cache(maxsize=4096)
def identifiers(text: str) -> Identifiers:
    """Names and words of a text (kept for the last few thousand texts: an import compares each new
    text with up to SIMILAR_PER_TEXT others, and those with each other)."""
    names: set[str] = set()
    initial: set[str] = set()
    words: set[str] = set()

    def lift(match: re.Match[str]) -> str:
        found = match.group(0)
        core = found.rstrip(_TRAILING)
        names.add(core.lower().rstrip("/"))
        return " " + found[len(core) :]

    rest = _EMAIL.sub(lift, _URL.sub(lift, text))
    starts = True
    for chunk in rest.split():
        core = _POSSESSIVE.sub("", chunk.strip(_STRIP))
        ends = chunk.rstrip("\"')]}’”").endswith((".", "!", "?", ":", ";")) and not (
            chunk.endswith(".") and (core.lower() in _ABBREVIATIONS or (len(core) == 1 and core.isupper()))
        )
        possessive = core != chunk.strip(_STRIP)
        if not core:
            starts = starts or ends
            continue
        lower = core.lower()
        words.add(lower)
        words.update(part for part in _PARTS.split(lower) if part)
        letters = any(c.isalpha() for c in core)
        if _UNIT.fullmatch(core):
            words.add(lower.lstrip("0123456789.,:"))  # "8TB" says "8 TB"
        elif letters and ("/" in core or "\\" in core):
            names.add(lower.rstrip("/\\"))
        elif _HOST.fullmatch(core) or _product(core, letters):
            names.add(lower)
        elif core[0].isupper():
            if not starts:
                if lower not in _FIRST_PERSON:
                    names.add(lower)
            elif lower not in _NOT_NAMES:
                (names if possessive else initial).add(lower)
        starts = ends
    words.update(names)
    return Identifiers(frozenset(names), frozenset(initial), frozenset(words))


def same_identifiers(a: str, b: str) -> bool:
    """Neither text names someone or something the other does not mention.

    A name one text has and the other lacks, in any case, differs. A capitalised word starting a
    sentence differs only when the other text also starts with one it lacks: a swapped name
    ("Xavier orders ..." / "Marco orders ..."), not a reworded start ("Uses Tailscale ..." /
    "Remote access goes through Tailscale").
    """
    ia, ib = identifiers(a), identifiers(b)
    if not ia.names <= ib.words or not ib.names <= ia.words:
        return False
    return not (ia.initial - ib.words and ib.initial - ia.words)


@dataclass(frozen=True)
class Facts:
    """What must match, besides the names, for two texts to say the same thing."""

    values: tuple[str, ...]
    named_dates: tuple[str, ...]
    negations: int


@functools.lru_cache(maxsize=4096)
def facts(text: str) -> Facts:
    """Values, named dates and negations of a text (kept like `identifiers`)."""
    lowered = text.lower()
    values: list[str] = []
    rest = lowered
    for pattern in (_IP, _VERSION):
        values.extend(m.group(0).lstrip("v") for m in pattern.finditer(rest))
        rest = pattern.sub(" ", rest)
    values.extend(_number(m.group(0)) for m in _NUMBER.finditer(rest))
    words = _WORD.findall(rest)
    values.extend(NUMBER_WORDS[w] for w in words if w in NUMBER_WORDS)
    negations = sum(1 for w in words if w in NEGATIONS or w.endswith("n't"))
    dates = sorted({PERIODS.get(w, w) for w in words} & _NAMED_DATES)
    return Facts(tuple(sorted(Counter(values).elements())), tuple(dates), negations)


def same_values(a: str, b: str) -> bool:
    """Same numbers, versions, addresses and dates, and the same negations (counted as present or not)."""
    fa, fb = facts(a), facts(b)
    return fa.values == fb.values and fa.named_dates == fb.named_dates and (fa.negations > 0) == (fb.negations > 0)


def same_facts(a: str, b: str) -> bool:
    """Same values, dates and negations (`same_values`), the same names (`same_identifiers`), and not one
    sentence with a word substituted or two parts swapped (`wording.changed_in_place`)."""
    return same_values(a, b) and same_identifiers(a, b) and not wording.changed_in_place(a, b)


_NEGATION_WORD = re.compile(r"(?<![a-z])(?:" + "|".join(sorted(NEGATIONS)) + r")(?![a-z])")
"""Matches wherever `facts` could find a negation word in the lowered text, so a text it does not match
holds none: `facts` reads words from the text with addresses and versions blanked, an address or a
version never begins or ends against a letter, so a word `facts` finds has no letter on either side
in the text itself either (a property test checks this against `facts`)."""


@functools.lru_cache(maxsize=16384)
def negates(text: str) -> bool:
    """Whether a text negates (`facts(text).negations > 0`), reading its values only if it may: 2 µs
    instead of 23 for a text with no negation word (most of them), and a write compares each new text
    with its stored neighbours at cosine 0.70 and up, thousands per call in a large vault."""
    lowered = text.lower()
    if "n't" not in lowered and _NEGATION_WORD.search(lowered) is None:
        return False
    return facts(text).negations > 0


def negated(a: str, b: str) -> bool:
    """One text negates and the other does not."""
    return negates(a) != negates(b)


def classify(cosine: float, new_text: str, old_text: str) -> str | None:
    """'near-duplicate', 'similar' or None for one pair."""
    if cosine >= NEAR_DUPLICATE_COSINE and same_facts(new_text, old_text):
        return "near-duplicate"
    if cosine >= SIMILAR_COSINE or (cosine >= NEGATED_SIMILAR_COSINE and negated(new_text, old_text)):
        return "similar"
    return None


def lowest_cosine() -> float:
    """The lowest cosine any rule looks at: what to ask the indexer for."""
    return min(SIMILAR_COSINE, NEGATED_SIMILAR_COSINE)


class DuplicateCheck(StrEnum):
    SEMANTIC = "semantic"
    EXACT_ONLY = "exact-only"
    """The indexer was unavailable (or is not configured): only exact duplicates were caught."""


@dataclass(frozen=True)
class Match:
    """A stored memory the index found near a new text."""

    memory_id: str
    cosine: float
    content: str
    status: Status


@dataclass(frozen=True)
class Decision:
    """What to do with one new text: 'store', 'similar' (store and link) or 'duplicate' (skip)."""

    kind: str
    duplicate_of: str = ""
    """The memory it repeats, or empty when it repeats an earlier item of the same import."""
    duplicate_of_item: int | None = None
    similar_to: tuple[str, ...] = ()
    similar_items: tuple[int, ...] = ()
    cosine: float = 0.0


_COMPARED = (Status.ACTIVE, Status.PROPOSED, Status.SUPERSEDED)
_LINKED = (Status.ACTIVE, Status.PROPOSED)


def decide(
    texts: Sequence[str], matches: Sequence[Sequence[Match]], earlier: Sequence[dict[int, float]]
) -> list[Decision]:
    """Decide each new text in order, against stored memories and the texts before it.

    `matches[i]` are stored memories near text i; `earlier[i]` maps the position of an earlier
    text to its cosine with text i. Rejected and invalidated memories are not compared; a
    superseded one can be repeated (near-duplicate) but is not linked as similar.
    """
    decisions: list[Decision] = []
    for position, text in enumerate(texts):
        near: list[tuple[float, str, int | None]] = []
        similar: list[tuple[float, str]] = []
        similar_items: list[tuple[float, int]] = []
        for match in matches[position]:
            if match.status not in _COMPARED:
                continue
            kind = classify(match.cosine, text, match.content)
            if kind == "near-duplicate":
                near.append((match.cosine, match.memory_id, None))
            elif kind == "similar" and match.status in _LINKED:
                similar.append((match.cosine, match.memory_id))
        for other, cosine in earlier[position].items():
            before = decisions[other]
            kind = classify(cosine, text, texts[other])
            if kind == "near-duplicate":
                if before.kind == "duplicate":
                    near.append((cosine, before.duplicate_of, before.duplicate_of_item))
                else:
                    near.append((cosine, "", other))
            elif kind == "similar" and before.kind != "duplicate":
                similar_items.append((cosine, other))
        if near:
            cosine, memory_id, item = max(near, key=lambda n: n[0])
            decisions.append(Decision("duplicate", duplicate_of=memory_id, duplicate_of_item=item, cosine=cosine))
        elif similar or similar_items:
            # The closest links only: an import of many alike items must not link each to all the others.
            linked = tuple(m for _, m in sorted(similar, reverse=True))[:SIMILAR_PER_TEXT]
            decisions.append(
                Decision(
                    "similar",
                    similar_to=linked,
                    similar_items=tuple(i for _, i in sorted(similar_items, reverse=True))[
                        : SIMILAR_PER_TEXT - len(linked)
                    ],
                    cosine=max([c for c, _ in similar] + [c for c, _ in similar_items]),
                )
            )
        else:
            decisions.append(Decision("store"))
    return decisions
