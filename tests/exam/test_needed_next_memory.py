"""Needed-next targets are values only memory holds (issue 45): not shown again after the cut, one per value.

A target the agent re-read after the cut (a tool output, a user message, an earlier call of the case)
before the call that uses it is ``seen_after_cut``, not needed; forms of one path are one target; a
command's head and its flags are not targets; and an interval from few records is never narrower than
Clopper–Pearson over those records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as hst
from scipy import stats as st

from compaction_lab.core.session import Record, Session
from compaction_lab.exam.actions.targets import command_heads, targets_of
from compaction_lab.exam.exams import continuation as cont
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions.probes.forms import collapse
from compaction_lab.exam.statistics import intervals
from compaction_lab.exam.types import Case
from compaction_lab.ingest import load_sessions
from compaction_lab.ingest.sources import Sources
from tests.helpers import PUBLIC_FIXTURES

FILE = "src/billing/ledger_reconcile.py"
REREAD = "LEDGER_LIMIT_9431"  # before the cut, and again in a tool output after it
MEMORY = "RECON_MODE_7720"  # before the cut only


def _call(i: int, tool: str, args: dict) -> Record:
    return Record("s1", f"e{i}", 0, i, "tool_call", f"{tool} {json.dumps(args)}", tool=tool, call_id=f"c{i}")


def _rec(i: int, kind: str, text: str) -> Record:
    return Record("s1", f"e{i}", 0, i, kind, text)


def _session(*after: Record) -> Session:
    """Before the tail (2): the user names FILE, REREAD and MEMORY; the tail reads a doc; the cut is at 4."""
    before = [
        _rec(0, "user", f"In {FILE} raise {REREAD} and switch the flag to {MEMORY}."),
        _rec(1, "assistant", "On it."),
        _call(2, "read", {"path": "docs/tail_notes.md"}),
        _rec(3, "tool_output", "tail notes"),
    ]
    return Session("s1", "test", (*before, *after), metadata={"cwd": "/repo"})


CASE = Case("s1-c0", "s1", cut=4, tail_start=2)


def _status(key: cont.ContinuationCase, rank: int) -> dict[str, str]:
    return {t.value: t.status for t in key.actions[rank].targets}


def test_a_value_re_read_after_the_cut_is_not_needed_one_only_before_it_is():
    s = _session(
        _call(4, "read", {"path": FILE}),
        _rec(5, "tool_output", f"{REREAD} = 10\nMODE = 'old'"),
        _call(6, "edit", {"path": FILE, "old": REREAD, "new": MEMORY}),
    )
    key = cont.build_key("closed", CASE, s, k=5)
    assert "seen_after_cut" in cont.STATUSES
    assert _status(key, 0)[FILE] == "needed"  # the first call names it from memory
    edit = _status(key, 1)
    assert edit[REREAD] == "seen_after_cut"  # the read's output showed it again just before the edit
    assert edit[FILE] == "seen_after_cut"  # the earlier call of the case named it
    assert edit[MEMORY] == "needed"  # findable only before the cut
    assert sorted(t.value for _, t in key.needed) == sorted([FILE, MEMORY])
    # the key table says why a target is not scored
    row = cont.ContinuationCases((key,), {"s1": s}).key_table().iloc[0]
    assert row["needed"] == 2 and row["seen_after_cut"] == 2


def test_every_message_after_the_cut_shows_a_value_a_summary_does_not():
    for kind in ("user", "assistant", "reasoning"):
        told = _session(_rec(4, kind, f"use {MEMORY}"), _call(5, "edit", {"path": "x", "new": MEMORY}))
        assert _status(cont.build_key("closed", CASE, told, k=1), 0)[MEMORY] == "seen_after_cut", kind
    # a summary after the cut is the arm being graded, not something the agent saw again
    summarised = _session(_rec(4, "summary", f"held: {MEMORY}"), _call(5, "edit", {"path": "x", "new": MEMORY}))
    assert _status(cont.build_key("closed", CASE, summarised, k=1), 0)[MEMORY] == "needed"


def test_three_forms_of_one_path_are_one_target():
    path = "src/core/order_matcher.ts"
    s = Session(
        "s1",
        "test",
        (
            _rec(0, "user", f"Look at {path} first."),
            _rec(1, "assistant", "Sure."),
            _call(2, "read", {"path": "docs/tail_notes.md"}),
            _rec(3, "tool_output", "tail notes"),
            _call(4, "read", {"path": f"/repo/{path}"}),  # absolute
            _rec(5, "tool_output", "(binary)"),
            _call(6, "edit", {"path": f"@{path}", "new": "x"}),  # @-mention
            _rec(7, "tool_output", "ok"),
            _call(8, "bash", {"command": "wc -l core/order_matcher.ts"}),  # a /-bounded suffix
        ),
        metadata={"cwd": "/repo"},
    )
    key = cont.build_key("closed", CASE, s, k=5)
    assert [t.value for _, t in key.needed] == [f"/repo/{path}"]
    later = [t for a in key.actions[1:] for t in a.targets if "order_matcher" in t.value]
    assert later and {t.status for t in later} == {"seen_after_cut"}
    # and within one call: the absolute path and its suffix are one target
    one = _call(9, "bash", {"command": f"cat /repo/{path} && wc -l core/order_matcher.ts"})
    assert [t.value for t in targets_of(one, "/repo") if "order_matcher" in t.value] == [f"/repo/{path}"]


def test_command_heads_and_flags_are_not_targets():
    values = [t.value for t in targets_of(_call(1, "bash", {"command": "mkdir -p src/modes/interactive_v2"}), "/repo")]
    assert "mkdir" not in values and "-p" not in values
    assert "src/modes/interactive_v2" in values
    line = "cd /repo && sudo npm run check -- --force | tail -5; X=1 node app.js"
    assert {"cd", "sudo", "npm", "tail", "node"} <= command_heads({"command": line})
    values = [t.value for t in targets_of(_call(2, "bash", {"command": line}), "/repo")]
    assert not {"cd", "sudo", "npm", "tail", "node", "--force", "-5"} & set(values)
    argv = _call(3, "shell", {"command": ["git", "push", "--force-with-lease", "origin", "feature/ord-58213"]})
    values = [t.value for t in targets_of(argv, "/repo")]
    assert "git" not in values and "--force-with-lease" not in values
    assert "feature/ord-58213" in values


# --------------------------------------------------------------------------- the interval floor


def test_an_interval_from_few_records_is_at_least_clopper_pearson_over_them():
    narrow = intervals.Interval(0.894, 1.0, "cluster t over 3 records")
    iv = intervals.records_floor(narrow, 1.0, 3)
    assert iv.low == pytest.approx(0.025 ** (1 / 3)) and iv.high == 1.0
    assert "Clopper–Pearson over 3 records" in iv.method
    # k = recall × records need not be whole: the beta quantiles take it
    iv = intervals.records_floor(intervals.Interval(0.5, 0.6, "x"), 0.55, 4)
    assert iv.low == pytest.approx(st.beta.ppf(0.025, 2.2, 2.8)) and iv.high == pytest.approx(
        st.beta.ppf(0.975, 3.2, 1.8)
    )
    # from 10 records on, and with records unknown or no questions, nothing changes
    assert intervals.records_floor(narrow, 1.0, 10) == narrow
    assert intervals.records_floor(narrow, 1.0, None) == narrow
    assert intervals.records_floor(narrow, float("nan"), 3) == narrow
    with pytest.raises(ValueError, match="recall"):
        intervals.records_floor(narrow, 1.5, 3)
    with pytest.raises(ValueError, match="confidence"):
        intervals.records_floor(narrow, 1.0, 3, confidence=95)


@given(
    low=hst.floats(0, 1),
    width=hst.floats(0, 1),
    recall=hst.floats(0, 1),
    n=hst.integers(1, 30),
)
def test_the_floor_is_a_hull_never_narrower_than_either(low, width, recall, n):
    iv = intervals.Interval(low, min(1.0, low + width), "x")
    out = intervals.records_floor(iv, recall, n)
    assert out.low <= iv.low and out.high >= iv.high
    if n < intervals.MIN_RECORDS:
        cp = intervals.clopper_pearson(recall * n, n)
        assert out.low <= cp[0] and out.high >= cp[1]
        assert out.high - out.low > 0
    else:
        assert out == iv


# --------------------------------------------------------------------------- the public pi session

PI = "before-compaction.jsonl"


@pytest.fixture(scope="module")
def pi_session() -> Session:
    (s,) = [s for s in load_sessions(PUBLIC_FIXTURES / "pi") if Path(str(s.source_path)).name == PI]
    return s


def _visible_after_cut(s: Session, case: Case, at: int, forms: tuple[str, ...]) -> bool:
    return any(
        case.cut <= r.source_order < at and any(f in normalise(r.text) for f in forms)
        for r in s.records
        if r.kind in ("user", "tool_output", "tool_call")
    )


def _check_needed(s: Session, keys: list[cont.ContinuationCase]) -> list[tuple[str, int, str]]:
    out = []
    for key in keys:
        pool = collapse(t.key for a in key.actions for t in a.targets)
        values = [pool.of(t.key) or t.key for _, t in key.needed]
        assert len(values) == len(set(values)), "one value once per case"
        for a, t in key.needed:
            assert not _visible_after_cut(s, key.case, a.source_order, t.forms), (key.case.id, t.value)
            assert t.value not in command_heads(json.loads(a.arguments)), t.value
            out.append((key.case.id, a.rank, t.value))
    return out


def test_the_public_pi_session_needs_few_targets_none_visible_after_the_cut(pi_session):
    s = pi_session
    # the closed case (the baseline run's capacity cut) and the two compactions pi recorded
    keys = [cont.build_key("closed", Case("pi-closed", s.id, cut=497, tail_start=489), s, 5)]
    params = cont.ContinuationParams(window=200_000, output_ceiling=32_000, strategy_names=("full",))
    run = cont.keys_for(Sources((s,), "imported"), params)
    keys += list(run.keys)
    needed = _check_needed(s, keys)
    # the baseline counted 33 + 5 needed targets here: 28 of them re-read just before the edit using them
    assert 0 < len(needed) <= 8, needed
    closed = [v for cid, _, v in needed if cid == "pi-closed"]
    assert len(closed) <= 3 and not any(v.endswith(".js") for v in closed)  # the re-read imports are gone
    statuses = [t.status for k in keys for a in k.actions for t in a.targets]
    assert statuses.count("seen_after_cut") >= 20
