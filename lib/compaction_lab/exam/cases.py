"""The cases of a run: the synthetic bank for synthetic chains, mined probes for anyone's own sessions.

Notebooks 03 and 05 and ``compaction-lab exam`` call `for_run` with the run
folder: if notebook 01 wrote synthetic chains there (``sessions/facts.jsonl``)
the bank is built from their planted facts; otherwise questions are mined
from the imported sessions with `probes`. The bank is written into the run
folder (``exam_bank.jsonl``), so both exams ask exactly the same questions. When the sessions allow
fewer questions than asked, one sentence says what was asked, what was built and why
(`RunCases.shortfall`); it is printed with the cases and kept beside the bank (``exam_bank_shortfall.txt``),
where the report reads it (`shortfall_of_run`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core import excerpt
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.exam import bank, probes
from compaction_lab.exam.types import Case, bank_from_jsonl, write_bank
from compaction_lab.ingest import sources, synthetic
from compaction_lab.report import runfolder
from compaction_lab.strategies.base import CompactionContext

BANK_FILE = "exam_bank.jsonl"
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

    @property
    def n_questions(self) -> int:
        """Questions in all cases, decoys included."""
        return sum(len(c.questions) for c in self.cases)

    def describe(self) -> str:
        """What the exam will ask, in a few lines: fewer questions than asked (`shortfall`) and why, and says
        so plainly when it can ask nothing."""
        real = sum(len(c.real) for c in self.cases)
        line = f"{self.kind}: {len(self.cases)} cases, {real} questions and {self.n_questions - real} decoys"
        if self.shortfall:
            line += f"\n{self.shortfall}"
        if self.n_questions == 0:
            line += (
                "\nNo question could be asked: every question must point at an exact value before the "
                "recent tail (tail_tokens), and these sessions have none there. The exam tables stay empty "
                "and its figures say 'not measured'; compaction costs are still priced."
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
    mined = probes.mine_all(session_list, spec)
    notes = tuple(n for m in mined for n in m.notes)
    return RunCases(tuple(m.case for m in mined), by_id, "mined probes", None, notes, _probe_shortfall(mined, spec))


def _probe_shortfall(mined: Sequence[probes.MinedCase], spec: probes.ProbeSpec) -> str:
    """`RunCases.shortfall` for mined probes: asked per session, built in all, and why ("" when met)."""
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
    sessions = f"{n:,} session{'s' if n != 1 else ''}"
    return (
        f"probe_n_questions = {spec.n_questions:,} per session asked for ({sessions}), {real + decoys:,} built: "
        "the sessions allow " + "; ".join(why) + "."
    )


def probe_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The probe miner's parameters from a notebook's: ``probe_n_questions`` / ``probe_n_decoys`` become
    ``n_questions`` / ``n_decoys`` (probes ask per session; the bank's totals, e.g. 178, do not apply)."""
    out = dict(params)
    for key in ("n_questions", "n_decoys"):
        if f"probe_{key}" in params:
            out[key] = params[f"probe_{key}"]
        else:
            out.pop(key, None)
    return out


def for_run(run_dir: Path, params: Mapping[str, Any]) -> RunCases:
    """The cases of the sessions notebook 01 wrote into `run_dir` (reusing a saved bank)."""
    run_dir = Path(run_dir)
    session_list = sources.load_saved(run_dir)
    saved = run_dir / BANK_FILE
    sdir = run_dir / runfolder.SESSIONS
    chains = synthetic.read_chains(sdir) if (sdir / "facts.jsonl").exists() else None
    if saved.exists():
        cases = bank_from_jsonl(saved.read_bytes())
        kind = "synthetic bank" if chains else "mined probes"
        return RunCases(tuple(cases), {s.id: s for s in session_list}, kind, None, (), shortfall_of_run(run_dir))
    rc = build(session_list, chains, params)
    write_bank(rc.cases, saved)
    if rc.shortfall:
        (run_dir / SHORTFALL_FILE).write_text(rc.shortfall + "\n", encoding="utf-8")
    return rc


def shortfall_of_run(run_dir: Path) -> str:
    """The run's `RunCases.shortfall`, as `for_run` kept it beside the bank ("" when the count was met)."""
    path = Path(run_dir) / SHORTFALL_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else ""


def projections_for(
    cases: Sequence[Case], sessions: Mapping[str, Session], strategy: str, ctx: CompactionContext
) -> dict[str, Projection]:
    """One strategy's projection per case (the open-book arm)."""
    return {c.id: strategies.compact(sessions[c.session_id], strategy, c.cut, ctx) for c in cases}


def projections_by_case(
    cases: Sequence[Case], sessions: Mapping[str, Session], names: Sequence[str] | None, ctx: CompactionContext
) -> dict[tuple[str, str], Projection]:
    """Every named strategy's projection of every case, keyed by (case_id, strategy)."""
    names = list(names or strategies.names())
    return {(c.id, n): strategies.compact(sessions[c.session_id], n, c.cut, ctx) for c in cases for n in names}
