"""The recorded block of the exam: the compactions real agents made, found in their logs, examined.

For every compaction an imported session records (`strategies.recorded.find`)
the exam builds one case: its cut is the compaction, its questions are mined
(`probes.mine`, decoys as everywhere) from the records *before* it — what the
agent compacted — and never from its summary or anything after. The case is
then answered from the agent's own next request (the ``recorded`` arm, label
``recorded (<agent>, <model from the log>)``) and from every listed arm
projecting the same session at the same cut — that agent's own
reimplementation included, given the run's summariser (a direct check of the
reimplementation: ``own_agent`` in the table).

Sessions with no usable compaction are skipped and counted, each with its
reason (`strategies.recorded.skip_reason`); a run with none produces empty
tables and a figure that says "not measured", never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core import excerpt
from compaction_lab.core.session import Session
from compaction_lab.exam import closed, probes, stats
from compaction_lab.exam.cases import probe_params
from compaction_lab.exam.types import Case, bank_from_jsonl, write_bank
from compaction_lab.ingest import sources
from compaction_lab.strategies import recorded as rec
from compaction_lab.strategies.base import CompactionContext

BANK_FILE = "exam_recorded_bank.jsonl"

#: One row per recorded compaction (`RecordedCases.found`).
FOUND_COLUMNS: list[str] = [
    "case_id",
    "session_id",
    "agent",
    "model",
    "label",
    "compaction",
    "compaction_entry",
    "cut",
    "after",
    "questions",
    "decoys",
]
#: One row per session that gave no recorded case.
SKIP_COLUMNS: list[str] = ["session_id", "source_format", "reason"]
#: One row per recorded compaction x arm (`RecordedResult.table`).
TABLE_COLUMNS: list[str] = [
    "case_id",
    "session_id",
    "agent",
    "model",
    "compaction",
    "strategy",
    "strategy_label",
    "recorded",
    "own_agent",
    "retained",
    "n",
    "recall",
    "ci_low",
    "ci_high",
    "decoys_fallen",
    "decoys_n",
    "projection_tokens",
]


@dataclass(frozen=True)
class RecordedCases:
    """The recorded compactions of a run, their cases, and the sessions that gave none."""

    cases: tuple[Case, ...]
    sessions: Mapping[str, Session]
    found: pd.DataFrame
    skipped: pd.DataFrame
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """How many real compactions the logs hold, how many questions they give, and every skip counted."""
        n = len(self.found)
        real = sum(len(c.real) for c in self.cases)
        decoys = sum(len(c.questions) for c in self.cases) - real
        line = f"Real compactions found in your logs: {n}" + (
            f" (in {_n(self.found['session_id'].nunique(), 'session')}): {_n(real, 'question')} and "
            f"{_n(decoys, 'decoy')} mined from the records before each"
            if n
            else ""
        )
        if len(self.skipped):
            counts = self.skipped["reason"].value_counts()
            line += f"\nSessions skipped (no recorded case): {len(self.skipped)}"
            line += "".join(f"\n  {k} × {reason}" for reason, k in counts.items())
        if n and real == 0:
            line += (
                "\nNo question could be asked: every question must point at an exact value before the recent "
                "tail (tail_tokens) of the compaction, and these sessions have none there."
            )
        return line + "".join(f"\n  {note}" for note in self.notes[:20])


def _n(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


def build(
    session_list: Sequence[Session], params: Mapping[str, Any], saved: Mapping[str, Case] | None = None
) -> RecordedCases:
    """One case per recorded compaction of `session_list` (questions mined before it); skips counted.

    Parameters
    ----------
    session_list : sessions of the run
    params : notebook / profile parameters (`probes.ProbeSpec` keys: ``probe_n_questions``,
        ``probe_n_decoys``, ``tail_tokens``, ``seed``, ...).
    saved : mapping of case id to Case, optional
        A saved bank: its cases are used as they are (nothing is mined again) and a compaction
        it does not hold gives no case.
    """
    session_list = excerpt.for_stage(session_list, "the recorded exam")
    spec = probes.ProbeSpec.from_mapping(probe_params(params))
    cases: list[Case] = []
    found_rows: list[dict[str, Any]] = []
    skips: list[dict[str, Any]] = []
    notes: list[str] = []
    for s in session_list:
        found, problems = rec.find(s)
        notes += [f"{s.id}: {p}" for p in problems]
        if not found:
            skips.append({"session_id": s.id, "source_format": s.source_format, "reason": rec.skip_reason(s)})
            continue
        for rc in found:
            case_id = f"{s.id}-recorded-{rc.index}"
            if saved is not None:
                if case_id not in saved:
                    continue
                case = saved[case_id]
            else:
                mined = probes.mine(s, spec, case_id=case_id, cut=rc.cut)
                notes += list(mined.notes)
                case = mined.case
            cases.append(case)
            found_rows.append(_found_row(case, rc))
    return RecordedCases(
        tuple(cases),
        {s.id: s for s in session_list},
        pd.DataFrame(found_rows, columns=FOUND_COLUMNS),
        pd.DataFrame(skips, columns=SKIP_COLUMNS),
        tuple(notes),
    )


def _found_row(case: Case, rc: rec.RecordedCompaction) -> dict[str, Any]:
    return {
        "case_id": case.id,
        "session_id": rc.session_id,
        "agent": rc.agent,
        "model": rc.model or rec.UNKNOWN_MODEL,
        "label": rc.label,
        "compaction": rc.index,
        "compaction_entry": rc.entry_id,
        "cut": rc.cut,
        "after": rc.after,
        "questions": len(case.real),
        "decoys": len(case.questions) - len(case.real),
    }


def for_run(run_dir: Path, params: Mapping[str, Any]) -> RecordedCases:
    """The recorded cases of the sessions notebook 01 wrote into `run_dir` (reusing a saved bank)."""
    run_dir = Path(run_dir)
    session_list = sources.load_saved(run_dir, stage="the recorded exam")
    saved = run_dir / BANK_FILE
    if saved.exists():
        # The bank decides the questions (a rerun asks exactly the same, nothing is mined again);
        # where the compactions are still comes from the logs.
        return build(session_list, params, {c.id: c for c in bank_from_jsonl(saved.read_bytes())})
    built = build(session_list, params)
    write_bank(built.cases, saved)
    return built


@dataclass(frozen=True)
class RecordedResult:
    """The recorded exam's answers (`closed.ANSWER_COLUMNS`), projections and the per-compaction table."""

    answers: pd.DataFrame
    projections: pd.DataFrame
    table: pd.DataFrame


def run(
    rc: RecordedCases,
    names: Sequence[str] | None,
    ctx: CompactionContext,
    reader: Any,
    progress: bool = False,
    *,
    n_boot: int = 2000,
    seed: int = 7,
) -> RecordedResult:
    """Answer every recorded case from the agent's own next request and from every arm at the same cut.

    Parameters
    ----------
    rc : the run's recorded cases
    names : listed arms to compare (None: every listed strategy); ``recorded`` always comes first
    ctx, reader : as for `closed.run_closed`
    n_boot, seed : bootstrap of each row's 95% interval (`stats.bootstrap_interval`)
    """
    arms = ["recorded"] + [n for n in (names or strategies.names()) if n != "recorded"]
    if not rc.cases:
        empty = closed.run_closed((), rc.sessions, arms, ctx, reader)
        return RecordedResult(empty.answers, empty.projections, pd.DataFrame(columns=TABLE_COLUMNS))
    res = closed.run_closed(rc.cases, rc.sessions, arms, ctx, reader, progress=progress)
    return RecordedResult(res.answers, res.projections, comparison_table(res.answers, rc.found, n_boot, seed))


def comparison_table(answers: pd.DataFrame, found: pd.DataFrame, n_boot: int = 2000, seed: int = 7) -> pd.DataFrame:
    """Per recorded compaction x arm: retained of N with its 95% interval, decoys, projection size.

    ``recorded`` marks the agent's own compaction; ``own_agent`` the arm that
    reimplements the agent that wrote it.
    """
    rows = []
    for _, f in found.iterrows():
        g = answers[answers["case_id"] == f["case_id"]]
        if g.empty:
            continue
        for _, r in stats.recall_table(g, n_boot=n_boot, seed=seed).iterrows():
            rows.append(
                {
                    "case_id": f["case_id"],
                    "session_id": f["session_id"],
                    "agent": f["agent"],
                    "model": f["model"],
                    "compaction": int(f["compaction"]),
                    "strategy": r["strategy"],
                    "strategy_label": r["strategy_label"],
                    "recorded": r["strategy"] == "recorded",
                    "own_agent": r["strategy"] == f["agent"],
                    **{
                        k: r[k]
                        for k in (
                            "retained",
                            "n",
                            "recall",
                            "ci_low",
                            "ci_high",
                            "decoys_fallen",
                            "decoys_n",
                            "projection_tokens",
                        )
                    },
                }
            )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


__all__ = [
    "BANK_FILE",
    "FOUND_COLUMNS",
    "RecordedCases",
    "RecordedResult",
    "SKIP_COLUMNS",
    "TABLE_COLUMNS",
    "build",
    "comparison_table",
    "for_run",
    "run",
]
