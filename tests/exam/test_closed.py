import dataclasses

import pytest

from compaction_lab import strategies, summarize
from compaction_lab.exam.exams import closed
from compaction_lab.exam.readers import SearcherReader, VerbatimReader
from compaction_lab.exam.statistics import stats
from compaction_lab.exam.types import NOT_FOUND
from compaction_lab.ingest import synthetic
from compaction_lab.strategies import CompactionContext
from tests.helpers import case_at_end

NAMES = ["full", "codex", "futureos-deterministic"]
# Codex without a summariser does not compact (issue 27 item 6): these tests read its placeholder compaction.
CTX = CompactionContext(window=8000, output_ceiling=1000, params={"on_failure": "placeholder"})

EXPECTED_COLUMNS = [
    "strategy",
    "strategy_label",
    "reader",
    "reader_label",
    "session_id",
    "case_id",
    "question_id",
    "source_order",
    "pointer",
    "category",
    "decoy",
    "answer",
    "given",
    "correct",
    "found_in",
    "summary_by",
    "projection_tokens",
    "projection_tokens_model",
    "over_window",
    "compacted",
    "draw",
]


@pytest.fixture(scope="module")
def setup():
    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=20000))
    # the recent tail: the last ~4000 tokens; real questions point before it
    return case_at_end(chain, 4000, 5, decoys=1)


@pytest.fixture(scope="module")
def reader():
    return VerbatimReader()


@pytest.fixture(scope="module")
def result(setup, reader):
    case, sessions = setup
    return closed.run_closed([case], sessions, NAMES, CTX, reader)


def test_answers_table_shape_and_columns(setup, result):
    case, _ = setup
    a = result.answers
    assert list(a.columns) == EXPECTED_COLUMNS == closed.ANSWER_COLUMNS
    assert len(a) == len(NAMES) * len(case.questions)
    assert list(a["strategy"].unique()) == NAMES
    assert a["decoy"].sum() == len(NAMES)
    assert a["correct"].dtype == bool and a["projection_tokens"].dtype == "int64"
    assert (a["reader_label"] == "verbatim reader (retention ceiling)").all()


def test_full_retains_every_real_question_and_nobody_falls_for_the_decoy(result):
    a = result.answers
    full = a[(a["strategy"] == "full") & ~a["decoy"]]
    assert len(full) > 0 and full["correct"].all()
    assert a.loc[a["decoy"], "correct"].all()
    assert (a.loc[a["decoy"], "given"] == NOT_FOUND).all()
    # the small window forces the others to drop something
    assert not a.loc[(a["strategy"] == "codex") & ~a["decoy"], "correct"].all()


def test_over_window_flags_exactly_the_projections_larger_than_w_minus_o(setup, result):
    """`full` keeps the whole chain, larger than W − O = 7,000 here: flagged, in both tables; an arm that
    compacted into the window is not."""
    case, _ = setup
    p = result.projections.set_index("strategy")
    assert (p["usable_capacity"] == CTX.window - CTX.output_ceiling).all()
    assert (p["over_window"] == (p["tokens"] > p["usable_capacity"])).all()
    assert p.loc["full", "over_window"] and not p.loc["codex", "over_window"]
    a = result.answers
    flagged = a.groupby("strategy")["over_window"].agg(["all", "any"])
    assert (flagged["all"] == flagged["any"]).all()  # one projection per case: every row says the same
    assert flagged.loc["full", "all"] and not flagged.loc["codex", "any"]
    assert (a["session_id"] == case.session_id).all()
    real = a[~a["decoy"]]
    assert (real["source_order"] >= 0).all() and (a.loc[a["decoy"], "source_order"] == -1).all()


def test_projections_table_one_row_per_case_strategy(setup, result):
    case, _ = setup
    p = result.projections
    assert list(p.columns) == closed.PROJECTION_COLUMNS
    assert list(p["strategy"]) == NAMES and (p["case_id"] == case.id).all()
    by = p.set_index("strategy")["tokens"]
    for name, tokens in result.answers.groupby("strategy")["projection_tokens"].unique().items():
        assert list(tokens) == [by[name]]
    assert by["full"] > by["codex"]
    assert not p["stand_in"].any()
    assert p.set_index("strategy").loc["codex", "summarizer"] == "none"


def test_each_case_strategy_is_compacted_once(setup, reader, monkeypatch):
    case, sessions = setup
    calls = []
    real = strategies.compact

    def counting(session, name, cut=None, ctx=None):
        calls.append((session.id, name, cut))
        return real(session, name, cut, ctx)

    monkeypatch.setattr(strategies, "compact", counting)
    r = closed.run_closed([case, case], sessions, ["full", "codex"], CTX, reader, progress=True)
    assert len(calls) == 4 and len(r.projections) == 4
    assert len(r.answers) == 2 * 2 * len(case.questions)


def test_stand_in_summaries_and_readers_are_labelled(setup):
    case, sessions = setup
    ctx = CompactionContext(window=8000, output_ceiling=1000, summarizer=summarize.get_summarizer("extractive"))
    r = closed.run_closed([case], sessions, ["codex"], ctx, SearcherReader(search="never"))
    assert (r.answers["strategy_label"] == "codex (extractive stand-in)").all()
    assert (r.answers["reader"] == "searcher").all() and (r.answers["reader_label"] == "searcher stand-in").all()
    p = r.projections.iloc[0]
    assert p["stand_in"] and p["summarizer"] == "extractive" and not p["fallback"]


def test_reader_without_a_label_is_shown_by_name_and_stand_in():
    class Bare:
        def answer(self, messages, question, tools=(), *, wording="", shape_tools=()):
            raise AssertionError("not called")

    assert closed.reader_label(Bare()) == "Bare"
    assert closed.reader_label(Bare(), stand_in=True) == "Bare (stand-in)"
    assert closed.reader_label(VerbatimReader(), stand_in=True) == "verbatim reader (retention ceiling)"


def test_reader_sees_the_projection_messages_and_the_call_shape_tools(setup):
    case, sessions = setup
    seen = []

    class Recording(VerbatimReader):
        def answer(self, messages, question, tools=(), *, wording="", shape_tools=()):
            seen.append((messages, tuple(tools), tuple(shape_tools)))
            return super().answer(messages, question, tools, wording=wording, shape_tools=shape_tools)

    closed.run_closed([case], sessions, ["codex"], CTX, Recording())
    proj = strategies.compact(sessions[case.session_id], "codex", case.cut, CTX)
    assert len(seen) == len(case.questions)
    for messages, tools, shape_tools in seen:
        assert messages == proj.messages() and tools == ()
        assert shape_tools == tuple(CTX.shape.for_session(sessions[case.session_id]).tools)


def test_missing_session_and_empty_run(setup, reader):
    case, _ = setup
    with pytest.raises(KeyError, match=case.session_id):
        closed.run_closed([case], {}, NAMES, CTX, reader)
    r = closed.run_closed([], {}, NAMES, CTX, reader)
    assert r.answers.empty and list(r.answers.columns) == EXPECTED_COLUMNS and r.projections.empty


def test_stats_run_on_the_closed_answers(result):
    t = stats.recall_table(result.answers, n_boot=200).set_index("strategy")
    assert t.loc["full", "recall"] == 1.0 and t.loc["full", "ci_low"] < t.loc["full", "ci_high"] == 1.0
    assert (t["decoys_fallen"] == 0).all() and (t["decoys_n"] == 1).all()
    m = stats.paired_table(result.answers)
    assert len(m) == 3 and (m["b"] >= 0).all()
    assert not stats.sensitivity_table(result.answers).empty


class _Failing:
    """A summary provider whose every call fails (an endpoint down)."""

    name = "down"
    stand_in = False

    def summarize(self, request):
        raise ConnectionError("endpoint unreachable")


def test_an_agent_that_does_not_compact_on_a_failed_summary_is_reported_and_examined_as_sent(setup, tmp_path):
    """Codex keeps the history when its summary call fails (issue 27 item 6), and so does OpenCode when,
    as here (W = 8,000: no tail), its pinned code wrote no tail start (issue 46): the projection table says
    so, the exam reads the history as sent, and the report names the arm and the count."""
    from compaction_lab.core import runfolder
    from compaction_lab.report import share

    case, sessions = setup
    ctx = CompactionContext(window=8000, output_ceiling=1000, summarizer=_Failing())
    r = closed.run_closed([case], sessions, ["codex", "opencode", "futureos-deterministic"], ctx, VerbatimReader())
    p = r.projections.set_index("strategy")
    assert "endpoint unreachable" in p.loc["codex", "compaction_failed"]
    assert "endpoint unreachable" in p.loc["opencode", "compaction_failed"]
    assert p.loc["futureos-deterministic", "compaction_failed"] == ""  # never asks for a summary
    # The history unchanged is larger than anything the arm would have compacted to: here, past W − O.
    assert p.loc["codex", "over_window"] and p.loc["opencode", "over_window"]
    placeholder = closed.run_closed(
        [case], sessions, ["codex"], dataclasses.replace(ctx, params={"on_failure": "placeholder"}), VerbatimReader()
    ).projections.iloc[0]
    assert placeholder["compaction_failed"] == "" and placeholder["tokens"] < p.loc["codex", "tokens"]
    runfolder.save_table(r.projections, tmp_path, "exam_projections")
    lines = share.failed_compactions(tmp_path)
    did_not = [line for line in lines if "did not compact" in line]
    assert len(did_not) == 2 and all("history went on unchanged" in line and "1 of 1 case" in line for line in did_not)
    assert did_not[0].startswith("codex") and did_not[1].startswith("opencode")
    assert all("endpoint unreachable" in line for line in did_not)
    assert p.loc["codex", "summary_failed"] and p.loc["futureos-deterministic", "summary_failed"] == ""


def test_an_arm_that_compacts_without_its_summary_is_reported_as_such(setup, tmp_path):
    """OpenCode's pinned code drops the head when its summary fails after it wrote a tail start (issue 46):
    it compacted (``compaction_failed`` empty) but without a summary (``summary_failed`` says why), and the
    report says so in its own sentence, not as "history unchanged"."""
    from compaction_lab.core import runfolder
    from compaction_lab.report import share

    case, sessions = setup
    ctx = CompactionContext(window=20000, output_ceiling=1000, summarizer=_Failing())
    r = closed.run_closed([case], sessions, ["opencode"], ctx, VerbatimReader())
    row = r.projections.iloc[0]
    assert row["compaction_failed"] == "" and "endpoint unreachable" in row["summary_failed"]
    assert bool(row["compacted"])
    runfolder.save_table(r.projections, tmp_path, "exam_projections")
    (line,) = share.failed_compactions(tmp_path)
    assert line.startswith("opencode") and "compacted without a summary" in line and "1 of 1 case" in line
