"""Checks of a mined case against its session: provenance, the tail, absent decoys, no answer given away."""

from __future__ import annotations

from compaction_lab.core.session import Session
from compaction_lab.exam.grading import accepted
from compaction_lab.exam.questions.probes.haystacks import absent, session_haystacks
from compaction_lab.exam.questions.probes.wording import contains
from compaction_lab.exam.types import Case

__all__ = [
    "check_probe_case",
]


def check_probe_case(case: Case, session: Session, *, kept: str = "", max_per_record: int | None = None) -> None:
    """Validate a mined case against its session; raise ValueError on the first problem.

    Real questions: the answer occurs in the record at its source_order (of
    its source entry), before tail_start, and (normalised, with aliases) in
    no record text or target from tail_start to the case's cut, nor in
    `kept` (the other text kept verbatim, as `mine` was given it) nor in the
    system prompt; records at or after the cut do not matter. It is one line
    of fewer than four words. With `max_per_record`, no message (entry)
    holds more real questions than that.
    Decoys: no provenance, value and aliases absent from the whole session.
    Every question: the prompt contains no accepted form of its answer;
    no answer is asked twice.
    """
    if case.session_id != session.id:
        raise ValueError(f"case {case.id}: session {case.session_id!r}, not {session.id!r}")
    if not 0 <= case.tail_start <= case.cut:
        raise ValueError(f"case {case.id}: tail_start {case.tail_start} not within 0..cut ({case.cut})")
    hay = session_haystacks(session, case.tail_start, case.cut, kept)
    by_order = {r.source_order: r for r in session.records}
    per_record: dict[str, int] = {}
    seen: set[str] = set()
    for q in case.questions:
        forms = accepted(q)
        if not forms:
            raise ValueError(f"question {q.id}: empty answer")
        if contains(q.prompt, forms):
            raise ValueError(f"question {q.id}: prompt {q.prompt!r} contains its answer {q.answer!r}")
        if forms[0] in seen:
            raise ValueError(f"case {case.id}: answer {q.answer!r} asked twice")
        seen.add(forms[0])
        if q.decoy:
            if q.source_entry_id or q.source_order != -1:
                raise ValueError(f"decoy {q.id}: must have source_entry_id '' and source_order -1")
            bad = next((v for v in (q.answer, *q.aliases) if not absent(v, hay)), None)
            if bad is not None:
                raise ValueError(f"decoy {q.id}: value {bad!r} occurs in session {session.id}")
            continue
        rec = by_order.get(q.source_order)
        if rec is None or rec.entry_id != q.source_entry_id or q.answer not in rec.text:
            raise ValueError(
                f"question {q.id}: answer {q.answer!r} not in entry {q.source_entry_id!r} "
                f"at source_order {q.source_order}"
            )
        if "\n" in q.answer or len(q.answer.split()) >= 4:
            raise ValueError(f"question {q.id}: answer {q.answer!r} is not one short value")
        entry = q.source_entry_id or f"#{q.source_order}"
        per_record[entry] = per_record.get(entry, 0) + 1
        if max_per_record is not None and per_record[entry] > max_per_record:
            raise ValueError(f"case {case.id}: more than {max_per_record} questions from entry {entry!r}")
        if not q.source_order < case.tail_start:
            raise ValueError(f"question {q.id}: source_order {q.source_order} not before tail_start {case.tail_start}")
        hit = next((f for f in forms if f in hay.late or f in hay.system), None)
        if hit is not None:
            raise ValueError(
                f"question {q.id}: {hit!r} occurs between tail_start and the cut, in the kept text or in the system prompt"
            )
