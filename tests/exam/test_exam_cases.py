"""The run's cases: the bank for synthetic chains, probes for imported sessions, saved once and reused."""

from conftest import PUBLIC_FIXTURES

from compaction_lab.exam import cases as exam_cases
from compaction_lab.exam.types import bank_digest
from compaction_lab.ingest import sources, synthetic
from compaction_lab.report import runfolder

PARAMS = {"n_cases": 2, "n_questions": 8, "n_decoys": 2, "tail_tokens": 600, "seed": 7}


def test_synthetic_run_gets_the_bank_and_reuses_it(tmp_path):
    src = sources.gather(None, synthetic.SyntheticProfile(n_chains=2, window_tokens=6000), progress=False)
    sources.save(src, runfolder.resolve(tmp_path))
    first = exam_cases.for_run(tmp_path, PARAMS)
    assert first.kind == "synthetic bank" and len(first.cases) == 2
    assert (tmp_path / exam_cases.BANK_FILE).exists()
    again = exam_cases.for_run(tmp_path, {**PARAMS, "n_questions": 4})  # saved bank wins: both exams ask the same
    assert bank_digest(again.cases) == bank_digest(first.cases)
    assert set(again.sessions) == {s.id for s in src.sessions}


def test_imported_sessions_get_probes(tmp_path):
    src = sources.gather([str(PUBLIC_FIXTURES)], progress=False)
    sources.save(src, runfolder.resolve(tmp_path))
    rc = exam_cases.for_run(tmp_path, {"tail_tokens": 1000, "probe_n_questions": 12})
    assert rc.kind == "mined probes" and rc.cases
    assert all(c.session_id in rc.sessions for c in rc.cases)


def test_sessions_with_no_question_before_the_tail_say_why():
    from conftest import make_session

    short = make_session([("user", "Please rename ORD-58213 to ORD-99999."), ("assistant", "Done: ORD-99999.")])
    rc = exam_cases.build([short], None, {"tail_tokens": 8192})
    assert rc.n_questions == 0 and len(rc.cases) == 1
    text = rc.describe()
    assert "No question could be asked" in text and "0 of 20 real questions" in text
