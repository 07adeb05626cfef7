"""Answers imported from Inspect AI beside the suite's readers (`compaction_lab.exam.imported`)."""

from __future__ import annotations

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.exam import imported
from compaction_lab.exam.statistics import stats


def _closed(questions: int = 6, *, right: int = 4, sessions: int = 3) -> pd.DataFrame:
    rows = []
    for q in range(questions):
        rows.append(
            {
                "strategy": "codex",
                "strategy_label": "codex (extractive stand-in)",
                "reader": "verbatim",
                "reader_label": "verbatim reader (retention ceiling)",
                "session_id": f"s{q % sessions}",
                "case_id": f"c{q % sessions}",
                "question_id": f"q{q}",
                "pointer": ("assistant", "user", "tool")[q % 3],
                "decoy": False,
                "correct": q < right,
                "over_window": False,
                "draw": 0,
            }
        )
    rows.append({**rows[0], "question_id": "decoy", "decoy": True, "correct": True})  # never counted in recall
    return pd.DataFrame(rows)


def _inspect(closed: pd.DataFrame, draws: int, right: dict[str, int], unit: str = "question") -> pd.DataFrame:
    """Inspect rows for the closed book's questions: question q right in `right[q]` of `draws` draws."""
    rows = []
    for r in closed.itertuples():
        for d in range(draws):
            rows.append(
                {
                    "case_id": r.case_id,
                    "question_id": r.question_id,
                    "strategy": r.strategy,
                    "strategy_label": r.strategy_label,
                    "session_id": r.session_id,
                    "pointer": "assistant",
                    "category": "x",
                    "decoy": r.decoy,
                    "unit": unit,
                    "draw": d,
                    "given": "v",
                    "correct": d < right.get(str(r.question_id), 0),
                    "projection_tokens": 100,
                    "over_window": False,
                    "reader": "inspect",
                    "reader_label": "openai/m (Inspect)",
                    "task": "closed_book",
                    "eval_id": "e1",
                    "log": "a.eval",
                }
            )
    return pd.DataFrame(rows, columns=list(imported.COLUMNS))


def _folder(tmp_path, closed, inspect=None, unit="question"):
    """A run folder with the closed book's answers and recall (as notebook 03 writes them) and Inspect's rows."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    runfolder.save_table(closed, tmp_path, imported.CLOSED_TABLE)
    runfolder.save_table(stats.recall_table(closed, n_boot=200, unit=unit), tmp_path, imported.RECALL_TABLE)
    if inspect is not None:
        runfolder.save_table(inspect, tmp_path, imported.TABLE)
    return tmp_path


def test_the_suites_readers_alone_when_nothing_was_imported(tmp_path):
    d = _folder(tmp_path, _closed())
    assert imported.load(d) is None and imported.imported_lines(d) == []
    t = imported.readers_table(d, n_boot=200)
    assert list(t.columns) == list(imported.READER_COLUMNS) and len(t) == 1
    row = t.iloc[0]
    assert row["source"] == imported.SUITE and row["n_questions"] == 6 and row["draws"] == 1  # the decoy apart
    assert row["recall"] == pytest.approx(4 / 6) and row["correct"] == 4 and row["consistent"] == 1
    # The closed book's own recall and interval, as figures 3 and 4 and every table of the run give them.
    recall = runfolder.load_table(d, imported.RECALL_TABLE).iloc[0]
    assert (row["ci_low"], row["ci_high"], row["ci_method"]) == (
        recall["ci_low"],
        recall["ci_high"],
        recall["ci_method"],
    )
    assert imported.readers_table(tmp_path / "nothing", n_boot=50).empty


def test_an_inspect_model_joins_with_its_draws_and_consistency(tmp_path):
    closed = _closed()
    # Three draws: q0 always right, q1 right once, the rest never: q1's draws alone disagree.
    ins = _inspect(closed, 3, {"q0": 3, "q1": 1})
    d = _folder(tmp_path, closed, ins)
    t = imported.readers_table(d, n_boot=300)
    assert list(t["source"]) == [imported.SUITE, imported.INSPECT]
    row = t.iloc[1]
    assert row["reader_label"] == "openai/m (Inspect)" and row["n_questions"] == 6 and row["draws"] == 3
    assert row["correct"] == 4 and row["recall"] == pytest.approx(4 / 18)
    assert row["consistent"] == pytest.approx(5 / 6)  # q1's draws disagree
    assert row["ci_low"] <= row["recall"] <= row["ci_high"] and row["ci_high"] - row["ci_low"] > 0
    (line,) = imported.imported_lines(d)
    assert "openai/m (Inspect)" in line and "6 questions and 1 decoy x 1 arm x 3 draws" in line and "a.eval" in line


def test_questions_from_real_sessions_resample_the_sessions(tmp_path):
    """When the bank was mined from real sessions (unit ``session``) both sources resample sessions: the method says so."""
    closed = _closed(sessions=2)
    d = _folder(tmp_path, closed, _inspect(closed, 2, {"q0": 2, "q2": 1}, unit="session"), unit="session")
    t = imported.readers_table(d, n_boot=200)
    assert all("session" in m for m in t["ci_method"])
    q = _folder(tmp_path / "q", closed, _inspect(closed, 2, {"q0": 2, "q2": 1}))
    assert not any("session" in m for m in imported.readers_table(q, n_boot=200)["ci_method"])
