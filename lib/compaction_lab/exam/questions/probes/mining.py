"""Mining cases: the spec, one mined case and its report, and every session's cases.

The spec is `ProbeSpec`; one case and its report: `mine`, `MinedCase`; every session's cases: `mine_all`,
`mine_cases`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compaction_lab.core import bounded_json
from compaction_lab.core.session import Session
from compaction_lab.core.tokens import DEFAULT_ENCODING
from compaction_lab.exam.questions.bank import (
    MAX_QUESTIONS_PER_CASE,
    cut_points,
    mix_pairs,
    questions_limit_problem,
    spec_kwargs,
    tail_start_of,
)
from compaction_lab.exam.questions.probes.decoys import make_decoys, session_vocab
from compaction_lab.exam.questions.probes.haystacks import session_haystacks
from compaction_lab.exam.questions.probes.selection import DROP_REASONS, Usable, eligible, plan_counts, select
from compaction_lab.exam.types import POINTERS, Case, Question

__all__ = [
    "MinedCase",
    "ProbeSpec",
    "mine",
    "mine_all",
    "mine_case",
    "mine_cases",
]


def _parse_mix(mix: Any) -> tuple[tuple[str, float], ...] | None:
    """Check a pointer mix (None, mapping, pairs or JSON text) and return it as pairs in POINTERS order."""
    if mix is None or (isinstance(mix, str) and mix.strip().lower() in ("", "none", "natural", "null")):
        return None
    if isinstance(mix, str):
        mix = bounded_json.loads(mix)
    return mix_pairs(mix)


@dataclass(frozen=True)
class ProbeSpec:
    """Parameters of mined probe cases.

    Parameters
    ----------
    tail_tokens : int
        Recent-tail budget in report tokens; questions point before the tail.
    n_questions : int
        Real questions per case (fewer when the session has fewer candidates).
    n_decoys : int
        Decoys per case, on top of the real questions.
    pointer_mix : None, Mapping[str, float] or tuple of (pointer, weight)
        None: natural proportions (every pointer that has candidates, the rest
        by availability). Otherwise relative weights of ``assistant``,
        ``user``, ``tool``, stored as pairs in POINTERS order.
    seed : int
    encoding : str
        Report tokenizer for the tail.
    cuts_per_session : int
        `mine_cases`: cases per session (1 = at its end; k = cuts at
        ``1, (k-1)/k, …`` of its records, as the bank places them).
    max_per_record : int
        At most this many real questions from one message (its entry), so
        one long output cannot dominate a case.
    """

    tail_tokens: int = 8192
    n_questions: int = 20
    n_decoys: int = 2
    pointer_mix: Any = None
    seed: int = 7
    encoding: str = DEFAULT_ENCODING
    cuts_per_session: int = 1
    max_per_record: int = 2

    def __post_init__(self) -> None:
        """Parse the pointer mix and refuse counts out of range."""
        object.__setattr__(self, "pointer_mix", _parse_mix(self.pointer_mix))
        for name in ("tail_tokens", "n_questions", "n_decoys"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.cuts_per_session < 1:
            raise ValueError(f"cuts_per_session must be >= 1, got {self.cuts_per_session}")
        if self.max_per_record < 1:
            raise ValueError(f"max_per_record must be >= 1, got {self.max_per_record}")
        if self.n_questions > MAX_QUESTIONS_PER_CASE:
            raise ValueError(questions_limit_problem("n_questions", self.n_questions))

    @property
    def mix(self) -> dict[str, float] | None:
        """The pointer mix as a dict, or None for natural proportions."""
        return None if self.pointer_mix is None else dict(self.pointer_mix)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> ProbeSpec:
        """Build a spec from a mapping (e.g. papermill parameters), ignoring unknown keys and None.

        ``pointer_mix`` may be a mapping, pairs, JSON text or ``"none"``; other
        known keys are coerced to the field's type.
        """
        return cls(**spec_kwargs(cls, m, {"pointer_mix": lambda v: v}))


@dataclass(frozen=True)
class MinedCase:
    """A mined case and how it compares with what was asked.

    Parameters
    ----------
    case : Case
    available : Mapping[str, int]
        Usable values per pointer (the pool's composition).
    planned : Mapping[str, int]
        Real questions per pointer the spec asked for (the mix's rounding; with
        natural proportions, what availability allowed).
    shortfall : Mapping[str, int]
        Per pointer, planned minus asked (0 when met).
    decoys_skipped : int
        Decoys asked for but not made.
    notes : tuple of str
    pool : tuple of Question
        Every usable value as a question (ids ``f"{case_id}-e{n:03d}"``, in
        source order), before sampling and the per-message cap: what a caller
        grades a projection against to get recall over the whole pool. One
        value once: forms of one value (``agent-session.ts``,
        ``src/core/agent-session.ts``) are one question, the other forms its
        aliases (`selection.eligible`).
    dropped : Mapping[str, int]
        Values not asked, by reason (`selection.DROP_REASONS`: ``template``,
        ``phrase``, ``slash-list``, ``guessable``, ``ambiguous form``,
        ``ambiguous wording``: distinct values that were otherwise usable;
        ``per-record cap``: draws passed over because their message had
        ``max_per_record`` questions already).
    """

    case: Case
    available: Mapping[str, int]
    planned: Mapping[str, int]
    shortfall: Mapping[str, int]
    decoys_skipped: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    pool: tuple[Question, ...] = field(default_factory=tuple)
    dropped: Mapping[str, int] = field(default_factory=dict)

    @property
    def asked(self) -> dict[str, int]:
        """Real questions per pointer in the case."""
        return {p: sum(1 for q in self.case.real if q.pointer == p) for p in POINTERS}


def _question(u: Usable, qid: str, case_id: str) -> Question:
    return Question(
        id=qid,
        case_id=case_id,
        pointer=u.cand.pointer,
        category=u.cand.category,
        prompt=u.prompt,
        answer=u.cand.value,
        aliases=u.aliases,
        source_entry_id=u.cand.entry_id,
        source_order=u.cand.source_order,
    )


def mine(
    session: Session,
    spec: ProbeSpec | None = None,
    *,
    case_id: str | None = None,
    cut: int | None = None,
    tail_start: int | None = None,
    kept: str = "",
) -> MinedCase:
    """Mine one case from `session` at `cut`, with a report of what the candidates allowed.

    Parameters
    ----------
    session : Session
    spec : ProbeSpec, optional
    case_id : str, optional
        Defaults to ``f"{session.id}-probe"``.
    cut : int, optional
        Records with ``source_order < cut`` are compacted; defaults to the
        session's end (after its last record). Records at or after it never
        make a value ineligible (a recorded compaction's summary, the rest of
        the session).
    tail_start : int, optional
        First source_order of what is kept verbatim before the cut; defaults
        to the bank's tail (`bank.tail_start_of`). A recorded compaction
        passes where its kept region starts (``cut`` when it kept nothing).
    kept : str
        Other text kept verbatim (the kept part of an agent's own next
        request): its values are not eligible either.

    Returns
    -------
    MinedCase
    """
    spec = ProbeSpec() if spec is None else spec
    case_id = f"{session.id}-probe" if case_id is None else case_id
    end = session.end
    cut = end if cut is None else int(cut)
    if tail_start is None:
        tail = tail_start_of(session, cut, spec.tail_tokens, spec.encoding)
    else:
        tail = int(tail_start)
        if not 0 <= tail <= cut:
            raise ValueError(f"tail_start {tail} must be within 0..cut ({cut})")
    hay = session_haystacks(session, tail, cut, kept)
    found = eligible(session, tail, hay, cut)
    usable = list(found.usable)
    available = {p: sum(1 for u in usable if u.cand.pointer == p) for p in POINTERS}
    pool = tuple(_question(u, f"{case_id}-e{i:03d}", case_id) for i, u in enumerate(usable))
    planned, asked = plan_counts(available, spec.n_questions, spec.mix)

    rng = random.Random(f"{spec.seed}:{case_id}")
    selection = select(rng, usable, asked, spec.n_questions, spec.mix is None, spec.max_per_record)
    chosen = selection.chosen
    asked = {p: sum(1 for u in chosen if u.cand.pointer == p) for p in POINTERS}
    chosen.sort(key=lambda u: (u.cand.source_order, u.cand.start, u.cand.value))
    questions = [_question(u, f"{case_id}-p{i:02d}", case_id) for i, u in enumerate(chosen)]
    decoys = make_decoys(case_id, chosen, spec.n_decoys, rng, session_vocab(session), hay) if spec.n_decoys else []

    shortfall = {p: max(0, planned[p] - asked[p]) for p in POINTERS}
    dropped = {**{r: found.dropped.get(r, 0) for r in DROP_REASONS}, "per-record cap": selection.passed_capped}
    notes: list[str] = []
    if sum(asked.values()) < spec.n_questions:
        notes.append(
            f"{case_id}: {sum(asked.values())} of {spec.n_questions} real questions "
            f"(usable values {available}, tail_start {tail}, cut {cut})"
        )
    for p in POINTERS:
        if shortfall[p]:
            notes.append(f"{case_id}: {shortfall[p]} fewer {p} questions than planned ({available[p]} usable values)")
    why = [f"{found.dropped[r]} {r}" for r in DROP_REASONS if found.dropped.get(r)]
    if why or selection.passed_capped:
        parts = [f"values not asked: {', '.join(why)}"] if why else []
        if selection.passed_capped:
            parts.append(
                f"{selection.passed_capped} per-record cap (draws passed over, max {spec.max_per_record} per message)"
            )
        notes.append(f"{case_id}: " + "; ".join(parts))
    if found.merged:
        notes.append(f"{case_id}: {found.merged} spellings asked as forms of another value (one value once)")
    skipped = spec.n_decoys - len(decoys)
    if skipped:
        notes.append(f"{case_id}: {len(decoys)} of {spec.n_decoys} decoys (no lookalike could be made absent)")
    case = Case(id=case_id, session_id=session.id, cut=cut, tail_start=tail, questions=tuple(questions + decoys))
    return MinedCase(case, available, planned, shortfall, skipped, tuple(notes), pool, dropped)


def mine_case(
    session: Session,
    *,
    case_id: str | None = None,
    cut: int | None = None,
    tail_tokens: int = 8192,
    n_questions: int = 20,
    n_decoys: int = 2,
    pointer_mix: Any = None,
    seed: int = 7,
    encoding: str = DEFAULT_ENCODING,
    max_per_record: int = 2,
) -> Case:
    """Mine one probe case from a session (see `mine` for the report).

    Parameters
    ----------
    session : Session
    case_id : str, optional
        Defaults to ``f"{session.id}-probe"``; question ids are
        ``f"{case_id}-p{n:02d}"``, decoy ids ``f"{case_id}-d{n:02d}"``.
    cut : int, optional
        Defaults to the session's end.
    tail_tokens, n_questions, n_decoys, pointer_mix, seed, encoding, max_per_record
        See `ProbeSpec`.

    Returns
    -------
    Case
    """
    spec = ProbeSpec(
        tail_tokens=tail_tokens,
        n_questions=n_questions,
        n_decoys=n_decoys,
        pointer_mix=pointer_mix,
        seed=seed,
        encoding=encoding,
        max_per_record=max_per_record,
    )
    return mine(session, spec, case_id=case_id, cut=cut).case


def mine_all(sessions: Iterable[Session], spec: ProbeSpec | None = None) -> list[MinedCase]:
    """`mine` every session: one case at its end, or ``spec.cuts_per_session`` cases (ids ``…-probe-c{j}``)."""
    spec = ProbeSpec() if spec is None else spec
    out: list[MinedCase] = []
    for s in sessions:
        if spec.cuts_per_session == 1:
            out.append(mine(s, spec))
            continue
        k = spec.cuts_per_session
        fractions = [(k - j) / k for j in range(k)]
        for j, cut in enumerate(cut_points(s, fractions)):
            out.append(mine(s, spec, case_id=f"{s.id}-probe-c{j}", cut=cut))
    return out


def mine_cases(sessions: Iterable[Session], *, spec: ProbeSpec | None = None, **kw: Any) -> list[Case]:
    """One probe case per session at its end (or ``cuts_per_session`` cases each).

    Parameters
    ----------
    sessions : iterable of Session
    spec : ProbeSpec, optional
        Base parameters; keyword arguments (any `ProbeSpec` field) override it.

    Returns
    -------
    list of Case
    """
    spec = replace(spec or ProbeSpec(), **kw) if kw else (spec or ProbeSpec())
    return [m.case for m in mine_all(sessions, spec)]
