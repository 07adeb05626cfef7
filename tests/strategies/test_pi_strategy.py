"""``pi`` — pi's compaction (badlogic/pi-mono@83378aad, ``packages/coding-agent``), rule by rule.

Each test names the upstream rule it pins (file:line in docs/strategies.md,
section "pi: upstream pins"); tests ported from upstream name the upstream test
(``packages/coding-agent/test/compaction.test.ts``, ``compaction-serialization.test.ts``,
``session-manager/build-context.test.ts``).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from compaction_lab import strategies
from compaction_lab.core.projection import STAND_IN_LABEL
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.text import js_length
from compaction_lab.ingest import load_sessions, synthetic
from compaction_lab.strategies.arms import pi as pa
from compaction_lab.strategies.base import ESTIMATORS, CompactionContext
from compaction_lab.summarize import NoSummarizer
from compaction_lab.summarize.extractive import ExtractiveSummarizer, empty_template
from tests.helpers import FIXTURES, PUBLIC_FIXTURES, FakeSummarizer, make_session

NAME = "pi"
LOCAL_FIXTURES = FIXTURES
TWO = LOCAL_FIXTURES / "pi" / "two-compactions.jsonl"
UPSTREAM_FIXTURE = LOCAL_FIXTURES / "pi" / "upstream-compaction-before-compaction-excerpt.jsonl"
SHAPE = CallShape(
    "test", "You are pi.", ({"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}},)
)


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
    )


def compact(sess, ctx=None, cut=None):
    return strategies.compact(sess, NAME, cut=cut, ctx=ctx or ctx_for())


def call(cid: str, tool: str, **args) -> tuple:
    return ("tool_call", f"{tool} {json.dumps(args)}", {"tool": tool, "call_id": cid, "target": args.get("path")})


def out(cid: str, tool: str, text: str) -> tuple:
    return ("tool_output", text, {"tool": tool, "call_id": cid})


# --------------------------------------------------------------------------- pi session files


def write_pi(tmp_path: Path, entries: list[dict], name: str = "s") -> Path:
    """A version-3 pi session file (ids and parentIds, as pi writes them)."""
    lines = [{"type": "session", "version": 3, "id": name, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}]
    parent = None
    for i, e in enumerate(entries):
        e = {"id": e.pop("id", f"x{i:02d}"), "parentId": parent, "timestamp": f"2026-01-01T00:{i:02d}:00.000Z", **e}
        parent = e["id"]
        lines.append(e)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def user(text: str, **kw) -> dict:
    return {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": text}]}, **kw}


def assistant(text: str = "", calls: tuple = (), **kw) -> dict:
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "toolCall", "id": cid, "name": name, "arguments": args} for cid, name, args in calls
    ]
    return {"type": "message", "message": {"role": "assistant", "content": content, "stopReason": "stop"}, **kw}


def result(cid: str, name: str, text: str, **kw) -> dict:
    return {
        "type": "message",
        "message": {
            "role": "toolResult",
            "toolCallId": cid,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "isError": False,
        },
        **kw,
    }


def compaction(summary: str, first_kept: str, **kw) -> dict:
    return {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": 10000, **kw}


def load(path: Path):
    (s,) = load_sessions(path)
    return s


def entries_of(session) -> list[pa.PiEntry]:
    return pa.session_entries(session, len(session.records), ctx_for())


# =========================================================================== registry, trigger


def test_registered_with_its_prompts():
    s = strategies.get(NAME)
    assert s.algorithm_version == "pi-2" and s.estimator in ESTIMATORS
    p = s.prompts(ctx_for())
    assert set(p) >= {"system", "instruction", "update", "turn_prefix", "summary_prefix", "summary_suffix"}
    for heading in (
        "## Goal",
        "## Constraints & Preferences",
        "## Progress",
        "### Done",
        "### In Progress",
        "### Blocked",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ):
        assert heading in p["instruction"] and heading in p["update"]
    assert [h for h in ("## Original Request", "## Early Progress", "## Context for Suffix") if h in p["turn_prefix"]]


def test_should_compact_upstream_test():
    """compaction.test.ts "shouldCompact": true when context exceeds threshold / false when disabled
    (compaction.ts:212-215: contextTokens > contextWindow - reserveTokens)."""
    s = strategies.get(NAME)
    c = ctx_for(window=100_000, reserve_tokens=10_000, keep_recent_tokens=20_000)
    assert s.fires(95_000, c) and not s.fires(89_000, c)
    assert not s.fires(90_000, c)  # strict ">"
    assert not s.fires(95_000, ctx_for(window=100_000, reserve_tokens=10_000, enabled=False))


def test_default_settings_and_trigger():
    """DEFAULT_COMPACTION_SETTINGS (compaction.ts:114-118): reserve 16,384, keep 20,000; the output ceiling
    plays no part in the trigger."""
    s = strategies.get(NAME)
    assert (pa.RESERVE_TOKENS, pa.KEEP_RECENT_TOKENS) == (16_384, 20_000)
    assert s.fires(128_000 - 16_384 + 1, ctx_for(output=4_000)) and not s.fires(128_000 - 16_384, ctx_for())


# =========================================================================== estimator


def test_estimate_is_ceil_chars_over_four_per_message():
    """estimateTokens (compaction.ts:225-283): ceil(chars/4); a tool call counts name + JSON.stringify(args);
    lengths are UTF-16 units."""
    s = make_session(
        [
            ("user", "abcde"),
            ("assistant", "xy"),
            ("tool_call", 'read {"path": "a.py"}', {"tool": "read", "call_id": "c"}),
        ]
    )
    e = entries_of(s)
    assert [pa.estimate_entry(x) for x in e] == [2, 1, math.ceil(len('read{"path":"a.py"}') / 4)]
    assert js_length("😀") == 2 and js_length("é") == 1
    combined = make_session([("reasoning", "t" * 5), ("assistant", "a" * 6)])
    recs = tuple(replace(r, entry_id="m") for r in combined.records)
    assert pa.estimate_entry(pa.PiEntry("m", "assistant", recs)) == math.ceil(11 / 4)


# =========================================================================== cut point (compaction.test.ts "findCutPoint")


def _chat(pairs: int, text=lambda i: f"User {i}", reply=lambda i: f"Assistant {i}"):
    items = []
    for i in range(pairs):
        items += [("user", text(i)), ("assistant", reply(i))]
    return make_session(items)


def test_find_cut_point_lands_on_user_or_assistant():
    """compaction.test.ts "should find cut point based on actual token differences"."""
    s = _chat(10, text=lambda i: f"User {i} " + "w" * 1000, reply=lambda i: f"Assistant {i} " + "v" * 1000)
    e = entries_of(s)
    cp = pa.find_cut_point(e, 0, len(e), 2500)
    assert e[cp.first_kept].kind in ("user", "assistant") and cp.first_kept > 0


def test_find_cut_point_without_valid_cut_points_returns_start():
    """compaction.test.ts "should return startIndex if no valid cut points in range" (and tool results are
    never cut points: compaction.ts:308-309)."""
    e = entries_of(make_session([("assistant", "a")]))
    assert pa.find_cut_point(e, 0, len(e), 1000).first_kept == 0
    e = entries_of(make_session([out("c1", "read", "x" * 400), out("c2", "read", "y" * 400)]))
    assert pa.find_cut_point(e, 0, len(e), 10) == pa.CutPoint(0, -1, False)


def test_find_cut_point_keeps_everything_within_budget():
    """compaction.test.ts "should keep everything if all messages fit within budget"."""
    e = entries_of(make_session([("user", "1"), ("assistant", "a"), ("user", "2"), ("assistant", "b")]))
    assert pa.find_cut_point(e, 0, len(e), 50_000).first_kept == 0


def test_find_cut_point_split_turn():
    """compaction.test.ts "should indicate split turn when cutting at assistant message": cut at an assistant
    message mid-turn → isSplitTurn, turnStartIndex = the turn's user message (compaction.ts:428-437)."""
    s = make_session(
        [
            ("user", "Turn 1"),
            ("assistant", "A1"),
            ("user", "Turn 2"),
            ("assistant", "A2-1 " + "x" * 8000),
            ("assistant", "A2-2 " + "x" * 8000),
            ("assistant", "A2-3 " + "x" * 8000),
        ]
    )
    e = entries_of(s)
    cp = pa.find_cut_point(e, 0, len(e), 3000)
    assert e[cp.first_kept].kind == "assistant"
    assert cp.is_split_turn and cp.turn_start == 2
    assert cp.first_kept == 4  # 2,001 + 2,001 estimated tokens reach 3,000 at index 4


def test_cut_never_at_tool_result_and_moves_back_over_meta():
    """The closest valid cut point at or after the entry that reached the budget (compaction.ts:401-409);
    then back over non-message entries (413-426): a model change before the user message is kept, and the
    cut then counts as a split turn (not a user message), as upstream does."""
    s = make_session(
        [
            ("user", "u1"),
            ("assistant", "a1"),
            call("c1", "read", path="big.txt"),
            out("c1", "read", "r" * 40_000),
            ("meta", "model_change x/y"),
            ("user", "u2 " + "q" * 400),
            ("assistant", "a2"),
        ]
    )
    e = entries_of(s)
    assert [x.kind for x in e] == ["user", "assistant", "assistant", "toolResult", "other", "user", "assistant"]
    cp = pa.find_cut_point(e, 0, len(e), 5_000)  # reached at the tool result (index 3) → next cut point is 5
    assert cp.first_kept == 4 and e[4].kind == "other"
    assert cp.is_split_turn and cp.turn_start == 0


def test_find_cut_point_in_large_session():
    """compaction.test.ts "should find cut point in large session" (fixtures/large-session.jsonl; the shared
    fixture is the same pi session)."""
    path = PUBLIC_FIXTURES / "pi" / "large-session.jsonl"
    e = entries_of(load(path))
    assert len(e) > 100 and sum(x.is_message for x in e) > 100
    cp = pa.find_cut_point(e, 0, len(e), pa.KEEP_RECENT_TOKENS)
    assert e[cp.first_kept].kind in ("user", "assistant")


# =========================================================================== serialization (compaction-serialization.test.ts)


def _tool_result_entry(text: str) -> pa.PiEntry:
    s = make_session([out("tc1", "read", text)])
    return pa.PiEntry("e0", "toolResult", s.records)


def test_serialize_truncates_long_tool_results():
    """compaction-serialization.test.ts "should truncate long tool results" (utils.ts:88-99, 150-157)."""
    r = pa.serialize_conversation([_tool_result_entry("x" * 5000)])
    assert "[Tool result]:" in r and "[... 3000 more characters truncated]" in r
    assert "x" * 3000 not in r and "x" * 2000 in r


def test_serialize_does_not_truncate_short_tool_results():
    """compaction-serialization.test.ts "should not truncate short tool results"."""
    assert pa.serialize_conversation([_tool_result_entry("x" * 1500)]) == "[Tool result]: " + "x" * 1500


def test_serialize_does_not_truncate_user_or_assistant():
    """compaction-serialization.test.ts "should not truncate assistant or user messages"."""
    r = pa.serialize_conversation(entries_of(make_session([("user", "y" * 5000), ("assistant", "y" * 5000)])))
    assert r == f"[User]: {'y' * 5000}\n\n[Assistant]: {'y' * 5000}" and "truncated" not in r


def test_serialize_labels_thinking_text_and_tool_calls():
    """serializeConversation (utils.ts:122-149): thinking, text, then ``name(k=JSON, ...)`` joined by "; "."""
    recs = make_session(
        [
            ("reasoning", "think"),
            ("assistant", "say"),
            ("tool_call", 'read {"path": "a.py", "offset": 3}', {"tool": "read", "call_id": "1"}),
            ("tool_call", 'bash {"command": "ls -l"}', {"tool": "bash", "call_id": "2"}),
        ]
    ).records
    recs = tuple(replace(r, entry_id="m") for r in recs)
    assert pa.serialize_entry(pa.PiEntry("m", "assistant", recs)) == [
        "[Assistant thinking]: think",
        "[Assistant]: say",
        '[Assistant tool calls]: read(path="a.py", offset=3); bash(command="ls -l")',
    ]


# =========================================================================== file lists


def test_file_lists_read_only_and_modified_sorted():
    """computeFileLists / formatFileOperations (utils.ts:29-82): read/write/edit with a path; modified =
    written ∪ edited; read-only = read − modified; both sorted; XML blocks appended."""
    s = make_session(
        [
            call("1", "read", path="z.py"),
            call("2", "edit", path="b.py"),
            call("3", "write", path="a.py"),
            call("4", "read", path="b.py"),
            call("5", "bash", command="cat q.py"),
            call("6", "read_file", path="other.py"),
        ]
    )
    ops = pa.file_operations(entries_of(s))
    read, modified = pa.compute_file_lists(ops)
    assert (read, modified) == (["z.py"], ["a.py", "b.py"])
    assert pa.format_file_operations(read, modified) == (
        "\n\n<read-files>\nz.py\n</read-files>\n\n<modified-files>\na.py\nb.py\n</modified-files>"
    )
    assert pa.format_file_operations([], []) == ""


def test_previous_compaction_file_lists_carry_over():
    """extractFileOperations (compaction.ts:41-69): the previous compaction's read/modified lists are added
    (read from the tags pi appended to its summary: the importer keeps no ``details``)."""
    prev = "## Goal\nx\n\n<read-files>\nold.md\n</read-files>\n\n<modified-files>\nsrc/m.py\n</modified-files>"
    ops = pa.file_operations([], prev)
    assert pa.compute_file_lists(ops) == (["old.md"], ["src/m.py"])


# =========================================================================== live history (buildSessionContext)


def test_build_context_single_compaction(tmp_path):
    """compaction.test.ts / build-context.test.ts "should handle single compaction": summary + kept (u2, a2)
    + after (u3, a3) = 5 messages, the summary first (session-manager.ts:383-406)."""
    s = load(
        write_pi(
            tmp_path,
            [
                user("1", id="u1"),
                assistant("a", id="a1"),
                user("2", id="u2"),
                assistant("b", id="a2"),
                compaction("Summary of 1,a,2,b", "u2", id="c1"),
                user("3", id="u3"),
                assistant("c", id="a3"),
            ],
        )
    )
    live = pa.live_history(s, len(s.records), ctx_for())
    assert [r.entry_id for r in live] == ["c1", "u2", "a2", "u3", "a3"]
    assert live[0].kind == "summary" and "Summary of 1,a,2,b" in live[0].text


def test_build_context_multiple_compactions_only_latest_matters(tmp_path):
    """compaction.test.ts "should handle multiple compactions (only latest matters)"."""
    s = load(
        write_pi(
            tmp_path,
            [
                user("1", id="u1"),
                assistant("a", id="a1"),
                compaction("First summary", "u1"),
                user("2", id="u2"),
                assistant("b", id="b"),
                user("3", id="u3"),
                assistant("c", id="c"),
                compaction("Second summary", "u3", id="k2"),
                user("4", id="u4"),
                assistant("d", id="d"),
            ],
        )
    )
    live = pa.live_history(s, len(s.records), ctx_for())
    assert [r.entry_id for r in live] == ["k2", "u3", "c", "u4", "d"] and live[0].text == "Second summary"


def test_build_context_keeps_all_when_first_kept_is_first_entry(tmp_path):
    """compaction.test.ts "should keep all messages when firstKeptEntryId is first entry"."""
    s = load(
        write_pi(
            tmp_path,
            [
                user("1", id="u1"),
                assistant("a", id="a1"),
                compaction("First summary", "u1"),
                user("2", id="u2"),
                assistant("b", id="b"),
            ],
        )
    )
    assert len({r.entry_id for r in pa.live_history(s, len(s.records), ctx_for())}) == 5


def test_two_compactions_fixture_live_history():
    """The importer's boundary (``first_kept_entry_id``) drives the live history: SUMMARY-TWO, then e08, e09
    (kept by it), then e11, e12; nothing before e08, not SUMMARY-ONE."""
    s = load(TWO)
    live = pa.live_history(s, len(s.records), ctx_for())
    assert [r.entry_id for r in live] == ["e10", "e08", "e09", "e11", "e12"]
    assert all("SUMMARY-ONE" not in r.text for r in live)
    mid = [r for r in s.records if r.entry_id == "e08"][0].source_order  # before the second compaction
    assert [r.entry_id for r in pa.live_history(s, mid, ctx_for())] == ["e05", "e03", "e04", "e06", "e07"]


def test_upstream_v1_session_with_a_recorded_compaction():
    """A real pi session (pi-mono test/fixtures/before-compaction.jsonl, excerpt): a version-1 compaction with
    ``firstKeptEntryIndex`` (migrated by session-manager.ts:223-231) keeps from "i reviwed what we have"."""
    s = load(UPSTREAM_FIXTURE)
    (boundary,) = s.metadata["compactions"]
    assert boundary["first_kept_entry_index"] == 12
    live = pa.live_history(s, len(s.records), ctx_for())
    assert live[0].kind == "summary" and live[0].entry_id == boundary["entry_id"]
    assert live[1].entry_id == "L13" and live[1].text.startswith("i reviwed what we have")
    order = [r.source_order for r in live[1:]]
    assert order == sorted(order) and live[1].source_order > 0


def test_foreign_summary_restarts_the_context():
    """A foreign agent's recorded summary is a compaction that kept nothing before it."""
    s = make_session(
        [
            ("user", "old request ORD-1"),
            ("assistant", "old answer"),
            ("summary", "FOREIGN SUMMARY"),
            ("user", "new request"),
            ("assistant", "new answer"),
        ],
        source_format="claude_code",
    )
    live = pa.live_history(s, len(s.records), ctx_for())
    assert [r.text for r in live] == ["FOREIGN SUMMARY", "new request", "new answer"]
    prov = FakeSummarizer()
    compact(s, ctx_for(summarizer=prov))
    (req,) = prov.requests
    text = req.messages[0]["content"]
    assert "<previous-summary>\nFOREIGN SUMMARY\n</previous-summary>" in text and "ORD-1" not in text
    assert text.endswith(pa.UPDATE_SUMMARIZATION_PROMPT)


def test_pi_branch_summary_is_a_message_not_a_boundary(tmp_path):
    """A ``branch_summary`` entry is a user-role message (messages.ts:170-175), a valid cut point and turn
    start, not a compaction."""
    s = load(
        write_pi(
            tmp_path,
            [
                user("1", id="u1"),
                assistant("a", id="a1"),
                {"type": "branch_summary", "id": "bs", "summary": "BRANCH", "fromId": "a1"},
                user("2", id="u2"),
            ],
        )
    )
    e = entries_of(s)
    assert [x.kind for x in e] == ["user", "assistant", "branch", "user"]
    assert [r.entry_id for r in pa.live_history(s, len(s.records), ctx_for())] == ["u1", "a1", "bs", "u2"]
    assert pa.serialize_entry(e[2]) == [f"[User]: {pa.BRANCH_SUMMARY_PREFIX}BRANCH{pa.BRANCH_SUMMARY_SUFFIX}"]


# =========================================================================== summary request


def long_session(turns=8, size=16000):
    items = []
    for i in range(turns):
        items += [
            ("user", f"request {i}: keep ORD-5821{i} " + "u" * 200),
            ("assistant", f"reply {i} " + "a" * 200),
            call(f"e{i}", "edit", path=f"src/f{i}.py", oldText="a", newText="b"),
            out(f"e{i}", "edit", "Successfully replaced text"),
            call(f"r{i}", "read", path=f"src/f{i}.py"),
            out(f"r{i}", "read", f"content {i} " + "c" * size),
        ]
    return make_session(items)


def test_summary_request_is_dedicated():
    """generateSummary (compaction.ts:520-577): its own system prompt, no tools, ONE user message:
    <conversation> … </conversation>, then the prompt; maxTokens = floor(0.8 × reserveTokens)."""
    prov = FakeSummarizer()
    p = compact(long_session(), ctx_for(summarizer=prov))
    (req,) = prov.requests
    assert req is p.summary_request and req.shape == "dedicated" and req.tools == ()
    assert req.system == pa.SYSTEM_PROMPT and req.template == pa.TEMPLATE
    assert req.max_output_tokens == math.floor(0.8 * 16_384) == 13_107
    (msg,) = req.messages
    assert msg["role"] == "user"
    text = msg["content"]
    assert text.startswith("<conversation>\n[User]: request 0") and "\n</conversation>\n\n" in text
    assert text.endswith(pa.SUMMARIZATION_PROMPT) and "<previous-summary>" not in text
    assert '[Assistant tool calls]: read(path="src/f0.py")' in text
    assert "[... " in text  # tool results cut at 2,000 chars


def test_custom_instructions_are_appended():
    """compaction.ts:533-535: ``Additional focus: …`` after the prompt."""
    prov = FakeSummarizer()
    compact(long_session(), ctx_for(summarizer=prov, custom_instructions="the billing code"))
    assert prov.requests[0].messages[0]["content"].endswith("\n\nAdditional focus: the billing code")


def test_prompt_files_give_exact_text(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("EXACT UPSTREAM PROMPT")
    prov = FakeSummarizer()
    compact(long_session(), ctx_for(summarizer=prov, prompt_file=str(f)))
    assert prov.requests[0].messages[0]["content"].endswith("EXACT UPSTREAM PROMPT")


# =========================================================================== next request


def test_next_request_summary_message_then_kept_entries_verbatim():
    """buildSessionContext + convertToLlm (session-manager.ts:383-406, messages.ts:176-183): one user message
    PREFIX + summary + SUFFIX, then the kept entries from firstKeptEntryId, verbatim."""
    s = long_session()
    p = compact(s, ctx_for(summarizer=FakeSummarizer("THE SUMMARY")))
    kinds = [seg.kind for seg in p.segments]
    assert kinds[:5] == ["system", "tools", "header", "summary", "header"]
    assert set(kinds[5:]) == {"tail"}
    msgs = p.messages()
    summary_msg = [m for m in msgs if m["role"] == "user"][0]
    lists = pa.format_file_operations(
        [], [f"src/f{i}.py" for i in range(8) if f"src/f{i}.py" in p.notes["modified_files"]]
    )
    # upstream: PREFIX + summary + SUFFIX; the segments' blank-line join adds one newline on each side
    assert summary_msg["content"] == pa.SUMMARY_OPEN + "\n\n" + "THE SUMMARY" + lists + "\n\n" + pa.SUMMARY_CLOSE
    assert summary_msg["content"].replace("\n\nTHE", "\nTHE").replace("\n\n</summary>", "\n</summary>") == (
        pa.COMPACTION_SUMMARY_PREFIX + "THE SUMMARY" + lists + pa.COMPACTION_SUMMARY_SUFFIX
    )
    first = p.notes["first_kept_entry_id"]
    kept = [r for r in s.records if r.source_order >= [x for x in s.records if x.entry_id == first][0].source_order]
    assert [seg.text for seg in p.segments[5:]] == [r.text for r in kept]
    assert p.notes["kept_tokens"] > 0 and p.tokens <= p.capacity
    # what was kept is not summarised
    assert not set(p.summary_request.source_entry_ids) & {r.entry_id for r in kept}


def test_summary_carries_file_lists():
    """compact (compaction.ts:761-763): the read/modified lists of the summarised part are appended."""
    p = compact(long_session(), ctx_for(summarizer=FakeSummarizer("S")))
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.text.startswith("S\n\n<modified-files>\nsrc/f0.py\n")
    assert p.notes["read_files"] == []  # every read file was also edited


def test_no_provider_placeholder_gives_the_empty_template():
    """``on_failure="placeholder"`` (the lab's older behaviour): compact around the empty template."""
    p = compact(long_session(), ctx_for(on_failure="placeholder"))
    assert p.receipt.fallback
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.text.startswith(empty_template(pa.TEMPLATE)) and "<modified-files>" in seg.text


def test_extractive_stand_in_fills_pi_headings():
    p = compact(long_session(), ctx_for(summarizer=ExtractiveSummarizer()))
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.label == STAND_IN_LABEL
    assert seg.text.index("## Goal") < seg.text.index("### Done") < seg.text.index("## Critical Context")
    assert "ORD-58210" in seg.text


# =========================================================================== split turn


def split_session():
    """One user turn with many large assistant steps: the cut falls inside it."""
    items = [
        ("user", "earlier request " + "e" * 400),
        ("assistant", "earlier answer"),
        ("user", "big turn request ORD-77"),
    ]
    for i in range(12):
        items += [
            ("assistant", f"step {i} " + "s" * 4000),
            call(f"b{i}", "bash", command=f"make {i}"),
            out(f"b{i}", "bash", f"out {i} " + "o" * 4000),
        ]
    return make_session(items)


def test_split_turn_two_requests_merged():
    """compact (compaction.ts:730-747): history and turn-prefix summaries, merged with the split-turn
    separator; the prefix request has floor(0.5 × reserve) tokens and the turn-prefix prompt."""
    prov = FakeSummarizer("PART")
    p = compact(split_session(), ctx_for(summarizer=prov))
    assert p.notes["is_split_turn"]
    hist, prefix = prov.requests
    assert hist.max_output_tokens == 13_107 and prefix.max_output_tokens == 8_192
    assert prefix.messages[0]["content"].endswith(pa.TURN_PREFIX_PROMPT) and prefix.template == pa.TURN_PREFIX_TEMPLATE
    assert "[User]: big turn request ORD-77" in prefix.messages[0]["content"]
    assert "big turn request" not in hist.messages[0]["content"]
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.text == "PART" + pa.SPLIT_TURN_SEPARATOR + "PART"
    assert p.receipt.input_tokens == 2000  # both calls priced
    assert p.notes["turn_prefix_request"] == prefix.fingerprint()
    # each request is billed by the cost model: both, in order, with the size of its own answer
    assert [(r.request, r.output_tokens) for r in p.requests_sent()] == [(hist, 1), (prefix, 1)]


def test_split_turn_without_history_says_no_prior_history():
    """compaction.ts:733-743: no messages before the turn → "No prior history." (no history request)."""
    s = make_session(
        [
            (r.kind, r.text, {k: getattr(r, k) for k in ("tool", "call_id", "target")})
            for r in split_session().records[2:]
        ]
    )
    prov = FakeSummarizer("PREFIX")
    p = compact(s, ctx_for(summarizer=prov))
    (req,) = prov.requests
    assert req.template == pa.TURN_PREFIX_TEMPLATE and p.summary_request is req
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.text == pa.NO_PRIOR_HISTORY + pa.SPLIT_TURN_SEPARATOR + "PREFIX"


def test_checkpoint_replay_of_a_split_turn_gives_the_same_summary():
    """The receipt holds the merged body; a replay (`strategies._Replay`) answers the main request with it
    and the prefix is not asked again."""
    c = ctx_for(summarizer=FakeSummarizer("PART"))
    first = compact(split_session(), c)
    again = compact(split_session(), ctx_for(summarizer=strategies._Replay(first.receipt)))
    assert again.receipt.request_fingerprint == first.receipt.request_fingerprint
    assert [s.text for s in again.segments] == [s.text for s in first.segments]


# =========================================================================== earlier compactions


def test_second_compaction_uses_previous_summary_and_pin_behaviour():
    """prepareCompaction (compaction.ts:605-659 @ pin): the cut is searched after the latest compaction; its
    summary is the previousSummary (update prompt); what it kept before its entry (e08, e09) is neither
    summarised nor kept (upstream's behaviour at the pin, fixed later: earendil-works/pi#2608)."""
    s = load(TWO)
    prov = FakeSummarizer()
    p = compact(s, ctx_for(summarizer=prov))
    (req,) = prov.requests
    text = req.messages[0]["content"]
    assert "<previous-summary>\nSUMMARY-TWO\n</previous-summary>" in text and text.endswith(
        pa.UPDATE_SUMMARIZATION_PROMPT
    )
    tails = [seg.entry_ids[0] for seg in p.segments if seg.kind == "tail"]
    assert tails == ["e11", "e12"]
    assert "tests pass" not in text and "SUMMARY-ONE" not in text


def test_keep_previous_kept_parameter():
    """``keep_previous_kept`` (earendil-works/pi compaction.ts @00e68365): the search starts at the previous
    compaction's first kept entry, so e08/e09 stay."""
    s = load(TWO)
    p = compact(s, ctx_for(summarizer=FakeSummarizer(), keep_previous_kept=True))
    assert [seg.entry_ids[0] for seg in p.segments if seg.kind == "tail"] == ["e08", "e09", "e11", "e12"]
    p = compact(s, ctx_for(summarizer=FakeSummarizer(), keep_previous_kept=True, keep_recent_tokens=3))
    assert [seg.entry_ids[0] for seg in p.segments if seg.kind == "tail"] == ["e12"]
    prov = p.summary_request
    assert (
        "[User]: run the tests" in prov.messages[0]["content"]
        and "SUMMARY-TWO\n</previous" in prov.messages[0]["content"]
    )


def test_nothing_to_do_right_after_a_compaction():
    """prepareCompaction returns undefined when the last entry is a compaction (compaction.ts:605-607)."""
    s = load(TWO)
    cut = [r for r in s.records if r.entry_id == "e10"][0].source_order + 1
    prov = FakeSummarizer()
    p = compact(s, ctx_for(summarizer=prov), cut=cut)
    assert prov.requests == [] and p.summary_request is None and p.notes["skipped"]
    assert [seg.kind for seg in p.segments][:5] == ["system", "tools", "header", "summary", "header"]
    assert [seg.entry_ids[0] for seg in p.segments if seg.kind == "tail"] == ["e08", "e09"]


# =========================================================================== room, fixtures, chains


def test_small_window_shrinks_the_kept_part_never_past_capacity():
    s = long_session(turns=12, size=8000)
    p = compact(s, ctx_for(window=16_000, output=4_096, summarizer=ExtractiveSummarizer()))
    assert p.tokens <= p.capacity and p.notes["keep_recent_used"] < pa.KEEP_RECENT_TOKENS
    big = compact(s, ctx_for(summarizer=ExtractiveSummarizer()))
    assert big.notes["keep_recent_used"] == pa.KEEP_RECENT_TOKENS and big.tokens <= big.capacity


def _real_sessions():
    out = []
    out.extend(load_sessions(LOCAL_FIXTURES))  # tests/fixtures, the real public sessions included
    return out


@pytest.fixture(scope="module")
def chain():
    return synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1))[0].session


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_096)])
def test_every_fixture_and_a_synthetic_chain_within_capacity(chain, window, output):
    sessions = _real_sessions() + [chain]
    assert len(sessions) > 1
    c = CompactionContext(window=window, output_ceiling=output, summarizer=ExtractiveSummarizer())
    for s in sessions:
        for cut in (len(s.records), len(s.records) // 2):
            p = strategies.compact(s, NAME, cut, c)
            assert p.tokens <= p.capacity or p.notes.get("skipped"), (s.id, cut)
            if p.summary_request is not None:
                assert p.summary_request.shape == "dedicated" and p.summary_request.tools == ()


def test_default_chain_keeps_about_twenty_thousand_estimated_tokens(chain):
    p = strategies.compact(chain, NAME, None, CompactionContext(summarizer=ExtractiveSummarizer()))
    e = pa.session_entries(chain, len(chain.records), CompactionContext())
    ids = [x.id for x in e]
    first = ids.index(p.notes["first_kept_entry_id"])
    assert {seg.entry_ids[0] for seg in p.segments if seg.kind == "tail"} <= set(ids[first:])
    # "approximately keepRecentTokens": less than it from the cut, at least it from the previous cut point
    prev_cp = max(i for i, x in enumerate(e[:first]) if x.kind in pa.CUT_KINDS)
    assert sum(map(pa.estimate_entry, e[first:])) < pa.KEEP_RECENT_TOKENS <= sum(map(pa.estimate_entry, e[prev_cp:]))
    assert p.tokens <= p.capacity


# --------------------------------------------------------------------------- hostile nesting (issue 25, item 14)


def test_arguments_nested_past_the_bound_are_kept_as_text():
    """Was: `RecursionError` from `json.loads` for ``"[" * 100000 + "]" * 100000``. Arguments nested up to
    `bounded_json.MAX_DEPTH` are parsed; deeper ones are the recorded text, a plain string."""
    from compaction_lab.core.bounded_json import MAX_DEPTH
    from compaction_lab.core.session import Record
    from tests.deep_json import HOSTILE_DEPTH, deep_array

    def parts(args: str):
        return pa.tool_call_parts(Record("s", "e", 0, 0, "tool_call", f"bash {args}", tool="bash"))

    assert parts(deep_array(MAX_DEPTH)) == ("bash", json.loads(deep_array(MAX_DEPTH)))
    for depth in (MAX_DEPTH + 1, HOSTILE_DEPTH):
        assert parts(deep_array(depth)) == ("bash", deep_array(depth))
