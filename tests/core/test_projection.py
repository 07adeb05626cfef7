import pytest

from compaction_lab.core.projection import Projection, Segment, SummaryRequest, chat_messages


def _proj():
    segs = (
        Segment("system", "system", "SYS"),
        Segment("tools", "system", "[tools]"),
        Segment("user_original", "user", "do X", ("e1",), record_kind="user"),
        Segment("omitted_marker", "user", "[omitted e2]", ("e2",)),
        Segment("tail", "assistant", "ok", ("e3",), record_kind="assistant"),
        Segment("tail", "tool", "out", ("e4",), record_kind="tool_output"),
        Segment("tail", "tool", "out2", ("e5",), record_kind="tool_output"),
    )
    return Projection("s", "v-1", "sess", 6, segs, 1000, "tiktoken").finalize()


def test_segment_validation():
    with pytest.raises(ValueError, match="segment kind"):
        Segment("bogus", "user", "x")
    with pytest.raises(ValueError, match="role"):
        Segment("tail", "robot", "x")


def test_finalize_counts_every_segment():
    p = _proj()
    assert all(s.tokens > 0 for s in p.segments)
    assert p.tokens == sum(s.tokens for s in p.segments)


def test_messages_keep_message_boundaries_and_skip_tools():
    msgs = _proj().messages()
    # a kept user message and the marker standing for another entry are two messages (they were joined)
    assert [m["role"] for m in msgs] == ["system", "user", "user", "assistant", "tool", "tool"]
    assert [m["content"] for m in msgs[1:3]] == ["do X", "[omitted e2]"]
    assert all("[tools]" not in m["content"] for m in msgs)


def test_messages_codex_user_items_and_summary_stay_separate():
    """Codex sends each kept user message and the summary as separate user items: openai/codex @ e06dd0e5,
    codex-rs/core/src/compact.rs ``build_compacted_history_with_limit`` (one ``ResponseItem::Message`` per
    selected user message, then one for the summary); ported from its tests
    ``build_token_limited_compacted_history_truncates_overlong_user_messages`` (``history.len() == 2``: the
    truncated user message, then the summary) and ``build_token_limited_compacted_history_appends_summary_message``
    (the last item is the summary text alone)."""
    segs = (
        Segment("system", "system", "BASE"),
        Segment("tools", "system", "[]"),
        Segment("user_original", "user", "first user message", ("u1",), record_kind="user"),
        Segment("user_original", "user", "second user message", ("u2",), record_kind="user"),
        Segment("summary", "user", "summary text", ("u1", "a1", "u2", "a2")),
    )
    msgs = Projection("codex", "codex-x", "s", 5, segs, 1000, "bytes/4").messages()
    assert msgs[1:] == [
        {"role": "user", "content": "first user message"},
        {"role": "user", "content": "second user message"},
        {"role": "user", "content": "summary text"},
    ]
    one = Projection("codex", "codex-x", "s", 5, (segs[0], segs[2], segs[4]), 1000, "bytes/4").messages()
    assert len(one) == 3 and one[-1] == {"role": "user", "content": "summary text"}


def test_messages_join_blocks_of_one_entry_only():
    """Blocks of one source entry (an assistant message's reasoning, prose and tool calls) are one message;
    consecutive records of the same role from distinct entries stay distinct (SWE-agent sends one message
    per history item: the-complexity-trap @ 1b07decf4ca4, sweagent/agent/models.py:1402-1435)."""
    segs = (
        Segment("tail", "assistant", "thinking", ("a1",), record_kind="reasoning"),
        Segment("tail", "assistant", "I will run ls", ("a1",), record_kind="assistant"),
        Segment("tail", "assistant", "bash ls", ("a1",), record_kind="tool_call"),
        Segment("tail", "tool", "out 1", ("r1",), record_kind="tool_output"),
        Segment("tail", "tool", "out 2", ("r1",), record_kind="tool_output"),  # one entry, two results
        Segment("tail", "assistant", "next message", ("a2",), record_kind="assistant"),
        Segment("omitted_marker", "assistant", "[demoted a3]", ("a3",), record_kind="assistant"),
        Segment("tail", "assistant", "bash cat", ("a3",), record_kind="tool_call"),
    )
    msgs = Projection("s", "v-1", "sess", 9, segs, 1000, "tiktoken").messages()
    assert [(m["role"], m["content"]) for m in msgs] == [
        ("assistant", "thinking\n\nI will run ls\n\nbash ls"),
        ("tool", "out 1"),
        ("tool", "out 2"),  # one message per tool result, as before
        ("assistant", "next message"),
        ("assistant", "[demoted a3]\n\nbash cat"),
    ]


def test_messages_strategy_keys_join_authored_segments():
    """A strategy that sends several segments as one message gives them one `Segment.message` key; authored
    segments without a key are messages of their own; system segments form one system message."""
    segs = (
        Segment("system", "system", "SYS"),
        Segment("system", "system", "more system", ("s0",), record_kind="system"),
        Segment("header", "user", "HEADER", message="handoff"),
        Segment("summary", "user", "SUMMARY", ("e1", "e2"), message="handoff"),
        Segment("continue", "user", "CONTINUE", message="handoff"),
        Segment("header", "user", "another header"),
        Segment("continue", "user", "another continue"),
        Segment("tail", "user", "typed", ("e3",), record_kind="user", message="handoff"),  # key, not entry
    )
    p = Projection("s", "v-1", "sess", 4, segs, 1000, "tiktoken")
    assert p.messages() == [
        {"role": "system", "content": "SYS\n\nmore system"},
        {"role": "user", "content": "HEADER\n\nSUMMARY\n\nCONTINUE"},
        {"role": "user", "content": "another header"},
        {"role": "user", "content": "another continue"},
        {"role": "user", "content": "typed"},  # not consecutive with the keyed run
    ]
    assert [s.message_key() for s in segs[1:3]] == ["entry:s0", "handoff"] and segs[5].message_key() == ""


def test_chat_messages_applies_the_rule_to_records():
    parts = [
        ("user", "a", "entry:e1"),
        ("user", "b", "entry:e2"),
        ("assistant", "c", "entry:e3"),
        ("assistant", "d", "entry:e3"),
        ("tool", "e", "entry:e4"),
        ("tool", "f", "entry:e4"),
    ]
    assert [m["content"] for m in chat_messages(parts)] == ["a", "b", "c\n\nd", "e", "f"]
    assert chat_messages([("user", "x", ""), ("user", "y", "")]) == [
        {"role": "user", "content": "x"},
        {"role": "user", "content": "y"},
    ]


def test_text_rows_and_json():
    p = _proj()
    assert p.text().startswith("SYS") and "out2" in p.text()
    rows = p.to_rows("case-1")
    assert [r["position"] for r in rows] == list(range(7)) and rows[3]["entry_ids"] == ["e2"]
    j = p.to_json(include_text=False)
    assert j["tokens"] == p.tokens and "text" not in j["segments"][0] and j["summary_request"] is None
    assert p.entry_ids() == {"e1", "e2", "e3", "e4", "e5"}


def test_summary_request_fingerprints():
    a = SummaryRequest("s", "dedicated", "SYS", (), ({"role": "user", "content": "x"},), "t", 100)
    b = SummaryRequest("s", "dedicated", "SYS", (), ({"role": "user", "content": "y"},), "t", 100)
    c = SummaryRequest("s", "dedicated", "SYS2", (), ({"role": "user", "content": "x"},), "t", 100)
    assert a.fingerprint() != b.fingerprint() and a.shape_fingerprint() == b.shape_fingerprint()
    assert a.shape_fingerprint() != c.shape_fingerprint()
    body = a.to_openai()
    assert body["messages"][0] == {"role": "system", "content": "SYS"} and "tools" not in body


def test_full_projection_keeps_the_sessions_message_boundaries():
    """Issue #13 item 8: on a strategy's projection, two consecutive user entries stay two messages (they
    were merged into one) and the blocks of one assistant entry stay one message."""
    from compaction_lab import strategies
    from compaction_lab.core.session import Record, Session
    from compaction_lab.strategies.base import CompactionContext
    from compaction_lab.summarize import NoSummarizer

    rows = [
        ("u1", 0, "user", "first request"),
        ("u2", 0, "user", "and a follow-up"),
        ("a1", 0, "assistant", "I will look"),
        ("a1", 1, "tool_call", "bash ls"),
        ("r1", 0, "tool_output", "file.txt"),
    ]
    recs = tuple(
        Record("s", eid, blk, i, kind, text, call_id="c1" if kind.startswith("tool") else None)
        for i, (eid, blk, kind, text) in enumerate(rows)
    )
    sess = Session(id="s", source_format="test", records=recs)
    ctx = CompactionContext(window=100_000, output_ceiling=10_000, summarizer=NoSummarizer())
    msgs = strategies.compact(sess, "full", ctx=ctx).messages()
    assert [(m["role"], m["content"]) for m in msgs[1:]] == [
        ("user", "first request"),
        ("user", "and a follow-up"),
        ("assistant", "I will look\n\nbash ls"),
        ("tool", "file.txt"),
    ]


def test_a_projection_stored_before_the_summarizer_rename_reads_back():
    """Projections stored when the receipt said ``provider`` read back with ``summarizer``; today's write it."""
    from compaction_lab.core.projection import Projection, SummaryReceipt, projection_from_json

    receipt = SummaryReceipt("extractive", True, "the summary", "fp")
    p = Projection("s", "v1", "sess", 3, (), 100, "tiktoken", None, receipt, {})
    stored = p.to_json()
    assert stored["receipt"]["summarizer"] == "extractive" and "provider" not in stored["receipt"]
    old = {**stored, "receipt": {("provider" if k == "summarizer" else k): v for k, v in stored["receipt"].items()}}
    assert projection_from_json(old).receipt == receipt == projection_from_json(stored).receipt
