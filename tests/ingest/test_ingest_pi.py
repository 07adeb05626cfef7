"""pi session importer: real large session, every line type, links, bad lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from compaction_lab.ingest import claimants
from compaction_lab.ingest.files import Head, read_head
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.importers import pi
from tests.helpers import FIXTURES, PUBLIC_FIXTURES

FIX = FIXTURES / "pi"
REAL = PUBLIC_FIXTURES / "pi" / "large-session.jsonl"


def load(path: Path) -> tuple[list, ImportAudit]:
    audit = ImportAudit()
    return list(pi.load(path, audit)), audit


def kinds(session) -> Counter:
    return Counter(r.kind for r in session)


def skips(audit: ImportAudit) -> list[tuple[int | None, str]]:
    return [(s.line, s.reason) for s in audit.skipped]


def raw_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


# --------------------------------------------------------------------------- real fixture


def expected_kinds(path: Path) -> Counter:
    """Record kinds of a well-formed pi file, counted by hand from the raw JSON."""
    c: Counter = Counter()
    for line in raw_lines(path):
        ltype = line["type"]
        if ltype == "session":
            continue  # the header is metadata, not a record
        if ltype in ("compaction", "branch_summary"):
            c["summary"] += 1
            continue
        if ltype == "custom_message":  # extension text sent to the model as user text
            content = line["content"]
            c["user"] += 1 if isinstance(content, str) else sum(b["type"] == "text" for b in content)
            continue
        if ltype != "message":
            c["meta"] += 1
            continue
        msg = line["message"]
        role, content = msg["role"], msg.get("content")
        if role in ("user", "custom"):
            blocks = [{"type": "text"}] if isinstance(content, str) else content
            for b in blocks:
                c["user" if b["type"] == "text" else "meta"] += 1
        elif role == "assistant":
            for b in content:  # an empty (aborted) message adds nothing
                c[{"text": "assistant", "thinking": "reasoning", "toolCall": "tool_call"}[b["type"]]] += 1
        elif role == "toolResult":
            c["tool_output"] += 1
        elif role == "bashExecution":
            if msg.get("excludeFromContext"):
                c["meta"] += 1
            else:
                c["tool_call"] += 1
                c["tool_output"] += 1
    return c


def test_real_session_imports_without_skips():
    (session,), audit = load(REAL)
    assert audit.n_skipped == 0, audit.skipped
    assert kinds(session) == expected_kinds(REAL)
    lines = raw_lines(REAL)
    header = lines[0]
    assert session.id == header["id"]
    assert session.metadata["cwd"] == header["cwd"]
    assert session.metadata["model"] == header["modelId"]
    assistants = [x["message"] for x in lines if x["type"] == "message" and x["message"]["role"] == "assistant"]
    usage = session.metadata["usage"]
    assert len(usage) == len(assistants)
    assert sum(u["output_tokens"] for u in usage) == sum(m["usage"]["output"] for m in assistants)
    assert sum(u["cached_tokens"] for u in usage) == sum(m["usage"]["cacheRead"] for m in assistants)
    assert sum(u["cost"] for u in usage) == pytest.approx(sum(m["usage"]["cost"]["total"] for m in assistants))
    assert set(session.metadata["models"]) == {m["model"] for m in assistants} | {header["modelId"]}
    empty = Counter(m["stopReason"] for m in assistants if not m["content"])
    assert session.metadata["empty_responses"] == dict(empty)


def test_real_session_entry_ids_are_line_numbers_and_tools_link():
    (session,), _ = load(REAL)
    assert session.records[0].entry_id == "L2"
    assert all(r.entry_id.startswith("L") for r in session)
    calls = {r.call_id: r for r in session.of_kind("tool_call")}
    for out in session.of_kind("tool_output"):
        assert out.call_id in calls
        assert (out.tool, out.target) == (calls[out.call_id].tool, calls[out.call_id].target)
    errors = sum(1 for x in raw_lines(REAL) if x["type"] == "message" and x["message"].get("isError") is True)
    assert sum(r.is_error for r in session.of_kind("tool_output")) == errors


# --------------------------------------------------------------------------- sniffing


def other_format_files() -> list[Path]:
    # public/pi/ holds the real pi session; public/'s other folders are other agents' sessions
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and "pi" not in p.parts)


@pytest.mark.parametrize("path", sorted(FIX.glob("*.jsonl")) + [REAL], ids=lambda p: p.name)
def test_sniff_recognises_pi(path):
    assert pi.sniff(read_head(path))


@pytest.mark.parametrize("path", other_format_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path):
    assert not pi.sniff(read_head(path))


def test_sniff_rejects_look_alikes_and_never_raises(tmp_path):
    assert not pi.sniff(read_head(tmp_path))
    claude = {"type": "user", "sessionId": "s", "uuid": "u", "message": {"role": "user", "content": "hi"}}
    claude_msg = {"type": "message", "uuid": "u", "message": {"role": "user", "content": "hi"}}
    chat = {"role": "user", "content": "hi"}
    assert not pi.sniff(Head(tmp_path / "x", b"", (claude, claude_msg, chat, 3, None, "s", [1])))
    assert not pi.sniff(Head(tmp_path / "y", b"", ({"type": "message", "message": "not a dict"},)))


def test_pi_is_the_first_format_to_claim_its_fixtures():
    for path in sorted(FIX.glob("*.jsonl")):
        claimed = claimants(read_head(path))
        assert claimed[:1] == ["pi"], (path.name, claimed)


# --------------------------------------------------------------------------- mapping


@pytest.fixture(scope="module")
def main():
    (session,), audit = load(FIX / "main.jsonl")
    assert audit.n_skipped == 0, audit.skipped
    return session


def test_main_kinds_and_header(main):
    assert main.id == "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    assert main.source_format == "pi"
    assert kinds(main) == expected_kinds(FIX / "main.jsonl")
    assert kinds(main) == Counter(meta=8, user=3, reasoning=1, assistant=2, tool_call=4, tool_output=4, summary=2)
    assert main.metadata["cwd"] == "/home/dev/shop"
    assert main.metadata["title"] == "EUR checkout rounding"
    # Entry ids are pi's own ids; several blocks of one message share it.
    assert [(r.entry_id, r.block_index, r.kind) for r in main if r.entry_id == "e0000004"] == [
        ("e0000004", 0, "reasoning"),
        ("e0000004", 1, "assistant"),
        ("e0000004", 2, "tool_call"),
        ("e0000004", 3, "tool_call"),
    ]


def test_tool_results_link_to_calls_and_carry_errors(main):
    outs = {r.call_id: r for r in main.of_kind("tool_output")}
    assert (outs["toolu_01P1"].tool, outs["toolu_01P1"].target, outs["toolu_01P1"].is_error) == (
        "read",
        "src/cart.ts",
        False,
    )
    assert (outs["toolu_01P2"].tool, outs["toolu_01P2"].target, outs["toolu_01P2"].is_error) == (
        "bash",
        "npm test -- cart",
        True,
    )


def test_bash_execution_is_a_bash_call_and_output(main):
    recs = [r for r in main if r.entry_id == "e0000007"]
    assert [(r.kind, r.tool, r.target, r.call_id) for r in recs] == [
        ("tool_call", "bash", "git log --oneline -3", "e0000007"),
        ("tool_output", "bash", "git log --oneline -3", "e0000007"),
    ]
    assert recs[0].text == 'bash {"command": "git log --oneline -3"}'
    assert recs[1].text.startswith("a1b2c3d fix tax") and not recs[1].is_error
    cancelled = [r for r in main if r.entry_id == "e0000009" and r.kind == "tool_output"][0]
    assert cancelled.is_error
    # `!!` commands never reach the model.
    (excluded,) = [r for r in main if r.entry_id == "e0000008"]
    assert excluded.kind == "meta"


def test_usage_models_and_empty_responses(main):
    usage = main.metadata["usage"]
    assert [u["entry_id"] for u in usage] == ["e0000004", "e000000a", "e0000010"]
    assert usage[0] == {
        "entry_id": "e0000004",
        "model": "claude-sonnet-4-5",
        "input_tokens": 3,
        "output_tokens": 180,
        "cached_tokens": 0,
        "cache_write_tokens": 2100,
        "cost": 0.0143,
    }
    assert main.metadata["model"] == "claude-sonnet-4-5"
    assert main.metadata["models"] == ["claude-sonnet-4-5", "gpt-5.1-codex"]
    # The aborted request left usage but no record.
    assert main.metadata["empty_responses"] == {"aborted": 1}
    assert not [r for r in main if r.entry_id == "e000000a"]


def test_compaction_summary_and_boundary(main):
    summaries = main.of_kind("summary")
    assert [r.entry_id for r in summaries] == ["e000000b", "e000000f"]  # compaction, branch_summary
    (boundary,) = main.metadata["compactions"]
    assert boundary == {
        "entry_id": "e000000b",
        "source_order": summaries[0].source_order,
        "first_kept_entry_id": "e0000007",
        "tokens_before": 48211,
        "model": "gpt-5.1-codex",
    }  # the model in use when it compacted (the last assistant's)


def test_injected_and_meta_lines(main):
    users = {r.entry_id: r for r in main.of_kind("user")}
    assert users["e0000003"].injected is False
    assert users["e000000c"].injected is True  # role custom (extension message)
    assert users["e000000d"].injected is True  # custom_message line
    metas = [r.text for r in main.of_kind("meta")]
    assert metas[:2] == ["model_change anthropic/claude-sonnet-4-5", "thinking_level_change medium"]
    assert "image image/png" in metas
    assert "holodeck_state" in metas  # unknown line type: tolerated, not skipped


# --------------------------------------------------------------------------- links and robustness


def test_bad_parent_links_are_counted_and_records_kept():
    (session,), audit = load(FIX / "links.jsonl")
    assert [r.text for r in session] == ["start", "parent went missing", "loop a", "loop b"]
    assert skips(audit) == [(3, "dangling_parent"), (4, "cyclic_parent")]


def test_broken_file_counts_bad_lines_and_keeps_good_ones():
    (session,), audit = load(FIX / "broken.jsonl")
    assert skips(audit) == [
        (3, "malformed_json"),
        (4, "unknown_type"),
        (5, "missing_field"),
        (6, "unknown_type"),
        (6, "missing_field"),
        (8, "missing_field"),
        (9, "missing_field"),
        (10, "truncated_last_line"),
    ]
    assert [(r.entry_id, r.kind) for r in session] == [("L2", "user"), ("L6", "assistant"), ("L7", "summary")]
    assert session.metadata["compactions"] == [
        {
            "entry_id": "L7",
            "source_order": 2,
            "first_kept_entry_index": 2,
            "tokens_before": 120000,
            "model": "claude-opus-4-1",
        }
    ]
    assert session.metadata["model"] == "claude-opus-4-1"


def test_file_without_header_uses_stem(tmp_path):
    p = tmp_path / "2025-11-01_abc.jsonl"
    line = {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi"}}
    p.write_text(json.dumps(line) + "\n")
    (session,), audit = load(p)
    assert session.id == "2025-11-01_abc" and audit.n_skipped == 0
    assert [(r.entry_id, r.kind, r.text) for r in session] == [("L1", "user", "hi")]


def test_empty_file(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_bytes(b"\n\n")
    sessions, audit = load(p)
    assert sessions == [] and skips(audit) == [(None, "empty_file")]


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.jsonl")))
def test_reimport_is_identical(name):
    first, _ = load(FIX / name)
    second, _ = load(FIX / name)
    assert [s.to_jsonl() for s in first] == [s.to_jsonl() for s in second]


def test_header_after_a_corrupt_first_line_still_gives_metadata(tmp_path):
    p = tmp_path / "corrupt-head.jsonl"
    user = {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi"}}
    header = {"type": "session", "id": "late-id", "timestamp": "t", "cwd": "/late"}
    p.write_text('{"type": "sess\n' + json.dumps(user) + "\n" + json.dumps(header) + "\n")
    (session,), audit = load(p)
    assert skips(audit) == [(1, "malformed_json")]
    assert session.id == "corrupt-head"  # records exist before the header: the id stays the stem
    assert session.metadata["cwd"] == "/late"
    assert [r.kind for r in session] == ["user", "meta"]
