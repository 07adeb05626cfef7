"""SWE-agent importer: ``.traj`` JSON (history preferred, trajectory as fallback)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from compaction_lab.ingest import files, import_audit
from compaction_lab.ingest.importers import swe_agent
from tests.helpers import FIXTURES, PUBLIC_FIXTURES

FIXTURES = FIXTURES
SW = FIXTURES / "swe_agent"
REAL = PUBLIC_FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"


def load(path):
    audit = import_audit.ImportAudit()
    return list(swe_agent.load(Path(path), audit)), audit


def hand_count(doc: dict) -> Counter:
    """Kinds expected from a 0.x history, counted directly from the raw JSON.

    A user message right after an assistant message that carried an action is
    that action's observation; every assistant action is one tool call, and its
    thought (when not blank) one assistant record.
    """
    counts: Counter = Counter()
    answered = True
    for msg in doc["history"]:
        if msg["role"] == "system":
            counts["system"] += 1
        elif msg["role"] == "assistant":
            action = (msg.get("action") or "").strip()
            if action:
                counts["tool_call"] += 1
                if (msg.get("thought") or "").strip():
                    counts["assistant"] += 1
            else:
                counts["assistant"] += 1
            answered = not action
        elif msg["role"] == "user":
            counts["user" if answered else "tool_output"] += 1
            answered = True
    return counts


# --------------------------------------------------------------------------- the real trajectory


def test_real_traj_counts_match_a_hand_count():
    (s,), audit = load(REAL)
    assert audit.n_skipped == 0
    doc = json.loads(REAL.read_text())
    assert Counter(r.kind for r in s.records) == hand_count(doc)
    assert s.id == "pydicom__pydicom-1458" and s.source_format == "swe_agent"


def test_real_traj_details():
    (s,), _ = load(REAL)
    doc = json.loads(REAL.read_text())
    calls = s.of_kind("tool_call")
    actions = [m["action"] for m in doc["history"] if m["role"] == "assistant"]
    assert [c.tool for c in calls] == [a.split()[0] for a in actions]
    assert calls[0].text == "create reproduce_bug.py" and calls[0].target == "reproduce_bug.py"
    assert calls[3].tool == "find_file" and calls[3].target == "numpy_handler.py"
    assert calls[4].target == "pydicom/pixel_data_handlers/numpy_handler.py"  # open <file> <line>
    # edit acts on the file the previous observation reports as open
    assert (
        calls[5].tool == "edit" and calls[5].target == "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py"
    )
    # every output is linked to the call just before it, with its tool and target
    for out in s.of_kind("tool_output"):
        call = next(c for c in calls if c.call_id == out.call_id)
        assert (out.tool, out.target) == (call.tool, call.target) and call.source_order < out.source_order
    demo, task = s.of_kind("user")
    assert demo.injected and demo.text.startswith("Here is a demonstration")
    assert not task.injected and "ISSUE:" in task.text
    m = s.metadata
    assert m["system_prompt"].startswith("SETTING: You are an autonomous programmer")
    assert m["usage_totals"] == {"input_tokens": 122612, "output_tokens": 1369, "cost": 1.26719, "api_calls": 12}
    assert m["exit_status"] == "submitted" and m["submission"].startswith("\ndiff --git")
    assert "usage" not in m and "model" not in m  # per-call usage and the model are not recorded in 0.x


def test_real_traj_reimport_is_identical():
    assert load(REAL)[0] == load(REAL)[0]


def test_trajectory_fallback_on_the_real_file(tmp_path):
    doc = json.loads(REAL.read_text())
    del doc["history"]
    p = tmp_path / "no-history.traj"
    p.write_text(json.dumps(doc))
    (s,), audit = load(p)
    assert audit.n_skipped == 0 and s.id == "no-history"
    n = len(doc["trajectory"])
    kinds = Counter(r.kind for r in s.records)
    assert kinds == Counter({"assistant": n, "tool_call": n, "tool_output": n})


# --------------------------------------------------------------------------- hand-made trajectories


def test_trajectory_only_file():
    (s,), audit = load(SW / "trajectory_only.traj")
    assert audit.n_skipped == 0
    got = [(r.entry_id, r.block_index, r.kind, r.tool, r.target) for r in s.records]
    assert got == [
        ("t0", 0, "assistant", None, None),
        ("t0", 1, "tool_call", "find_file", "retry.py"),
        ("t0", 2, "tool_output", "find_file", "retry.py"),
        ("t1", 0, "assistant", None, None),
        ("t1", 1, "tool_call", "open", "src/payments/retry.py"),
        ("t1", 2, "tool_output", "open", "src/payments/retry.py"),
        ("t2", 0, "tool_call", "edit", "/repo/src/payments/retry.py"),  # blank thought: no prose record
        ("t2", 1, "tool_output", "edit", "/repo/src/payments/retry.py"),
        ("t3", 0, "assistant", None, None),
        ("t3", 1, "tool_call", "submit", None),
        ("t3", 2, "tool_output", "submit", None),
    ]
    assert s.records[6].text.startswith("edit 40:41\n    delay = min(cap")
    assert all(r.call_id == r.entry_id for r in s.of_kind("tool_call", "tool_output"))
    assert s.metadata["usage_totals"] == {"input_tokens": 18250, "output_tokens": 402, "cost": 0.21, "api_calls": 4}


def test_function_calling_history():
    (s,), audit = load(SW / "function_calling.traj")
    assert audit.n_skipped == 0
    got = [(r.entry_id, r.block_index, r.kind, r.tool, r.target, r.call_id) for r in s.records]
    assert got == [
        ("h0", 0, "system", None, None, None),
        ("h1", 0, "user", None, None, None),  # the task is an "observation" by message_type, but no action precedes it
        ("h2", 0, "reasoning", None, None, None),
        ("h2", 1, "assistant", None, None, None),
        ("h2", 2, "tool_call", "str_replace_editor", "/testbed/src/retry.py", "toolu_01Vb"),
        ("h3", 0, "tool_output", "str_replace_editor", "/testbed/src/retry.py", "toolu_01Vb"),
        ("h4", 0, "assistant", None, None, None),
        ("h4", 1, "tool_call", "bash", "cd /testbed && python -m pytest -q", "toolu_02Xc"),
        ("h5", 0, "tool_output", "bash", "cd /testbed && python -m pytest -q", "toolu_02Xc"),
        ("h6", 0, "assistant", None, None, None),
    ]
    assert s.records[1].text.startswith("<uploaded_files>")
    assert s.metadata["model"] == "claude-3-5-sonnet-20241022"
    assert s.metadata["swe_agent_version"] == "1.0.1"


def test_truncated_traj_is_counted_not_fatal():
    sessions, audit = load(SW / "truncated.traj")
    assert sessions == []
    assert audit.reasons == Counter({"malformed_json": 1})
    assert audit.skipped[0].line is None


def test_bad_history_items_are_counted_and_the_rest_kept(tmp_path):
    doc = json.loads((SW / "function_calling.traj").read_text())
    doc["history"][3:3] = ["not a message", {"role": "narrator", "content": "x"}, {"content": "no role"}]
    p = tmp_path / "bad.traj"
    p.write_text(json.dumps(doc))
    (s,), audit = load(p)
    assert audit.reasons == Counter({"not_an_object": 1, "unknown_type": 1, "missing_field": 1})
    assert [k.detail.split(":")[0] for k in audit.skipped] == ["history[3]", "history[4]", "history[5]"]
    assert len(s.records) == 10  # every good item still imported, outputs still linked
    assert s.records[5].entry_id == "h6" and s.records[5].call_id == "toolu_01Vb"


def test_neither_history_nor_trajectory(tmp_path):
    p = tmp_path / "x.traj"
    p.write_text('{"environment": "swe_main", "info": {}}')
    sessions, audit = load(p)
    assert sessions == [] and audit.reasons == Counter({"missing_field": 1})


def test_parse_action():
    assert swe_agent.parse_action("open a/b.py 12\n") == ("open", "a/b.py 12", "a/b.py")
    assert swe_agent.parse_action('search_dir "def foo" src\n') == ("search_dir", '"def foo" src', "def foo")
    assert swe_agent.parse_action("edit 1:2\nx\nend_of_edit\n", "/r/f.py") == ("edit", "1:2\nx\nend_of_edit", "/r/f.py")
    assert swe_agent.parse_action("ls -la src\n") == ("ls", "-la src", "-la src")
    assert swe_agent.parse_action("submit\n") == ("submit", "", None)


# --------------------------------------------------------------------------- sniffing


def test_sniff_recognises_trajs():
    for p in SW.glob("*.traj"):
        assert swe_agent.sniff(files.read_head(p)), p
    if REAL.is_file():
        assert swe_agent.sniff(files.read_head(REAL))


def test_sniff_traj_longer_than_the_head(tmp_path):
    doc = json.loads((SW / "trajectory_only.traj").read_text())
    doc["trajectory"][0]["observation"] = "y" * (files.HEAD_BYTES * 2)
    for name, indent in (("big.json", 2), ("big-compact.json", None)):
        p = tmp_path / name
        p.write_text(json.dumps(doc, indent=indent))
        assert swe_agent.sniff(files.read_head(p)), name


def test_sniff_rejects_lookalikes(tmp_path):
    cases = {
        "jsonl.json": '{"trajectory": []}\n{"trajectory": []}\n',
        "export.json": json.dumps({"info": {"id": "ses_1"}, "messages": []}, indent=2),
        "list.json": "[]",
        "other.json": json.dumps({"history": [], "messages": []}),
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_text(text)
        assert not swe_agent.sniff(files.read_head(p)), name
    db = tmp_path / "x.db"
    sqlite3.connect(db).execute("CREATE TABLE trajectory (id INTEGER)").connection.commit()
    assert not swe_agent.sniff(files.read_head(db))
    assert not swe_agent.sniff(files.read_head(tmp_path))


def _other_format_files():
    files = []
    for d in FIXTURES.iterdir():
        if d.is_dir() and d.name != "swe_agent":
            # public/ holds the real SWE-agent trajectory beside other agents' sessions
            files += [p for p in d.rglob("*") if p.is_file() and p.suffix != ".md" and "swe-agent" not in p.parts]
            files += [p for p in d.rglob("*") if p.is_dir()]  # e.g. an OpenCode storage tree
    return files


@pytest.mark.parametrize("path", _other_format_files(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_sniff_false_on_other_formats(path):
    assert not swe_agent.sniff(files.read_head(path))
