"""Answers another harness gave, read into a run folder: Inspect AI's, beside the suite's own readers.

``compaction-lab import-inspect`` (`compaction_lab.inspect.logs`) writes every sample x epoch of an
Inspect log of the suite's tasks as one row of ``exam_inspect.parquet`` (`TABLE`, `COLUMNS`). Here those
rows and the closed book's own recall (``exam_recall``, ``exam_closed``) become one table of recall per
reader x arm (`readers_table`), each row saying where its answers came from (``source``), so notebook 03
(figure ``fig12_readers``) and the report show Inspect's models beside the built-in readers. Both count
real questions only (decoys apart), every draw a row.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from compaction_lab.core import runfolder
from compaction_lab.exam.statistics import power

#: The run folder's table of answers imported from Inspect logs.
TABLE = "exam_inspect"

#: Its columns, in order.
COLUMNS: tuple[str, ...] = (
    "case_id",
    "question_id",
    "strategy",
    "strategy_label",
    "session_id",
    "pointer",
    "category",
    "decoy",
    "unit",
    "draw",
    "epoch",
    "given",
    "correct",
    "projection_tokens",
    "over_window",
    "reader",
    "reader_label",
    "task",
    "eval_id",
    "sample_uuid",
    "log",
)

#: ``source`` of a row: the suite's own readers (notebook 03), or Inspect AI (``import-inspect``).
SUITE, INSPECT = "compaction-lab", "Inspect AI"

#: The closed book's answers and its recall per reader x arm (notebook 03).
CLOSED_TABLE, RECALL_TABLE = "exam_closed", "exam_recall"

#: `readers_table`'s columns.
READER_COLUMNS: tuple[str, ...] = (
    "source",
    "reader",
    "reader_label",
    "strategy",
    "strategy_label",
    "n_questions",
    "draws",
    "correct",
    "recall",
    "ci_low",
    "ci_high",
    "ci_method",
    "consistent",
    "over_window",
)

#: The same, short enough for a figure's subtitle.
NONE_IMPORTED_SHORT = "no Inspect log imported (compaction-lab import-inspect LOG adds its model beside these readers)"


def load(run_dir: str | Path) -> pd.DataFrame | None:
    """Return a run folder's imported Inspect answers (`TABLE`), None when none were imported."""
    return runfolder.maybe_table(Path(run_dir), TABLE)


def cluster_of(rows: pd.DataFrame) -> str | None:
    """Return the column an interval over imported rows resamples.

    ``session_id`` for questions mined from real sessions (``unit`` ``session``: clustered in them), None for
    independent synthetic questions.
    """
    return "session_id" if (rows["unit"].astype(str) == "session").any() else None


def readers_table(run_dir: str | Path, *, n_boot: int = 2000, seed: int = 7) -> pd.DataFrame:
    """Recall per reader x arm: the closed book's own readers, then those imported from Inspect logs.

    The suite's rows are the closed book's recall as the run reports it everywhere (``exam_recall``: the
    same recall and interval as figures 3 and 4), with their draws and consistency from ``exam_closed``.
    An imported model's rows count its answers the same way -- real questions only, every draw a row --
    with `exam.statistics.power.hierarchical_interval` over the sessions (questions mined from real sessions) or
    the questions (synthetic chains), draws nested in them; ``ci_method`` says which interval a row has.

    Parameters
    ----------
    run_dir : path
        A run folder; any of the tables may be missing (an empty frame when nothing was answered).
    n_boot, seed
        `exam.statistics.power.hierarchical_interval`'s, for the imported rows (each from the same seed).

    Returns
    -------
    DataFrame
        `READER_COLUMNS`: ``source`` (`SUITE` or `INSPECT`), the reader and the arm, the real questions
        answered, draws per question (mean), draws right, pooled recall with its interval, the share of
        questions whose draws all agree, and whether the arm's projection was over the window.
    """
    run_dir = Path(run_dir)
    by = ["reader", "reader_label", "strategy", "strategy_label"]
    parts = [_suite_rows(run_dir, by)]
    rows = load(run_dir)
    if rows is not None and not rows.empty and (~rows["decoy"].astype(bool)).any():
        real = rows[~rows["decoy"].astype(bool)].assign(correct=lambda f: f["correct"].astype(bool))
        table = power.draw_recall_table(real, by=by, cluster=cluster_of(real), n_boot=n_boot, seed=seed)
        over = real.groupby(by, sort=False)["over_window"].any().reset_index()
        parts.append(table.merge(over, on=by, how="left").assign(source=INSPECT))
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=list(READER_COLUMNS))
    out = pd.concat(parts, ignore_index=True)
    out["over_window"] = out["over_window"].astype("boolean").fillna(False).astype(bool)
    return out[list(READER_COLUMNS)]


def _suite_rows(run_dir: Path, by: list[str]) -> pd.DataFrame:
    """Return the closed book's readers: ``exam_recall``'s recall and interval, draws and consistency from answers."""
    recall = runfolder.maybe_table(run_dir, RECALL_TABLE)
    answers = runfolder.maybe_table(run_dir, CLOSED_TABLE)
    if recall is None or answers is None:
        return pd.DataFrame()
    real = answers[~answers["decoy"].astype(bool)]
    if recall.empty or real.empty:
        return pd.DataFrame()
    per = real.groupby([*by, "case_id", "question_id"], sort=False)["correct"].agg(["sum", "count"]).reset_index()
    per["agree"] = (per["sum"] == 0) | (per["sum"] == per["count"])
    counts = per.groupby(by, sort=False).agg(
        n_questions=("count", "size"), draws=("count", "mean"), correct=("sum", "sum"), consistent=("agree", "mean")
    )
    keep = [*by, "recall", "ci_low", "ci_high", "ci_method", "over_window"]
    table = recall[[c for c in keep if c in recall.columns]].merge(counts.reset_index(), on=by, how="inner")
    if "over_window" not in table.columns:
        table["over_window"] = False
    return table.assign(source=SUITE, correct=table["correct"].astype(int), draws=table["draws"].astype(float))


def imported_lines(run_dir: str | Path) -> list[str]:
    """Return what the report says of the imported answers: per Inspect model, its answers, draws, task, logs."""
    rows = load(run_dir)
    if rows is None or rows.empty:
        return []
    lines = []
    for label, g in rows.groupby("reader_label", sort=False):
        asked = g[["case_id", "question_id", "decoy"]].drop_duplicates()
        decoys = int(asked["decoy"].astype(bool).sum())
        draws = g.groupby(["case_id", "question_id", "strategy"])["draw"].nunique()
        n_strategies = g["strategy"].nunique()
        logs = sorted(g["log"].astype(str).unique())
        lines.append(
            f"{label}: {len(g):,} answers from Inspect AI ({', '.join(sorted(g['task'].astype(str).unique()))}; "
            f"{len(asked) - decoys} questions and {decoys} decoy{'s' if decoys != 1 else ''} x {n_strategies} "
            f"arm{'s' if n_strategies != 1 else ''} x {draws.mean():g} draws), imported with compaction-lab "
            f"import-inspect from {', '.join(logs)}."
        )
    return lines


__all__ = [
    "CLOSED_TABLE",
    "COLUMNS",
    "INSPECT",
    "NONE_IMPORTED_SHORT",
    "READER_COLUMNS",
    "RECALL_TABLE",
    "SUITE",
    "TABLE",
    "cluster_of",
    "imported_lines",
    "load",
    "readers_table",
]
