"""How a memory becomes the text that is embedded and the text that is keyword-indexed.

These are the constructions the fusion research settled on (docs/research-fusion.md):

- dense text:   "<date> <content> <context>"   e.g. "8 May 2023 Caroline: I went to ... Melanie: Hey ..."
- keyword text: "<date> <content>" at weight A, plus the context at weight D.
- context:      the previous memory of the same batch (here: the previous turn of the session);
                empty for facts and for memories written on their own.
- query text:   the question as asked, for both sides.
"""

from __future__ import annotations

from datetime import datetime

from tests.eval.locomo import Fact, Turn


def date_words(moment: datetime | None) -> str:
    """A date the way people write it in questions ("8 May 2023"); empty when unknown."""
    return f"{moment.day} {moment:%B %Y}" if moment else ""


def with_date(content: str, moment: datetime | None) -> str:
    """The memory's text prefixed by its date, so "when"/"in May" questions can match it."""
    words = date_words(moment)
    return f"{words} {content}" if words else content


def previous_turns(turns: list[Turn]) -> list[str]:
    """For each turn, the previous turn of the same session (empty for a session's first)."""
    out: list[str] = []
    for index, turn in enumerate(turns):
        before = turns[index - 1] if index else None
        out.append(before.content if before and before.session == turn.session else "")
    return out


def join_context(texts: list[str], context: list[str]) -> list[str]:
    """Each text followed by its context (the previous turn), when there is one."""
    return [f"{text} {extra}" if extra else text for text, extra in zip(texts, context, strict=True)]


def fact_texts(facts: list[Fact], *, dated: bool) -> list[str]:
    return [with_date(f.content, f.date) if dated else f.content for f in facts]


def turn_texts(turns: list[Turn], *, dated: bool) -> list[str]:
    return [with_date(t.content, t.date) if dated else t.content for t in turns]
