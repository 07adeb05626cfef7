"""Codex with no answer text (issue 46 item 4): the summary holds the live history's last assistant message.

Upstream @ e06dd0e5 (docs/strategies.md, "codex: upstream pins"): compact.rs `drain_to_completed` records every output
item of the compaction turn into the session history; `run_compact_task_inner` then takes
`get_last_assistant_message_from_turn(history_items).unwrap_or_default()` of the *whole* history (codex.rs:
newest to oldest, the first assistant message with an output text, whatever that text is). With no assistant
message in the compaction turn the scan reaches the reply before it. docs/strategies.md#codex.
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.strategies.arms import codex
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import FakeSummarizer, make_session

SHAPE = CallShape("t", "You are the test agent.", ({"type": "function", "function": {"name": "bash"}},))
PREFIX = codex.SUMMARY_PREFIX
S1 = "Another language model started to solve this problem and wrote:\nS1"


def run(session: Session, answer: str = "", cut: int | None = None, **params) -> tuple:
    prov = FakeSummarizer(answer)
    p = strategies.compact(session, "codex", cut, CompactionContext(shape=SHAPE, summarizer=prov, params=params))
    return p, prov


def summary(p):
    (seg,) = [s for s in p.segments if s.kind == "summary"]
    return seg


TURN = [
    ("system", "You are the test agent."),  # e0
    ("user", "fix the build"),  # e1
    ("assistant", "OLDER-REPLY: looking at the Makefile"),  # e2
    ("user", "and the docs?"),  # e3
    ("assistant", "PREVIOUS-REPLY: the build is green, docs next"),  # e4
    ("reasoning", "THINKING about the docs"),  # e5
    ("tool_call", "bash make docs", {"tool": "bash", "call_id": "c1"}),  # e6
    ("tool_output", "docs built", {"tool": "bash", "call_id": "c1"}),  # e7
]


def test_no_answer_text_gives_the_previous_reply():
    """Reasoning and tool traffic after it are not messages: the last assistant message is e4's."""
    p, _ = run(make_session(TURN))
    seg = summary(p)
    assert seg.text == PREFIX + "\nPREVIOUS-REPLY: the build is green, docs next"
    assert seg.role == "user" and seg.entry_ids == ("e4",)
    assert seg.label == codex.PREVIOUS_REPLY_LABEL == "summary (previous reply: no answer)"
    assert p.notes["summary_suffix"] == "previous_reply" and p.notes["summary_suffix_entry"] == "e4"
    assert p.notes["no_answer"] == "previous_reply"
    assert not p.receipt.fallback and "compaction_failed" not in p.notes
    assert "OLDER-REPLY" not in p.text()


def test_the_previous_reply_is_the_last_one_before_the_cut():
    p, _ = run(make_session(TURN), cut=4)  # e4 not yet written
    seg = summary(p)
    assert seg.text == PREFIX + "\nOLDER-REPLY: looking at the Makefile" and seg.entry_ids == ("e2",)


def test_no_assistant_message_anywhere_gives_the_prefix_alone():
    s = make_session([("user", "fix the build"), ("reasoning", "THINKING"), ("tool_call", "bash ls", {"call_id": "c"})])
    p, _ = run(s)
    seg = summary(p)
    assert seg.text == PREFIX + "\n" and seg.entry_ids == ()
    assert seg.label == codex.NO_ANSWER_LABEL == "summary (no answer)"
    assert p.notes["summary_suffix"] == "empty" and p.notes["summary_suffix_entry"] is None
    assert codex.NO_SUMMARY not in p.text()


def test_what_if_empty_keeps_the_prefix_alone():
    p, _ = run(make_session(TURN), no_answer="empty")
    seg = summary(p)
    assert seg.text == PREFIX + "\n" and seg.label == "summary (no answer)" and seg.entry_ids == ()
    assert p.notes["no_answer"] == "empty" and p.notes["summary_suffix"] == "empty"
    assert "PREVIOUS-REPLY" not in p.text()


@pytest.mark.parametrize("answer", ["   ", "\n"])
def test_blank_answer_text_stops_the_scan(answer):
    """An assistant message with blank text is an output text: the scan stops at it (no previous reply)."""
    p, _ = run(make_session(TURN), answer)
    seg = summary(p)
    assert seg.text == PREFIX + "\n" + answer and seg.label == "summary (empty answer)" and seg.entry_ids == ()
    assert p.notes["summary_suffix"] == "answer"


def test_an_answer_is_never_replaced():
    p, _ = run(make_session(TURN), "did the docs")
    assert summary(p).text == PREFIX + "\ndid the docs" and p.notes["summary_suffix"] == "answer"
    assert "PREVIOUS-REPLY" not in p.text()


def test_unknown_no_answer_value_is_refused_before_any_work():
    prov = FakeSummarizer("S")
    ctx = CompactionContext(shape=SHAPE, summarizer=prov, params={"no_answer": "intent"})
    with pytest.raises(ValueError, match=r"^codex no_answer 'intent': expected one of previous_reply, empty$"):
        strategies.compact(make_session(TURN), "codex", None, ctx)
    assert prov.requests == []


def _codex(items: list[tuple], replacement: list[dict]) -> Session:
    s = make_session(items, source_format="codex")
    bound = {"entry_id": "e3", "source_order": 3, "replacement_history": replacement}
    return Session(s.id, s.source_format, s.records, metadata={"compactions": [bound]})


def _msg(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "text": text, "injected": False}


ROLLOUT = [
    ("system", "You are the test agent."),  # e0
    ("user", "fix the build"),  # e1
    ("assistant", "REPLACED-REPLY: before the compaction"),  # e2
    ("summary", S1),  # e3 compacted, replacement history below
    ("user", "and the docs?"),  # e4
    ("reasoning", "THINKING"),  # e5
    ("assistant", "AFTER-REPLY: docs next"),  # e6
]


def test_the_scan_reads_the_live_history_not_the_journal():
    """The compaction replaced the history: e2's reply is no longer in it (rollout_reconstruction.rs)."""
    s = _codex(ROLLOUT, [_msg("user", "fix the build"), _msg("user", S1)])
    p, _ = run(s, cut=6)
    assert summary(p).text == PREFIX + "\n" and summary(p).label == "summary (no answer)"
    p, _ = run(s)
    assert summary(p).text == PREFIX + "\nAFTER-REPLY: docs next" and summary(p).entry_ids == ("e6",)


def test_an_assistant_message_of_the_replacement_history_counts():
    """A remote compaction's replacement history may keep assistant messages (compact.rs
    `should_keep_compacted_history_item` keeps all but developer and contextual user items)."""
    s = _codex(ROLLOUT, [_msg("user", "fix the build"), _msg("assistant", "KEPT-REPLY"), _msg("user", S1)])
    p, _ = run(s, cut=6)
    assert summary(p).text == PREFIX + "\nKEPT-REPLY" and summary(p).entry_ids == ("e3",)
