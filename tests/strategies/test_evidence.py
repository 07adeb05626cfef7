"""FutureOS tool-evidence index: pairing, each priority rule, bounded rows, the budget."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.core.tokens import count_tokens
from compaction_lab.strategies.evidence import (
    INDEX_HEADER,
    REASONS,
    ToolRecord,
    by_recency,
    error_records,
    evidence_rows,
    evidence_text,
    excerpts,
    group_records,
    group_representatives,
    is_priority_target,
    ordered_groups,
    prioritized,
    priority_order,
    row_json,
    tool_records,
)
from tests.helpers import make_session

KEYS = ["entryId", "blockIndex", "sourceOrder", "tool", "target", "error", "head", "tail"]


def tool_pair(tool: str, target: str, out: str, cid: str, error: bool = False) -> list[tuple]:
    extra = {"tool": tool, "target": target, "call_id": cid}
    return [
        ("tool_call", f'{tool} {{"target": "{target}"}}', extra),
        ("tool_output", out, {**extra, "is_error": error}),
    ]


def records_of(pairs: list[list[tuple]]) -> list[ToolRecord]:
    items = [it for p in pairs for it in p]
    return tool_records(make_session(items).records)


def order_of(recs: list[ToolRecord]) -> list[int]:
    return [r.source_order for r in recs]


# --------------------------------------------------------------------------- pairing


def test_pairs_calls_and_outputs_by_call_id():
    s = make_session(
        [
            ("user", "go"),
            ("tool_call", "a", {"tool": "bash", "target": "ls", "call_id": "c1"}),
            ("tool_call", "b", {"tool": "read_file", "target": "x.py", "call_id": "c2"}),
            ("tool_output", "out-b", {"tool": "read_file", "target": "x.py", "call_id": "c2"}),
            ("tool_output", "out-a", {"tool": "bash", "target": "ls", "call_id": "c1"}),
            ("tool_call", "c", {"tool": "bash", "target": "make", "call_id": "c3"}),  # never answered
            ("tool_output", "orphan", {"tool": "bash", "call_id": "zz"}),  # no call
        ]
    )
    recs = tool_records(s.records)
    assert [(r.call and r.call.entry_id, r.output and r.output.entry_id) for r in recs] == [
        ("e2", "e3"),
        ("e1", "e4"),
        ("e5", None),
        (None, "e6"),
    ]
    assert recs[0].entry_ids == ("e2", "e3")
    assert recs[2].result.entry_id == "e5" and recs[2].tool == "bash" and recs[2].target == "make"


def test_reused_call_id_pairs_with_the_latest_earlier_call():
    s = make_session(
        [
            ("tool_call", "a", {"tool": "bash", "target": "one", "call_id": "c"}),
            ("tool_output", "1", {"call_id": "c"}),
            ("tool_call", "b", {"tool": "bash", "target": "two", "call_id": "c"}),
            ("tool_output", "2", {"call_id": "c"}),
        ]
    )
    recs = tool_records(s.records)
    assert [(r.call.entry_id, r.output.entry_id, r.target) for r in recs] == [("e0", "e1", "one"), ("e2", "e3", "two")]


# --------------------------------------------------------------------------- rules


def test_priority_target_regex():
    for t in [
        "config/app.py",
        "settings.py",
        "pyproject.toml",
        "deploy.yaml",
        "ci.yml",
        "package.json",
        "db/schema.sql",
        "migrations/0007_add.py",
        "validators.py",
        "tests/test_api.py",
        "pytest -q",
        "spec/api_spec.rb",
        "CONFIG.INI",
    ]:
        assert is_priority_target(t), t
    for t in ["app/main.py", "ls -la", "README.md", "", None]:
        assert not is_priority_target(t), t


def test_rule1_errors_first_newest_first():
    recs = records_of(
        [
            tool_pair("bash", "make", "ok", "c1"),
            tool_pair("bash", "make", "boom", "c2", True),
            tool_pair("bash", "ls", "x", "c3"),
            tool_pair("read_file", "a.py", "nope", "c4", True),
        ]
    )
    errs = error_records(recs)
    assert [r.output.text for r in errs] == ["nope", "boom"]
    assert priority_order(recs)[:2] == errs


def test_rule2_grouping_and_priority_groups_first():
    recs = records_of(
        [
            tool_pair("read_file", "app/main.py", "m1", "c1"),
            tool_pair("read_file", "config/settings.toml", "s1", "c2"),
            tool_pair("read_file", "app/main.py", "m2", "c3"),
            tool_pair("bash", "pytest tests", "t1", "c4"),
            tool_pair("bash", "ls", "l1", "c5"),
        ]
    )
    groups = group_records(recs)
    assert list(groups) == [
        ("read_file", "app/main.py"),
        ("read_file", "config/settings.toml"),
        ("bash", "pytest tests"),
        ("bash", "ls"),
    ]
    assert [r.output.text for r in groups[("read_file", "app/main.py")]] == ["m1", "m2"]
    ordered = [g[0].target for g in ordered_groups(groups)]
    # priority targets first (newest group first), then the others (newest group first)
    assert ordered == ["pytest tests", "config/settings.toml", "ls", "app/main.py"]


def test_rule3_latest_then_first_of_each_group():
    recs = records_of([tool_pair("bash", "make", str(i), f"c{i}") for i in range(4)])
    assert [r.output.text for r in group_representatives(recs)] == ["3", "0"]
    assert [r.output.text for r in group_representatives(recs[:1])] == ["0"]
    assert group_representatives([]) == []


def test_rule4_rest_by_recency():
    recs = records_of([tool_pair("bash", "make", str(i), f"c{i}") for i in range(4)])
    assert [r.output.text for r in by_recency(recs)] == ["3", "2", "1", "0"]


def test_full_priority_order():
    recs = records_of(
        [
            tool_pair("bash", "ls", "ls-0", "c0"),  # other group, first
            tool_pair("read_file", "app.yaml", "yaml-1", "c1"),  # priority group, first
            tool_pair("bash", "ls", "ls-2", "c2"),  # other group, middle
            tool_pair("bash", "make", "make-3", "c3", True),  # error
            tool_pair("read_file", "app.yaml", "yaml-4", "c4"),  # priority group, middle
            tool_pair("read_file", "app.yaml", "yaml-5", "c5"),  # priority group, latest
            tool_pair("bash", "ls", "ls-6", "c6"),  # other group, latest
        ]
    )
    got = [(r.output.text, why) for r, why in prioritized(recs)]
    assert got == [
        ("make-3", "error"),
        ("yaml-5", "group-latest"),
        ("yaml-1", "group-first"),
        ("ls-6", "group-latest"),
        ("ls-0", "group-first"),
        ("yaml-4", "recency"),
        ("ls-2", "recency"),
    ]
    # make-3 is also the only record of its group, so it is not repeated
    assert len(got) == len(recs)


# --------------------------------------------------------------------------- rows


def test_excerpts_fixed_size_and_empty_tail_when_short():
    assert excerpts("short", 10, 10) == ("short", "")
    assert excerpts("a" * 10 + "b" * 5, 10, 10) == ("a" * 10, "b" * 5)  # nothing skipped
    head, tail = excerpts("h" * 10 + "m" * 100 + "t" * 10, 10, 10)
    assert head == "h" * 10 and tail == "t" * 10
    assert excerpts("x" * 50, 10, 0) == ("x" * 10, "")


def test_row_json_keys_bounds_and_source_fields():
    s = make_session([("user", "u"), *tool_pair("bash", "pytest " + "-k x " * 100, "H" * 500 + "T" * 500, "c", True)])
    rec = tool_records(s.records)[0]
    row = json.loads(row_json(rec, 160, 160, 50))
    assert list(row) == KEYS
    assert row["entryId"] == "e2" and row["blockIndex"] == 0 and row["sourceOrder"] == 2
    assert row["tool"] == "bash" and row["error"] is True
    assert row["head"] == "H" * 160 and row["tail"] == "T" * 160
    assert len(row["target"]) == 50 and row["target"].endswith("…")
    assert "\n" not in row_json(rec)


def test_rows_never_cut_and_within_budget():
    recs = records_of([tool_pair("bash", f"cmd{i}", f"line {i}\n" * 80, f"c{i}", i % 5 == 0) for i in range(60)])
    for budget in (0, 50, 120, 300, 777, 2048):
        rows = evidence_rows(recs, budget)
        text = evidence_text(rows)
        assert count_tokens(text) <= budget
        if rows:
            lines = text.split("\n")
            assert lines[0] == INDEX_HEADER
            assert lines[1:] == [r.json for r in rows]
            for r in rows:
                assert r.json == row_json(r.record)
                assert list(json.loads(r.json)) == KEYS
        else:
            assert text == ""


def test_row_that_does_not_fit_is_left_out_whole_and_later_rows_still_tried():
    big = tool_pair("bash", "make", "E" * 3000, "c1", True)  # error: offered first, large row
    smalls = [tool_pair("bash", f"ls {i}", "ok", f"s{i}") for i in range(3)]
    recs = records_of([big, *smalls])
    head = 2000
    big_row = row_json(recs[0], head, head)
    small_cost = count_tokens(row_json(recs[1], head, head)) + 1
    budget = count_tokens(INDEX_HEADER) + 3 * small_cost + 5
    assert count_tokens(big_row) > budget
    rows = evidence_rows(recs, budget, head_chars=head, tail_chars=head)
    assert all(not r.record.is_error for r in rows)  # the big error row is absent, not truncated
    assert len(rows) == 3
    assert all(json.loads(r.json)["head"] == "ok" for r in rows)


def test_rows_listed_in_priority_order_not_time_order():
    recs = records_of(
        [
            tool_pair("bash", "ls", "old", "c0"),
            tool_pair("bash", "make", "failed", "c1", True),
            tool_pair("read_file", "schema.sql", "create table", "c2"),
            tool_pair("bash", "ls", "new", "c3"),
        ]
    )
    rows = evidence_rows(recs, 2048)
    assert [r.record for r in rows] == priority_order(recs)
    assert [r.reason for r in rows] == ["error", "group-latest", "group-latest", "group-first"]
    orders = [json.loads(r.json)["sourceOrder"] for r in rows]
    assert orders == [3, 5, 7, 1]  # chronology stays visible through sourceOrder


def test_accepts_raw_records_and_ignores_other_kinds():
    s = make_session([("user", "hi"), *tool_pair("bash", "ls", "x", "c"), ("assistant", "done")])
    rows = evidence_rows(s.records, 2048)
    assert len(rows) == 1 and rows[0].entry_ids == ("e1", "e2")
    assert evidence_rows([], 2048) == []


# --------------------------------------------------------------------------- properties

_TARGETS = ["app/main.py", "config.yaml", "tests/test_x.py", "ls -la", "pytest -q", "README.md", "make"]


@st.composite
def tool_sessions(draw):
    n = draw(st.integers(0, 30))
    items: list[tuple] = []
    for i in range(n):
        tool = draw(st.sampled_from(["bash", "read_file", "grep"]))
        target = draw(st.sampled_from(_TARGETS))
        size = draw(st.integers(0, 600))
        err = draw(st.booleans())
        text = "".join(chr(97 + (i * 7 + k) % 26) for k in range(size))
        items.extend(tool_pair(tool, target, text, f"c{i}", err))
        if draw(st.integers(0, 5)) == 0:
            items.append(("assistant", "note"))
    return make_session(items) if items else make_session([("user", "x")])


@settings(max_examples=50, derandomize=True, deadline=None)
@given(tool_sessions(), st.integers(0, 2500), st.sampled_from([0, 40, 160]))
def test_property_rows_fit_whole_in_priority_order(session, budget, chars):
    recs = tool_records(session.records)
    rows = evidence_rows(recs, budget, head_chars=chars, tail_chars=chars)
    text = evidence_text(rows)
    assert count_tokens(text) <= budget
    order = priority_order(recs)
    pos = [order.index(r.record) for r in rows]
    assert pos == sorted(pos) and len(set(pos)) == len(pos)
    seen_ok = False
    for r in rows:
        assert r.json == row_json(r.record, chars, chars)  # whole rows only
        assert r.reason in REASONS
        if not r.record.is_error:
            seen_ok = True
        else:
            assert not seen_ok, "an error row after a non-error row"
    ids = {rec.entry_id for rec in session.records}
    assert all(set(r.entry_ids) <= ids for r in rows)
