"""A pi session compacted twice, read by every agent arm (issue 13 item 2, acceptance 3).

`tests/fixtures/pi/two-compactions.jsonl` is hand-built in pi's format: two `compaction`
entries, each with its summary and `firstKeptEntryId` (the first entry pi kept verbatim).
No arm is pi's own (pi's arm is a later issue), so each treats pi's latest recorded
compaction as its own agent's summary message -- the rule every strategy documents:

* claude-code: the conversation restarts at the summary (no kept tail);
* opencode: the latest summary is the prior summary, after the conversation, and the
  conversation starts at the recorded kept tail (pi's `firstKeptEntryId`);
* codex: the summary is rebuilt as Codex's own (its summary prefix), after the real user
  messages, as upstream rebuilds a compacted history without a replacement history.

The expected requests are written out by hand.
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.ingest import load_sessions
from compaction_lab.strategies.arms import codex
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import FIXTURES, FakeSummarizer

FIXTURE = FIXTURES / "pi" / "two-compactions.jsonl"


@pytest.fixture(scope="module")
def session():
    (s,) = load_sessions(FIXTURE)
    assert s.source_format == "pi" and len(s.metadata["compactions"]) == 2
    return s


def request(session, name):
    prov = FakeSummarizer()
    strategies.compact(session, name, None, CompactionContext(window=128_000, output_ceiling=32_000, summarizer=prov))
    (req,) = prov.requests
    return [(m["role"], m["content"]) for m in req.messages[:-1]], req.messages[-1]["content"]


def test_claude_code_forks_from_the_latest_summary(session):
    msgs, _ = request(session, "claude-code")
    assert msgs == [("user", "SUMMARY-TWO"), ("user", "ship it"), ("assistant", "shipped v1.4.2")]


def test_opencode_keeps_the_recorded_tail_and_puts_the_summary_after_the_conversation(session):
    msgs, text = request(session, "opencode")  # one user message: the transcript, then the instruction
    assert msgs == []
    conversation = text.split("<conversation>\n", 1)[1].split("\n</conversation>", 1)[0]
    assert conversation == (
        "[User]: run the tests\n\n[Assistant]: tests pass: 42 passed\n\n[User]: ship it\n\n[Assistant]: shipped v1.4.2"
    )
    prior = text.split("<prior-summary>\n", 1)[1].split("\n</prior-summary>", 1)[0]
    assert prior == "SUMMARY-TWO" and text.index("</conversation>") < text.index("<prior-summary>")
    assert "SUMMARY-ONE" not in text and "ORD-58213" not in text


def test_codex_rebuilds_the_summary_as_its_own(session):
    msgs, instruction = request(session, "codex")
    assert msgs == [
        ("user", "add retries to billing/client.py"),
        ("user", "keep ORD-58213 in the export"),
        ("user", "now add a CSV export"),
        ("user", "run the tests"),
        ("user", codex.SUMMARY_PREFIX + "\nSUMMARY-TWO"),
        ("user", "ship it"),
        ("assistant", "shipped v1.4.2"),
    ]
    assert "SUMMARY-ONE" not in instruction


def test_every_strategy_compacts_a_session_compacted_twice(session):
    """The arms that are no agent (FutureOS, the baselines) read the whole journal: both recorded summaries
    stay in what `full` sends, and every registered strategy projects the session within its capacity."""
    ctx = CompactionContext(window=128_000, output_ceiling=32_000)
    for name in strategies.names():
        p = strategies.compact(session, name, None, ctx)
        assert p.tokens <= p.capacity, name
    sent = " ".join(m["content"] for m in strategies.compact(session, "full", None, ctx).messages())
    assert "SUMMARY-ONE" in sent and "SUMMARY-TWO" in sent
