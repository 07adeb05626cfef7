"""Fewer questions than asked is said, with what was asked, what the sessions allow and why (issue 25,
item 15): in the notebook's description of the cases, in the run folder, and in the report."""

from __future__ import annotations

import json

import pytest

from compaction_lab.core import runfolder
from compaction_lab.exam.questions import bank, probes
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.ingest import sources, synthetic
from compaction_lab.report import render
from tests.helpers import make_session

PARAMS = {"n_cases": 2, "n_decoys": 2, "tail_tokens": 600, "seed": 7}


@pytest.fixture()
def run_dir(tmp_path):
    """A run folder holding two small synthetic chains, as notebook 01 leaves it."""
    src = sources.gather(None, synthetic.SyntheticSpec(n_chains=2, window_tokens=6000), progress=False)
    sources.save(src, runfolder.resolve(tmp_path))
    return tmp_path


def test_a_bank_short_of_questions_says_asked_allowed_and_why(run_dir):
    """Was: 10,000 asked, a handful built, and only a warning no notebook showed."""
    rc = exam_cases.for_run(run_dir, {**PARAMS, "n_questions": 10_000})
    built = rc.n_questions
    real = sum(len(c.real) for c in rc.cases)
    eligible = sum(sum(c.eligible.values()) for c in rc.report.cases)
    assert 0 < built < 10_000
    line = rc.shortfall
    assert line.startswith(f"n_questions = 10,000 asked for, {built:,} built")
    assert f"{real:,} of 9,998 real questions" in line and "tail_tokens = 600" in line
    assert f"hold {eligible:,} such facts" in line
    assert line in rc.describe()
    # Written beside the bank: the report reads it, and a reuse of the saved bank (notebook 05) says it too.
    assert exam_cases.shortfall_of_run(run_dir) == line
    again = exam_cases.for_run(run_dir, {**PARAMS, "n_questions": 10_000})
    assert again.shortfall == line and line in again.describe()


def test_decoys_short_say_so(run_dir):
    rc = exam_cases.for_run(run_dir, {**PARAMS, "n_questions": 40, "n_decoys": 30})
    built_decoys = sum(len(c.questions) - len(c.real) for c in rc.cases)
    assert built_decoys < 30 and f"{built_decoys:,} of 30 decoys" in rc.shortfall


def test_a_bank_as_asked_says_nothing(run_dir):
    rc = exam_cases.for_run(run_dir, {**PARAMS, "n_questions": 4})
    assert rc.n_questions == 4 and rc.shortfall == ""
    assert exam_cases.shortfall_of_run(run_dir) == ""


def test_probes_short_of_questions_say_so():
    short = make_session([("user", "Please rename ORD-58213 to ORD-99999."), ("assistant", "Done: ORD-99999.")])
    params = {"tail_tokens": 8192, "probe_n_questions": 20, "probe_n_decoys": 0, "cut": "end"}
    rc = exam_cases.build([short], None, params)
    assert rc.shortfall.startswith("probe_n_questions = 20 per session asked for (1 cut of 1 session), 0 built")
    assert "tail_tokens = 8,192" in rc.shortfall and rc.shortfall in rc.describe()


def test_the_specs_refuse_past_the_maximum():
    m = bank.MAX_QUESTIONS_PER_CASE
    assert bank.BankSpec(n_cases=2, n_questions=2 * m, n_decoys=0).n_questions == 2 * m
    with pytest.raises(ValueError, match=f"n_questions = {2 * m + 1:,}: at most {m:,} per case"):
        bank.BankSpec(n_cases=2, n_questions=2 * m + 1, n_decoys=0)
    with pytest.raises(ValueError, match=f"n_questions = {m + 1:,}: at most {m:,} per case"):
        probes.ProbeSpec(n_questions=m + 1)


def test_the_report_shows_the_shortfall(run_dir):
    from compaction_lab.run import runner

    rc = exam_cases.for_run(run_dir, {**PARAMS, "n_questions": 10_000})
    (run_dir / runfolder.RUN_JSON).write_text(json.dumps({"run": run_dir.name, "started": "now"}), "utf-8")
    page = render.build_index(run_dir, runner.load_profile("smoke")).read_text("utf-8")
    assert "Fewer questions than asked" in page and "n_questions = 10,000 asked for" in page
    assert f"{rc.n_questions:,} built" in page


def test_a_bank_whose_text_holds_line_separators_reads_back():
    """U+2028, U+2029 and NEL are not line ends in JSONL: a question mined from a log may hold them."""
    from compaction_lab.exam.types import Case, Question, bank_from_jsonl, bank_to_jsonl

    q = Question(
        id="q1", case_id="c1", pointer="user", category="value", prompt="after a\u2028b\u2029c\x85d?", answer="x\u2028y"
    )
    case = Case(id="c1", session_id="s\u20281", cut=3, tail_start=2, questions=(q,))
    assert bank_from_jsonl(bank_to_jsonl([case])) == [case]
