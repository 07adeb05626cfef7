"""Tests of the plain chat-JSONL importer (`compaction_lab.ingest.importers.chat_jsonl`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from compaction_lab.core.session import Session
from compaction_lab.ingest import formats
from compaction_lab.ingest.files import read_head
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.importers import chat_jsonl
from tests.helpers import FIXTURES, PUBLIC_FIXTURES
from tests.helpers import FIXTURES as ALL_FIXTURES

FIXTURES = FIXTURES / "chat_jsonl"
TOOLS = FIXTURES / "fix-flaky-test.jsonl"
CONVERSATIONS = FIXTURES / "conversations.jsonl"
BROKEN = FIXTURES / "broken.jsonl"


def _load(path: Path) -> tuple[list[Session], ImportAudit]:
    audit = ImportAudit()
    return list(chat_jsonl.load(path, audit)), audit


def _expected_kinds(messages: list[dict]) -> Counter:
    """Record kinds of chat messages, counted by hand from the raw JSON."""
    kinds: Counter = Counter()
    for m in messages:
        role = m["role"]
        if role in ("system", "developer"):
            kinds["system"] += 1
        elif role == "user":
            kinds["user"] += 1
        elif role in ("tool", "function"):
            kinds["tool_output"] += 1
        elif role == "assistant":
            calls = m.get("tool_calls") or []
            kinds["tool_call"] += len(calls)
            if m.get("reasoning_content"):
                kinds["reasoning"] += 1
            if m.get("content") or not calls:
                kinds["assistant"] += 1
    return kinds


# --------------------------------------------------------------------------- one message per line


def test_tool_using_conversation_kinds_match_raw_count():
    (s,), audit = _load(TOOLS)
    assert audit.n_skipped == 0
    raw = [json.loads(line) for line in TOOLS.read_text("utf-8").splitlines() if line.strip()]
    assert Counter(r.kind for r in s) == _expected_kinds(raw)
    assert s.id == "fix-flaky-test" and s.source_format == "chat_jsonl"
    assert [r.source_order for r in s] == list(range(len(s)))


def test_tool_calls_link_to_outputs():
    (s,), _ = _load(TOOLS)
    calls = {r.call_id: r for r in s.of_kind("tool_call")}
    outs = {r.call_id: r for r in s.of_kind("tool_output")}
    assert set(calls) == set(outs) == {"call_a1", "call_a2", "call_a3"}
    assert calls["call_a1"].text == 'read_file {"path": "tests/test_cache.py"}'
    assert calls["call_a1"].target == "tests/test_cache.py"
    assert calls["call_a2"].target == "pytest -q tests/test_cache.py -p no:randomly --count 20"
    for cid, out in outs.items():
        assert (out.tool, out.target) == (calls[cid].tool, calls[cid].target)
        assert not out.is_error
    # Content given as a list of typed parts is flattened.
    assert outs["call_a3"].text == "cache/store.py:41:        now = time.monotonic()"


def test_entry_ids_and_blocks():
    (s,), _ = _load(TOOLS)
    # Line 3: prose then one call; line 5: content null, two calls and no prose record.
    assert [(r.entry_id, r.block_index, r.kind) for r in s if r.entry_id in ("L3", "L5")] == [
        ("L3", 0, "assistant"),
        ("L3", 1, "tool_call"),
        ("L5", 0, "tool_call"),
        ("L5", 1, "tool_call"),
    ]


def test_reimport_is_identical():
    for path in (TOOLS, CONVERSATIONS):
        a, _ = _load(path)
        b, _ = _load(path)
        assert [s.to_jsonl() for s in a] == [s.to_jsonl() for s in b]


def test_zst_imports_identical_to_plain(tmp_path):
    import zstandard

    target = tmp_path / (TOOLS.name + ".zst")
    target.write_bytes(zstandard.ZstdCompressor().compress(TOOLS.read_bytes()))
    assert chat_jsonl.sniff(read_head(target))
    (z,), _ = _load(target)
    (s,), _ = _load(TOOLS)
    assert z.id == s.id == "fix-flaky-test"
    assert z.records == s.records


# --------------------------------------------------------------------------- one conversation per line


def test_conversation_lines_are_sessions():
    sessions, audit = _load(CONVERSATIONS)
    assert audit.n_skipped == 0
    assert [s.id for s in sessions] == ["conversations-1", "conversations-2", "conversations-3"]
    raw = [json.loads(line) for line in CONVERSATIONS.read_text("utf-8").splitlines() if line.strip()]
    for s, obj in zip(sessions, raw, strict=False):
        assert Counter(r.kind for r in s) == _expected_kinds(obj["messages"])
    weather = sessions[1]
    assert weather.metadata == {"model": "example-chat-model"}
    assert [(r.entry_id, r.block_index, r.kind) for r in weather] == [
        ("m0", 0, "system"),
        ("m1", 0, "user"),
        ("m2", 0, "reasoning"),
        ("m2", 1, "tool_call"),
        ("m3", 0, "tool_output"),
        ("m4", 0, "assistant"),
    ]
    out = weather.records[4]
    assert (out.tool, out.call_id) == ("get_weather", "w1")


def test_mixed_file_and_legacy_forms(tmp_path):
    p = tmp_path / "mixed.jsonl"
    lines = [
        {"role": "user", "content": "<environment_context>cwd=/x</environment_context>"},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"role": "assistant", "content": None, "function_call": {"name": "ls", "arguments": '{"path": "."}'}},
        {"role": "function", "name": "ls", "content": "a.py\nb.py"},
        {"messages": "oops"},
    ]
    p.write_text("".join(json.dumps(o) + "\n" for o in lines), "utf-8")
    sessions, audit = _load(p)
    assert [s.id for s in sessions] == ["mixed-2", "mixed"]
    plain = sessions[1]
    assert [(r.kind, r.tool, r.target) for r in plain] == [
        ("user", None, None),
        ("tool_call", "ls", "."),
        ("tool_output", "ls", None),
    ]
    assert plain.records[0].injected
    assert [(k.line, k.reason) for k in audit.skipped] == [(5, "missing_field")]


# --------------------------------------------------------------------------- bad input


def test_broken_file_counts_skips_and_keeps_good_lines():
    (s,), audit = _load(BROKEN)
    assert s.id == "broken"
    assert [(r.entry_id, r.kind) for r in s] == [
        ("L1", "system"),
        ("L2", "user"),
        ("L9", "tool_output"),
        ("L10", "assistant"),
    ]
    # The call of line 3 was lost with its line, so its output has no tool name.
    assert s.records[2].call_id == "c1" and s.records[2].tool is None
    assert [(k.line, k.reason) for k in audit.skipped] == [
        (3, "malformed_json"),
        (4, "invalid_utf8"),
        (5, "missing_field"),  # no role
        (6, "unknown_type"),  # role "narrator"
        (7, "missing_field"),  # tool call without a function name
        (8, "not_an_object"),
        (11, "truncated_last_line"),
    ]


def test_bad_messages_inside_a_conversation(tmp_path):
    p = tmp_path / "conv.jsonl"
    p.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "ok"},
                    "nope",
                    {"content": "no role"},
                    {"role": "alien", "content": "?"},
                ]
            }
        )
        + "\n",
        "utf-8",
    )
    (s,), audit = _load(p)
    assert [r.kind for r in s] == ["user"]
    assert [(k.line, k.reason) for k in audit.skipped] == [
        (1, "not_an_object"),
        (1, "missing_field"),
        (1, "unknown_type"),
    ]
    assert audit.skipped[1].detail.startswith("messages[2]")


def test_empty_and_all_bad_files_give_no_session(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert _load(empty)[0] == []
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "robot", "content": "x"}\n', "utf-8")
    sessions, audit = _load(bad)
    assert sessions == [] and audit.reasons == Counter({"unknown_type": 1})


# --------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.name)
def test_sniff_accepts_chat_files(path):
    assert chat_jsonl.sniff(read_head(path))


def test_sniff_rejects_other_formats():
    files: list[Path] = []
    for d in ALL_FIXTURES.iterdir():
        if d.is_dir() and d.name != "chat_jsonl":
            files += [p for p in d.rglob("*") if p.is_file()]
    assert files
    assert [str(p) for p in files if chat_jsonl.sniff(read_head(p))] == []


def test_sniff_rejects_real_public_fixtures():
    real = [p for p in PUBLIC_FIXTURES.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".traj")]
    assert real and not any(chat_jsonl.sniff(read_head(p)) for p in real)


def test_sniff_rejects_typed_lines(tmp_path):
    # Lines that look like messages but carry a "type" belong to other formats.
    p = tmp_path / "typed.jsonl"
    p.write_text(
        json.dumps({"type": "message", "role": "user", "content": "hi"})
        + "\n"
        + json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}})
        + "\n",
        "utf-8",
    )
    assert not chat_jsonl.sniff(read_head(p))
    assert not chat_jsonl.sniff(read_head(tmp_path))


def test_detect_picks_chat_jsonl():
    from compaction_lab.ingest import detect, importer

    assert all(importer(fmt) for fmt in formats())  # every importer loads (an import error fails here)

    for path in FIXTURES.glob("*.jsonl"):
        assert detect(path) == "chat_jsonl"
