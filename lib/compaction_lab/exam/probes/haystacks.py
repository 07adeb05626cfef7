"""The session's haystacks: normalised record texts and targets, split at ``tail_start``, where a value's
presence (usable questions) and absence (decoys) are looked up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from compaction_lab.core.session import Record, Session
from compaction_lab.exam.grading import normalise

__all__ = [
    "Haystacks",
    "absent",
    "session_haystacks",
    "system_prompt_text",
]

_SEP = "\n\x00\n"  # joins record texts in haystacks; no match can straddle two records


def system_prompt_text(session: Session) -> str:
    """The session's system prompt as recorded: ``metadata["system_prompt"]`` and every ``system`` record."""
    parts = [session.metadata.get("system_prompt")] + [r.text for r in session.records if r.kind == "system"]
    return _SEP.join(p for p in parts if isinstance(p, str) and p)


def _hay(records: Iterable[Record]) -> str:
    """Normalised texts and targets of `records`, joined so no match straddles two."""
    parts: list[str] = []
    for r in records:
        parts.append(normalise(r.text))
        if r.target:
            parts.append(normalise(r.target))
    return _SEP.join(parts)


@dataclass(frozen=True)
class Haystacks:
    """A session's normalised text before and after ``tail_start``, its system prompt, the whole and the raw JSONL."""

    late: str  # at or after tail_start
    covered: str  # before tail_start
    system: str
    whole: str  # every record and target, and the system prompt
    raw: bytes  # Session.to_jsonl


def session_haystacks(session: Session, tail_start: int) -> Haystacks:
    """The haystacks of `session` with its covered part ending at `tail_start`."""
    late = _hay(r for r in session.records if r.source_order >= tail_start)
    covered = _hay(r for r in session.records if r.source_order < tail_start)
    system = normalise(system_prompt_text(session))
    return Haystacks(late, covered, system, _SEP.join((covered, late, system)), session.to_jsonl())


def absent(value: str, hay: Haystacks) -> bool:
    """True when `value` occurs nowhere in the session: normalised texts, targets, system prompt, raw JSONL."""
    key = normalise(value)
    if not key or key in hay.whole:
        return False
    raw = (value.encode("utf-8"), json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8"))
    return not any(x in hay.raw for x in raw)
