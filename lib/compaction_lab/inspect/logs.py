"""Inspect eval logs read back into a run folder (``compaction-lab import-inspect LOG...``).

Every sample of a `compaction_lab.inspect.tasks.closed_book` or ``open_book`` log, every epoch, becomes one row of
``exam_inspect.parquet`` in the run folder the task was built from: the case, question, arm and pointer
(the sample's metadata), the answer as graded, whether it was right, and the draw (the epoch, from 0).
The reader is Inspect's model (``reader`` ``inspect``, ``reader_label`` ``<model> (Inspect)``): the
table says where the answers came from. Importing a log again replaces its rows (a log is known by its
eval id), so a log can be re-read after ``inspect score``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from inspect_ai.log import read_eval_log
from inspect_ai.scorer import CORRECT

from compaction_lab.core import runfolder
from compaction_lab.exam import power
from compaction_lab.exam.imported import COLUMNS, TABLE, cluster_of

#: The scorer whose value is read (`compaction_lab.inspect.tasks.exact_value`).
SCORER = "exact_value"


def rows_from_log(path: str | Path) -> tuple[Path | None, pd.DataFrame]:
    """Read one Inspect log: the run folder its task was built from (None if it does not say) and its rows.

    Raises
    ------
    ValueError
        When the log holds no samples, or samples of another task (no ``case_id`` in their metadata)
        or without this suite's score.
    """
    log = read_eval_log(str(path))
    samples = log.samples or []
    if not samples:
        raise ValueError(f"{path}: the log holds no samples (status {log.status})")
    if str(log.eval.task).rsplit("/", 1)[-1] == "continuation":
        raise ValueError(
            f"{path}: a continuation log grades next calls (tool, target, arguments), not answers to questions: "
            "it is not read into exam_inspect; its scores are in the log (inspect view)"
        )
    model = log.eval.model
    rows = []
    for s in samples:
        meta = s.metadata or {}
        if "case_id" not in meta or "question_id" not in meta:
            raise ValueError(f"{path}: sample {s.id} is not one of compaction_lab's (no case_id in its metadata)")
        score = (s.scores or {}).get(SCORER)
        if score is None:
            raise ValueError(f"{path}: sample {s.id} has no {SCORER} score")
        rows.append(
            {
                "case_id": meta["case_id"],
                "question_id": meta["question_id"],
                "strategy": meta["strategy"],
                "strategy_label": meta.get("strategy_label", meta["strategy"]),
                "session_id": meta.get("session_id", ""),
                "pointer": meta.get("pointer", ""),
                "category": meta.get("category", ""),
                "decoy": bool(meta.get("decoy", False)),
                "unit": meta.get("unit", "question"),
                "draw": int(s.epoch) - 1,
                "given": str(score.answer or ""),
                "correct": score.value == CORRECT,
                "projection_tokens": int(meta.get("projection_tokens", 0)),
                "over_window": bool(meta.get("over_window", False)),
                "reader": "inspect",
                # An open-book round's answers (tools offered, its wording) are not the closed book's: kept apart.
                "reader_label": f"{model} (Inspect)"
                if meta.get("round") is None
                else f"{model} (Inspect, open book round {meta['round']})",
                "task": log.eval.task,
                "eval_id": log.eval.eval_id,
                "log": Path(path).name,
            }
        )
    # The task's metadata holds the folder resolved when it was built; its argument may be relative.
    run = (log.eval.metadata or {}).get("run") or (log.eval.task_args or {}).get("run")
    return (Path(run) if run else None), pd.DataFrame(rows, columns=list(COLUMNS))


def import_logs(logs: Iterable[str | Path], run_dir: str | Path | None = None) -> dict[Path, int]:
    """Add the rows of Inspect logs to their run folders' ``exam_inspect`` table; rows written per folder.

    Parameters
    ----------
    logs : iterable of paths
    run_dir : path, optional
        The run folder to write into; None: the one each log's task names (``-T run=...``).

    Raises
    ------
    ValueError
        For a log `rows_from_log` refuses, or one that names no run folder when `run_dir` is None.
    FileNotFoundError
        When the run folder does not exist.
    """
    by_folder: dict[Path, list[pd.DataFrame]] = {}
    for path in logs:
        named, rows = rows_from_log(path)
        folder = Path(run_dir) if run_dir is not None else named
        if folder is None:
            raise ValueError(f"{path}: the log names no run folder (task argument run); give one")
        if not (folder / runfolder.RUN_JSON).is_file():
            raise FileNotFoundError(f"{folder}: not a run folder (no {runfolder.RUN_JSON})")
        by_folder.setdefault(folder, []).append(rows)
    written = {}
    for folder, frames in by_folder.items():
        new = pd.concat(frames, ignore_index=True)
        target = runfolder.table_path(folder, TABLE)
        if target.exists():
            old = runfolder.load_table(folder, TABLE)
            new = pd.concat([old[~old["eval_id"].isin(set(new["eval_id"]))], new], ignore_index=True)
        runfolder.save_table(new, folder, TABLE)
        written[folder] = len(new)
    return written


def summary_lines(run_dir: str | Path) -> list[str]:
    """One line per reader x arm of a run folder's ``exam_inspect`` table: recall, its interval, draws, consistency.

    Over the real questions (decoys apart, as the closed book's recall and `exam.imported.readers_table`).

    The interval is `exam.power.hierarchical_interval` over the sessions (questions nested in them, draws
    in the questions) when the questions were mined from real sessions (``unit`` ``session``), else over
    the questions.
    """
    rows = runfolder.load_table(Path(run_dir), TABLE)
    real = rows[~rows["decoy"].astype(bool)]  # recall is over real questions; a decoy is right only by abstaining
    table = power.draw_recall_table(real, by=("reader_label", "strategy"), cluster=cluster_of(real))
    return [
        f"{r.reader_label}  {r.strategy:<28} {r.correct:>5} right of {r.n_questions} questions x {r.draws:g} "
        f"draws = {r.recall:6.1%} [{r.ci_low:.1%}, {r.ci_high:.1%}]; all draws agree on {r.consistent:.0%} "
        "of the questions"
        for r in table.itertuples()
    ]
