"""Claude Code (reconstructed) on a summary answer with no text (issue 46).

Source [M] (Jayleonc/claude-code-source-code @ 83fba929, the TypeScript of npm 2.1.88):
``getAssistantMessageText`` trims the answer's text and gives null for ``""`` (src/utils/messages.ts:2843-2859);
``compactConversation`` then throws "Failed to generate conversation summary" (src/services/compact/compact.ts:
493-506) and ``autoCompactIfNeeded`` catches it and returns ``wasCompacted: false`` (autoCompact.ts:334-349): the
next request carries the history as it was. Before issue 46 the arm compacted around an empty summary.
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.strategies.arms import claude_code
from compaction_lab.strategies.base import compacted, history
from tests.helpers import FakeSummarizer
from tests.strategies.test_claude_code_strategy import ctx_for, session

NAME = "claude-code"


@pytest.mark.parametrize("answer", ["", "  \n\t "], ids=["empty", "blank"])
def test_no_summary_text_leaves_the_history_unchanged(answer):
    sess = session()
    summ = FakeSummarizer(text=answer, usage=(5000, 0, 700))
    p = strategies.compact(sess, NAME, cut=None, ctx=ctx_for(summarizer=summ))
    assert p.notes["compaction_failed"] == claude_code.NO_SUMMARY_TEXT and not compacted(p, sess)
    # system, tools, then every record of the live history as it was (the system-prompt record is the system)
    recs = claude_code.live_history(sess, len(sess.records), ctx_for())
    assert [s.kind for s in p.segments] == ["system", "tools"] + ["tail"] * len(recs)
    assert [s.text for s in p.segments[2:]] == [r.text for r in recs]
    assert not any(s.kind in ("summary", "continue") for s in p.segments)
    assert claude_code.SUMMARY_PREFACE not in p.text()
    # the request was sent and billed: the receipt is an answer (not a fallback), priced once
    assert not p.receipt.fallback and p.receipt.output_tokens == 700 and p.receipt.text == answer
    assert len(summ.requests) == 1 and [r.request for r in p.requests_sent()] == [p.summary_request]


def test_an_analysis_only_answer_is_a_summary_formatted_to_nothing():
    """Upstream tests the answer before formatting: ``<analysis>`` alone is text, so it compacts."""
    sess = session()
    answer = "<analysis>thinking only</analysis>"
    p = strategies.compact(sess, NAME, cut=None, ctx=ctx_for(summarizer=FakeSummarizer(text=answer)))
    assert not p.notes.get("compaction_failed") and compacted(p, sess)
    (summ,) = [s for s in p.segments if s.kind == "summary"]
    assert summ.text == "" and claude_code.SUMMARY_PREFACE in p.text()
    assert p.receipt.text == answer  # kept, so that a checkpoint replay formats it again to the same projection


def test_microcompacted_records_go_out_cleared():
    sess = session()
    ctx = ctx_for(summarizer=FakeSummarizer(text=""), microcompact_keep_recent=1)
    p = strategies.compact(sess, NAME, cut=None, ctx=ctx)
    cleared = [s for s in p.segments if s.kind == "omitted_marker"]
    assert cleared and all(s.text == claude_code.CLEARED_TOOL_RESULT for s in cleared)
    assert all(s.label == claude_code.MICROCOMPACT_LABEL and s.record_kind == "tool_output" for s in cleared)
    assert len(p.segments) - 2 == len(claude_code.live_history(sess, len(sess.records), ctx))


def test_a_failed_summary_uses_the_empty_template_under_placeholder():
    """A summarizer failure compacts around the empty template only under the what-if ``on_failure: placeholder``;
    the default keeps the history (tests/strategies/test_failure_claude_code.py)."""
    sess = session()
    p = strategies.compact(sess, NAME, cut=None, ctx=ctx_for(on_failure="placeholder"))
    assert p.receipt.fallback and not p.notes.get("compaction_failed")
    assert any(s.kind == "summary" for s in p.segments) and len(history(sess, None)) > 0


def test_a_checkpointed_empty_answer_replays_to_the_same_projection(tmp_path):
    """The empty answer is committed (it was billed); the replay reads it again as no text, asking nobody."""
    import dataclasses

    sess = session()
    summ = FakeSummarizer(text="")
    ctx = dataclasses.replace(ctx_for(summarizer=summ), checkpoints=str(tmp_path / "ck.sqlite"))
    first = strategies.compact(sess, NAME, cut=None, ctx=ctx)
    again = strategies.compact(sess, NAME, cut=None, ctx=ctx)
    assert len(summ.requests) == 1
    assert again.notes["compaction_failed"] == claude_code.NO_SUMMARY_TEXT and again.text() == first.text()
