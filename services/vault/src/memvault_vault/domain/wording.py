"""Whether two texts are one sentence with its words changed in place: a fact about something else.

Two texts that share their names and numbers can still say different things:

- the same sentence with another ordinary word ("the support team's standup" / "the infra team's
  standup", "works as a nurse" / "works as a teacher"): `substituted`;
- the same sentence with two of its parts trading places ("flies from Lisbon to Porto" / "flies from
  Porto to Lisbon", "Carmen Silva sees Dr. Jensen" / "Carmen Jensen sees Dr. Silva"): `swapped`.

A rewording moves words around, adds or drops some and changes the small words (articles,
pronouns, prepositions, auxiliaries); those stay near-duplicates. The cost of the rule is the
rewording that only trades one word for a synonym ("prefers" / "likes"): it is linked as similar
(a review), which is the safe side, since a distinct fact skipped as a repeat would be lost.

Both work on the texts' words only (no model, no dictionary beyond the small words), and the
tokens of a text are kept for the last few thousand texts like the other facts.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from difflib import SequenceMatcher

_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "its", "their", "every",
    "each", "all", "some", "any", "both", "either", "another", "other", "such", "many", "most", "much", "few",
    "several", "more", "less", "own", "same", "i", "we", "you", "he", "she", "it", "they", "me", "us", "him",
    "them", "one's", "someone", "something", "everyone", "everything", "anyone", "anything", "there", "here", "in",
    "on", "at", "by", "for", "from", "to", "with", "without", "of", "about", "after", "before", "during", "since",
    "until", "till", "over", "under", "between", "through", "via", "per", "as", "like", "into", "onto", "within",
    "across", "around", "behind", "near", "up", "down", "out", "off", "than", "and", "or", "but", "so", "yet", "if",
    "when", "whenever", "while", "because", "although", "though", "unless", "whether", "once", "then", "also",
    "only", "just", "always", "usually", "often", "sometimes", "now", "currently", "still", "even", "already",
    "again", "ever", "really", "very", "quite", "what", "which", "who", "whom", "whose", "where", "why", "how",
    "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "has", "have", "had", "having",
    "will", "would", "can", "could", "should", "may", "might", "must", "shall", "let", "please", "e.g", "i.e",
    "etc", "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "don't", "doesn't",
    "didn't", "isn't", "aren't", "wasn't", "weren't", "won't", "can't", "couldn't", "shouldn't", "wouldn't",
    "haven't", "hasn't", "hadn't", "i'm", "i've", "i'd", "i'll", "we're", "we've", "you're", "they're",
})  # fmt: skip
"""The small words of English (articles, determiners, pronouns, prepositions, conjunctions, auxiliaries and a
few adverbs, negations: the numbers rule compares those): changing one of them rewords a sentence; it does not
make it about something else."""
_COORDINATORS = frozenset({"and", "or", "nor", "plus", "&", "versus", "vs", "v"})
"""Two parts joined by these can trade places and say the same ("Alice and Bob" / "Bob and Alice")."""
NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14",
    "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "thousand": "1000", "dozen": "12",
    "once": "1", "twice": "2",
}  # fmt: skip
# "nightly" says what "every night" says.
PERIODS = {"hourly": "hour", "nightly": "night", "daily": "day", "weekly": "week", "monthly": "month",
           "quarterly": "quarter", "yearly": "year", "annually": "year", "annual": "year"}  # fmt: skip
_TOKEN = re.compile(r"[^\W_]+(?:['’\-.:/@][^\W_]+)*|&")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_POSSESSIVE = re.compile(r"['’]s$")


def _stem(word: str) -> str:
    """A light English stem, so "editor" / "editors" and "deploys" / "deployed" are one word (not a grammar)."""
    if not word.isalpha() or len(word) <= 2:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if len(stem) >= 2 and any(c in "aeiouy" for c in stem):
                if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                    stem = stem[:-1]  # "running", "preferred"
                word = stem
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def _number(token: str) -> str:
    """'02:00' and '2:00' are one time, '1,450' and '1450' one number."""
    whole, dot, fraction = token.replace(",", "").partition(".")
    return (whole.lstrip("0") or "0") + dot + fraction


def _normal(found: str) -> str:
    word = _POSSESSIVE.sub("", found.replace("’", "'"))
    if word == "an":
        return "a"
    if _NUMBER.fullmatch(word):
        return _number(word)
    if word in _FUNCTION_WORDS or word in _COORDINATORS:
        return word
    word = NUMBER_WORDS.get(word, PERIODS.get(word, word))
    return _stem(word.replace("'", "").replace("-", ""))


@functools.lru_cache(maxsize=4096)
def tokens(text: str) -> tuple[str, ...]:
    """The words of a text in order, lower case, with numbers, plurals and tenses made alike; no punctuation."""
    return tuple(_normal(t) for t in _TOKEN.findall(text.lower()))


def _content(words: list[str] | tuple[str, ...]) -> list[str]:
    return [w for w in words if w not in _FUNCTION_WORDS and w not in _COORDINATORS]


def substituted(a: str, b: str) -> bool:
    """The same sentence with other ordinary words in one place or more, and nothing else changed.

    The two word sequences are aligned; every stretch where they differ must either differ only in small
    words ("every" / "all") or be a substitution: content words in place of other content words, with the
    same small words around them ("the support team" / "the infra team", "an oat flat white" / "a soy
    latte"). At least one substitution, and nothing added, dropped or restructured ("Alice's email is" /
    "Alice can be reached at" is a rewording).
    """
    ta, tb = tokens(a), tokens(b)
    if ta == tb:
        return False
    found = False
    for op, i1, i2, j1, j2 in SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        left, right = ta[i1:i2], tb[j1:j2]
        if "".join(left) == "".join(right):
            continue  # "wi fi" / "wifi"
        content_left, content_right = _content(left), _content(right)
        if not content_left and not content_right:
            continue
        if not content_left or not content_right:
            return False  # a content word added or dropped: reworded
        small_left = [w for w in left if w not in content_left]
        small_right = [w for w in right if w not in content_right]
        if small_left != small_right:
            return False  # restructured around the change
        if Counter(content_left) != Counter(content_right):
            found = True
    return found


def swapped(a: str, b: str) -> bool:
    """The same sentence with two of its parts trading places: "A <frame> B" and "B <frame> A".

    Beyond the common start and end of the two texts, one reads F1 S F2 and the other F2 S F1, where
    what stays (start, S and end) holds a content word, so the parts change their role ("from Lisbon
    to Porto" / "from Porto to Lisbon"). Not when S only joins them ("Alice and Bob"), nor when only
    a small word stays ("Mia is Sam's daughter" / "Sam's daughter is Mia", "The dentist is Dr. Okafor"
    / "Dr. Okafor is the dentist").
    """
    ta, tb = tokens(a), tokens(b)
    if len(ta) != len(tb) or ta == tb or Counter(ta) != Counter(tb):
        return False
    start = 0
    while ta[start] == tb[start]:
        start += 1
    end = len(ta)
    while ta[end - 1] == tb[end - 1]:
        end -= 1
    middle_a, middle_b = ta[start:end], tb[start:end]
    size = len(middle_a)
    for first in range(1, size - 1):
        if middle_b[size - first :] != middle_a[:first]:
            continue
        for last in range(1, size - first):
            if middle_b[:last] != middle_a[size - last :]:
                continue
            between = middle_a[first : size - last]
            if middle_b[last : size - first] != between or all(w in _COORDINATORS for w in between):
                continue
            if _content(ta[:start] + between + ta[end:]):
                return True
    return False


def changed_in_place(a: str, b: str) -> bool:
    """One sentence said of something else: a word substituted (`substituted`) or two parts swapped (`swapped`)."""
    return substituted(a, b) or swapped(a, b)
