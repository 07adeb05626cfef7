"""Rediscovery after real compactions: the calls an agent repeated after compacting, read from its log."""

from __future__ import annotations

import dataclasses
import json
import random

import pandas as pd
import pytest

from compaction_lab import ingest
from compaction_lab.core.tokens import counter
from compaction_lab.exam.actions import rediscovery as rd
from tests.helpers import PUBLIC_FIXTURES, make_session

PI_PUBLIC = PUBLIC_FIXTURES / "pi" / "before-compaction.jsonl"


# --------------------------------------------------------------------------- acceptance 3: the public pi session


def _expected_from_raw_jsonl(path):
    """Per compaction, from the raw file alone: the calls after it, and its exact repeats with "earlier output kept".

    pi's own reading: a tool call is a ``toolCall`` block of an assistant message; the same call is the same
    name and the same arguments (``json.dumps(sort_keys=True)``); the earlier output is the ``toolResult``
    answering the latest earlier identical call; the agent kept verbatim the entries from
    ``firstKeptEntryIndex`` (an index into the file's lines) up to the compaction line. An entry without an id
    is named ``L<line number>`` (lines counted from 1, as the pi importer documents).
    """
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    calls, result_line = [], {}
    for i, obj in enumerate(lines):
        msg = obj.get("message") or {}
        if obj["type"] == "message" and msg.get("role") == "assistant" and isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if block.get("type") == "toolCall":
                    calls.append((i, block["name"], json.dumps(block["arguments"], sort_keys=True), block["id"]))
        if obj["type"] == "message" and msg.get("role") == "toolResult":
            result_line[msg["toolCallId"]] = i
    compactions = [i for i, obj in enumerate(lines) if obj["type"] == "compaction"]
    ends = compactions[1:] + [len(lines)]
    out = []
    for c, end in zip(compactions, ends, strict=True):
        first_kept = lines[c]["firstKeptEntryIndex"]
        latest = {}
        for i, name, args, cid in calls:
            if i < c:
                latest[(name, args)] = cid
        after = [x for x in calls if c < x[0] < end]
        repeats = {}
        for i, name, args, _ in after:
            if (name, args) in latest:
                earlier_out = result_line[latest[(name, args)]]
                repeats[(f"L{i + 1}", name, args)] = first_kept <= earlier_out < c
        out.append((len(after), repeats))
    return out


@pytest.fixture(scope="module")
def pi_public():
    (session,) = list(ingest.load_sessions(PI_PUBLIC))
    return session, rd.rediscovery([session], price_table="deepseek-flash")


def test_public_pi_session_lists_exactly_the_exact_repeats_with_whether_their_output_was_kept(pi_public):
    _, result = pi_public
    expected = _expected_from_raw_jsonl(PI_PUBLIC)
    # the numbers, computed from the raw file: 128 and 157 calls, of which 4 and 1 repeat exactly
    assert [(n, len(reps)) for n, reps in expected] == [(128, 4), (157, 1)]
    assert list(result.compactions["calls_after"]) == [n for n, _ in expected]
    classes = ("repeats", "repeats_kept", "state_checks", "repeats_other")  # every exact repeat has one class
    assert result.compactions[list(classes)].sum(axis=1).tolist() == [len(reps) for _, reps in expected]
    for k, (_, reps) in enumerate(expected):
        rows = result.repeats[result.repeats["compaction"] == k]
        got = {
            (e, tool, json.dumps(json.loads(args), sort_keys=True)): bool(kept)
            for e, tool, args, kept in zip(
                rows["repeat_entry_id"], rows["tool"], rows["arguments"], rows["earlier_output_kept"], strict=True
            )
        }
        assert got == reps


def test_public_pi_rows_are_ordered_and_counted(pi_public):
    session, result = pi_public
    t = result.repeats
    assert list(t.columns) == rd.REDISCOVERY_COLUMNS
    assert list(result.compactions.columns) == rd.COMPACTION_COLUMNS
    assert t["repeat_source_order"].is_monotonic_increasing
    assert (t["earlier_source_order"] < t["cut"]).all() and (t["repeat_source_order"] >= t["after"]).all()
    assert (t["repeat_source_order"] < t["until"]).all()
    assert (t["repeat_output_tokens"] > 0).all()
    # the classes and the money: tests/exam/test_rediscovery_classes.py


# --------------------------------------------------------------------------- hand-built pi logs


def _pi_log(path, entries, session_id="pi-rd", cwd="/w"):
    """Write a pi session file from short entry specs and import it."""
    lines = [{"type": "session", "id": session_id, "timestamp": "2025-01-01T10:00:00.000Z", "cwd": cwd}]
    for n, spec in enumerate(entries, start=1):
        eid, ts = f"e{n:02d}", f"2025-01-01T10:{n:02d}:00.000Z"
        kind = spec[0]
        if kind == "compaction":
            _, summary, first_kept = spec
            lines.append(
                {"type": "compaction", "id": eid, "timestamp": ts, "summary": summary, "firstKeptEntryId": first_kept}
            )
            continue
        if kind == "user":
            msg = {"role": "user", "content": [{"type": "text", "text": spec[1]}]}
        elif kind == "call":
            _, cid, name, args = spec
            msg = {"role": "assistant", "content": [{"type": "toolCall", "id": cid, "name": name, "arguments": args}]}
        elif kind == "result":
            _, cid, name, text = spec
            msg = {
                "role": "toolResult",
                "toolCallId": cid,
                "toolName": name,
                "content": [{"type": "text", "text": text}],
            }
        elif kind == "user_bash":
            _, command, output = spec
            msg = {"role": "bashExecution", "command": command, "output": output, "exitCode": 0, "cancelled": False}
        else:
            raise AssertionError(kind)
        lines.append(
            {"type": "message", "id": eid, "parentId": None, "timestamp": ts, "message": {**msg, "timestamp": 1}}
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (session,) = list(ingest.load_sessions(path))
    return session


A_TEXT = "def a():\n    return 'alpha-7731'\n"
TEST_TEXT = "collected 3 items\n3 passed in 0.41s\n"


@pytest.fixture()
def story(tmp_path):
    """Two compactions; what each window repeats is known by construction (entry ids e01..)."""
    return _pi_log(
        tmp_path / "story.jsonl",
        [
            ("user", "fix the parser"),  # e01
            ("call", "c1", "read", {"path": "/w/src/a.py"}),  # e02
            ("result", "c1", "read", A_TEXT),  # e03: before the kept region
            ("call", "c2", "bash", {"command": "pytest -q", "timeout": 60}),  # e04: first kept entry
            ("result", "c2", "bash", TEST_TEXT),  # e05: kept
            ("call", "c3", "read", {"path": "/w/src/b.py", "offset": 1}),  # e06
            ("result", "c3", "read", "b"),  # e07
            ("call", "c8", "bash", {"command": "git status"}),  # e08
            ("result", "c8", "bash", "clean"),  # e09
            ("compaction", "We read src/a.py and ran the tests.", "e04"),  # e10
            ("call", "c4", "read", {"path": "/w/src/a.py"}),  # e11: repeat, earlier output dropped
            ("result", "c4", "read", A_TEXT),  # e12
            ("call", "c5", "bash", {"timeout": 60, "command": "pytest -q"}),  # e13: repeat, keys reordered, kept
            ("result", "c5", "bash", TEST_TEXT),  # e14
            ("call", "c6", "read", {"path": "/w/src/b.py", "offset": 2}),  # e15: another value, no repeat
            ("result", "c6", "read", "b2"),  # e16
            ("user_bash", "git status", "clean"),  # e17: the user ran it, not the agent
            ("compaction", "Tests pass.", "e15"),  # e18
            ("call", "c7", "read", {"path": "/w/src/a.py"}),  # e19: the second compaction's repeat
            ("result", "c7", "read", A_TEXT),  # e20
        ],
    )


def _by_entry(table):
    return {e: row for e, (_, row) in zip(table["repeat_entry_id"], table.iterrows(), strict=True)}


def test_earlier_output_kept_or_dropped_and_the_summary_mention(story):
    rows = _by_entry(rd.rediscovery_table([story]))
    assert set(rows) == {"e11", "e13", "e19"}
    dropped, kept = rows["e11"], rows["e13"]
    assert dropped["earlier_entry_id"] == "e02" and not dropped["earlier_output_kept"]
    assert kept["earlier_entry_id"] == "e04" and kept["earlier_output_kept"]
    # the summary names src/a.py relative to the cwd; the call used the absolute path
    assert dropped["target"] == "/w/src/a.py" and dropped["target_in_summary"]
    assert kept["target"] == "pytest -q" and not kept["target_in_summary"]


def test_argument_key_order_does_not_matter_and_another_value_is_not_a_repeat(story):
    t = rd.rediscovery_table([story])
    first = t[t["compaction"] == 0]
    assert list(first["repeat_entry_id"]) == ["e11", "e13"]
    assert json.loads(first["arguments"].iloc[1]) == {"command": "pytest -q", "timeout": 60}
    assert "e15" not in set(t["repeat_entry_id"])
    comp = rd.compactions_table([story])
    assert comp["calls_after"].tolist()[0] == 3  # e11, e13, e15: the user's own `!git status` is no agent call


def test_the_window_stops_at_the_next_compaction(story):
    t = rd.rediscovery_table([story])
    comp = rd.compactions_table([story])
    assert comp["until"].iloc[0] == comp["cut"].iloc[1]
    assert list(t[t["compaction"] == 0]["repeat_entry_id"]) == ["e11", "e13"]
    second = t[t["compaction"] == 1]
    assert list(second["repeat_entry_id"]) == ["e19"]
    # before the second compaction the latest identical call is the first window's repeat, not yet kept
    assert second["earlier_entry_id"].iloc[0] == "e11" and not second["earlier_output_kept"].iloc[0]
    assert comp["until"].iloc[1] == story.end


def test_a_log_naming_no_model_and_recording_no_cost_is_never_priced(story):
    tokens = counter("cl100k_base").count(A_TEXT)
    for table in ("deepseek-flash", None, ""):
        t = rd.rediscovery_table([story], price_table=table)
        comp = rd.compactions_table([story], price_table=table)
        assert _by_entry(t)["e11"]["repeat_output_tokens"] == tokens
        assert t["repeat_cost"].isna().all() and comp["repeat_cost"].isna().all()
        assert t["price_table"].isna().all() and t["currency"].isna().all()
        assert (t["repeat_output_tokens"] > 0).all()


def test_no_output_in_the_log_is_na_not_zero(tmp_path):
    s = _pi_log(
        tmp_path / "unanswered.jsonl",
        [
            ("call", "c1", "read", {"path": "/w/x.py"}),  # never answered
            ("compaction", "x", "e01"),
            ("call", "c2", "read", {"path": "/w/x.py"}),  # never answered either
        ],
    )
    row = rd.rediscovery_table([s], price_table="deepseek-flash").iloc[0]
    assert pd.isna(row["earlier_output_kept"]) and pd.isna(row["earlier_output_source_order"])
    assert pd.isna(row["repeat_output_tokens"]) and pd.isna(row["repeat_cost"])
    assert rd.compactions_table([s], price_table="deepseek-flash")["repeat_output_tokens"].iloc[0] == 0


def test_sessions_without_usable_compaction_give_no_row_and_no_error(story):
    plain = make_session([("user", "hi"), ("tool_call", 'read {"path": "a"}', {"tool": "read"})], session_id="t")
    broken = dataclasses.replace(
        make_session([("user", "hi"), ("assistant", "no summary here")], session_id="p", source_format="pi"),
        metadata={"compactions": [{"entry_id": "e1", "source_order": 1}]},
    )
    r = rd.rediscovery([plain, broken])
    assert r.repeats.empty and r.compactions.empty
    assert list(r.repeats.columns) == rd.REDISCOVERY_COLUMNS
    with_story = rd.rediscovery([plain, story, broken])
    assert set(with_story.compactions["session_id"]) == {story.id}


def test_deterministic_and_ordered_whatever_the_input_order(story, tmp_path):
    other = _pi_log(
        tmp_path / "other.jsonl",
        [("call", "k1", "ls", {"dir": "/w"}), ("compaction", "s", "e01"), ("call", "k2", "ls", {"dir": "/w"})],
        session_id="aaa-first",
    )
    sessions = [story, other]
    a = rd.rediscovery(sessions, price_table="deepseek-flash")
    random.Random(3).shuffle(sessions)
    b = rd.rediscovery(list(reversed(sessions)), price_table="deepseek-flash")
    pd.testing.assert_frame_equal(a.repeats, b.repeats)
    pd.testing.assert_frame_equal(a.compactions, b.compactions)
    assert list(a.repeats["session_id"]) == ["aaa-first", story.id, story.id, story.id]
