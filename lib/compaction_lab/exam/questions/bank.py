"""The synthetic question bank: cases and exact-value questions from the chains' planted facts.

A *case* is (chain, compaction point, questions). The default bank has 18
cases — 6 chains × 3 compaction points — and 178 questions, 8 of them decoys,
all taken from the generator's ledger (`PlantedFact`); nothing is mined or
invented here.

Key names: `BankSpec` (the parameters), `build_bank` (the cases;
`build_bank_with_report` adds the `BankReport` of shortfalls), `cut_points`,
`check_bank` (decoys absent from every chain), `tail_start_of` (the recent tail
no question may sit in); `types.bank_digest` fingerprints a bank.

Design: docs/exams.md#2-the-synthetic-bank
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from compaction_lab.core import bounded_json
from compaction_lab.core.session import Session
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.exam.grading import accepted, normalise
from compaction_lab.exam.questions.allocation import allocate, largest_remainder, mix_plan, split_evenly
from compaction_lab.exam.types import POINTERS, Case, Question
from compaction_lab.ingest.synthetic import PlantedFact, SyntheticChain
from compaction_lab.strategies.arms.futureos import tail_boundaries, tail_start
from compaction_lab.strategies.base import history

if TYPE_CHECKING:  # pandas is imported where a frame is built, not with the module
    import pandas as pd

#: The default pointer mix: the seed's follow-up study (80% assistant, 10% user, 10% tool).
DEFAULT_POINTER_MIX: Mapping[str, float] = {"assistant": 0.8, "user": 0.1, "tool": 0.1}

#: Cut fractions of the default bank: the chain's end, then 80% and 60% of its records.
DEFAULT_CUT_FRACTIONS: tuple[float, ...] = (1.0, 0.8, 0.6)

#: How far back (as a fraction of the chain's records) a cut may snap to reach a user turn.
_SNAP_WINDOW = 0.1

#: Separator between record texts in joined haystacks; no generated text contains it,
#: so no match can straddle two records.
_SEP = "\n\x00\n"


#: Most questions asked per case (the bank's ``n_questions`` is at most this times ``n_cases``; a probe
#: case's at most this). A synthetic chain plants a few dozen facts and a session seldom holds more exact
#: values before its tail, so a number far past this is a slip (a million asked, nine built); the
#: parameter check (`run.params`) refuses it before any work, naming ``n_questions``.
MAX_QUESTIONS_PER_CASE = 10_000


class BankShortfallWarning(UserWarning):
    """The bank has fewer questions (or a different pointer mix) than asked: the facts did not allow more."""


# --------------------------------------------------------------------------- spec


def spec_kwargs(
    cls: type, m: Mapping[str, Any], converters: Mapping[str, Callable[[Any], Any]] | None = None
) -> dict[str, Any]:
    """Keyword arguments for the dataclass `cls` from a mapping such as papermill parameters.

    Unknown keys and None values are ignored; each known value goes through its converter
    (``encoding`` -> str, `converters` for the rest by name, otherwise int).
    """
    conv: dict[str, Callable[[Any], Any]] = {"encoding": str, **dict(converters or {})}
    return {f.name: conv.get(f.name, int)(m[f.name]) for f in fields(cls) if m.get(f.name) is not None}


def questions_limit_problem(name: str, value: int, n_cases: int | None = None) -> str:
    """Word the problem of more questions than `MAX_QUESTIONS_PER_CASE` allows (per case; `n_cases` cases)."""
    if n_cases is None:
        return f"{name} = {value:,}: at most {MAX_QUESTIONS_PER_CASE:,} per case (one case per session)"
    limit = MAX_QUESTIONS_PER_CASE * max(1, n_cases)
    return f"{name} = {value:,}: at most {MAX_QUESTIONS_PER_CASE:,} per case (n_cases = {n_cases:,}: {limit:,})"


@dataclass(frozen=True)
class BankSpec:
    """Parameters of a synthetic question bank.

    Parameters
    ----------
    n_cases : int
        Cases (chain, cut) in the bank; at most chains × ``len(cut_fractions)``.
    n_questions : int
        Questions in the whole bank, decoys included.
    n_decoys : int
        Of which decoys.
    pointer_mix : Mapping[str, float] or tuple of (pointer, weight)
        Relative weights of ``assistant``, ``user``, ``tool`` among the real
        questions (need not sum to 1; missing pointers weigh 0). Stored as a
        tuple of pairs in `POINTERS` order so the spec stays hashable.
    tail_tokens : int
        Recent-tail budget in report tokens; questions point before the tail.
    seed : int
        Seed of every random choice of the bank.
    encoding : str
        Report tokenizer for the tail.
    cut_fractions : tuple of float
        Compaction points as fractions of a chain's records, in (0, 1].
    """

    n_cases: int = 18
    n_questions: int = 178
    n_decoys: int = 8
    pointer_mix: Any = field(default_factory=lambda: dict(DEFAULT_POINTER_MIX))
    tail_tokens: int = 8192
    seed: int = 7
    encoding: str = DEFAULT_ENCODING
    cut_fractions: tuple[float, ...] = DEFAULT_CUT_FRACTIONS

    def __post_init__(self) -> None:
        """Normalise the pointer mix and cut fractions, and refuse counts and fractions that cannot make a bank."""
        object.__setattr__(self, "pointer_mix", mix_pairs(self.pointer_mix))
        object.__setattr__(self, "cut_fractions", tuple(float(f) for f in self.cut_fractions))
        for name in ("n_cases", "n_questions", "n_decoys", "tail_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.n_decoys > self.n_questions:
            raise ValueError(f"n_decoys ({self.n_decoys}) exceeds n_questions ({self.n_questions})")
        if self.n_questions > 0 and self.n_cases == 0:
            raise ValueError("n_questions > 0 needs n_cases >= 1")
        if self.n_questions > MAX_QUESTIONS_PER_CASE * max(1, self.n_cases):
            raise ValueError(questions_limit_problem("n_questions", self.n_questions, self.n_cases))
        if not self.cut_fractions:
            raise ValueError("cut_fractions must not be empty")
        bad = [f for f in self.cut_fractions if not 0.0 < f <= 1.0]
        if bad:
            raise ValueError(f"cut fractions must lie in (0, 1], got {bad}")

    @property
    def mix(self) -> dict[str, float]:
        """The pointer mix as a dict (every pointer present, weights as given)."""
        return dict(self.pointer_mix)

    @property
    def n_real(self) -> int:
        """Real (non-decoy) questions asked for."""
        return self.n_questions - self.n_decoys

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> BankSpec:
        """Build a spec from a mapping, ignoring unknown keys (like `SyntheticSpec.from_mapping`).

        Parameters
        ----------
        m : Mapping
            E.g. papermill parameters. ``pointer_mix`` may be a mapping or its
            JSON text; ``cut_fractions`` a sequence or comma-separated text;
            other known keys are coerced to the field's type. None is ignored.
        """
        return cls(
            **spec_kwargs(
                cls,
                m,
                {
                    "pointer_mix": lambda v: bounded_json.loads(v) if isinstance(v, str) else v,
                    "cut_fractions": lambda v: tuple(
                        float(x) for x in (v.split(",") if isinstance(v, str) else v) if str(x).strip()
                    ),
                },
            )
        )


def mix_pairs(mix: Any) -> tuple[tuple[str, float], ...]:
    """Check a pointer mix (mapping or pairs) and return it as ``((pointer, weight), ...)`` in POINTERS order."""
    d = dict(mix.items() if isinstance(mix, Mapping) else mix)
    unknown = sorted(set(d) - set(POINTERS))
    if unknown:
        raise ValueError(f"pointer_mix has unknown pointers {unknown}; expected some of {POINTERS}")
    pairs = tuple((p, float(d.get(p, 0.0))) for p in POINTERS)
    if any(w < 0 for _, w in pairs) or sum(w for _, w in pairs) <= 0:
        raise ValueError(f"pointer_mix weights must be >= 0 with a positive sum, got {dict(pairs)}")
    return pairs


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class CaseAllocation:
    """What one case was meant to ask, what its facts allowed, and what it asks.

    Dicts are keyed by pointer (every pointer present).
    """

    case_id: str
    session_id: str
    cut: int
    tail_start: int
    eligible: Mapping[str, int]
    planned: Mapping[str, int]
    actual: Mapping[str, int]
    decoys_planned: int
    decoys_actual: int

    @property
    def real_planned(self) -> int:
        """Real questions planned for the case, all pointers."""
        return sum(self.planned.values())

    @property
    def real_actual(self) -> int:
        """Real questions the case has, all pointers."""
        return sum(self.actual.values())


@dataclass(frozen=True)
class BankReport:
    """How the built bank compares with its spec: pointer targets, shortfalls, notes.

    Parameters
    ----------
    spec : BankSpec
    targets : Mapping[str, int]
        Bank-wide real questions per pointer asked for (largest-remainder rounding of the mix).
    actual : Mapping[str, int]
        Real questions per pointer in the bank.
    cases : tuple of CaseAllocation
    notes : tuple of str
        Human-readable shortfalls and reuse notes (empty when the bank is as asked).
    """

    spec: BankSpec
    targets: Mapping[str, int]
    actual: Mapping[str, int]
    cases: tuple[CaseAllocation, ...]
    notes: tuple[str, ...] = ()

    @property
    def real_built(self) -> int:
        """Real questions in the bank, all pointers."""
        return sum(self.actual.values())

    @property
    def decoys_built(self) -> int:
        """Decoys in the bank, all cases."""
        return sum(c.decoys_actual for c in self.cases)

    @property
    def missing_real(self) -> int:
        """Real questions asked for but not built (no eligible fact left)."""
        return self.spec.n_real - self.real_built

    @property
    def missing_decoys(self) -> int:
        """Decoys asked for but not built."""
        return self.spec.n_decoys - self.decoys_built

    @property
    def shortfall(self) -> dict[str, int]:
        """Per pointer, how many fewer real questions the bank has than its target (0 if none)."""
        return {p: max(0, self.targets[p] - self.actual[p]) for p in POINTERS}

    @property
    def ok(self) -> bool:
        """True when the bank has exactly the questions, decoys and pointer counts asked for."""
        return self.missing_real == 0 and self.missing_decoys == 0 and dict(self.targets) == dict(self.actual)

    def shortfall_line(self) -> str:
        """Say in one sentence that the bank has fewer questions than asked, if it has.

        What was asked, what the sessions allow, and why ("" when the count is met; a pointer mix the facts
        could not follow is in `notes`).
        """
        if self.missing_real <= 0 and self.missing_decoys <= 0:
            return ""
        s = self.spec
        why = []
        if self.missing_real > 0:
            eligible = sum(sum(c.eligible.values()) for c in self.cases)
            why.append(
                f"{self.real_built:,} of {s.n_real:,} real questions — a real question asks a fact planted before "
                f"its case's recent tail (tail_tokens = {s.tail_tokens:,}), at most once per case, and the "
                f"{len(self.cases):,} cases (n_cases) hold {eligible:,} such facts"
            )
            if any(sum(c.eligible.values()) > c.real_planned for c in self.cases):
                why[-1] += ", each case asking at most its even share of the questions"
        if self.missing_decoys > 0:
            why.append(
                f"{self.decoys_built:,} of {s.n_decoys:,} decoys — a case asks each of its chain's decoys "
                "(decoys_per_chain) at most once"
            )
        built = self.real_built + self.decoys_built
        return f"n_questions = {s.n_questions:,} asked for, {built:,} built: the sessions allow " + "; ".join(why) + "."

    def frame(self) -> pd.DataFrame:
        """Per case: eligible, planned and actual questions by pointer, and decoys (a DataFrame)."""
        import pandas as pd

        rows = []
        for c in self.cases:
            row: dict[str, Any] = {
                "case_id": c.case_id,
                "session_id": c.session_id,
                "cut": c.cut,
                "tail_start": c.tail_start,
            }
            for what in ("eligible", "planned", "actual"):
                for p in POINTERS:
                    row[f"{what}_{p}"] = getattr(c, what)[p]
            row["decoys_planned"], row["decoys_actual"] = c.decoys_planned, c.decoys_actual
            rows.append(row)
        return pd.DataFrame(rows)


# --------------------------------------------------------------------------- cuts and tails


def cut_points(session: Session, fractions: Sequence[float]) -> list[int]:
    """Compaction points (source_order cuts) of `session` at the given fractions of its records.

    Parameters
    ----------
    session : Session
    fractions : sequence of float
        In (0, 1]; 1.0 cuts after the last record.

    Returns
    -------
    list of int
        One cut per fraction: records with ``source_order < cut`` are compacted.
        A fraction below 1 snaps back to the nearest user turn at or before
        record ``round(f * n)``, at most a tenth of the records back; without
        one (or when it is already another fraction's cut), to the nearest
        boundary no call/output pair straddles that is not a cut yet. See
        docs/exams.md#2-the-synthetic-bank ("Cut points").
    """
    recs = session.records
    n = len(recs)
    if n == 0:
        return [0 for _ in fractions]
    end = recs[-1].source_order + 1
    valid = tail_boundaries(recs)
    out: list[int] = []
    for f in fractions:
        if f >= 1.0:
            out.append(end)
            continue
        target = min(n, max(1, round(f * n)))
        order = lambda p: recs[p].source_order if p < n else end
        lowest = max(1, target - math.ceil(_SNAP_WINDOW * n))
        turn = next(
            (
                p
                for p in range(min(target, n - 1), lowest - 1, -1)
                if valid[p] and recs[p].kind == "user" and not recs[p].injected
            ),
            None,
        )
        if turn is None or order(turn) in out:
            # no free user turn: the nearest boundary no call/output pair straddles, not already a cut
            turn = next((p for p in range(target, 0, -1) if valid[p] and order(p) not in out), target)
        out.append(order(turn))
    return out


def tail_start_of(session: Session, cut: int, tail_tokens: int, encoding: str = DEFAULT_ENCODING) -> int:
    """First source_order of the recent tail before `cut` (FutureOS's notion, see docs/exams.md#1-cases-and-questions).

    Parameters
    ----------
    session : Session
    cut : int
    tail_tokens : int
        Tail budget in report tokens.
    encoding : str

    Returns
    -------
    int
        ``cut`` when nothing precedes the cut.
    """
    hist = history(session, cut)
    if not hist:
        return cut
    sizes = counter(encoding).count_many([r.text for r in hist])
    p, q = tail_start(hist, sizes, tail_tokens)
    return hist[p if p < len(hist) else q].source_order


# --------------------------------------------------------------------------- building


@dataclass(frozen=True)
class _Slot:
    """A case before its questions are drawn."""

    index: int
    case_id: str
    chain: SyntheticChain
    cut: int
    tail_start: int
    eligible: Mapping[str, tuple[PlantedFact, ...]]


def _eligible(chain: SyntheticChain, tail: int) -> dict[str, tuple[PlantedFact, ...]]:
    """Collect a chain's real facts strictly before the tail, by pointer, sorted by (source_order, fact_id)."""
    facts = sorted(
        (f for f in chain.facts if not f.is_decoy and 0 <= f.source_order < tail),
        key=lambda f: (f.source_order, f.fact_id),
    )
    return {p: tuple(f for f in facts if f.pointer == p) for p in POINTERS}


def _slots(chains: Sequence[SyntheticChain], spec: BankSpec) -> list[_Slot]:
    """Lay out the cases' chains, cuts and tails, round-robin over the chains."""
    n_chains, n_cuts = len(chains), len(spec.cut_fractions)
    if spec.n_cases > n_chains * n_cuts:
        raise ValueError(
            f"{spec.n_cases} cases asked but {n_chains} chains × {n_cuts} cut fractions "
            f"give only {n_chains * n_cuts} distinct cases"
        )
    cuts = {i: cut_points(c.session, spec.cut_fractions) for i, c in enumerate(chains)}
    out = []
    for i in range(spec.n_cases):
        k, j = i % n_chains, i // n_chains
        chain = chains[k]
        cut = cuts[k][j]
        tail = tail_start_of(chain.session, cut, spec.tail_tokens, spec.encoding)
        out.append(_Slot(i, f"{chain.session.id}-c{j}", chain, cut, tail, _eligible(chain, tail)))
    return out


def _draw(rng: random.Random, pool: Sequence[PlantedFact], k: int, used: set[str]) -> list[PlantedFact]:
    """`k` facts of `pool`, facts not in `used` first (each part sampled with `rng`)."""
    fresh = [f for f in pool if f.fact_id not in used]
    old = [f for f in pool if f.fact_id in used]
    first = rng.sample(fresh, min(k, len(fresh)))
    return first + rng.sample(old, k - len(first))


def _real_question(case_id: str, f: PlantedFact) -> Question:
    return Question(
        id="",
        case_id=case_id,
        pointer=f.pointer,
        category=f.category,
        prompt=f.question,
        answer=f.value,
        aliases=tuple(f.aliases),
        source_entry_id=f.entry_id,
        source_order=f.source_order,
        decoy=False,
    )


def _decoy_question(case_id: str, d: PlantedFact) -> Question:
    return Question(
        id="",
        case_id=case_id,
        pointer=d.pointer,
        category=d.category,
        prompt=d.question,
        answer=d.value,
        aliases=tuple(d.aliases),
        source_entry_id="",
        source_order=-1,
        decoy=True,
    )


def build_bank_with_report(
    chains: Sequence[SyntheticChain], spec: BankSpec | None = None
) -> tuple[list[Case], BankReport]:
    """Build the bank and say how it compares with the spec.

    Parameters
    ----------
    chains : sequence of SyntheticChain
        The generated chains, in the order cases are dealt to them.
    spec : BankSpec, optional
        Defaults to ``BankSpec()``.

    Returns
    -------
    cases : list of Case
    report : BankReport
        Pointer targets and counts, per-case allocations and shortfall notes.

    Raises
    ------
    ValueError
        If the spec asks for more cases than chains × cut fractions, or the
        built bank fails `check_bank` (e.g. a decoy value occurs in a chain).
    """
    spec = BankSpec() if spec is None else spec
    chains = list(chains)
    if spec.n_cases and not chains:
        raise ValueError("no chains to build a bank from")
    slots = _slots(chains, spec)
    rows = split_evenly(spec.n_real, len(slots))
    decoy_rows = split_evenly(spec.n_decoys, len(slots))
    targets = largest_remainder(spec.n_real, spec.mix)
    plan = mix_plan(rows, targets) if slots else []
    caps = [{p: len(s.eligible[p]) for p in POINTERS} for s in slots]
    alloc = allocate(rows, targets, caps, plan) if slots else []

    notes: list[str] = []
    used: dict[str, set[str]] = {}
    decks: dict[str, list[PlantedFact]] = {}
    dealt: dict[str, int] = {}
    cases, allocations = [], []
    for s, want, x, want_d in zip(slots, plan, alloc, decoy_rows, strict=False):
        sid = s.chain.session.id
        rng = random.Random(f"{spec.seed}:{s.case_id}")
        seen = used.setdefault(sid, set())
        real: list[PlantedFact] = []
        for p in POINTERS:
            real += _draw(rng, s.eligible[p], x[p], seen)
        real.sort(key=lambda f: (f.source_order, f.fact_id))
        seen.update(f.fact_id for f in real)
        questions = [_real_question(s.case_id, f) for f in real]

        if sid not in decks:
            deck = sorted(s.chain.decoys, key=lambda d: d.fact_id)
            random.Random(f"{spec.seed}:{sid}:decoys").shuffle(deck)
            decks[sid], dealt[sid] = deck, 0
        deck = decks[sid]
        got_d = min(want_d, len(deck))
        for _ in range(got_d):
            d = deck[dealt[sid] % len(deck)]
            if dealt[sid] >= len(deck):
                notes.append(f"{s.case_id}: decoy {d.fact_id} reused (chain {sid} has only {len(deck)} decoys)")
            dealt[sid] += 1
            questions.insert(rng.randint(0, len(questions)), _decoy_question(s.case_id, d))
        if got_d < want_d:
            notes.append(f"{s.case_id}: {got_d} of {want_d} decoys (chain {sid} has {len(deck)})")

        questions = [_renumber(q, f"{s.case_id}-q{n:02d}") for n, q in enumerate(questions)]
        cases.append(Case(id=s.case_id, session_id=sid, cut=s.cut, tail_start=s.tail_start, questions=tuple(questions)))
        actual = {p: x[p] for p in POINTERS}
        allocations.append(
            CaseAllocation(s.case_id, sid, s.cut, s.tail_start, dict(caps[s.index]), dict(want), actual, want_d, got_d)
        )
        short = {p: want[p] - actual[p] for p in POINTERS if actual[p] < want[p]}
        if short or sum(actual.values()) < sum(want.values()):
            notes.append(
                f"{s.case_id}: planned {dict(want)}, eligible {dict(caps[s.index])}, "
                f"asked {actual} (tail_start {s.tail_start})"
            )

    actual_tot = {p: sum(x[p] for x in alloc) for p in POINTERS}
    if actual_tot != targets:
        notes.insert(
            0,
            f"pointer counts {actual_tot} differ from the targets {targets}: the eligible facts did not allow the mix",
        )
    missing = spec.n_real - sum(actual_tot.values())
    if missing:
        notes.insert(0, f"{missing} of {spec.n_real} real questions not built: not enough eligible facts")
    check_bank(cases, chains)
    report = BankReport(spec, targets, actual_tot, tuple(allocations), tuple(notes))
    return cases, report


def _renumber(q: Question, qid: str) -> Question:
    return dataclasses.replace(q, id=qid)


def _warn_if_short(report: BankReport) -> None:
    """Warn (`BankShortfallWarning`) when the bank differs from its spec, so a shortfall is never silent."""
    if not report.ok:
        more = f" (+{len(report.notes) - 3} more notes)" if len(report.notes) > 3 else ""
        warnings.warn(
            "question bank differs from its spec: " + "; ".join(report.notes[:3]) + more,
            BankShortfallWarning,
            stacklevel=3,
        )


def build_bank_from_spec(chains: Sequence[SyntheticChain], spec: BankSpec) -> list[Case]:
    """`build_bank_with_report` without the report; warns (`BankShortfallWarning`) on any shortfall."""
    cases, report = build_bank_with_report(chains, spec)
    _warn_if_short(report)
    return cases


def build_bank(
    chains: Sequence[SyntheticChain],
    *,
    n_cases: int = 18,
    n_questions: int = 178,
    n_decoys: int = 8,
    pointer_mix: Mapping[str, float] | None = None,
    tail_tokens: int = 8192,
    seed: int = 7,
    encoding: str = DEFAULT_ENCODING,
    cut_fractions: Sequence[float] = DEFAULT_CUT_FRACTIONS,
) -> list[Case]:
    """Build the synthetic question bank (``docs/exams.md``, "Cases and questions").

    Parameters
    ----------
    chains : sequence of SyntheticChain
    n_cases, n_questions, n_decoys, pointer_mix, tail_tokens, seed, encoding, cut_fractions
        See `BankSpec` (``pointer_mix`` None means `DEFAULT_POINTER_MIX`).

    Returns
    -------
    list of Case
        Byte-identical (`bank_to_jsonl`) for the same chains and parameters.

    Warns
    -----
    BankShortfallWarning
        When the eligible facts did not allow the questions, decoys or pointer
        mix asked for; `build_bank_with_report` returns the details instead.
    """
    spec = BankSpec(
        n_cases=n_cases,
        n_questions=n_questions,
        n_decoys=n_decoys,
        pointer_mix=dict(DEFAULT_POINTER_MIX) if pointer_mix is None else pointer_mix,
        tail_tokens=tail_tokens,
        seed=seed,
        encoding=encoding,
        cut_fractions=tuple(cut_fractions),
    )
    return build_bank_from_spec(chains, spec)


# --------------------------------------------------------------------------- checks


def _haystack(texts: Iterable[str]) -> str:
    """Normalised record texts joined with a separator no match can straddle."""
    return _SEP.join(normalise(t) for t in texts)


def check_bank(cases: Sequence[Case], chains: Sequence[SyntheticChain]) -> None:
    """Validate a bank against its chains; raise ValueError with a clear message on the first problem.

    Checks: case and question ids unique, each question's case_id its case's;
    every case's session among the chains and ``tail_start <= cut``; decoys
    carry no provenance and their values and aliases occur in no chain (not in
    the exact bytes of ``Session.to_jsonl`` nor, normalised, in any record
    text); every real answer occurs in the record at its source_order, which
    belongs to its source entry and lies before the case's tail; no real answer
    or alias occurs (normalised) in any record at or after tail_start; no prompt
    contains its answer or an alias; no case asks the same answer twice.
    """
    sessions = {c.session.id: c.session for c in chains}
    seen_cases: set[str] = set()
    seen_q: set[str] = set()
    decoy_hay: list[tuple[str, bytes, str]] | None = None
    for case in cases:
        if case.id in seen_cases:
            raise ValueError(f"duplicate case id {case.id!r}")
        seen_cases.add(case.id)
        s = sessions.get(case.session_id)
        if s is None:
            raise ValueError(f"case {case.id}: session {case.session_id!r} is not among the chains")
        if case.tail_start > case.cut:
            raise ValueError(f"case {case.id}: tail_start {case.tail_start} is after the cut {case.cut}")
        by_order = {r.source_order: r for r in s.records}
        late = _haystack(r.text for r in s.records if r.source_order >= case.tail_start)
        answers: set[str] = set()
        for q in case.questions:
            if q.id in seen_q:
                raise ValueError(f"duplicate question id {q.id!r}")
            seen_q.add(q.id)
            if q.case_id != case.id:
                raise ValueError(f"question {q.id}: case_id {q.case_id!r} but it is in case {case.id!r}")
            forms = accepted(q)
            if not forms:
                raise ValueError(f"question {q.id}: empty answer")
            if any(f in normalise(q.prompt) for f in forms):
                raise ValueError(f"question {q.id}: prompt {q.prompt!r} contains its answer {q.answer!r}")
            key = normalise(q.answer)
            if key in answers:
                raise ValueError(f"case {case.id}: answer {q.answer!r} asked twice")
            answers.add(key)
            if q.decoy:
                if q.source_entry_id or q.source_order != -1:
                    raise ValueError(f"decoy {q.id}: must have source_entry_id '' and source_order -1")
                if decoy_hay is None:
                    decoy_hay = [
                        (c.session.id, c.session.to_jsonl(), _haystack(r.text for r in c.session.records))
                        for c in chains
                    ]
                _check_decoy_absent(q, decoy_hay)
                continue
            rec = by_order.get(q.source_order)
            if rec is None or rec.entry_id != q.source_entry_id:
                raise ValueError(
                    f"question {q.id}: no record at source_order {q.source_order} "
                    f"in entry {q.source_entry_id!r} of {s.id}"
                )
            if q.answer not in rec.text:
                raise ValueError(
                    f"question {q.id}: answer {q.answer!r} is not in its source entry "
                    f"{q.source_entry_id!r} (source_order {q.source_order})"
                )
            if not q.source_order < case.tail_start:
                raise ValueError(
                    f"question {q.id}: source_order {q.source_order} is not before the "
                    f"tail (tail_start {case.tail_start})"
                )
            hit = next((f for f in forms if f in late), None)
            if hit is not None:
                raise ValueError(
                    f"question {q.id}: answer {hit!r} occurs at or after tail_start "
                    f"{case.tail_start} in {s.id}, so the tail would give it away"
                )


def _check_decoy_absent(q: Question, hay: Sequence[tuple[str, bytes, str]]) -> None:
    """Raise if a decoy's value or an alias occurs in any chain (raw JSONL bytes or normalised texts)."""
    for value in (q.answer, *q.aliases):
        if not value:
            continue
        raw = (value.encode("utf-8"), json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8"))
        form = normalise(value)
        for sid, data, text in hay:
            if any(r in data for r in raw) or (form and form in text):
                raise ValueError(f"decoy {q.id}: value {value!r} occurs in chain {sid}")


# --------------------------------------------------------------------------- summary


def bank_summary(cases: Sequence[Case]):
    """Per case: chain, cut, tail_start, real questions by pointer, decoys; then a ``total`` row.

    Returns
    -------
    pandas.DataFrame
        Columns ``case_id, session_id, cut, tail_start, questions, real,
        assistant, user, tool, decoys``; the last row (``case_id == "total"``)
        sums the counts (cut and tail_start empty).
    """
    import pandas as pd

    cols = ["case_id", "session_id", "cut", "tail_start", "questions", "real", *POINTERS, "decoys"]
    rows = []
    for c in cases:
        row: dict[str, Any] = {
            "case_id": c.id,
            "session_id": c.session_id,
            "cut": c.cut,
            "tail_start": c.tail_start,
            "questions": len(c.questions),
            "real": len(c.real),
            "decoys": len(c.decoys),
        }
        for p in POINTERS:
            row[p] = sum(1 for q in c.real if q.pointer == p)
        rows.append(row)
    total: dict[str, Any] = {"case_id": "total", "session_id": "", "cut": None, "tail_start": None}
    for k in ("questions", "real", *POINTERS, "decoys"):
        total[k] = sum(r[k] for r in rows)
    df = pd.DataFrame(rows + [total], columns=cols)
    for k in ("cut", "tail_start"):
        df[k] = df[k].astype("Int64")
    return df
