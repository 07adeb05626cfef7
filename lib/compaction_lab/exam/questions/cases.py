"""The cases of a run: the synthetic bank for synthetic chains, mined probes for anyone's own sessions.

Notebooks 03 and 05 and ``compaction-lab exam`` call `for_run` with the run
folder: if notebook 01 wrote synthetic chains there (``sessions/facts.jsonl``)
the bank is built from their planted facts; otherwise questions are mined
from the imported sessions with `probes`. The bank is written into the run
folder (``exam_bank.jsonl``), so both exams ask exactly the same questions. When the sessions allow
fewer questions than asked, one sentence says what was asked, what was built and why
(`RunCases.shortfall`); it is printed with the cases and kept beside the bank (``exam_bank_shortfall.txt``),
where the report reads it (`shortfall_of_run`).

Imported sessions are cut where the run's ``cut`` parameter says (`exam.questions.cuts`: ``capacity`` by default,
where the uncompacted request first outgrows W − O; ``end``; ``recorded``); one row per imported session
says where it was cut, how many questions it gave and, when none, why (``exam_sessions.parquet``,
`RunCases.sessions_table`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core import bounded_json, excerpt, runfolder
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.exam import tasks
from compaction_lab.exam.questions import bank, cuts, probes
from compaction_lab.exam.types import POINTERS, Case, bank_from_jsonl, write_bank
from compaction_lab.ingest import sources, synthetic
from compaction_lab.strategies.base import CompactionContext

BANK_FILE = "exam_bank.jsonl"
#: Beside the bank: one row per imported session (where it was cut, its questions, why none).
SESSIONS_TABLE = "exam_sessions"
#: Beside the bank when it holds fewer questions than asked: the one sentence saying so (`RunCases.shortfall`).
SHORTFALL_FILE = "exam_bank_shortfall.txt"


@dataclass(frozen=True)
class RunCases:
    """The cases of a run, the sessions they refer to, and where the questions came from."""

    cases: tuple[Case, ...]
    sessions: Mapping[str, Session]
    kind: str  # "synthetic bank" or "mined probes"
    report: Any = None  # BankReport for the bank; None for probes
    notes: tuple[str, ...] = ()  # where a case gave fewer questions (or another mix) than asked, and why
    shortfall: str = ""  # fewer questions in all than asked: what was asked, what was built, why ("" if none)
    session_rows: Any = None  # DataFrame of `cuts.SESSION_COLUMNS` for imported sessions (None: synthetic)
    pool: Mapping[str, int] = field(default_factory=dict)  # mined probes: usable values per pointer, all cases

    @property
    def unit(self) -> str:
        """What the intervals resample: independent planted facts (``question``) or real sessions (``session``)."""
        return "question" if self.kind == "synthetic bank" else "session"

    def natural_mix(self) -> dict[str, float]:
        """Return the pool's own composition (usable values per pointer, as shares); {} when unknown."""
        total = sum(self.pool.values())
        return {p: self.pool[p] / total for p in self.pool} if total else {}

    def question_mix(self, bank_mix: Mapping[str, float]) -> tuple[dict[str, float], str]:
        """Return the mix the questions follow and its label, for the sensitivity table's own point.

        The pool's natural mix for real logs (the bank's `bank_mix` when the pool is unknown), the bank's for
        synthetic chains.
        """
        natural = self.natural_mix() if self.unit == "session" else {}
        return (natural, "natural (the pool's own)") if natural else (dict(bank_mix), "the bank's")

    def sessions_table(self) -> pd.DataFrame:
        """One row per imported session (`cuts.SESSION_COLUMNS`); empty for synthetic chains."""
        if self.session_rows is None:
            return pd.DataFrame(columns=cuts.SESSION_COLUMNS)
        return self.session_rows

    @property
    def n_questions(self) -> int:
        """Questions in all cases, decoys included."""
        return sum(len(c.questions) for c in self.cases)

    def describe(self) -> str:
        """Describe in a few lines what the exam will ask.

        Says when there are fewer questions than asked (`shortfall`) and why, and says so plainly when it can
        ask nothing.
        """
        real = sum(len(c.real) for c in self.cases)
        line = f"{self.kind}: {len(self.cases)} cases, {real} questions and {self.n_questions - real} decoys"
        if self.shortfall:
            line += f"\n{self.shortfall}"
        rows = self.sessions_table()
        skipped = rows[rows["questions"] == 0] if len(rows) else rows
        if len(skipped):
            line += f"\n{len(skipped)} of {len(rows)} sessions gave no question:"
            line += "".join(f"\n  {r.session_id}: {r.reason}" for r in skipped.head(20).itertuples())
        if self.n_questions == 0:
            line += (
                "\nNo question could be asked: every question must point at an exact value before the "
                "recent tail (tail_tokens) of a cut, and these sessions have none there (see above). The exam "
                "tables stay empty and its figures say 'not measured'; compaction costs are still priced."
            )
        shown = self.notes[:20]
        more = f"\n  … {len(self.notes) - 20} more notes" if len(self.notes) > 20 else ""
        return line + "".join(f"\n  {n}" for n in shown) + more

    def summary(self) -> pd.DataFrame:
        """Per case: its session, cut, tail start and questions by pointer, plus decoys."""
        return bank.bank_summary(self.cases)


def build(session_list: Sequence[Session], chains: Sequence | None, params: Mapping[str, Any]) -> RunCases:
    """Cases for these sessions: the bank when `chains` carry planted facts, else mined probes.

    Parameters
    ----------
    session_list : sessions of the run
    chains : SyntheticChains (with facts), or None for imported sessions
    params : notebook / profile parameters; `bank.BankSpec` and
        `probes.ProbeSpec` take the keys they know (``n_cases``,
        ``n_questions``, ``n_decoys``, ``pointer_mix``, ``tail_tokens``,
        ``seed``, ...) and ignore the rest.
    """
    # The exam reads every record many times (probe mining, projections, grading): records over the
    # per-record cap are excerpted, with a note (a no-op for sessions load_saved already capped).
    session_list = excerpt.for_stage(session_list, "the exam")
    by_id = {s.id: s for s in session_list}
    if chains:
        cases, report = bank.build_bank_with_report(list(chains), bank.BankSpec.from_mapping(params))
        return RunCases(tuple(cases), by_id, "synthetic bank", report, report.notes, report.shortfall_line())
    spec = probes.ProbeSpec.from_mapping(probe_params(params))
    mode = cuts.check_mode(str(params.get("cut") or cuts.CUT_MODES[0]))
    ctx = cuts.context_of(dict(params))
    mined: list[probes.MinedCase] = []
    rows: list[dict[str, Any]] = []
    # One task per session (on the engine when a scheduler is given): its cut, then its cases.
    for sc, got in tasks.each(_cut_and_mine, session_list, spec, mode, ctx):
        mined += got
        n = sum(len(m.case.real) for m in got)
        reason = sc.reason or ("" if n else _no_question_reason(got, spec))
        rows.append({**sc.row(), "questions": n, "reason": reason})
    notes = tuple(n for m in mined for n in m.notes)
    pool = {p: sum(m.available.get(p, 0) for m in mined) for p in POINTERS}
    return RunCases(
        tuple(m.case for m in mined),
        by_id,
        "mined probes",
        None,
        notes,
        _probe_shortfall(mined, spec, len(session_list)),
        pd.DataFrame(rows, columns=cuts.SESSION_COLUMNS),
        pool,
    )


def _cut_and_mine(
    s: Session, spec: probes.ProbeSpec, mode: str, ctx: CompactionContext
) -> tuple[cuts.SessionCut, list[probes.MinedCase]]:
    """Cut one session under `mode` (`cuts.plan`) and mine its cases at the cuts (`_mine_session`): one task."""
    sc = cuts.plan([s], mode, ctx)[0]
    return sc, _mine_session(s, sc, spec, mode)


def _mine_session(s: Session, sc: cuts.SessionCut, spec: probes.ProbeSpec, mode: str) -> list[probes.MinedCase]:
    """Mine the cases of one session at its cuts.

    ``-probe`` for a single cut (``-probe-c{j}`` for several fractions under ``end``, ``-probe-r{i}`` for
    recorded compactions).
    """
    if not sc.cuts:
        return []
    mode = sc.mode or mode
    if mode == "recorded":
        return [probes.mine(s, spec, case_id=f"{s.id}-probe-r{i}", cut=c) for i, c in enumerate(sc.cuts)]
    if mode == "end" and spec.cuts_per_session > 1:
        return probes.mine_all([s], spec)
    return [probes.mine(s, spec, cut=sc.cuts[0])]


def _no_question_reason(mined: Sequence[probes.MinedCase], spec: probes.ProbeSpec) -> str:
    """Why a cut session gave no question: no exact value before its recent tail that no arm keeps verbatim."""
    usable = sum(sum(m.available.values()) for m in mined)
    if usable:
        return f"{usable} usable values but none could be asked (see the notes)"
    return (
        f"no usable exact value before the recent tail (tail_tokens = {spec.tail_tokens:,}): everything before "
        "it is either kept verbatim by every arm or not an exact value"
    )


def _probe_shortfall(mined: Sequence[probes.MinedCase], spec: probes.ProbeSpec, n_sessions: int) -> str:
    """`RunCases.shortfall` for mined probes: asked per cut session, built in all, and why ("" when met).

    Sessions the ``cut`` rule did not cut (they would not compact at W) are listed in `RunCases.sessions_table`,
    not counted here.
    """
    n = len(mined)
    real = sum(len(m.case.real) for m in mined)
    decoys = sum(len(m.case.questions) - len(m.case.real) for m in mined)
    want_real, want_decoys = spec.n_questions * n, spec.n_decoys * n
    if real >= want_real and decoys >= want_decoys:
        return ""
    why = []
    if real < want_real:
        usable = sum(sum(m.available.values()) for m in mined)
        why.append(
            f"{real:,} of {want_real:,} real questions — a question asks an exact value from before its "
            f"session's recent tail (tail_tokens = {spec.tail_tokens:,}), and these sessions hold {usable:,} "
            "usable ones"
        )
    if decoys < want_decoys:
        why.append(f"{decoys:,} of {want_decoys:,} decoys — a decoy must be a lookalike found nowhere in its session")
    sessions = f"{n:,} cut{'s' if n != 1 else ''} of {n_sessions:,} session{'s' if n_sessions != 1 else ''}"
    return (
        f"probe_n_questions = {spec.n_questions:,} per session asked for ({sessions}), {real + decoys:,} built: "
        "the sessions allow " + "; ".join(why) + "."
    )


def probe_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Derive the probe miner's parameters from a notebook's.

    ``probe_n_questions`` / ``probe_n_decoys`` / ``probe_pointer_mix`` / ``probe_max_per_record`` become
    ``n_questions`` / ``n_decoys`` / ``pointer_mix`` / ``max_per_record`` (probes ask per session; the bank's
    totals, e.g. 178, and its synthetic 80/10/10 mix do not apply: real logs are asked in their own, natural,
    composition unless ``probe_pointer_mix`` says otherwise).
    """
    out = dict(params)
    for key in ("n_questions", "n_decoys", "pointer_mix", "max_per_record"):
        if f"probe_{key}" in params:
            out[key] = params[f"probe_{key}"]
        else:
            out.pop(key, None)
    return out


def for_run(run_dir: Path, params: Mapping[str, Any]) -> RunCases:
    """Build the cases of the sessions notebook 01 wrote into `run_dir` (reusing a saved bank)."""
    run_dir = Path(run_dir)
    session_list = sources.load_saved(run_dir)
    saved = run_dir / BANK_FILE
    sdir = run_dir / runfolder.SESSIONS
    chains = synthetic.read_chains(sdir) if (sdir / "facts.jsonl").exists() else None
    if saved.exists():
        cases = bank_from_jsonl(saved.read_bytes())
        kind = "synthetic bank" if chains else "mined probes"
        has_rows = runfolder.table_path(run_dir, SESSIONS_TABLE).exists()
        rows = runfolder.load_table(run_dir, SESSIONS_TABLE) if has_rows else None
        pool = _saved_pool(run_dir)
        return RunCases(
            tuple(cases), {s.id: s for s in session_list}, kind, None, (), shortfall_of_run(run_dir), rows, pool
        )
    rc = build(session_list, chains, params)
    write_bank(rc.cases, saved)
    if rc.shortfall:
        (run_dir / SHORTFALL_FILE).write_text(rc.shortfall + "\n", encoding="utf-8")
    if rc.session_rows is not None:
        runfolder.save_table(rc.session_rows, run_dir, SESSIONS_TABLE)
        (run_dir / POOL_FILE).write_text(json.dumps(dict(rc.pool), sort_keys=True) + "\n", encoding="utf-8")
    return rc


def for_source(source: str | Path | sources.Sources, params: Mapping[str, Any]) -> RunCases:
    """Return the cases of a run folder's sessions, or of sessions gathered in memory.

    A run folder keeps its bank (`for_run`: saved the first time, reused after); gathered sessions get
    theirs built and nothing is written (`build`, as ``compaction-lab exam`` does). The closed-book and
    open-book exams' `exam.Exam.cases` step.
    """
    if isinstance(source, sources.Sources):
        return build(source.sessions, source.chains or None, params)
    return for_run(Path(source), params)


#: Beside the bank of mined probes: usable values per pointer in all cases (the pool's natural mix).
POOL_FILE = "exam_bank_pool.json"


def _saved_pool(run_dir: Path) -> dict[str, int]:
    path = run_dir / POOL_FILE
    if not path.is_file():
        return {}
    data = bounded_json.loads(path.read_text(encoding="utf-8"))
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def shortfall_of_run(run_dir: Path) -> str:
    """Read the run's `RunCases.shortfall`, as `for_run` kept it beside the bank ("" when the count was met)."""
    path = Path(run_dir) / SHORTFALL_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else ""


def priced_cases(rc: RunCases, n: int) -> tuple[Case, ...]:
    """Return the cases the cost model prices: the exam's first `n`.

    When the exam has none because no session would compact at W (``cut: capacity``), each session forced at
    its end (no questions), with one note printed, so what compacting would cost is still shown and said to
    be forced.
    """
    if rc.cases:
        return tuple(rc.cases[:n])
    ends = tuple(
        Case(id=f"{sid}-end", session_id=sid, cut=s.end, tail_start=0) for sid, s in list(rc.sessions.items())[:n]
    )
    if ends:
        print(
            f"note: no session would compact at this window, so the cost model prices {len(ends)} compaction(s) "
            "forced at each session's end (the exam has no case)"
        )
    return ends


def projections_for(
    cases: Sequence[Case], sessions: Mapping[str, Session], strategy: str, ctx: CompactionContext
) -> dict[str, Projection]:
    """One strategy's projection per case (the open-book arm)."""
    return {c.id: strategies.compact(sessions[c.session_id], strategy, c.cut, ctx) for c in cases}


def projections_by_case(
    cases: Sequence[Case], sessions: Mapping[str, Session], names: Sequence[str] | None, ctx: CompactionContext
) -> dict[tuple[str, str], Projection]:
    """Every named strategy's projection of every case, keyed by (case_id, strategy).

    One task per case (on the engine when a scheduler is given, `tasks.each`).
    """
    names = list(names or strategies.names())
    made = tasks.each(_case_projections, [(c, sessions[c.session_id]) for c in cases], names, ctx)
    return {(c.id, n): p for c, ps in zip(cases, made, strict=True) for n, p in zip(names, ps, strict=True)}


def _case_projections(item: tuple[Case, Session], names: Sequence[str], ctx: CompactionContext) -> list[Projection]:
    """Every named strategy's projection of one case (one task of `projections_by_case`)."""
    case, session = item
    return [strategies.compact(session, n, case.cut, ctx) for n in names]
