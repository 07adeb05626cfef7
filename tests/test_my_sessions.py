"""The `my_sessions` chain on real-world input, end to end (issue 12).

Each test runs the real `my_sessions` profile (redaction on, its own defaults)
pointed at the shipped fixture sessions, so what a new user would meet is what
is tested.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from compaction_lab import report, share
from conftest import SHARED_FIXTURES

pytestmark = pytest.mark.slow


def _need(path):
    if not path.exists():
        pytest.skip(f"shared fixtures not present: {path}")
    return path


def test_short_sessions_that_give_no_question_complete_the_chain(tmp_path):
    """Item 2: the three Claude Code fixtures are shorter than the 8,192-token tail, so no question can
    be mined; notebook 03 crashed ("Cannot set a DataFrame with multiple columns…")."""
    folder = _need(SHARED_FIXTURES / "claude-code")
    res = report.run_profile("my_sessions", results=tmp_path, progress=False,
                             overrides={"session_paths": [str(folder)]})
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks)
    assert json.loads((res.run_dir / "run.json").read_text())["status"] == "ok"
    assert pd.read_parquet(res.run_dir / "exam_closed.parquet").empty
    bank = (res.run_dir / "exam_bank.jsonl").read_text().splitlines()
    assert len(bank) == 3 and all(json.loads(line)["questions"] == [] for line in bank)
    # The reader is told why, in the notebook, the figures and the report.
    nb03 = (res.run_dir / "03_closed_book_exam.html").read_text(encoding="utf-8")
    assert "No question could be asked" in nb03
    assert "not measured" in (res.run_dir / "figures" / "fig1_retained.svg").read_text(encoding="utf-8")
    assert share.NO_HEADLINE.split(":")[0] in (res.run_dir / "report.html").read_text(encoding="utf-8")
    # Costs do not need questions: they are still priced.
    assert not pd.read_parquet(res.run_dir / "cost.parquet").empty
