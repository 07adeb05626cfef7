"""``claude-code``: what the pinned code does with the summary's output cap and in microcompact (issue 46).

Source [M] (docs/strategies.md, "claude_code: sources (reconstructed)"): the TypeScript of npm
``@anthropic-ai/claude-code`` 2.1.88 as copied in Jayleonc/claude-code-source-code @ 83fba929.
Each test cites the file:line it pins; each fails on the code before issue 46 (a fork asking for
20,000 tokens whatever O; microcompact clearing MCP and MultiEdit results, lower-casing names,
counting results rather than calls and keeping none at ``keep_recent`` 0).
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.strategies.arms import claude_code as cc
from compaction_lab.strategies.base import CompactionContext
from compaction_lab.summarize import NoSummarizer
from tests.helpers import FakeSummarizer, make_session

SHAPE = CallShape("test", "You are a test agent.", ())
CLEARED = cc.CLEARED_TOOL_RESULT


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
    )


def chat(n_turns: int, words: int = 50):
    items = [("system", SHAPE.system_prompt)]
    for i in range(n_turns):
        items += [("user", f"u{i}:" + " word" * words), ("assistant", f"a{i}:" + " word" * words)]
    return make_session(items)


def request(sess, ctx):
    prov = ctx.summarizer
    p = strategies.compact(sess, "claude-code", ctx=ctx)
    (req,) = prov.requests
    return p, req


def fork_tokens(sess) -> int:
    """The fork's input as the arm counts it: system, tools, every record's text, the instruction."""
    cnt = counter(DEFAULT_ENCODING)
    texts = [r.text for r in sess.records if r.text != SHAPE.system_prompt]
    return sum(cnt.count(t) for t in [SHAPE.system_prompt, SHAPE.tools_text(), *texts, cc.NINE_SECTION_INSTRUCTION])


def call(tool: str, cid: str, out: str) -> list[tuple]:
    extra = {"tool": tool, "call_id": cid}
    return [("tool_call", f"{tool} {{}}", extra), ("tool_output", out, extra)]


def outputs(records) -> list[str]:
    return [r.text for r in records if r.kind == "tool_output"]


# =========================================================================== the summary request's output cap


def test_fork_asks_for_at_most_the_models_output_limit():
    """compact.ts:1181-1200 [M]: the fork sets no maxOutputTokens, so claude.ts:1591-1594 sends the
    model's own limit (getMaxOutputTokensForModel). At O = 8,192 the request asks for at most 8,192
    (before issue 46: 20,000)."""
    p, req = request(chat(4), ctx_for(output=8_192, summarizer=FakeSummarizer()))
    assert req.max_output_tokens == 8_192
    assert p.notes["summary_cap"] == 8_192
    _, big = request(chat(4), ctx_for(window=200_000, output=64_000, summarizer=FakeSummarizer()))
    assert big.max_output_tokens == 64_000  # not capped at the streaming fallback's 20,000


def test_summary_tokens_only_lowers_the_cap():
    """``summary_tokens`` is a what-if override that can lower O, never raise it."""
    _, low = request(chat(4), ctx_for(output=8_192, summarizer=FakeSummarizer(), summary_tokens=4_000))
    assert low.max_output_tokens == 4_000
    _, high = request(chat(4), ctx_for(output=8_192, summarizer=FakeSummarizer(), summary_tokens=50_000))
    assert high.max_output_tokens == 8_192


@pytest.mark.parametrize("bad", [-5, 0, "lots", True])
def test_bad_summary_tokens_is_a_one_line_error(bad):
    prov = FakeSummarizer()
    with pytest.raises(ValueError, match=r"^claude-code summary_tokens .*positive integer[^\n]*$"):
        strategies.compact(chat(2), "claude-code", ctx=ctx_for(summarizer=prov, summary_tokens=bad))
    assert prov.requests == []  # raised before any work


def test_fork_cap_is_the_room_its_input_leaves_in_the_window():
    """The answer stops at the window's end: a fork whose input leaves less than O in the window asks
    for that room (withRetry.ts:388-416 [M] lowers max_tokens to the room on an overflow)."""
    sess = chat(60, words=100)  # about 12,000 tokens of history
    ctx = ctx_for(window=16_000, output=8_000, summarizer=FakeSummarizer())
    p, req = request(sess, ctx)
    fork = fork_tokens(sess)
    assert 8_000 < fork < 16_000
    assert req.max_output_tokens == 16_000 - fork < 8_000
    assert p.notes["fork_tokens"] == fork


def test_fork_cap_counts_the_input_in_model_tokens():
    """The room is the window less the input in the model's tokens (the session's calibration)."""
    sess = chat(60, words=100)
    arm = strategies.get("claude-code")
    cut = len(sess.records)
    plain = arm.compact(sess, cut, ctx_for(window=16_000, output=8_000, summarizer=FakeSummarizer()))
    fork = fork_tokens(sess)
    assert plain.summary_request.max_output_tokens == 16_000 - fork
    calibrated = CompactionContext(
        window=16_000, output_ceiling=8_000, shape=SHAPE, summarizer=FakeSummarizer(), calibration=1.1
    )
    p = arm.compact(sess, cut, calibrated)
    assert p.summary_request.max_output_tokens == 16_000 - round(fork * 1.1)


def test_fork_past_the_window_keeps_the_output_limit():
    """A forced cut past the window sends the fork whole (``ptl_retry`` off, docs/strategies.md#claude_code):
    its cap stays O (bounded by the room after compaction), never 0 or negative."""
    sess = chat(60, words=100)
    _, req = request(sess, ctx_for(window=10_000, output=1_000, summarizer=FakeSummarizer()))
    assert fork_tokens(sess) > 10_000
    assert req.max_output_tokens == 1_000


def test_trigger_keeps_upstreams_reserve():
    """autoCompact.ts:30-37, :72-76 [M]: the trigger reserves min(O, 20,000) — unchanged by the request's cap."""
    s, ctx = strategies.get("claude-code"), ctx_for(200_000, 8_192)
    threshold = 200_000 - 8_192 - 13_000
    assert s.fires(threshold, ctx) and not s.fires(threshold - 1, ctx)


# =========================================================================== microcompact


def test_compactable_tools_are_upstreams_exact_set():
    """microCompact.ts:41-50 [M]: Read, Bash, PowerShell, Grep, Glob, WebSearch, WebFetch, Edit, Write —
    compared with Set.has (:234), so exactly these names; MultiEdit, NotebookEdit and MCP tools are not."""
    assert cc.COMPACTABLE_TOOLS == {
        "Read",
        "Bash",
        "PowerShell",
        "Grep",
        "Glob",
        "WebSearch",
        "WebFetch",
        "Edit",
        "Write",
    }
    for tool in ("Read", "PowerShell", "WebFetch", "Write"):
        assert cc.is_compactable(tool)
    for tool in ("MultiEdit", "multiedit", "NotebookEdit", "mcp__gh__issue", "mcp__fs__read", "Task", "READ", None):
        assert not cc.is_compactable(tool), tool


def test_mcp_and_multiedit_results_are_not_cleared():
    """microCompact.ts:41-50 [M]: an MCP tool's or MultiEdit's result stays (before issue 46: cleared)."""
    recs = make_session(
        [
            *call("mcp__gh__issue", "m", "issue body"),
            *call("MultiEdit", "e", "edited"),
            *call("PowerShell", "p", "ps output"),
            *call("Read", "r", "file body"),
            *call("Bash", "b", "newest listing"),
        ]
    ).records
    kept, n = cc.microcompact(list(recs), 1)
    assert outputs(kept) == ["issue body", "edited", CLEARED, CLEARED, "newest listing"] and n == 2


def test_keep_recent_zero_keeps_the_newest():
    """microCompact.ts:461 [M]: ``Math.max(1, config.keepRecent)`` — 0 (or less) keeps the newest one."""
    items = [*call("Read", "1", "one"), *call("Bash", "2", "two"), *call("Grep", "3", "three")]
    recs = make_session(items).records
    for keep in (0, -4):
        kept, n = cc.microcompact(list(recs), keep)
        assert outputs(kept) == [CLEARED, CLEARED, "three"] and n == 2
    p = strategies.compact(
        make_session([("user", "go"), *items]), "claude-code", ctx=ctx_for(microcompact_keep_recent=0)
    )
    assert p.notes["microcompact_cleared"] == 2


def test_keep_recent_counts_calls_not_results():
    """microCompact.ts:226-241, :456-463 [M]: the kept set is the newest compactable *tool_use ids*; a call
    whose result is not in yet takes a place, so the result before it is cleared."""
    recs = make_session(
        [
            *call("Read", "1", "one"),
            *call("Bash", "2", "two"),
            ("tool_call", "Grep {}", {"tool": "Grep", "call_id": "3"}),
        ]
    ).records
    kept, n = cc.microcompact(list(recs), 1)
    assert outputs(kept) == [CLEARED, CLEARED] and n == 2


def test_a_result_already_cleared_is_not_cleared_again():
    """microCompact.ts:475-485, :494-496 [M]: a result already cleared is left as it is; when nothing
    else is to clear (nothing saved) the messages are returned unchanged and nothing counts."""
    recs = make_session([*call("Read", "1", CLEARED), *call("Bash", "2", "two")]).records
    kept, n = cc.microcompact(list(recs), 1)
    assert outputs(kept) == [CLEARED, "two"] and n == 0


def test_nothing_saved_means_nothing_cleared():
    """microCompact.ts:494-496 [M]: tokensSaved (roughTokenCountEstimation, Math.round(length / 4)) of 0
    returns null — results too short to save a token stay."""
    recs = make_session([*call("Read", "1", "a"), *call("Bash", "2", ""), *call("Grep", "3", "newest")]).records
    kept, n = cc.microcompact(list(recs), 1)
    assert outputs(kept) == ["a", "", "newest"] and n == 0
    recs = make_session([*call("Read", "1", "ab"), *call("Bash", "2", ""), *call("Grep", "3", "newest")]).records
    kept, n = cc.microcompact(list(recs), 1)
    assert outputs(kept) == [CLEARED, CLEARED, "newest"] and n == 2


def test_foreign_agents_names_for_the_same_tools_count():
    """A session from another agent (pi's ``read``, Codex's ``shell``, the bank's ``read_file``) is read
    as the Claude Code tool of the same job, as re-attachment reads it."""
    recs = make_session(
        [*call("read_file", "1", "one"), *call("shell", "2", "two"), *call("bash", "3", "three")]
    ).records
    kept, n = cc.microcompact(list(recs), 1)
    assert outputs(kept) == [CLEARED, CLEARED, "three"] and n == 2


@pytest.mark.parametrize("bad", ["3", 2.5, True])
def test_bad_keep_recent_is_a_one_line_error(bad):
    with pytest.raises(ValueError, match=r"^claude-code microcompact_keep_recent [^\n]*$"):
        strategies.compact(chat(2), "claude-code", ctx=ctx_for(microcompact_keep_recent=bad))
