"""The run's cases: the bank for synthetic chains, probes for imported sessions, saved once and reused."""

import pytest

from compaction_lab import strategies
from compaction_lab.core import runfolder
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.questions import cuts
from compaction_lab.exam.types import bank_digest
from compaction_lab.ingest import load_sessions, sources, synthetic
from compaction_lab.strategies import calibration
from compaction_lab.strategies.arms.futureos import tail_boundaries
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import PUBLIC_FIXTURES, make_session

PARAMS = {"n_cases": 2, "n_questions": 8, "n_decoys": 2, "tail_tokens": 600, "seed": 7}


def test_synthetic_run_gets_the_bank_and_reuses_it(tmp_path):
    src = sources.gather(None, synthetic.SyntheticSpec(n_chains=2, window_tokens=6000), progress=False)
    sources.save(src, runfolder.resolve(tmp_path))
    first = exam_cases.for_run(tmp_path, PARAMS)
    assert first.kind == "synthetic bank" and len(first.cases) == 2
    assert (tmp_path / exam_cases.BANK_FILE).exists()
    again = exam_cases.for_run(tmp_path, {**PARAMS, "n_questions": 4})  # saved bank wins: both exams ask the same
    assert bank_digest(again.cases) == bank_digest(first.cases)
    assert again.question_mix({"assistant": 1.0}) == ({"assistant": 1.0}, "the bank's")
    assert set(again.sessions) == {s.id for s in src.sessions}


@pytest.mark.slow
def test_imported_sessions_get_probes(tmp_path):
    src = sources.gather([str(PUBLIC_FIXTURES)], progress=False)
    sources.save(src, runfolder.resolve(tmp_path))
    rc = exam_cases.for_run(tmp_path, {"tail_tokens": 1000, "probe_n_questions": 12, "cut": "end"})
    assert rc.kind == "mined probes" and rc.cases and rc.unit == "session"
    assert all(c.session_id in rc.sessions for c in rc.cases)
    rows = rc.sessions_table()
    assert list(rows.columns) == cuts.SESSION_COLUMNS and set(rows["session_id"]) == {s.id for s in src.sessions}
    assert (rows["cut"] != "").all()  # under "end" every session is cut
    again = exam_cases.for_run(tmp_path, {})  # the saved bank, its session rows and its pool come back as they were
    assert again.sessions_table().equals(rows) and again.pool == rc.pool and sum(rc.pool.values()) > 0
    bank_mix = {"assistant": 0.8, "user": 0.1, "tool": 0.1}
    mix, label = again.question_mix(bank_mix)  # the sensitivity table's own point: the pool's, not the bank's
    assert label.startswith("natural") and mix == rc.natural_mix() != bank_mix
    assert abs(sum(mix.values()) - 1) < 1e-9 and mix["tool"] == rc.pool["tool"] / sum(rc.pool.values())


@pytest.mark.slow
def test_cut_capacity_cuts_where_the_request_first_outgrows_w_minus_o_in_the_models_tokens():
    """cut = capacity: the two pi sessions at W = 200,000 / O = 32,000, sized in their model's tokens (each
    calibrated by its own usage, ~1.25-1.28 tokens per cl100k token). The before-compaction one (~404k report
    tokens) is cut where the calibrated request first exceeds 168,000; so is the other (~138k report tokens,
    ~173k calibrated), which in report tokens alone would not have compacted."""
    sessions = [s for s in load_sessions(PUBLIC_FIXTURES / "pi") if s.source_format == "pi"]
    params = {"window": 200_000, "output_ceiling": 32_000, "probe_n_questions": 5, "probe_n_decoys": 0}
    rc = exam_cases.build(sessions, None, {**params, "cut": "capacity"})
    rows = rc.sessions_table().set_index("session_id")
    ctx = CompactionContext(window=200_000, output_ceiling=32_000)
    for s in sessions:
        row = rows.loc[s.id]
        c = calibration.calibrate(s, ctx)
        sizes = cuts.request_sizes(s, ctx)
        assert c.calibrated and 1.2 < c.factor < 1.35 and row["calibration"] == c.factor
        assert row["tokens"] == sizes[-1] and row["tokens_model"] == c.tokens(sizes[-1])
        assert row["would_compact"]
        cut = int(row["cut"])
        assert c.tokens(strategies.compact(s, "full", cut, ctx).tokens) > 168_000
        valid = tail_boundaries(s.records)  # the first boundary no tool call/output pair straddles
        assert all(c.tokens(sizes[i]) <= 168_000 for i in range(1, cut) if valid[i])
        assert [k.cut for k in rc.cases if k.session_id == s.id] == [cut]
    small = next(s for s in sessions if not s.metadata.get("compactions"))
    assert cuts.request_sizes(small, ctx)[-1] <= 168_000  # uncalibrated, it would not have been cut
    lower = exam_cases.build(sessions, None, {**params, "cut": "capacity", "window": 100_000})
    assert lower.sessions_table()["would_compact"].all() and len(lower.cases) == 2


@pytest.mark.slow
def test_cut_auto_is_the_default_recorded_where_the_log_compacted_else_capacity():
    sessions = [s for s in load_sessions(PUBLIC_FIXTURES / "pi") if s.source_format == "pi"]
    params = {"window": 200_000, "output_ceiling": 32_000, "probe_n_questions": 5, "probe_n_decoys": 0}
    assert cuts.CUT_MODES[0] == "auto"
    rc = exam_cases.build(sessions, None, params)
    rows = rc.sessions_table().set_index("session_id")
    logged = next(s for s in sessions if s.metadata.get("compactions"))
    other = next(s for s in sessions if s is not logged)
    recorded = [c["source_order"] for c in logged.metadata["compactions"]]
    assert rows.loc[logged.id, "cut"] == ",".join(map(str, recorded))
    assert [c.cut for c in rc.cases if c.session_id == logged.id] == recorded
    assert all(c.id.startswith(f"{logged.id}-probe-r") for c in rc.cases if c.session_id == logged.id)
    ctx = CompactionContext(window=200_000, output_ceiling=32_000)
    assert rows.loc[other.id, "cut"] == str(cuts.capacity_cut(other, ctx).cuts[0])


@pytest.mark.slow
def test_cut_recorded_uses_the_agents_own_compactions_and_names_a_session_without_one():
    sessions = list(load_sessions(PUBLIC_FIXTURES / "pi"))
    rc = exam_cases.build(sessions, None, {"cut": "recorded", "probe_n_questions": 5, "probe_n_decoys": 0})
    rows = rc.sessions_table().set_index("session_id")
    with_two = next(s for s in sessions if len(s.metadata.get("compactions") or ()) == 2)
    recorded = [c["source_order"] for c in with_two.metadata["compactions"]]
    assert [c.cut for c in rc.cases if c.session_id == with_two.id] == recorded
    other = next(s for s in sessions if s is not with_two)
    assert rows.loc[other.id, "cut"] == "" and "no recorded compaction" in rows.loc[other.id, "reason"]


def test_an_unknown_cut_is_an_error_naming_the_parameter():
    with pytest.raises(ValueError, match="cut = 'middle': expected one of auto, capacity, end, recorded"):
        exam_cases.build([make_session([("user", "hi")])], None, {"cut": "middle"})


def test_sessions_with_no_question_before_the_tail_say_why():
    short = make_session([("user", "Please rename ORD-58213 to ORD-99999."), ("assistant", "Done: ORD-99999.")])
    rc = exam_cases.build([short], None, {"tail_tokens": 8192, "cut": "end"})
    assert rc.n_questions == 0 and len(rc.cases) == 1
    text = rc.describe()
    assert "No question could be asked" in text and "0 of 20 real questions" in text
    assert "s1: no usable exact value before the recent tail" in text  # the session's own line says why
    by_default = exam_cases.build([short], None, {"tail_tokens": 8192})  # cut = auto -> capacity: never cut
    assert not by_default.cases and "would not compact at W = 128,000" in by_default.describe()
