"""Claude Code (reconstructed) on a failed summary call (issue 46): upstream does not compact.

Source [M] (Jayleonc/claude-code-source-code @ 83fba929, the TypeScript of npm 2.1.88): the fork failing (an
API error, a synthetic ``isApiErrorMessage``) falls back to a streaming request (src/services/compact/compact.ts:
1201-1247); its API error comes back as an "API Error..." assistant message that ``compactConversation`` throws
(compact.ts:507-515; src/services/api/claude.ts:2743-2806), or no response comes and it throws (compact.ts:
1359-1392); ``autoCompactIfNeeded`` catches it, ``wasCompacted: false`` (src/services/compact/autoCompact.ts:334-349),
and the turn goes on with its messages as they were (src/query.ts:454-549). Before issue 46 the arm compacted
around the empty template; that is now the what-if ``on_failure: placeholder``. The tests of a failed call and
of the parameter's check fail on the code before this change; the placeholder, answer and no-room tests pin
what it keeps.
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.core.shapes import CallShape
from compaction_lab.cost import model as cost
from compaction_lab.strategies.arms import claude_code
from compaction_lab.strategies.base import CompactionContext, compacted
from compaction_lab.summarize import NoSummarizer, SummaryUnavailable
from compaction_lab.summarize.extractive import empty_template
from tests.helpers import FakeSummarizer, make_session

NAME = "claude-code"
SHAPE = CallShape("test", "You are a test agent.", ({"type": "function", "function": {"name": "read_file"}},))


def ctx_for(summarizer=None, window=128_000, output=32_000, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
    )


def tool(kind: str, text: str, cid: str, name: str = "read_file") -> tuple:
    return (kind, text, {"tool": name, "call_id": cid, "target": "src/p.py"})


#: (kind, text) of a session; its next request without compaction is every item but the system prompt's and meta.
ITEMS = [
    ("system", SHAPE.system_prompt),
    ("user", "fix the parser in src/p.py"),
    ("assistant", "reading it"),
    tool("tool_call", 'read_file {"path": "src/p.py"}', "c1"),
    tool("tool_output", "def parse(s):\n    return s.split(',')", "c1"),
    ("meta", "bookkeeping the model never sees"),
    ("assistant", "found it: no strip"),
    ("user", "now run the tests"),
    tool("tool_call", 'bash {"command": "pytest"}', "c2", "bash"),
    tool("tool_output", "3 passed", "c2", "bash"),
    ("assistant", "LAST WORDS: all green"),
]
#: What the agent's next request carries after the system prompt and tools, written out by hand.
EXPECTED = [
    ("user", "fix the parser in src/p.py"),
    ("assistant", "reading it"),
    ("assistant", 'read_file {"path": "src/p.py"}'),
    ("tool", "def parse(s):\n    return s.split(',')"),
    ("assistant", "found it: no strip"),
    ("user", "now run the tests"),
    ("assistant", 'bash {"command": "pytest"}'),
    ("tool", "3 passed"),
    ("assistant", "LAST WORDS: all green"),
]
FAILURES = [
    (NoSummarizer(), "no summarizer configured (summarizer 'none')"),
    (FakeSummarizer(error=RuntimeError("503 overloaded")), "RuntimeError: 503 overloaded"),
    (FakeSummarizer(error=SummaryUnavailable("endpoint down")), "endpoint down"),
]


def sent(p) -> list[tuple[str, str]]:
    """(role, text) of every segment after the system prompt and the tools."""
    assert [s.kind for s in p.segments[:2]] == ["system", "tools"]
    return [(s.role, s.text) for s in p.segments[2:]]


@pytest.mark.parametrize(("summarizer", "error"), FAILURES, ids=["none", "raises", "unavailable"])
def test_a_failed_call_leaves_the_history_unchanged(summarizer, error):
    sess = make_session(ITEMS)
    p = strategies.compact(sess, NAME, ctx=ctx_for(summarizer))
    assert sent(p) == EXPECTED and {s.kind for s in p.segments[2:]} == {"tail"}
    assert p.notes["compaction_failed"] == error == p.receipt.error and not compacted(p, sess)
    assert claude_code.SUMMARY_PREFACE not in p.text() and not p.notes["reattached_files"]
    # the request was asked for (kept, as the verify manifest and the exam read it), nothing came back
    assert p.receipt.fallback and p.summary_request is not None
    assert [r.request for r in p.requests_sent()] == [p.summary_request]
    assert p.notes["tokens"] == p.tokens and p.notes["fits"]


def test_the_history_unchanged_is_the_request_the_session_would_send_and_nothing_is_billed():
    """The cost model prices the projection as the uncompacted request, and no compaction request."""
    sess = make_session(ITEMS)
    cut = len(sess.records)
    p = strategies.compact(sess, NAME, ctx=ctx_for(FakeSummarizer(error=RuntimeError("boom"))))
    bills = cost.simulate_case(sess, cut, p, SHAPE, "anthropic", cost.CostAssumptions(turns=1, simulated_turns=1))
    assert bills.projection_request_tokens == bills.uncompacted_request_tokens
    assert bills.compaction_cold == cost.Bill() and bills.compaction_cached == cost.Bill()


def test_a_failed_call_at_a_cut_after_a_recorded_summary():
    """The live history starts at the latest recorded summary and ends at the cut (compact.ts buildPostCompactMessages)."""
    items = [("user", "old request"), ("assistant", "old answer"), ("summary", "EARLIER SUMMARY"), *ITEMS[1:]]
    sess = make_session(items)
    cut = 3 + ITEMS.index(("user", "now run the tests")) - 1  # the records before the second user message
    p = strategies.compact(sess, NAME, cut=cut, ctx=ctx_for())
    assert sent(p) == [("user", "EARLIER SUMMARY"), *EXPECTED[:5]]
    assert p.notes["compaction_failed"] and "old answer" not in p.text()


def test_microcompacted_results_go_out_cleared():
    """Microcompact runs before auto-compact (query.ts:419): the failed compaction leaves its clearing in place."""
    sess = make_session(ITEMS)
    p = strategies.compact(sess, NAME, ctx=ctx_for(microcompact_keep_recent=1))
    cleared = [s for s in p.segments if s.kind == "omitted_marker"]
    assert [s.text for s in cleared] == [claude_code.CLEARED_TOOL_RESULT]
    assert cleared[0].label == claude_code.MICROCOMPACT_LABEL and cleared[0].entry_ids == ("e4",)
    assert [t for _, t in sent(p)] == [
        claude_code.CLEARED_TOOL_RESULT if t.startswith("def parse") else t for _, t in EXPECTED
    ]


def test_placeholder_is_the_labs_older_template_projection():
    """``on_failure: placeholder``: the projection before issue 46 — the empty template as the summary."""
    sess = make_session(ITEMS)
    p = strategies.compact(
        sess, NAME, ctx=ctx_for(FakeSummarizer(error=RuntimeError("boom")), on_failure="placeholder")
    )
    answered = strategies.compact(sess, NAME, ctx=ctx_for(FakeSummarizer()))
    # the same next request as with an answer, the empty template in the summary's place
    assert [s.kind for s in p.segments] == [s.kind for s in answered.segments]
    assert [s.kind for s in p.segments[:5]] == ["system", "tools", "header", "summary", "continue"]
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.text == empty_template("claude-code-9") and summary.label == "empty template (no summary)"
    assert p.notes["reattached_files"] == answered.notes["reattached_files"] == ["src/p.py"]
    assert "compaction_failed" not in p.notes and compacted(p, sess) and not p.sent_requests
    assert p.receipt.fallback and p.receipt.error == "RuntimeError: boom" and p.receipt.text == summary.text
    assert "LAST WORDS" not in p.text()


def test_an_unknown_on_failure_is_refused_before_any_work():
    prov = FakeSummarizer()
    with pytest.raises(ValueError, match=r"^claude-code on_failure 'retry': expected one of upstream, placeholder$"):
        strategies.compact(make_session(ITEMS), NAME, ctx=ctx_for(prov, on_failure="retry"))
    assert prov.requests == []


def test_an_answer_is_unaffected_by_on_failure():
    sess = make_session(ITEMS)
    texts = {
        mode: strategies.compact(sess, NAME, ctx=ctx_for(FakeSummarizer(), on_failure=mode)).text()
        for mode in ("upstream", "placeholder")
    }
    assert texts["upstream"] == texts["placeholder"] and "SUMMARY TEXT" in texts["upstream"]


@pytest.mark.parametrize("mode", ["upstream", "placeholder"])
def test_no_room_under_the_ceiling_compacts_around_the_empty_template(mode):
    """Not a failure upstream: the fork sets no cap (compact.ts:1181-1200) and is sent. The lab's ceiling W - O
    leaves the summary no room (system prompt and tools fill it): nothing is asked, and the empty template that
    stands in is cut to the room left, none: the arm compacts around an empty summary, as before issue 46."""
    big = CallShape("test", "You are a test agent. " + "rule " * 3_000, ())
    sess = make_session([("system", big.system_prompt), *ITEMS[1:]])
    prov = FakeSummarizer()
    ctx = CompactionContext(window=4_000, output_ceiling=1_000, shape=big, summarizer=prov, params={"on_failure": mode})
    p = strategies.compact(sess, NAME, ctx=ctx)
    assert prov.requests == [] and p.summary_request.max_output_tokens == 0
    assert p.receipt.fallback and p.receipt.error == "no room left for a summary"
    assert "compaction_failed" not in p.notes and compacted(p, sess)
    assert [s.text for s in p.segments if s.kind == "summary"] == [""] and p.notes["summary_truncated"]
    assert [s.kind for s in p.segments[:5]] == ["system", "tools", "header", "summary", "continue"]
