"""Issue 45 item 1: cuts, over_window and "compacted" in the agent's model's tokens, and the best other arm."""

import dataclasses

import pandas as pd
import pytest

from compaction_lab.core.session import Session
from compaction_lab.exam.exams import closed, recorded
from compaction_lab.exam.questions import cuts
from compaction_lab.exam.readers import VerbatimReader
from compaction_lab.exam.types import Case, Question
from compaction_lab.ingest import load_sessions
from compaction_lab.strategies import calibration as cal
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import PUBLIC_FIXTURES, make_session

CTX = CompactionContext(window=4_000, output_ceiling=1_000)  # usable capacity W − O = 3,000


def _session(factor: float | None, n: int = 20) -> Session:
    """`n` records of ~100 report tokens each; with usage rows counting `factor` times the report tokens."""
    items = [("user" if i % 2 == 0 else "assistant", " ".join(f"v{i}k{j}" for j in range(25))) for i in range(n)]
    s = make_session(items, "cal")
    if factor is None:
        return s
    sizes = cal.request_sizes(s, CTX)
    usage = [{"entry_id": r.entry_id, "input_tokens": round(sizes[r.source_order] * factor)} for r in s.records[1::2]]
    return dataclasses.replace(s, metadata={"usage": usage})


def test_capacity_cuts_where_the_calibrated_request_outgrows_w_minus_o():
    plain, doubled = _session(None), _session(2.0)
    sizes = cal.request_sizes(plain, CTX)
    assert sizes[-1] <= 3_000 < 2 * sizes[-1]  # fits in report tokens, not in the model's
    uncal = cuts.capacity_cut(plain, CTX)
    assert uncal.cuts == () and not uncal.would_compact and uncal.calibration is None
    assert "uncalibrated (cl100k)" in uncal.reason
    sc = cuts.capacity_cut(doubled, CTX)
    assert sc.would_compact and sc.calibration == pytest.approx(2.0, abs=0.02)
    (cut,) = sc.cuts
    c = cal.calibrate(doubled, CTX)
    assert c.tokens(sizes[cut]) > 3_000 >= c.tokens(sizes[cut - 1])  # the first boundary over, in model tokens
    assert sc.row()["tokens"] == sizes[-1] and sc.row()["tokens_model"] == cal.model_tokens(sizes[-1], doubled, CTX)


def test_auto_falls_back_to_capacity_without_a_recorded_compaction():
    s = _session(2.0)
    auto, capacity = cuts.plan([s], "auto", CTX)[0], cuts.capacity_cut(s, CTX)
    assert auto == capacity and auto.mode == "capacity"
    assert cuts.CUT_MODES[0] == "auto" and list(cuts.SESSION_COLUMNS[1:4]) == ["tokens", "tokens_model", "calibration"]


def test_over_window_and_compacted_in_the_closed_answer_rows():
    """At the end of the doubled session (~2,000 report tokens, ~4,000 model tokens, W − O = 3,000): ``full``
    and ``truncate-oldest`` (which found room in report tokens and kept everything) are over the window and
    did not compact; ``futureos-deterministic`` compacted."""
    s = _session(2.0)
    q = Question(
        id="q0",
        case_id="c0",
        pointer="user",
        category="value",
        prompt="What came first?",
        answer="v0k7",
        source_entry_id="e0",
        source_order=0,
    )
    case = Case(id="c0", session_id=s.id, cut=s.end, tail_start=s.end - 2, questions=(q,))
    res = closed.run_closed(
        [case], {s.id: s}, ["full", "truncate-oldest", "futureos-deterministic"], CTX, VerbatimReader()
    )
    a = res.answers.set_index("strategy")
    assert a.loc["full", "over_window"] and not a.loc["full", "compacted"]
    # truncate-oldest fits what the model accepts: W − O over the calibration, in report tokens
    assert not a.loc["truncate-oldest", "over_window"] and a.loc["truncate-oldest", "compacted"]
    assert a.loc["truncate-oldest", "projection_tokens_model"] <= CTX.window - CTX.output_ceiling
    assert a.loc["full", "projection_tokens"] <= 3_000 < a.loc["full", "projection_tokens_model"]
    assert a.loc["futureos-deterministic", "compacted"]
    p = res.projections.set_index("strategy")
    assert p.loc["full", "calibration"] == pytest.approx(2.0, abs=0.02) and not p.loc["full", "compacted"]
    assert (p["over_window"] == (p["tokens_model"] > p["usable_capacity"])).all()
    recall = closed.with_compacted(
        pd.DataFrame({"strategy": ["full", "truncate-oldest", "futureos-deterministic"]}), res.answers
    )
    assert recall["compacted"].tolist() == [False, True, True]


def _table(rows):
    cols = [
        "case_id",
        "strategy",
        "recorded",
        "own_agent",
        "n",
        "recall",
        "projection_tokens",
        "over_window",
        "compacted",
    ]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


def test_the_best_other_arm_is_never_the_reference_an_uncompacted_or_an_over_window_arm():
    t = _table(
        [
            ("c", "recorded", True, False, 20, 0.1, 100, False, True),
            ("c", "pi", False, True, 20, 0.9, 100, False, True),
            ("c", "full", False, False, 20, 1.0, 900, False, False),
            ("c", "truncate-oldest", False, False, 20, 1.0, 900, False, False),
            ("c", "masking", False, False, 20, 0.95, 800, True, True),
            ("c", "aider", False, False, 20, 0.4, 300, False, True),
            ("c", "codex", False, False, 20, 0.4, 200, False, True),
            ("d", "full", False, False, 20, 1.0, 900, True, False),
        ]
    )
    ok = recorded.may_be_best(t)
    assert t.loc[ok, "strategy"].tolist() == ["aider", "codex"]
    best = recorded.best_other(t)
    assert t.loc[best, "strategy"].tolist() == ["codex"]  # tie on recall: the smaller projection


@pytest.fixture(scope="module")
def pi_recorded():
    (s,) = [s for s in load_sessions(PUBLIC_FIXTURES / "pi") if s.metadata.get("compactions")]
    params = {"window": 200_000, "output_ceiling": 32_000, "probe_n_questions": 3, "probe_n_decoys": 0}
    ctx = CompactionContext(window=200_000, output_ceiling=32_000)
    rc = recorded.build([s], params, ctx=ctx)
    res = recorded.run(rc, ["full", "truncate-oldest", "observation-masking"], ctx, VerbatimReader(), n_boot=50)
    return rc, res


@pytest.mark.slow
def test_public_pi_compactions_match_the_logs_own_size_and_full_is_over_window(pi_recorded):
    """The acceptance: at both of pi's compactions the calibrated size of the request it held is within 1% of
    the log's ``tokensBefore`` (175,004 and 185,014); at the first, ``full`` (137k cl100k) is over W − O."""
    rc, res = pi_recorded
    found = rc.found.sort_values("compaction")
    assert found["tokens_before"].tolist() == [175_004, 185_014]
    for _, f in found.iterrows():
        assert abs(f["tokens_model"] - f["tokens_before"]) <= 0.01 * f["tokens_before"]
        assert f["tokens"] < 168_000 < f["tokens_model"] or f["compaction"] == 1
    t = res.table
    first = t[t["compaction"] == 0].set_index("strategy")
    assert first.loc["full", "over_window"] and not first.loc["full", "compacted"]
    # truncate-oldest keeps what fits the model's W − O: it compacted, and it can be sent
    assert not first.loc["truncate-oldest", "over_window"] and first.loc["truncate-oldest", "compacted"]
    for _, g in t.groupby("case_id"):
        named = g[g["best_other"]]
        assert len(named) <= 1 and not set(named["strategy"]) & {"full", "truncate-oldest", "recorded"}
