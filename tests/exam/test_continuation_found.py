"""Needed-next recall split by where the value was found: scope (kept by design) vs summary (issue 47)."""

from __future__ import annotations

import pandas as pd

from compaction_lab import strategies
from compaction_lab.exam.exams import continuation as cont
from compaction_lab.exam.types import Case
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import FakeSummarizer, make_session

FILLER = " ".join(["lorem"] * 300)


def _session():
    """ORD-58213 only in a tool call and its output (Codex drops both; the summary names it), INV-99120 in a
    user message (Codex keeps user text verbatim); after the cut (6) the agent's next call uses both."""
    bash = {"tool": "bash"}
    return make_session(
        [
            ("user", "Please reconcile the ledger for the quarter."),
            ("tool_call", 'bash {"command": "grep -n ORD-58213 ledger.csv"}', {**bash, "call_id": "c1"}),
            ("tool_output", "17: ORD-58213 refunded 42.00", {**bash, "call_id": "c1"}),
            ("assistant", "Found the refund. " + FILLER),
            ("user", "Also check invoice INV-99120 please."),
            ("assistant", "Checking. " + FILLER),
            ("tool_call", 'bash {"command": "grep -n ORD-58213 ledger.csv INV-99120"}', {**bash, "call_id": "c2"}),
        ]
    )


def _graded():
    s = _session()
    ctx = CompactionContext(
        window=10_000, output_ceiling=1000, summarizer=FakeSummarizer("Order ORD-58213 was refunded.", name="fake")
    )
    key = cont.build_key("closed", Case("s1-c0", "s1", cut=6, tail_start=6), s, k=1)
    assert {t.value: t.status for _, t in key.needed} == {
        "ledger.csv": "needed",
        "ORD-58213": "needed",
        "INV-99120": "needed",
    }
    p = strategies.compact(s, "codex", 6, ctx)
    return key, p, cont.grade_case(key, p, ctx)


def test_a_value_only_the_summary_holds_is_summary_one_in_kept_user_text_verbatim():
    _, _, (actions, targets) = _graded()
    where = {r["target"]: r["found_in"] for r in targets}
    assert where == {"ORD-58213": "summary", "INV-99120": "verbatim", "ledger.csv": "nowhere"}
    assert {r["summary_by"] for r in targets} == {"fake"}
    # presence is unchanged: held exactly when found somewhere
    assert all(r["correct"] == (r["found_in"] != "nowhere") for r in targets)
    assert sorted(actions[0]["held"]) == ["INV-99120", "ORD-58213"] and actions[0]["n_needed"] == 3


def test_continuation_recall_counts_the_summary_value_in_summary_recall_not_scope():
    key, p, (actions, targets) = _graded()
    res = cont.ContinuationResult(
        pd.DataFrame(actions, columns=cont.ACTION_COLUMNS),
        pd.DataFrame(targets, columns=cont.TARGET_COLUMNS),
        (("closed", "codex", "codex"),),
    )
    row = cont.recall_table(res, n_boot=50).iloc[0]
    assert (row["retained"], row["n"]) == (2, 3)
    assert (row["scope_retained"], row["summary_retained"]) == (1, 1)
    assert row["scope_recall"] == 1 / 3 and row["summary_recall"] == 1 / 3
    assert row["scope_retained_user"] == 1 and row["summary_retained_tool"] == 1
    assert row["scope_ci_low"] <= row["scope_recall"] <= row["scope_ci_high"]
    assert row["summary_ci_low"] <= row["summary_recall"] <= row["summary_ci_high"]
    assert row["summary_by"] == "fake"


def test_an_arm_that_needed_nothing_keeps_its_row_and_numeric_part_columns():
    _, _, (actions, targets) = _graded()
    res = cont.ContinuationResult(
        pd.DataFrame(actions, columns=cont.ACTION_COLUMNS),
        pd.DataFrame(targets, columns=cont.TARGET_COLUMNS),
        (("closed", "codex", "codex"), ("closed", "idle", "idle")),
    )
    table = cont.recall_table(res, n_boot=50).set_index("strategy")
    assert table.loc["idle", "n"] == 0 and pd.isna(table.loc["idle", "scope_recall"])
    assert table.loc["idle", "scope_retained"] == 0 and table.loc["idle", "summary_retained"] == 0
    assert table.loc["codex", "scope_retained"] == 1
    assert str(table["scope_retained"].dtype) == "Int64"
    assert pd.api.types.is_float_dtype(table["scope_recall"]) and pd.api.types.is_float_dtype(table["summary_ci_low"])
