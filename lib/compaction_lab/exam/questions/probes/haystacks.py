"""The session's haystacks: normalised record texts and targets, split at ``tail_start`` and the cut.

In them a value's presence (usable questions) and absence (decoys) are looked up.
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
    """Join the session's system prompt as recorded: ``metadata["system_prompt"]`` and every ``system`` record."""
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
    """A session's normalised text around its cut, its system prompt, the whole and the raw JSONL.

    ``late`` is what every arm keeps verbatim: the records from ``tail_start``
    to the cut, and the `kept` text (the verbatim part of an agent's own next
    request). Records at or after the cut are in ``whole`` only.
    """

    late: str  # tail_start <= source_order < cut, and the kept text
    covered: str  # before tail_start
    system: str
    whole: str  # every record and target, the kept text and the system prompt
    raw: bytes  # Session.to_jsonl

    @property
    def before_cut(self) -> str:
        """Everything a reader could have seen before the cut: covered part, tail and kept text."""
        return self.covered + _SEP + self.late


def session_haystacks(session: Session, tail_start: int, cut: int | None = None, kept: str = "") -> Haystacks:
    """Build the haystacks of `session` with its covered part ending at `tail_start` and its tail at `cut`.

    `cut` None: the session's end (nothing after the cut). `kept`: extra text
    that is kept verbatim beside the tail.
    """
    end = cut if cut is not None else session.end
    late = _hay(r for r in session.records if tail_start <= r.source_order < end)
    if kept:
        late = late + _SEP + normalise(kept)
    covered = _hay(r for r in session.records if r.source_order < tail_start)
    after = _hay(r for r in session.records if r.source_order >= end and r.source_order >= tail_start)
    system = normalise(system_prompt_text(session))
    return Haystacks(late, covered, system, _SEP.join((covered, late, after, system)), session.to_jsonl())


def absent(value: str, hay: Haystacks) -> bool:
    """Tell whether `value` occurs nowhere in the session: normalised texts, targets, system prompt, raw JSONL."""
    key = normalise(value)
    if not key or key in hay.whole:
        return False
    raw = (value.encode("utf-8"), json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8"))
    return not any(x in hay.raw for x in raw)
