"""Where an answer was found (issue 47): kept by design, only in the summary, both, nowhere; the two recalls."""

from __future__ import annotations

import pandas as pd
import pytest

from compaction_lab import strategies
from compaction_lab.core.projection import STAND_IN_LABEL, Projection, Segment, SummaryReceipt
from compaction_lab.exam import found
from compaction_lab.exam.exams import closed
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.readers import VerbatimReader
from compaction_lab.exam.statistics import stats
from compaction_lab.exam.types import Case, Question
from compaction_lab.ingest import synthetic
from compaction_lab.strategies import CompactionContext
from tests.helpers import FakeSummarizer, case_at_end, make_session

#: A value the assistant reported early on (compacted away), and one the last tool output holds (the tail).
EARLY, LATE = "ORD-58213", "INV-90417"


def _session():
    filler = "The build log goes on for a while without anything worth remembering. " * 40
    return make_session(
        [
            ("system", "You are a coding agent."),
            ("user", "Find the order behind the failing refund."),
            ("assistant", f"The failing refund belongs to order {EARLY}."),
            ("tool_output", filler),
            ("user", "Now look at the invoices."),
            ("tool_output", filler),
            ("assistant", "Reading the invoice table next."),
            ("tool_output", f"invoice {LATE} is unpaid"),
        ]
    )


def _question(qid: str, answer: str, order: int, pointer: str = "assistant") -> Question:
    return Question(qid, "c1", pointer, "assistant_value", f"Which value ({qid})?", answer, source_order=order)


@pytest.fixture(scope="module")
def exam():
    """Codex compacts the session at its end with a summariser whose answer repeats the early value."""
    s = _session()
    ctx = CompactionContext(window=4000, output_ceiling=500, summarizer=FakeSummarizer(f"Refund order: {EARLY}."))
    case = Case("c1", s.id, cut=len(s.records), tail_start=3, questions=(_question("q1", EARLY, 2),))
    res = closed.run_closed([case], {s.id: s}, ["codex"], ctx, VerbatimReader())
    return s, ctx, res


def test_a_value_only_the_summary_holds_is_summary_recall_not_scope(exam):
    """Acceptance 1: the value is only in codex's summary (codex keeps user messages, never assistant text)."""
    _, _, res = exam
    row = res.answers.iloc[0]
    assert row["correct"] and row["found_in"] == "summary"
    assert row["summary_by"] == "fake"  # the summariser that wrote it, as its receipt names it
    r = stats.recall_table(res.answers).iloc[0]
    assert (r["retained"], r["scope_retained"], r["summary_retained"]) == (1, 0, 1)
    assert r["scope_recall"] == 0.0 and r["summary_recall"] == 1.0
    assert r["scope_ci_low"] == 0.0 and 0 < r["scope_ci_high"] < 1  # an interval for each part, never of zero width
    assert 0 < r["summary_ci_low"] < 1 and r["summary_ci_high"] == 1.0
    assert r["summary_retained_assistant"] == 1 and r["scope_retained_assistant"] == 0
    assert r["summary_by"] == "fake"


def test_a_value_kept_in_the_tail_is_verbatim(exam):
    """Acceptance 1: a value the arm keeps in its recent tail is found verbatim, whatever the summary says."""
    s, ctx, _ = exam
    pi = strategies.compact(s, "pi", len(s.records), ctx)
    # pi keeps its recent tail verbatim: the last output is there, and the summary does not repeat it
    assert found.found_in(_question("q2", LATE, 7, "tool"), found.regions(pi)) == "verbatim"


def _projection(*segments: Segment, receipt: SummaryReceipt | None = None) -> Projection:
    return Projection("x", "1", "s1", 3, segments, capacity=1000, estimator="tiktoken", receipt=receipt)


def test_only_the_summarisers_answer_is_summary_text():
    """What a strategy writes around the answer (pi's file lists, a prefix) is kept by design; an earlier
    summary carried over, or a recorded agent's, is summary text whole; an opaque one is in neither."""
    answer = "Goal: ship ORD-1."
    receipt = SummaryReceipt("extractive", True, answer, "f")
    p = _projection(
        Segment("system", "system", "You are a coding agent."),
        Segment("summary", "user", answer + "\n\n<read-files>\nsrc/app.py\n</read-files>"),
        Segment("summary", "user", "Earlier: ORD-0 was closed.", label="recorded summary (pi)"),
        Segment("summary", "user", "[encrypted]", opaque=True),
        Segment("tail", "tool", "ok ORD-2"),
        receipt=receipt,
    )
    r = found.regions(p)
    assert "src/app.py" in r.scope and "src/app.py" not in r.summary
    assert "ord-1" in r.summary and "ord-1" not in r.scope
    assert "ord-0" in r.summary and "[encrypted]" not in r.scope + r.summary and r.opaque
    assert r.summary_by == STAND_IN_LABEL
    assert [found.where([normalise(v)], r) for v in ("ORD-1", "ORD-2", "src/app.py", "ORD-9")] == [
        "summary",
        "verbatim",
        "verbatim",
        "nowhere",
    ]
    both = _projection(Segment("tail", "tool", "ORD-1"), Segment("summary", "user", "ORD-1"))
    assert found.where(["ord-1"], found.regions(both)) == "both"
    assert found.regions(both).summary_by == "summary"  # no receipt: the segment's label, else "summary"
    # no summary text at all: nobody wrote one
    assert found.regions(_projection(Segment("tail", "tool", "x"))).summary_by == ""


def test_part_of_recall():
    assert [found.part(f, True) for f in found.FOUND_IN] == ["scope", "summary", "scope", "elsewhere"]
    assert {found.part(f, False) for f in found.FOUND_IN} == {""}


def test_recall_table_without_found_in_leaves_the_parts_unmeasured():
    """A frame saved before issue 47 (no ``found_in``): the parts are <NA>, never 0."""
    answers = pd.DataFrame(
        {
            "strategy": ["a", "a"],
            "case_id": ["c", "c"],
            "question_id": ["q1", "q2"],
            "pointer": ["assistant", "tool"],
            "decoy": [False, False],
            "correct": [True, False],
        }
    )
    r = stats.recall_table(answers).iloc[0]
    assert r["retained"] == 1
    assert pd.isna(r["scope_retained"]) and pd.isna(r["summary_recall"]) and pd.isna(r["scope_ci_low"])
    # a column without values is no measurement either
    r = stats.recall_table(answers.assign(found_in=None)).iloc[0]
    assert pd.isna(r["scope_retained"]) and pd.isna(r["summary_retained"])


@pytest.fixture(scope="module")
def synthetic_exam():
    """Every arm on a synthetic chain, the summaries by the extractive stand-in (as `make run` does)."""
    from compaction_lab import summarize

    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=40000, seed=11))
    case, sessions = case_at_end(chain, 3000, 60)
    ctx = CompactionContext(window=48000, output_ceiling=1000, summarizer=summarize.get_summarizer("extractive"))
    names = [n for n in strategies.names() if n != "recorded"]
    projections: dict[str, Projection] = {}
    res = closed.run_closed(
        [case], sessions, names, ctx, VerbatimReader(), on_projection=lambda c, p: projections.update({p.strategy: p})
    )
    return case, res, projections


def test_the_verbatim_reader_is_right_exactly_where_the_value_was_found(synthetic_exam):
    """scope + summary = total for the verbatim reader: it answers iff the value is in the messages."""
    _, res, _ = synthetic_exam
    real = res.answers[~res.answers["decoy"]]
    assert (real["correct"] == real["found_in"].ne("nowhere")).all()
    table = stats.recall_table(res.answers)
    assert (table["scope_retained"] + table["summary_retained"] == table["retained"]).all()
    # both parts occur: the split is not trivially one-sided on this chain
    assert table["summary_retained"].sum() > 0 and table["scope_retained"].sum() > 0


def test_codex_scope_on_assistant_questions_is_what_it_keeps_outside_the_summary(synthetic_exam):
    """Acceptance 2, computed independently: codex's projection keeps user messages and a summary; its
    scope recall on assistant-pointer questions is the count of their values in its segments other than
    the summary — none here, as the seed says ("keeps no assistant text at all")."""
    case, res, projections = synthetic_exam
    p = projections["codex"]
    kinds = {s.kind for s in p.segments}
    assert "summary" in kinds and "assistant_original" not in kinds
    outside = normalise("\n".join(s.text for s in p.segments if s.kind not in ("summary", "tools")))
    asked = [q for q in case.real if q.pointer == "assistant"]
    expected = sum(any(normalise(a) in outside for a in (q.answer, *q.aliases)) for q in asked)
    row = stats.recall_table(res.answers).set_index("strategy").loc["codex"]
    assert row["n_assistant"] == len(asked) > 0
    assert row["scope_retained_assistant"] == expected == 0
    # whatever it answers there came through its summary
    assert row["summary_retained_assistant"] == row["retained_assistant"]


def test_what_pis_code_wrote_into_a_recorded_summary_is_kept_by_design(tmp_path):
    """A recorded pi summary ends with the file lists pi's code computed (``formatFileOperations``) and sits in
    pi's fixed wrapper: both are kept by design, as the pi arm's own lists are; the model's text is summary."""
    import json

    from compaction_lab import ingest
    from compaction_lab.strategies.arms import pi as pi_strategy
    from compaction_lab.strategies.arms import recorded
    from tests.helpers import FIXTURES

    lists = pi_strategy.format_file_operations(["docs/README.md"], ["src/orders/migrate.py"])
    lines = (FIXTURES / "pi" / "recorded.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    for e in entries:
        if e.get("type") == "compaction":
            e["summary"] += lists
    path = tmp_path / "with-lists.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    (s,) = list(ingest.load_sessions(path))
    (rc,) = recorded.find(s)[0]
    p = strategies.compact(s, "recorded", rc.cut, CompactionContext())
    assert (
        lists in p.notes["authored_in_summary"]
        and pi_strategy.COMPACTION_SUMMARY_PREFIX in p.notes["authored_in_summary"]
    )
    r = found.regions(p)
    assert found.where([normalise("src/orders/migrate.py")], r) == "verbatim"
    assert found.where([normalise("MIG-20251102-7QX")], r) == "summary"  # the model's words
    assert "compacted into the following summary" in r.scope and "compacted into the following summary" not in r.summary
    # without lists (the fixture as it is) only the wrapper is pi's
    (plain,) = list(ingest.load_sessions(FIXTURES / "pi" / "recorded.jsonl"))
    q = strategies.compact(plain, "recorded", recorded.find(plain)[0][0].cut, CompactionContext())
    assert q.notes["authored_in_summary"] == [
        pi_strategy.COMPACTION_SUMMARY_PREFIX,
        pi_strategy.COMPACTION_SUMMARY_SUFFIX,
    ]
    # a list a model wrote mid-text is the model's, not pi's
    assert pi_strategy.appended_file_lists("<read-files>\na.py\n</read-files>\n\nmore words") == ""
