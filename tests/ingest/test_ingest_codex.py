"""Tests of the Codex CLI rollout importer (`compaction_lab.ingest.importers.codex`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from compaction_lab.core.session import Session
from compaction_lab.ingest import formats
from compaction_lab.ingest.files import read_head
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.importers import codex
from tests.helpers import FIXTURES, PUBLIC_FIXTURES
from tests.helpers import FIXTURES as ALL_FIXTURES

FIXTURES = FIXTURES / "codex"
MAIN = FIXTURES / "rollout-2025-09-14T10-02-11-0199a1b2-7c3d-7e10-9f00-5d2c8e4b1a01.jsonl"
TWO = FIXTURES / "rollout-2025-09-15T08-00-00-two-sessions.jsonl"
BROKEN = FIXTURES / "rollout-2025-09-16T12-00-00-broken.jsonl"
MAIN_ID = "0199a1b2-7c3d-7e10-9f00-5d2c8e4b1a01"

#: The documented mapping, written out independently of the importer.
EXPECTED_ITEM_KIND = {
    "reasoning": "reasoning",
    "function_call": "tool_call",
    "custom_tool_call": "tool_call",
    "local_shell_call": "tool_call",
    "web_search_call": "tool_call",
    "tool_search_call": "tool_call",
    "function_call_output": "tool_output",
    "custom_tool_call_output": "tool_output",
    "tool_search_output": "tool_output",
}
EXPECTED_ROLE_KIND = {"user": "user", "assistant": "assistant", "developer": "system"}


def _load(path: Path) -> tuple[list[Session], ImportAudit]:
    audit = ImportAudit()
    return list(codex.load(path, audit)), audit


def _raw_lines(path: Path) -> list[tuple[int, dict]]:
    return [(n, json.loads(line)) for n, line in enumerate(path.read_text("utf-8").splitlines(), 1) if line.strip()]


def _expected_kinds(path: Path) -> dict[int, str]:
    """Line number -> record kind, computed from the raw JSON by the documented rules."""
    out: dict[int, str] = {}
    for n, obj in _raw_lines(path):
        t, p = obj["type"], obj["payload"]
        if t == "response_item":
            pt = p["type"]
            if pt == "message":
                out[n] = EXPECTED_ROLE_KIND[p["role"]]
            else:
                out[n] = EXPECTED_ITEM_KIND.get(pt, "meta")
        elif t == "compacted":
            out[n] = "summary"
        elif t == "world_state" or t.startswith("inter_agent_"):
            out[n] = "meta"
    return out


@pytest.fixture(scope="module")
def main_session() -> Session:
    sessions, audit = _load(MAIN)
    assert audit.n_skipped == 0, audit.skipped
    assert len(sessions) == 1
    return sessions[0]


# --------------------------------------------------------------------------- mapping


def test_fixture_covers_every_documented_payload_type():
    seen_top = {obj["type"] for _, obj in _raw_lines(MAIN)}
    seen_items = {obj["payload"]["type"] for _, obj in _raw_lines(MAIN) if obj["type"] == "response_item"}
    seen_roles = {
        obj["payload"]["role"]
        for _, obj in _raw_lines(MAIN)
        if obj["type"] == "response_item" and obj["payload"]["type"] == "message"
    }
    seen_events = {obj["payload"]["type"] for _, obj in _raw_lines(MAIN) if obj["type"] == "event_msg"}
    assert {
        "session_meta",
        "response_item",
        "compacted",
        "turn_context",
        "event_msg",
        "world_state",
        "inter_agent_message",
    } <= seen_top
    assert set(EXPECTED_ITEM_KIND) | {"message", "ghost_snapshot"} <= seen_items
    assert set(EXPECTED_ROLE_KIND) <= seen_roles
    assert {"token_count", "agent_message", "user_message"} <= seen_events


def test_every_payload_type_maps_to_documented_kind(main_session):
    expected = _expected_kinds(MAIN)
    got = {int(r.entry_id[1:]): r.kind for r in main_session}
    assert got == expected
    assert Counter(r.kind for r in main_session) == Counter(expected.values())
    assert [r.source_order for r in main_session] == list(range(len(main_session)))
    assert all(r.block_index == 0 for r in main_session)


def test_session_id_timestamps_and_source(main_session):
    assert main_session.id == MAIN_ID
    assert main_session.source_format == "codex"
    assert main_session.source_path == str(MAIN)
    assert main_session.records[0].timestamp == "2025-09-14T10:02:11.230Z"


def test_messages_roles_and_injected(main_session):
    users = main_session.of_kind("user")
    assert [u.injected for u in users] == [True, True, False, False]
    assert users[0].text.startswith("# AGENTS.md instructions")
    assert users[1].text.startswith("<environment_context>")
    (system,) = main_session.of_kind("system")
    assert system.text.startswith("<permissions instructions>")
    # Several output_text blocks of one message are joined into one record.
    last = main_session.of_kind("assistant")[-1]
    assert "not refunds.csv" in last.text and "currency column" in last.text


def test_reasoning_uses_summary_and_only_sizes_encrypted_content(main_session):
    first, second = main_session.of_kind("reasoning")
    assert first.text.startswith("**Finding the export filter**")
    assert "gAAAA" not in first.text and second.text == ""
    raw = [
        obj["payload"].get("encrypted_content")
        for _, obj in _raw_lines(MAIN)
        if obj["type"] == "response_item" and obj["payload"]["type"] == "reasoning"
    ]
    assert main_session.metadata["encrypted_reasoning_bytes"] == sum(len(e.encode()) for e in raw if e)


def test_event_msg_text_is_not_duplicated(main_session):
    texts = [r.text for r in main_session]
    for _, obj in _raw_lines(MAIN):
        if obj["type"] == "event_msg" and obj["payload"]["type"] in ("agent_message", "user_message"):
            assert texts.count(obj["payload"]["message"]) == 1
    # agent_reasoning repeats the first line of the summary; it adds no record either.
    assert len(main_session.of_kind("reasoning")) == 2


def test_tool_calls_and_outputs(main_session):
    calls = {r.call_id: r for r in main_session.of_kind("tool_call")}
    outs = {r.call_id: r for r in main_session.of_kind("tool_output")}
    assert calls["call_rg01"].tool == "shell"
    assert calls["call_rg01"].target == "rg -n 'amount' ledger/export.py"
    assert calls["call_rg01"].text.startswith('shell {"command":["bash","-lc"')
    assert calls["call_patch02"].tool == "apply_patch" and calls["call_patch02"].target == "ledger/export.py"
    assert calls["call_patch02"].text.startswith("apply_patch *** Begin Patch")
    assert calls["call_pytest03"].tool == "local_shell"
    assert calls["call_pytest03"].target == "pytest -q tests/test_export.py"
    assert calls["tsearch04"].tool == "tool_search" and calls["tsearch04"].target == "spreadsheet export"
    assert calls["call_read05"].target == "tests/fixtures/refunds.csv"
    assert calls["call_ls06"].target == "ls tests/fixtures"
    (web,) = [r for r in main_session.of_kind("tool_call") if r.tool == "web_search"]
    assert web.call_id is None and web.target == "python csv writer Decimal negative zero"
    # Every output carries its call's tool and target.
    assert set(outs) == {"call_rg01", "call_patch02", "call_pytest03", "tsearch04", "call_read05", "call_ls06"}
    for cid, out in outs.items():
        assert (out.tool, out.target) == (calls[cid].tool, calls[cid].target)


def test_output_text_unwrapped_and_errors(main_session):
    outs = {r.call_id: r for r in main_session.of_kind("tool_output")}
    assert outs["call_rg01"].text.startswith("22:        if row.amount < 0:")
    assert all('"metadata"' not in o.text for o in outs.values())
    assert outs["call_patch02"].text == "Success. Updated the following files:\nM ledger/export.py\n"
    assert outs["tsearch04"].text == (
        "xlsx_writer: write rows to an .xlsx sheet\ncsv_dialect: detect the dialect of a CSV file"
    )
    errors = {cid for cid, o in outs.items() if o.is_error}
    assert errors == {"call_pytest03", "call_read05"}  # exit_code 1, success false


def test_compaction_summary_and_boundary(main_session):
    (summary,) = main_session.of_kind("summary")
    assert summary.text.startswith("Summary so far:")
    (boundary,) = main_session.metadata["compactions"]
    assert (boundary["entry_id"], boundary["source_order"]) == (summary.entry_id, summary.source_order)
    assert all(item["type"] == "message" for item in boundary.get("replacement_history", []))


def test_meta_records_for_tolerated_types(main_session):
    metas = [r.text for r in main_session.of_kind("meta")]
    assert metas == ["world_state", "inter_agent_message/note", "response_item/ghost_snapshot"]


def test_metadata_usage_system_prompt_model(main_session):
    md = main_session.metadata
    (meta_line,) = [obj for _, obj in _raw_lines(MAIN) if obj["type"] == "session_meta"]
    assert md["system_prompt"] == meta_line["payload"]["base_instructions"]["text"]
    assert md["instructions"] == meta_line["payload"]["instructions"]
    assert md["cwd"] == "/home/dev/ledger"
    assert md["cli_version"] == "0.39.0" and md["model_provider"] == "openai"
    assert md["model"] == "gpt-5-codex" and md["models"] == ["gpt-5-codex", "gpt-5"]
    assert md["window"] == 272000
    # token_count with info null and the re-emitted identical event add no rows.
    assert md["usage"] == [
        {
            "entry_id": "L13",
            "model": "gpt-5-codex",
            "input_tokens": 6120,
            "cached_tokens": 4864,
            "output_tokens": 188,
            "reasoning_tokens": 128,
        },
        {
            "entry_id": "L20",
            "model": "gpt-5-codex",
            "input_tokens": 7530,
            "cached_tokens": 6144,
            "output_tokens": 214,
            "reasoning_tokens": 128,
        },
        {
            "entry_id": "L38",
            "model": "gpt-5",
            "input_tokens": 2560,
            "cached_tokens": 1152,
            "output_tokens": 113,
            "reasoning_tokens": 64,
        },
    ]
    assert md["usage_input_includes_cached"] is True


# --------------------------------------------------------------------------- files


def test_reimport_is_identical():
    (a,), _ = _load(MAIN)
    (b,), _ = _load(MAIN)
    assert a.to_jsonl() == b.to_jsonl()


def test_zst_imports_identical_to_plain(tmp_path, main_session):
    import zstandard

    target = tmp_path / (MAIN.name + ".zst")
    target.write_bytes(zstandard.ZstdCompressor().compress(MAIN.read_bytes()))
    assert codex.sniff(read_head(target))
    (z,), audit = _load(target)
    assert audit.n_skipped == 0
    assert z.id == main_session.id
    assert z.records == main_session.records
    assert dict(z.metadata) == dict(main_session.metadata)


def test_session_id_falls_back_to_file_stem(tmp_path):
    import zstandard

    lines = [ln for ln in MAIN.read_text("utf-8").splitlines() if '"type":"session_meta"' not in ln]
    plain = tmp_path / "rollout-2025-09-14-nometa.jsonl"
    plain.write_text("\n".join(lines) + "\n", "utf-8")
    packed = tmp_path / "rollout-2025-09-14-packed.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    (s,), _ = _load(plain)
    assert s.id == "rollout-2025-09-14-nometa"
    assert "system_prompt" not in s.metadata
    (z,), _ = _load(packed)
    assert z.id == "rollout-2025-09-14-packed"


def test_several_sessions_per_file():
    sessions, audit = _load(TWO)
    assert audit.n_skipped == 0
    assert [s.id for s in sessions] == ["0199b000-aaaa-7000-8000-000000000001", "0199b000-bbbb-7000-8000-000000000002"]
    first, second = sessions
    # The line before the first session_meta joins that session (renamed to its id).
    assert [r.entry_id for r in first] == ["L1", "L3", "L4"]
    assert first.records[0].injected and first.records[0].session_id == first.id
    assert first.metadata["system_prompt"] == "You are a careful coding agent."
    # A repeated session_meta with the same id does not split the session.
    assert [r.kind for r in second] == ["user", "tool_call", "tool_output"]
    assert second.metadata["cwd"] == "/srv/worker" and second.metadata["model"] == "gpt-5-codex"
    assert second.records[0].text == "Restart the worker."  # content as a plain string
    out = second.records[2]
    assert out.is_error and out.tool == "shell" and out.target == "systemctl restart worker"


def test_broken_file_counts_skips_and_keeps_good_lines():
    sessions, audit = _load(BROKEN)
    (s,) = sessions
    assert s.id == "0199c111-cccc-7000-8000-000000000003"
    assert [(r.entry_id, r.kind) for r in s] == [("L2", "user"), ("L11", "assistant")]
    assert [(k.line, k.reason) for k in audit.skipped] == [
        (3, "malformed_json"),
        (4, "invalid_utf8"),
        (5, "not_an_object"),
        (6, "missing_field"),  # no payload
        (7, "missing_field"),  # no type
        (8, "unknown_type"),  # role "narrator"
        (9, "missing_field"),  # function_call without name
        (10, "missing_field"),  # function_call_output without output
        (12, "truncated_last_line"),
    ]
    assert all(k.path == str(BROKEN) for k in audit.skipped)


def _write(tmp_path: Path, name: str, objs: list[dict]) -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(o) + "\n" for o in objs), "utf-8")
    return p


def test_tool_search_output_with_tool_specs(tmp_path):
    tools = [{"type": "function", "name": "xlsx_writer", "description": "Write rows to .xlsx"}]
    p = _write(
        tmp_path,
        "r.jsonl",
        [
            {
                "timestamp": "t",
                "type": "response_item",
                "payload": {
                    "type": "tool_search_call",
                    "call_id": "s1",
                    "execution": "client",
                    "arguments": {"query": "xlsx"},
                },
            },
            {
                "timestamp": "t",
                "type": "response_item",
                "payload": {
                    "type": "tool_search_output",
                    "call_id": "s1",
                    "status": "completed",
                    "execution": "client",
                    "tools": tools,
                },
            },
        ],
    )
    (s,), audit = _load(p)
    assert audit.n_skipped == 0
    call, out = s.records
    assert out.kind == "tool_output" and json.loads(out.text) == tools
    assert (out.tool, out.target, out.call_id) == ("tool_search", "xlsx", "s1")


def test_unknown_top_level_type_is_meta_and_other_events_are_quiet(tmp_path):
    p = _write(
        tmp_path,
        "r.jsonl",
        [
            {"timestamp": "t", "type": "future_thing", "payload": {"x": 1}},
            {"timestamp": "t", "type": "event_msg", "payload": {"type": "exec_command_end", "stdout": "hi"}},
            {"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count", "info": {"bad": 1}}},
            {"timestamp": "t", "type": "compacted", "payload": {"nothing": True}},
        ],
    )
    (s,), audit = _load(p)
    assert [(r.kind, r.text) for r in s] == [("meta", "future_thing")]
    assert [(k.line, k.reason) for k in audit.skipped] == [(3, "missing_field"), (4, "missing_field")]


def test_empty_file(tmp_path):
    p = tmp_path / "rollout-empty.jsonl"
    p.write_bytes(b"")
    sessions, audit = _load(p)
    assert sessions == [] and audit.reasons == Counter({"empty_file": 1})


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("plain text", ("plain text", False)),
        ('{"output": "boom", "metadata": {"exit_code": 2}}', ("boom", True)),
        ('{"output": "ok", "metadata": {"exit_code": 0}}', ("ok", False)),
        ('{"output": "no", "success": false}', ("no", True)),
        ('{"content": "denied", "success": false}', ('{"content": "denied", "success": false}', True)),
        (
            "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nerr\n",
            ("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nerr\n", True),
        ),
        ("Exit code: 0\nOutput:\n", ("Exit code: 0\nOutput:\n", False)),
        ([{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "data:"}], ("a", False)),
        ({"content": "x", "success": False}, ("x", True)),
        ({"content": [{"type": "input_text", "text": "y"}]}, ("y", False)),
        (None, None),
        (3, None),
    ],
)
def test_output_text(output, expected):
    assert codex.output_text(output) == expected


@pytest.mark.parametrize(
    ("args", "target"),
    [
        ('{"command": ["bash", "-lc", "make check"]}', "make check"),
        ({"command": ["git", "status"]}, "git status"),
        (
            '{"command": ["apply_patch", "*** Begin Patch\\n*** Add File: a.py\\n+x\\n*** Update File: b.py\\n"]}',
            "a.py b.py",
        ),
        ("*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n", "old.txt"),
        ('{"path": "src/x.py"}', "src/x.py"),
        ({"type": "open_page", "url": "https://example.com/doc"}, "https://example.com/doc"),
        ("not json at all", "not json at all"),
        ({}, None),
    ],
)
def test_call_target(args, target):
    assert codex.call_target(args) == target


def test_file_stem():
    assert codex.file_stem(Path("a/rollout-x.jsonl.zst")) == "rollout-x"
    assert codex.file_stem(Path("rollout-y.jsonl")) == "rollout-y"


# --------------------------------------------------------------------------- sniffing


def _other_fixture_files() -> list[Path]:
    """Session files of the other formats: real shared ones and other importers' fixtures."""
    files = []
    for d in ALL_FIXTURES.iterdir():  # public/ (real sessions of other agents) included
        if d.is_dir() and d.name != "codex":
            files += [p for p in d.rglob("*") if p.is_file()]
    return files


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.name)
def test_sniff_accepts_rollouts(path):
    assert codex.sniff(read_head(path))


def test_sniff_rejects_other_formats():
    others = _other_fixture_files()
    claimed = [str(p) for p in others if codex.sniff(read_head(p))]
    assert claimed == []


def test_sniff_rejects_real_public_fixtures():
    real = [p for p in PUBLIC_FIXTURES.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".traj")]
    assert real
    assert not any(codex.sniff(read_head(p)) for p in real)


def test_sniff_when_first_line_is_longer_than_the_head(tmp_path):
    prompt = "Follow the repository conventions. " * 3000  # > 64 KiB
    p = _write(
        tmp_path,
        "rollout-big.jsonl",
        [
            {
                "timestamp": "2025-09-14T10:00:00Z",
                "type": "session_meta",
                "payload": {"id": "big-1", "base_instructions": {"text": prompt}},
            },
            {
                "timestamp": "2025-09-14T10:00:01Z",
                "type": "response_item",
                "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            },
        ],
    )
    # The head holds the first line's outline (its shape and short values; tests/ingest/test_sniff_long_lines.py
    # has every spacing): the sniffer judges it as any parsed line.
    head = read_head(p)
    assert [o["payload"]["id"] for o in head.objects] == ["big-1"]
    assert codex.sniff(head)
    (s,), _ = _load(p)
    assert s.id == "big-1" and s.metadata["system_prompt"] == prompt


def test_sniff_never_raises_and_rejects_near_misses(tmp_path):
    near = _write(
        tmp_path,
        "near.jsonl",
        [
            {"timestamp": "t", "type": "message", "payload": {"x": 1}},  # not a rollout type
            {"timestamp": "t", "type": "response_item", "payload": "text"},  # payload not an object
        ],
    )
    assert not codex.sniff(read_head(near))
    assert not codex.sniff(read_head(tmp_path))  # a directory


def test_detect_picks_codex():
    from compaction_lab.ingest import detect, importer, load_sessions

    assert all(importer(fmt) for fmt in formats())  # every importer loads (an import error fails here)

    for path in FIXTURES.glob("*.jsonl"):
        assert detect(path) == "codex"
    audit = ImportAudit()
    sessions = list(load_sessions(FIXTURES, audit))
    # 4 sessions of 3 rollouts (one holds two), + the recorded one, + the remote compaction (upstream's test data)
    assert audit.formats == Counter({"codex": 6})
    assert len(sessions) == 6


def test_compacted_keeps_its_replacement_history(tmp_path):
    """Codex's `CompactedItem { message, replacement_history }`: the replacement history is the live history a
    later compaction summarises (issue 13 item 2), so the boundary keeps it as role + text."""

    def msg(role, text):
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    p = _write(
        tmp_path,
        "r.jsonl",
        [
            {"timestamp": "t", "type": "response_item", "payload": msg("user", "fix the flaky test in ci.yml")},
            {
                "timestamp": "t",
                "type": "compacted",
                "payload": {
                    "message": "SUMMARY-1",
                    "replacement_history": [
                        msg("user", "<environment_context>cwd=/w</environment_context>"),
                        msg("user", "fix the flaky test in ci.yml"),
                        msg("user", "Another language model started to solve this problem... SUMMARY-1"),
                        {"type": "compaction", "encrypted_content": "opaque"},
                    ],
                },
            },
            {"timestamp": "t", "type": "compacted", "payload": {"message": "SUMMARY-2"}},
        ],
    )
    (s,), audit = _load(p)
    assert audit.n_skipped == 0
    first, second = s.metadata["compactions"]
    assert [r.kind for r in s.records] == ["user", "summary", "summary"]
    assert first["source_order"] == 1 and "replacement_history" not in second
    assert first["replacement_history"] == [
        {
            "type": "message",
            "role": "user",
            "text": "<environment_context>cwd=/w</environment_context>",
            "injected": True,
        },
        {"type": "message", "role": "user", "text": "fix the flaky test in ci.yml", "injected": False},
        {
            "type": "message",
            "role": "user",
            "text": "Another language model started to solve this problem... SUMMARY-1",
            "injected": False,
        },
        {"type": "compaction", "encrypted_bytes": len("opaque")},
    ]


# --------------------------------------------------------------------------- hostile nesting (issue 25, item 14)


def test_arguments_nested_100k_levels_import_whole_and_verbatim(tmp_path):
    """JSON nested far past Python's recursion limit inside ``arguments`` / ``output`` strings: every
    record is imported, nothing skipped, the text kept verbatim (it cannot be read as JSON)."""
    from tests.deep_json import deep_array, deep_object, write_rollout

    (s,), audit = _load(write_rollout(tmp_path))
    assert audit.n_skipped == 0, audit.skipped
    kinds = [r.kind for r in s.records]
    assert kinds == ["user", "tool_call", "tool_output", "tool_call", "tool_output", "tool_call", "tool_output"] + [
        "assistant",
        "user",
    ]
    calls = [r for r in s.records if r.kind == "tool_call"]
    assert calls[0].text.endswith(deep_array()) and calls[1].text.endswith(deep_object())
    outputs = [r for r in s.records if r.kind == "tool_output"]
    assert outputs[0].text == deep_array() and outputs[1].text == deep_object()


@pytest.mark.parametrize("depth", ["bound+1", "100k"])
def test_a_line_nested_past_the_bound_is_a_counted_skip_with_its_reason(tmp_path, depth):
    """A whole line of the session file nested past `bounded_json.MAX_DEPTH` is one counted skip (reason and
    detail), not a crash, and not a value that breaks a later stage; the lines around it are kept."""
    from compaction_lab.core.bounded_json import MAX_DEPTH
    from tests.deep_json import HOSTILE_DEPTH

    n = MAX_DEPTH + 1 if depth == "bound+1" else HOSTILE_DEPTH
    nested = '{"a":' * (n - 1) + "1" + "}" * (n - 1)  # the line's own object is the first level
    msg = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "kept"}]}
    p = tmp_path / "rollout-deep-line.jsonl"
    good = json.dumps({"timestamp": "t", "type": "response_item", "payload": msg})
    bad = '{"timestamp": "t", "type": "response_item", "payload": ' + nested + "}"
    p.write_text("\n".join([good, bad, good]) + "\n", "utf-8")
    (s,), audit = _load(p)
    assert [r.text for r in s.records] == ["kept", "kept"]
    ((skip),) = audit.skipped
    assert (skip.line, skip.reason) == (2, "malformed_json")
    assert f"deeper than {MAX_DEPTH} levels" in skip.detail


# --------------------------------------------------------------------------- remote compaction (issue 27, item 2)

#: Built from openai/codex core/tests/suite/compact_remote.rs @ a13f6a86 (tests/fixtures/SOURCES.md).
REMOTE = FIXTURES / "rollout-2026-01-20T09-00-00-0199c0de-0000-7000-8000-00000000e0c1.jsonl"


def test_remote_compaction_imports_with_its_encrypted_summary_sized():
    """compact_remote.rs persists `CompactedItem { message: String::new(), replacement_history }`; the replacement
    history holds `ResponseItem::Compaction { encrypted_content }` (protocol/src/models.rs:153-156 @ 001cb8e2,
    serde tag `compaction`, alias `compaction_summary`). The importer keeps its type and encrypted size."""
    (s,), audit = _load(REMOTE)
    assert audit.n_skipped == 0
    assert [(r.kind, r.text) for r in s.records] == [
        ("user", "needs compaction"),
        ("assistant", "COMPACT_BASELINE_REPLY"),
        ("summary", ""),
        ("user", "after compact"),
        ("assistant", "AFTER_COMPACT_REPLY"),
    ]
    (b,) = s.metadata["compactions"]
    assert (b["entry_id"], b["source_order"]) == ("L4", 2)
    assert b["replacement_history"] == [
        {"type": "message", "role": "user", "text": "COMPACTED_USER_SUMMARY", "injected": False},
        {"type": "compaction", "encrypted_bytes": len("ENCRYPTED_COMPACTION_SUMMARY")},
        {"type": "message", "role": "assistant", "text": "COMPACTED_ASSISTANT_NOTE", "injected": False},
    ]


@pytest.mark.parametrize(
    "item,expected",
    [
        ({"type": "compaction", "encrypted_content": "abcd"}, {"type": "compaction", "encrypted_bytes": 4}),
        ({"type": "compaction_summary", "encrypted_content": "abcdef"}, {"type": "compaction", "encrypted_bytes": 6}),
        ({"type": "context_compaction", "encrypted_content": "ab"}, {"type": "compaction", "encrypted_bytes": 2}),
        ({"type": "context_compaction"}, {"type": "context_compaction"}),  # no encrypted content: nothing to size
        ({"type": "ghost_snapshot", "ghost_commit": {}}, {"type": "ghost_snapshot"}),
    ],
)
def test_replacement_history_items_of_a_remote_compaction(tmp_path, item, expected):
    p = _write(
        tmp_path,
        "r.jsonl",
        [{"timestamp": "t", "type": "compacted", "payload": {"message": "", "replacement_history": [item]}}],
    )
    (s,), _ = _load(p)
    assert s.metadata["compactions"][0]["replacement_history"] == [expected]
