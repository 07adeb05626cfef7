"""Redaction never moves a number (issue 45, acceptance 3 and 5).

One `my_sessions` run on the public fixture sessions (plus a planted session whose author's home shows
in every encoded form the supported agents write) with redaction and one without: every numeric column
of the tables the report is made of is identical, and the redacted folder holds neither a planted secret
nor the author's account name, in any file's bytes or any file's name. The pair (`tests.redaction_pair`) is
run once per test session, on one xdist worker.
"""

from __future__ import annotations

import json
import stat

import pandas as pd
import pytest

from compaction_lab.privacy.leaks import find_leaks
from tests.redaction_pair import NEEDLES

pytestmark = pytest.mark.slow

#: The numeric columns of these tables are the numbers a report shows (acceptance 3).
TABLES = ("headline", "exam_recall", "exam_recorded", "recorded_compactions", "continuation_recall", "composition")


@pytest.mark.parametrize("table", TABLES)
def test_redaction_moves_no_number(redaction_pair, table):
    red, plain = (pd.read_parquet(d / f"{table}.parquet") for d in redaction_pair)
    numeric = [c for c in plain.columns if pd.api.types.is_numeric_dtype(plain[c])]
    assert numeric, f"{table} has no numeric column"
    assert list(red.columns) == list(plain.columns) and len(red) == len(plain)
    pd.testing.assert_frame_equal(red[numeric], plain[numeric], check_exact=True)


def test_the_exam_asked_real_questions(redaction_pair):
    """The questions and decoys are made from the values as written: no marker is cut into an answer."""
    red, plain = redaction_pair
    assert len(pd.read_parquet(plain / "exam_closed.parquet")) > 0
    for d in redaction_pair:
        bank = (d / "exam_bank.jsonl").read_text(encoding="utf-8")
        assert "[SWITCHED:" not in bank
    for line in (plain / "exam_bank.jsonl").read_text(encoding="utf-8").splitlines():
        for q in json.loads(line)["questions"] if line.strip() else ():
            assert "REDACTED" not in q["answer"] and "REDACTED" not in q["prompt"], q


def test_the_redacted_folder_holds_no_planted_value_nor_the_authors_name(redaction_pair):
    red, plain = redaction_pair
    assert {n for _, n in find_leaks(plain, NEEDLES)} == set(NEEDLES)  # they were there to be found
    assert find_leaks(red, NEEDLES) == []
    names = [p.relative_to(red).as_posix() for p in red.rglob("*")]
    assert not [n for n in names if any(needle in n for needle in NEEDLES)]
    sweep = json.loads((red / "run.json").read_text())["redaction"]
    assert sweep["enabled"] and any(f.startswith("sessions/") for f in sweep["files_changed_by_final_sweep"])
    shown = (red / "sessions").iterdir()
    assert any("[REDACTED:log-user-name]" in p.read_text(encoding="utf-8") for p in shown)
    # Private while it held the sessions as written; once swept, as any run folder.
    assert stat.S_IMODE(red.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    assert stat.S_IMODE((red / "sessions").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
