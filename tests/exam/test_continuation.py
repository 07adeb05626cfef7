"""The continuation exam: the recorded next actions as the key, needed-next recall per arm (issue 29)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from compaction_lab.core.projection import Projection, Segment
from compaction_lab.core.session import Record, Session
from compaction_lab.exam import exam
from compaction_lab.exam.actions.calls import call_arguments, call_key, canonical_arguments
from compaction_lab.exam.exams import continuation as cont
from compaction_lab.exam.types import Case
from compaction_lab.strategies.base import CompactionContext

OLD_PATH = "src/billing/ledger_reconcile.py"
NEW_PATH = "src/billing/fresh_module_added.py"
TAIL_PATH = "docs/tail_only_notes.md"


def _call(i: int, tool: str, args: dict) -> Record:
    return Record("s1", f"e{i}", 0, i, "tool_call", f"{tool} {json.dumps(args)}", tool=tool, call_id=f"c{i}")


def _rec(i: int, kind: str, text: str) -> Record:
    return Record("s1", f"e{i}", 0, i, kind, text)


def session() -> Session:
    """Before the cut (4): a read of OLD_PATH (covered part) and of TAIL_PATH (the tail, from 2); after it,
    the agent reads OLD_PATH again, then a file it never saw, then TAIL_PATH."""
    recs = [
        _rec(0, "user", "Please reconcile the ledger."),
        _call(1, "read_file", {"path": OLD_PATH}),
        _rec(2, "tool_output", f"contents of {TAIL_PATH}: nothing here"),
        _rec(3, "assistant", "Working on it."),
        _call(4, "read_file", {"path": OLD_PATH}),
        _rec(5, "tool_output", "def reconcile(): ..."),
        _call(6, "read_file", {"path": NEW_PATH}),
        _rec(7, "tool_output", "new"),
        _call(8, "read_file", {"path": TAIL_PATH}),
    ]
    return Session("s1", "test", tuple(recs), metadata={"cwd": "/repo"})


CASE = Case("s1-c0", "s1", cut=4, tail_start=2)


def projection(strategy: str, text: str) -> Projection:
    return Projection(strategy, "1", "s1", 4, (Segment("summary", "user", text),), 100, "tiktoken").finalize()


def test_a_kept_path_scores_one_a_dropped_path_zero_and_new_targets_are_not_scored():
    key = cont.build_key("closed", CASE, session(), k=5)
    assert [a.source_order for a in key.actions] == [4, 6, 8]
    status = {t.value: t.status for a in key.actions for t in a.targets}
    assert status[OLD_PATH] == "needed"  # seen only before the tail: from memory
    assert status[NEW_PATH] == "new"  # first seen after the cut: exploration, not scored
    assert status[TAIL_PATH] == "in_tail"  # every arm keeps the tail verbatim
    assert [t.value for _, t in key.needed] == [OLD_PATH]
    ctx = CompactionContext(window=10_000, output_ceiling=1000)
    _, kept_rows = cont.grade_case(key, projection("kept", f"Earlier I read {OLD_PATH}."), ctx)
    _, dropped_rows = cont.grade_case(key, projection("dropped", "We reconciled something."), ctx)
    assert [r["correct"] for r in kept_rows] == [True]
    assert [r["correct"] for r in dropped_rows] == [False]
    res = cont.ContinuationResult(
        pd.DataFrame(columns=cont.ACTION_COLUMNS),
        pd.DataFrame(kept_rows + dropped_rows, columns=cont.TARGET_COLUMNS),
        (("closed", "kept", "kept"), ("closed", "dropped", "dropped")),
    )
    table = cont.recall_table(res, n_boot=50).set_index("strategy")
    assert table.loc["kept", "recall"] == 1.0 and table.loc["dropped", "recall"] == 0.0
    assert (table["n"] == 1).all()
    # one session, one target: an honest interval is wide, never zero-width
    assert (table["ci_high"] - table["ci_low"] > 0.5).all()


def test_the_absolute_form_of_a_needed_path_counts_as_holding_it():
    key = cont.build_key("closed", CASE, session(), k=1)
    ctx = CompactionContext(window=10_000, output_ceiling=1000)
    _, rows = cont.grade_case(key, projection("abs", f"opened /repo/{OLD_PATH} earlier"), ctx)
    assert [r["correct"] for r in rows] == [True]


def test_a_target_in_the_system_prompt_is_not_scored():
    s = session()
    s = Session(s.id, s.source_format, s.records, metadata={"cwd": "/repo", "system_prompt": f"Never edit {OLD_PATH}"})
    key = cont.build_key("closed", CASE, s, k=1)
    assert [t.status for t in key.actions[0].targets] == ["system"]


def test_k_limits_the_key_and_a_cut_at_the_end_has_no_action():
    assert len(cont.build_key("closed", CASE, session(), k=2).actions) == 2
    end = Case("s1-end", "s1", cut=9, tail_start=5)
    assert cont.build_key("closed", end, session(), k=5).actions == ()


def test_targets_of_a_call_exact_values_urls_and_short_arguments_not_command_heads():
    rec = _call(
        1,
        "bash",
        {"command": "curl -s https://api.example.test/v2/orders/ORD-58213 | jq .status", "timeout": 30},
    )
    t = {x.value: x.category for x in cont.targets_of(rec)}
    assert t["https://api.example.test/v2/orders/ORD-58213"] == "url"
    assert t["ORD-58213"] == "identifier"
    assert not {"curl", "jq", "-s"} & set(t)  # a command's heads and flags are not values (issue 45)
    grep = _call(2, "grep", {"pattern": "reconcile_totals", "path": "src"})
    values = [x.value for x in cont.targets_of(grep)]
    assert "reconcile_totals" in values and "src" not in values  # "src" is too easy to guess


def test_decoy_objects_are_look_alikes_absent_from_the_session_and_seeded():
    a = cont.build_key("closed", CASE, session(), k=5, decoy_share=1.0, seed=3)
    b = cont.build_key("closed", CASE, session(), k=5, decoy_share=1.0, seed=3)
    assert a.decoys == b.decoys and len(a.decoys) == 1
    whole = "\n".join(r.text for r in session().records)
    assert a.decoys[0] not in whole and a.decoys[0] != OLD_PATH
    assert cont.build_key("closed", CASE, session(), k=5, decoy_share=0.0).decoys == ()


def test_calls_are_compared_by_tool_and_canonical_arguments():
    a = Record("s", "a", 0, 0, "tool_call", 'read {"b": 1, "a": "x"}', tool="read")
    b = Record("s", "b", 0, 1, "tool_call", 'read {"a":"x","b":1}', tool="read")
    c = Record("s", "c", 0, 2, "tool_call", 'read {"a":"y","b":1}', tool="read")
    assert call_key(a) == call_key(b) != call_key(c)
    raw = Record("s", "d", 0, 3, "tool_call", "shell ls -la", tool="shell")
    assert call_arguments(raw) == "ls -la" and canonical_arguments(raw) == "ls -la"


def test_the_params_refuse_a_meaningless_k_or_share():
    with pytest.raises(ValueError, match="continuation_k"):
        cont.ContinuationParams(continuation_k=0)
    with pytest.raises(ValueError, match="continuation_decoy_share"):
        cont.ContinuationParams(continuation_decoy_share=1.5)


def test_the_continuation_exam_is_registered_for_notebook_07():
    assert "continuation" in exam.names()
    assert exam.EXAMS.entry("continuation").meta["notebook"] == "06_continuation_exam"
    assert exam.get("continuation").defaults()["continuation_k"] == 5
