"""Claude Code importer: projects transcripts, sidechains, links, stream-json, bad lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from compaction_lab.ingest import claimants
from compaction_lab.ingest.files import Head, read_head
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.importers import claude_code as cc
from tests.helpers import FIXTURES, PUBLIC_FIXTURES

FIX = FIXTURES / "claude_code"
REAL = PUBLIC_FIXTURES / "claude-code"
REAL_FILES = sorted(REAL.glob("*.jsonl"))


def load(path: Path) -> tuple[list, ImportAudit]:
    audit = ImportAudit()
    return list(cc.load(path, audit)), audit


def kinds(session) -> Counter:
    return Counter(r.kind for r in session)


def skips(audit: ImportAudit) -> list[tuple[int | None, str]]:
    return [(s.line, s.reason) for s in audit.skipped]


# --------------------------------------------------------------------------- independent count


def expected_kinds(path: Path) -> Counter:
    """Record kinds of a (well-formed, single-session, no-sidechain) projects file, counted by hand."""
    c: Counter = Counter()
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        ltype = line["type"]
        if ltype == "user":
            content = line["message"]["content"]
            if isinstance(content, str):
                c["summary" if line.get("isCompactSummary") else "user"] += 1
                continue
            for block in content:
                c[{"tool_result": "tool_output", "text": "user"}.get(block["type"], "meta")] += 1
        elif ltype == "assistant":
            for block in line["message"]["content"]:
                c[
                    {"text": "assistant", "thinking": "reasoning", "tool_use": "tool_call"}.get(block["type"], "meta")
                ] += 1
        elif ltype == "system":
            c["meta" if line.get("subtype") == "compact_boundary" else "system"] += 1
        else:  # summary titles, queue operations, snapshots: bookkeeping
            c["meta"] += 1
    return c


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_real_fixture_imports_without_skips(path):
    sessions, audit = load(path)
    assert audit.n_skipped == 0, audit.skipped
    assert len(sessions) == 1
    assert kinds(sessions[0]) == expected_kinds(path)
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    sid = next(x["sessionId"] for x in lines if "sessionId" in x)
    assert sessions[0].id == sid
    assert sessions[0].metadata["variant"] == "projects"


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_real_fixture_keeps_file_order_and_counts_usage_per_message(path):
    (session,), _ = load(path)
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    expected_ids = []
    for n, line in enumerate(lines, start=1):
        eid = line.get("uuid") or f"L{n}"
        if not expected_ids or expected_ids[-1] != eid:
            expected_ids.append(eid)
    seen = []
    for r in session:
        if not seen or seen[-1] != r.entry_id:
            seen.append(r.entry_id)
    # Every line that yields records appears, in file order.
    assert seen == [e for e in expected_ids if e in set(seen)]
    message_ids = {x["message"]["id"] for x in lines if x["type"] == "assistant" and "usage" in x["message"]}
    assert len(session.metadata.get("usage", [])) == len(message_ids)
    models = {x["message"]["model"] for x in lines if x["type"] == "assistant" and "model" in x["message"]}
    if models:
        assert session.metadata["model"] in models


def test_parallel_tool_results_are_not_dropped():
    # coverage-test-fix has two parallel Read calls: the parent tree forks there.
    (session,), _ = load(REAL / "coverage-test-fix.jsonl")
    calls = {r.call_id for r in session.of_kind("tool_call")}
    outputs = {r.call_id for r in session.of_kind("tool_output")}
    assert calls == outputs
    assert all(r.tool and r.target for r in session.of_kind("tool_output"))


# --------------------------------------------------------------------------- sniffing


def other_format_files() -> list[Path]:
    # The public fixtures sit in tests/fixtures/public/, the real Claude Code ones under claude-code/.
    files = [p for p in FIXTURES.rglob("*") if p.is_file() and not {"claude_code", "claude-code"} & set(p.parts)]
    return sorted(files)


@pytest.mark.parametrize("path", sorted(FIX.glob("*.jsonl")) + REAL_FILES, ids=lambda p: p.name)
def test_sniff_recognises_claude_code(path):
    assert cc.sniff(read_head(path))


@pytest.mark.parametrize("path", other_format_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path):
    assert not cc.sniff(read_head(path))


def test_sniff_rejects_directories_and_never_raises(tmp_path):
    assert not cc.sniff(read_head(tmp_path))
    odd = Head(
        tmp_path / "x", b"", (1, "two", None, [3], {"type": ["user"]}, {"type": "session", "id": "p", "cwd": "/"})
    )
    assert not cc.sniff(odd)
    pi_line = {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi"}}
    codex_line = {"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}
    assert not cc.sniff(Head(tmp_path / "y", b"", (pi_line, codex_line)))


def test_claude_code_is_the_first_format_to_claim_its_fixtures():
    for path in sorted(FIX.glob("*.jsonl")):
        claimed = claimants(read_head(path))
        assert claimed[:1] == ["claude_code"], (path.name, claimed)


# --------------------------------------------------------------------------- mapping


@pytest.fixture(scope="module")
def main():
    sessions, audit = load(FIX / "main.jsonl")
    assert audit.n_skipped == 0, audit.skipped
    assert len(sessions) == 1
    return sessions[0]


def test_main_kinds_and_ids(main):
    assert main.id == "7f3c2a10-5b1e-4c8d-9a6f-0e2d4b8c1a01"
    assert main.source_format == "claude_code"
    assert kinds(main) == expected_kinds(FIX / "main.jsonl")
    assert kinds(main) == Counter(
        meta=8, user=5, tool_call=4, tool_output=4, reasoning=1, assistant=2, summary=1, system=1
    )
    # Entry ids are the uuids; bookkeeping lines without one use their line number.
    assert [r.entry_id for r in main][:5] == ["L1", "L2", "L3", "L4", "u-0001"]


def test_injected_user_text(main):
    users = {r.entry_id: r for r in main.of_kind("user")}
    assert users["u-0001"].injected is False
    assert users["u-0002"].injected is True  # <system-reminder> block
    assert users["u-0003"].injected is True  # isMeta
    assert users["u-0011"].injected is False  # typed beside a tool result


def test_tool_results_are_tool_outputs_linked_to_their_calls(main):
    calls = {r.call_id: r for r in main.of_kind("tool_call")}
    assert calls["toolu_01R1"].text == 'Read {"file_path": "/home/dev/payments/client.py"}'
    assert calls["toolu_01R2"].target == "/home/dev/payments/tests"
    outs = {r.call_id: r for r in main.of_kind("tool_output")}
    assert set(outs) == set(calls)
    for cid, out in outs.items():
        assert (out.tool, out.target) == (calls[cid].tool, calls[cid].target)
    assert outs["toolu_01B1"].is_error is True
    assert outs["toolu_01R2"].is_error is False
    assert outs["toolu_01R2"].text == "No matches found"  # list content flattened
    # A tool result and the user's words in one line: two records, one entry.
    mixed = [r for r in main if r.entry_id == "u-0011"]
    assert [(r.block_index, r.kind) for r in mixed] == [(0, "tool_output"), (1, "user")]


def test_thinking_redacted_thinking_and_images(main):
    (reasoning,) = main.of_kind("reasoning")
    assert reasoning.text.startswith("I should read the client")
    assert main.metadata["redacted_thinking_bytes"] == 64
    metas = [r.text for r in main.of_kind("meta")]
    assert "redacted_thinking (64 bytes)" in metas
    assert "image image/png" in metas
    assert not any("iVBOR" in r.text for r in main)  # image data is not text


def test_usage_counted_once_per_message_id_last_line_wins(main):
    usage = main.metadata["usage"]
    assert [u["entry_id"] for u in usage] == ["u-0007", "u-0010", "u-0016"]
    assert usage[0] == {
        "entry_id": "u-0007",
        "model": "claude-sonnet-4-5-20250929",
        "input_tokens": 4,
        "output_tokens": 131,
        "cache_write_tokens": 5120,
        "cached_tokens": 12000,
    }
    # The <synthetic> API-error notice is no model call.
    assert all(u.get("model") != "<synthetic>" for u in usage)
    assert main.metadata["model"] == "claude-sonnet-4-5-20250929"
    assert main.metadata["models"] == ["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"]


def test_compaction_boundary_and_summary(main):
    (summary,) = main.of_kind("summary")
    assert summary.entry_id == "u-0014"
    assert summary.text.startswith("This session is being continued")
    (boundary,) = main.metadata["compactions"]
    assert boundary == {
        "entry_id": "u-0013",
        "source_order": summary.source_order - 1,
        "trigger": "auto",
        "pre_tokens": 155012,
        "model": "claude-sonnet-4-5-20250929",
    }  # the main model, which wrote the summary
    assert main.records[boundary["source_order"]].kind == "meta"


def test_summary_lines_are_titles_not_context(main):
    # The `summary` line is the resume-picker label; a custom-title overrides it.
    first = main.records[0]
    assert (first.kind, first.text) == ("meta", "Add retry to payments client")
    assert main.metadata["title"] == "payments retry"
    assert (main.metadata["cwd"], main.metadata["git_branch"]) == ("/home/dev/payments", "main")


def test_system_line_is_system_record(main):
    (system,) = main.of_kind("system")
    assert system.text == "PostToolUse hook: formatted 1 file"


# --------------------------------------------------------------------------- sessions and links


def test_sidechain_is_its_own_session_and_nothing_is_lost():
    sessions, audit = load(FIX / "sidechain.jsonl")
    assert audit.n_skipped == 0
    main, side = sessions
    sid = "2b9e4f60-1c2d-4e3f-8a9b-0c1d2e3f4a02"
    assert (main.id, side.id) == (sid, f"{sid}:sidechain")
    assert [r.entry_id for r in main] == ["m-1", "m-2", "m-3", "m-4"]
    assert [r.entry_id for r in side] == ["s-1", "s-2", "s-3", "s-4"]
    assert side.metadata["sidechain"] is True and side.metadata["parent_session"] == sid
    assert side.metadata["model"] == "claude-3-5-haiku-20241022"
    assert len(main) + len(side) == 8
    assert side.of_kind("tool_output")[0].tool == "Grep"


def test_subagent_file_names_its_agent():
    (session,), audit = load(FIX / "agent-a1b2c3d4.jsonl")
    assert audit.n_skipped == 0
    assert session.id == "2b9e4f60-1c2d-4e3f-8a9b-0c1d2e3f4a02:sidechain:a1b2c3d4"
    assert session.metadata["agent_id"] == "a1b2c3d4"


def test_several_session_ids_in_one_file():
    sessions, audit = load(FIX / "two_sessions.jsonl")
    assert audit.n_skipped == 0  # p-3's parent lives in the other session of the file: not dangling
    a, b = sessions
    assert a.id.startswith("aaaaaaaa") and b.id.startswith("bbbbbbbb")
    assert [r.entry_id for r in a] == ["p-1", "p-2", "L3"]  # the summary line joins its neighbour
    assert [r.entry_id for r in b] == ["p-3", "p-4"]
    assert a.metadata["title"] == "Refactor kickoff"
    assert [u["entry_id"] for u in b.metadata["usage"]] == ["p-4"]


def test_parent_links_order_and_bad_links_are_counted_but_kept():
    (session,), audit = load(FIX / "links.jsonl")
    # k-2 answers k-3, which the file writes later: it moves after its parent.
    assert [r.entry_id for r in session] == ["k-1", "k-3", "k-2", "k-4", "k-5", "k-6", "k-7"]
    assert skips(audit) == [(4, "dangling_parent"), (5, "cyclic_parent")]


# --------------------------------------------------------------------------- stream-json


def test_stream_json_transcript():
    sessions, audit = load(FIX / "stream_json.jsonl")
    assert audit.n_skipped == 0
    main, side = sessions
    sid = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
    assert main.id == sid and side.id == f"{sid}:sidechain:toolu_S1"
    assert main.metadata["variant"] == side.metadata["variant"] == "stream_json"
    assert kinds(main) == Counter(meta=4, assistant=2, tool_call=1, tool_output=1)
    assert kinds(side) == Counter(user=1, tool_call=1, tool_output=1)
    meta = main.metadata
    assert meta["model"] == "claude-sonnet-4-5-20250929"
    assert meta["tools"] == ["Task", "Bash", "Read", "Edit"]
    assert meta["cwd"] == "/repo"
    assert meta["window"] == 200000
    assert meta["total_cost_usd"] == 0.0421
    assert meta["result"]["num_turns"] == 3
    # The result line's aggregate usage is not a model call: rows come from the messages.
    assert [u["entry_id"] for u in meta["usage"]] == ["st-2", "st-7"]
    assert meta["usage"][0]["output_tokens"] == 72
    task = main.of_kind("tool_output")[0]
    assert (task.tool, task.call_id) == ("Task", "toolu_S1")


# --------------------------------------------------------------------------- robustness


def test_broken_file_counts_bad_lines_and_keeps_good_ones():
    (session,), audit = load(FIX / "broken.jsonl")
    assert skips(audit) == [
        (2, "malformed_json"),
        (3, "invalid_utf8"),
        (4, "not_an_object"),
        (5, "missing_field"),
        (6, "unknown_type"),
        (7, "missing_field"),
        (9, "truncated_last_line"),
    ]
    assert [(r.entry_id, r.kind, r.text) for r in session] == [
        ("b-1", "user", "hello"),
        ("b-2", "assistant", "hi"),
        ("b-4", "meta", "brand-new-line-type"),
    ]


def test_empty_file(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_bytes(b"")
    sessions, audit = load(p)
    assert sessions == [] and skips(audit) == [(None, "empty_file")]


def test_session_id_falls_back_to_file_stem(tmp_path):
    p = tmp_path / "0b1c2d3e-aaaa-bbbb.jsonl"
    p.write_text(json.dumps({"type": "summary", "summary": "lonely title", "leafUuid": "x"}) + "\n")
    (session,), audit = load(p)
    assert session.id == "0b1c2d3e-aaaa-bbbb" and audit.n_skipped == 0


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.jsonl")))
def test_reimport_is_identical(name):
    first, _ = load(FIX / name)
    second, _ = load(FIX / name)
    assert [s.to_jsonl() for s in first] == [s.to_jsonl() for s in second]


def test_zstd_compressed_file_imports_the_same(tmp_path):
    import zstandard

    src = FIX / "main.jsonl"
    dst = tmp_path / "main.jsonl.zst"
    dst.write_bytes(zstandard.ZstdCompressor().compress(src.read_bytes()))
    assert cc.sniff(read_head(dst))
    (plain,), _ = load(src)
    (packed,), audit = load(dst)
    assert audit.n_skipped == 0
    assert [r.to_dict() for r in packed] == [r.to_dict() for r in plain]


def test_first_line_longer_than_the_sniff_window(tmp_path):
    # A pasted screenshot makes the first line bigger than the 64 KiB head.
    big = {
        "parentUuid": None,
        "isSidechain": False,
        "sessionId": "s-big",
        "type": "user",
        "uuid": "g-1",
        "message": {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 100_000}},
                {"type": "text", "text": "what is wrong here?"},
            ],
        },
    }
    nxt = {
        "parentUuid": "g-1",
        "sessionId": "s-big",
        "type": "assistant",
        "uuid": "g-2",
        "message": {"id": "msg_g", "role": "assistant", "content": [{"type": "text", "text": "A typo."}]},
    }
    p = tmp_path / "s-big.jsonl"
    p.write_text(json.dumps(big) + "\n" + json.dumps(nxt) + "\n")
    assert cc.sniff(read_head(p))
    (session,), audit = load(p)
    assert audit.n_skipped == 0
    assert [r.kind for r in session] == ["meta", "user", "assistant"]


def test_compact_summary_in_blocks_marks_one_boundary(tmp_path):
    lines = [
        {
            "parentUuid": None,
            "sessionId": "s",
            "type": "user",
            "uuid": "c-1",
            "isCompactSummary": True,
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "Summary part 1"}, {"type": "text", "text": "part 2"}],
            },
        },
        {
            "parentUuid": "c-1",
            "sessionId": "s",
            "type": "user",
            "uuid": "c-2",
            "message": {"role": "user", "content": "go on"},
        },
    ]
    p = tmp_path / "s.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (session,), _ = load(p)
    assert [r.kind for r in session] == ["summary", "summary", "user"]
    assert session.metadata["compactions"] == [{"entry_id": "c-1", "source_order": 0}]
