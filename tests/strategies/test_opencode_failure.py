"""OpenCode on a failed or empty summary (issue 46 items 2 and 5): what the pinned code sends next.

Upstream (sst/opencode, both pins; docs/strategies.md "opencode: upstream pins"): ``processCompaction`` persists
the compaction part's ``tail_start_id`` even when the summary turn failed (compaction.ts :461-466
@3df4a25, after the refused-request return :450-459; ``persistDiagnostics`` :572-616, the write
:605-611, called on both failure paths :676 and :680 @31e22f65), and ``filterCompacted``'s reorder
checks only ``summary`` (anomalyco/opencode#42282), so the next request is the compaction message and
the retained tail; ``toModelMessages`` drops the errored summary. ``on_failure: intent`` keeps the
history unchanged. An empty answer is a completed compaction with an empty summary.
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.core.session import Session
from compaction_lab.strategies.arms import opencode as oc
from compaction_lab.strategies.base import COMPACTION_FAILED, compacted, record_messages
from compaction_lab.summarize import NoSummarizer
from tests.helpers import make_session
from tests.strategies.test_opencode_strategy import (
    SHAPE,
    TURNS,
    BrokenProvider,
    FixedProvider,
    build,
    est,
    run,
    toks,
    two_compactions,
)

VERSIONS = ["1.18", "main"]


def kinds_and_texts(p) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in p.segments]


# --------------------------------------------------------------------------- summariser down, a tail kept


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("provider", [NoSummarizer, BrokenProvider])
def test_summariser_down_default_sends_the_header_and_the_retained_tail(version, provider):
    """The pinned code after a failed summary with a tail (issue #42282): ``processCompaction`` returns
    "stop" (:554 @3df4a25; :679-682 @31e22f65), so no continue message, but the tail start is written
    first (:461-466 @3df4a25; ``persistDiagnostics`` :605-611 @31e22f65) and ``filterCompacted``
    returns ``[compaction, errored summary, tail...]``; ``toModelMessagesEffect`` skips the errored
    assistant message. The head (turns 1 and 2) is gone and no summary replaces it."""
    s = make_session(TURNS)
    p = run(s, summarizer=provider(), params={"tail_tokens": 39, "opencode_version": version})
    assert kinds_and_texts(p)[2:] == [("header", oc.HEADER), ("tail", toks(3)), ("tail", toks(7))]
    assert [seg.entry_ids for seg in p.segments[3:]] == [("e5",), ("e6",)]
    assert p.messages()[1:] == [
        {"role": "user", "content": oc.HEADER},
        {"role": "user", "content": toks(3)},
        {"role": "assistant", "content": toks(7)},
    ]
    assert p.receipt.fallback and p.receipt.error
    assert p.notes["summary_failed"] == p.receipt.error and p.notes["on_failure"] == "upstream"
    assert p.notes["failure_outcome"] == oc.HEAD_DROPPED
    assert p.notes["compaction_failed"] is None  # it did drop the head: not "history unchanged"
    assert compacted(p, s)
    assert p.summary_request is not None and p.summary_request.shape == "dedicated"  # it was asked


@pytest.mark.parametrize("version", VERSIONS)
def test_on_failure_intent_keeps_the_history_unchanged(version):
    """``on_failure: intent``: what the code evidently means (the loop's ``summary && finish && !error``
    test; PR anomalyco/opencode#42283 applies it to the reorder too): the history as it was."""
    s = make_session(TURNS)
    p = run(
        s, summarizer=BrokenProvider(), params={"tail_tokens": 39, "opencode_version": version, "on_failure": "intent"}
    )
    assert [seg.kind for seg in p.segments] == ["system", "tools"] + ["tail"] * 6
    assert p.messages()[1:] == record_messages(s.records)
    assert p.notes["compaction_failed"] == "TimeoutError: slow" == p.notes["summary_failed"]
    assert p.notes["failure_outcome"] == COMPACTION_FAILED and not compacted(p, s)
    default = run(s, summarizer=BrokenProvider(), params={"tail_tokens": 39, "opencode_version": version})
    assert default.finalize().tokens < p.finalize().tokens


def test_port_persists_tail_start_id_and_the_failed_retry_stops():
    """Port of upstream compaction.test.ts @31e22f65 "persists tail_start_id for retained recent turns"
    (turns first/second/third, ``tail_turns: 2``, ``preserve_recent_tokens: 10_000`` -> tail start
    "second") with the summary failing as in "persists fallback diagnostics when the prepend retry
    fails" (a provider error -> "stop", the compaction part written): the next request is the
    compaction message, "second" and "third"."""
    s = make_session([("user", "first"), ("user", "second"), ("user", "third")])
    for version in VERSIONS:
        params = {"tail_turns": 2, "tail_tokens": 10_000, "opencode_version": version}
        p = run(s, summarizer=BrokenProvider(), params=params)
        assert [m["content"] for m in p.messages()[1:]] == [oc.HEADER, "second", "third"]
        assert not any(seg.kind in ("summary", "continue") for seg in p.segments)
    suffix = {"tail_turns": 2, "tail_tokens": 10_000, "opencode_version": "main", "compaction_mode": "suffix"}
    p = run(s, summarizer=BrokenProvider(), params=suffix)
    assert p.summary_request.shape == "suffix"
    assert [m["content"] for m in p.messages()[1:]] == [oc.HEADER, "second", "third"]


# --------------------------------------------------------------------------- no tail start persisted


@pytest.mark.parametrize("version", VERSIONS)
def test_summariser_down_without_a_tail_keeps_the_history_then_the_compaction_message(version):
    """No tail (``select`` gives no ``tail_start_id``): nothing is persisted (the write needs
    ``selected.tail_start_id``, :461 @3df4a25; ``?? compactionPart.tail_start_id`` :608 @31e22f65), the
    reorder finds no compaction with a tail start, and the history goes out as it was, then the
    compaction message ("What did we do so far?"), its errored summary dropped."""
    s = make_session(TURNS)
    p = run(s, summarizer=BrokenProvider(), params={"tail_tokens": 0, "opencode_version": version})
    assert [seg.kind for seg in p.segments] == ["system", "tools"] + ["tail"] * 6 + ["header"]
    assert p.messages()[1:] == record_messages(s.records) + [{"role": "user", "content": oc.HEADER}]
    assert p.notes["compaction_failed"] == "TimeoutError: slow" and p.notes["failure_outcome"] == oc.HISTORY_THEN_HEADER
    assert not compacted(p, s)


def test_refused_request_1_18_returns_before_the_tail_start_is_written_main_after():
    """Port of upstream "marks summary message as errored on compact result": the processor answers
    "compact", the summary message gets ``ContextOverflowError`` and ``finish: "error"``, and
    ``processCompaction`` returns "stop". At 3df4a25 that return (:450-459) comes before the tail start
    write (:461-466): the history is kept, the compaction message last. At 31e22f65 it calls
    ``persistDiagnostics({ result })`` first (:676), which writes the tail start: the head is dropped."""
    s = make_session([("user", toks(3_000)), ("assistant", toks(3_000)), ("user", "next"), ("assistant", "ok")])
    kw = {"window": 10_000, "output_ceiling": 4_000, "summarizer": FixedProvider()}
    old = run(s, params={"tail_tokens": 100}, **kw)
    assert old.notes["request_overflow"] and old.receipt.error.startswith("context overflow")
    assert [seg.text for seg in old.segments[2:]] == [r.text for r in s.records] + [oc.HEADER]
    assert (
        old.notes["compaction_failed"] == old.receipt.error and old.notes["failure_outcome"] == oc.HISTORY_THEN_HEADER
    )
    main = run(s, params={"tail_tokens": 100, "opencode_version": "main"}, **kw)
    assert main.notes["request_overflow"] and main.notes["compaction_failed"] is None
    assert [seg.text for seg in main.segments[2:]] == [oc.HEADER, "next", "ok"]
    intent = run(s, params={"tail_tokens": 100, "opencode_version": "main", "on_failure": "intent"}, **kw)
    assert [seg.text for seg in intent.segments[2:]] == [r.text for r in s.records]


# --------------------------------------------------------------------------- earlier compactions


def test_failed_summary_after_a_compaction_drops_the_previous_summary_too():
    """After two compactions, compaction 3 fails keeping the last turn: the reorder picks the newest
    compaction with a tail start (the failed one), so the previous summary "SUMMARY-TWO" and everything
    before "ship it" are gone."""
    s = two_compactions({"tail_start_source_order": 8})
    p = run(s, summarizer=BrokenProvider(), params={"tail_tokens": est(s.records[16:18])})
    assert [m["content"] for m in p.messages()[1:]] == [oc.HEADER, "ship it", "shipped"]
    intent = run(s, summarizer=BrokenProvider(), params={"tail_tokens": est(s.records[16:18]), "on_failure": "intent"})
    assert [dict(m) for m in intent.messages()[1:]] == [dict(m) for m in oc.session_messages(oc.live_history(s, None))]


def test_a_retained_tail_holding_an_earlier_compaction_sends_it_in_place():
    """``filterCompacted`` by hand: compaction 2 kept from "add tests" (u2); the failed compaction 3
    keeps the newest three turns, from "fix bug ORD-1" (u3), before compaction 2's messages. The reorder
    returns ``[c3, s3, u3 ... a4, c2, s2, u4 ... a6]``: compaction 2's message and summary stay where
    they were, as "What did we do so far?" and "SUMMARY-TWO"."""
    s = two_compactions({"tail_start_entry_id": "u2"})
    p = run(s, summarizer=BrokenProvider(), params={"tail_turns": 3, "tail_tokens": 10_000})
    assert p.notes["failure_outcome"] == oc.HEAD_DROPPED
    assert [m["content"] for m in p.messages()[1:]] == [
        oc.HEADER,
        "fix bug ORD-1",
        'bash {"command": "pytest -k ord"}',
        "1 passed",
        "fixed",
        oc.HEADER,
        "SUMMARY-TWO",
        "now docs",
        "docs written",
        "ship it",
        "shipped",
    ]
    prev = next(seg for seg in p.segments if seg.entry_ids == ("s2",))
    assert prev.kind == "tail" and prev.role == "assistant" and prev.record_kind == "summary"


def test_a_header_record_before_an_earlier_summary_is_not_doubled():
    """Sessions whose compaction message is a user record "What did we do so far?" (not ``meta``): it is
    sent once, as it was (the earlier compaction kept from "done one"; the failed one from "two")."""
    items = [
        ("u1", "user", "one"),
        ("a1", "assistant", "done one"),
        ("u2", "user", "two"),
        ("a2", "assistant", "done two"),
        ("h1", "user", oc.HEADER),
        ("s1", "summary", "SUMMARY-ONE"),
        ("u3", "user", "three"),
        ("a3", "assistant", "done three"),
    ]
    base = build(items)
    s = Session(
        base.id, "opencode", base.records, metadata={"compactions": [{"source_order": 4, "tail_start_entry_id": "a1"}]}
    )
    p = run(s, summarizer=BrokenProvider(), params={"tail_turns": 2, "tail_tokens": 10_000})
    assert [m["content"] for m in p.messages()[1:]] == [
        oc.HEADER,
        "two",
        "done two",
        oc.HEADER,
        "SUMMARY-ONE",
        "three",
        "done three",
    ]


# --------------------------------------------------------------------------- the empty answer


@pytest.mark.parametrize("answer", ["", "  \n"])
@pytest.mark.parametrize("on_failure", ["upstream", "intent"])
def test_an_empty_answer_is_kept_as_an_empty_summary(answer, on_failure):
    """Upstream: an empty answer is no failure -- the summary message finishes without error, so it is a
    completed compaction (``completedCompactions`` needs ``summary && finish && !error``) and the next
    request is the header, the (empty) summary, the tail and the continue message; nothing replaces the
    empty text (``summaryText`` gives ``undefined``, used only as the next ``previousSummary``)."""
    p = run(make_session(TURNS), summarizer=FixedProvider(answer), params={"tail_tokens": 39, "on_failure": on_failure})
    assert [seg.kind for seg in p.segments] == ["system", "tools", "header", "summary", "tail", "tail", "continue"]
    summ = p.segments[3]
    assert (
        summ.text == "" and summ.role == "assistant" and summ.label == oc.EMPTY_ANSWER_LABEL == "summary (empty answer)"
    )
    assert not p.receipt.fallback and p.notes["summary_failed"] is None and p.notes["compaction_failed"] is None
    assert oc.EMPTY_SUMMARY not in p.text()


def test_placeholder_mode_still_fills_an_empty_answer_with_the_template():
    """``on_failure: placeholder`` is the lab's earlier behaviour in full."""
    p = run(make_session(TURNS), summarizer=FixedProvider(""), params={"tail_tokens": 39, "on_failure": "placeholder"})
    summ = next(seg for seg in p.segments if seg.kind == "summary")
    assert summ.text == oc.EMPTY_SUMMARY and summ.label == "empty template (empty answer)"


# --------------------------------------------------------------------------- the parameter


def test_on_failure_values_are_checked_before_any_work():
    prov = FixedProvider()
    with pytest.raises(ValueError, match=r"opencode on_failure 'retry': expected one of upstream, intent, placeholder"):
        run(make_session(TURNS), summarizer=prov, params={"on_failure": "retry"})
    assert prov.requests == []
    assert oc.ON_FAILURE_CHOICES == ("upstream", "intent", "placeholder")


def test_codex_keeps_its_own_on_failure_values():
    from compaction_lab.strategies.base import ON_FAILURE_CHOICES

    assert ON_FAILURE_CHOICES == ("upstream", "placeholder")
    with pytest.raises(ValueError, match="codex on_failure 'intent': expected one of upstream, placeholder"):
        strategies.compact(
            make_session(TURNS),
            "codex",
            None,
            strategies.base.CompactionContext(shape=SHAPE, params={"on_failure": "intent"}),
        )
