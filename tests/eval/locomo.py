"""Load a LoCoMo-format evaluation file into plain dataclasses.

The file is read from `../shared/eval/` (or any path of the same format); it is never copied
into the repository. Evidence ids are normalised (`D:1:3` → `D1:3`, `"D8:6; D9:17"` → two ids),
ids that name no turn are dropped, and questions left without evidence are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).resolve().parents[3] / "shared" / "eval" / "locomo_dev.json"

_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")
_HEADLINE_CATEGORIES = frozenset({1, 2, 3, 4})


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    blip_caption: str | None
    date: datetime | None

    @property
    def content(self) -> str:
        """The memory text the protocol stores for this turn."""
        base = f"{self.speaker}: {self.text}"
        return f"{base} [shares {self.blip_caption}]" if self.blip_caption else base


@dataclass(frozen=True, slots=True)
class Fact:
    fact_id: str
    session: int
    text: str
    dia_ids: frozenset[str]
    date: datetime | None

    @property
    def content(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]

    @property
    def headline(self) -> bool:
        """Categories 1–4 make the headline figure; 5 (adversarial) is reported apart."""
        return self.category in _HEADLINE_CATEGORIES


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    facts: list[Fact]
    questions: list[Question]


def normalise_dia_ids(raw: Any) -> list[str]:
    """Every well-formed dialogue id in `raw` (a string or a list of strings), normalised."""
    parts = raw if isinstance(raw, list) else [raw]
    ids: list[str] = []
    for part in parts:
        for session, turn in _DIA_ID.findall(str(part)):
            ids.append(f"D{int(session)}:{int(turn)}")
    return ids


def parse_session_date(value: str | None) -> datetime | None:
    """LoCoMo's `"1:56 pm on 8 May, 2023"` as a datetime, or None."""
    if not value:
        return None
    try:
        return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


def _load_conversation(item: dict[str, Any]) -> Conversation:
    conversation = item["conversation"]
    turns: list[Turn] = []
    dates: dict[int, datetime | None] = {}
    for key, value in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if not match or not isinstance(value, list):
            continue
        session = int(match.group(1))
        dates[session] = parse_session_date(conversation.get(f"{key}_date_time"))
        for turn in value:
            ids = normalise_dia_ids(turn.get("dia_id", ""))
            if not ids:
                continue
            turns.append(
                Turn(
                    dia_id=ids[0],
                    session=session,
                    speaker=str(turn["speaker"]),
                    text=str(turn.get("text", "")),
                    blip_caption=turn.get("blip_caption") or None,
                    date=dates[session],
                )
            )
    turns.sort(key=lambda t: (t.session, int(t.dia_id.split(":")[1])))
    known = {t.dia_id for t in turns}

    facts: list[Fact] = []
    for key, per_speaker in (item.get("observation") or {}).items():
        match = _SESSION_KEY.match(key)
        if not match:
            continue
        session = int(match.group(1))
        for entries in per_speaker.values():
            for entry in entries:
                cited = frozenset(i for i in normalise_dia_ids(entry[1]) if i in known)
                facts.append(
                    Fact(
                        fact_id=f"F{len(facts)}",
                        session=session,
                        text=str(entry[0]),
                        dia_ids=cited,
                        date=dates.get(session),
                    )
                )

    questions: list[Question] = []
    for qa in item.get("qa", []):
        evidence = frozenset(i for i in normalise_dia_ids(qa.get("evidence", [])) if i in known)
        if evidence:
            questions.append(Question(text=str(qa["question"]), category=int(qa["category"]), evidence=evidence))
    return Conversation(sample_id=str(item.get("sample_id", "")), turns=turns, facts=facts, questions=questions)


def load(path: Path = DEFAULT_PATH) -> list[Conversation]:
    """All conversations in a LoCoMo-format file."""
    with path.open(encoding="utf-8") as handle:
        data = json.load(handle)
    return [_load_conversation(item) for item in data]
