"""pi on a failed summary call (issue 46): what the pinned code sends next.

Upstream (badlogic/pi-mono@83378aad, ``packages/coding-agent``; docs/strategies.md "pi: upstream pins"):
``generateSummary`` / ``generateTurnPrefixSummary`` throw when the provider's answer stops with an
error (src/core/compaction/compaction.ts:567-568, 805-806); ``compact`` awaits both of a split turn's
calls in one ``Promise.all`` (:732-745), so either failing rejects it, before the file lists are
appended (:761-763). ``_runAutoCompaction`` catches the error (src/core/agent-session.ts:1947-1959)
before ``appendCompaction`` and ``replaceMessages`` (:1904-1907): no compaction entry, the agent's
messages as they were; the prompt that asked for the check goes on (:947-951). So the default
(``on_failure: upstream``) is the live history unchanged; ``placeholder`` is the lab's older
empty-template compaction.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from compaction_lab import strategies
from compaction_lab.core.session import Record
from compaction_lab.strategies.arms import pi as pa
from compaction_lab.strategies.base import compacted, record_messages
from compaction_lab.summarize import NoSummarizer, SummaryResult, SummaryUnavailable
from compaction_lab.summarize.extractive import empty_template
from tests.helpers import FakeSummarizer
from tests.strategies.test_pi_strategy import TWO, compact, ctx_for, load, long_session, split_session

FAILING = {
    "none": (NoSummarizer, "no summarizer configured"),
    "unavailable": (lambda: FakeSummarizer(error=SummaryUnavailable("endpoint down")), "endpoint down"),
    "raising": (lambda: FakeSummarizer(error=RuntimeError("boom")), "RuntimeError: boom"),
}


class PrefixFails:
    """Answers the history request; the split turn's prefix request raises."""

    name, stand_in = "half", False

    def __init__(self) -> None:
        self.requests: list = []

    def summarize(self, request):
        self.requests.append(request)
        if request.template == pa.TURN_PREFIX_TEMPLATE:
            raise RuntimeError("prefix down")
        return SummaryResult("HISTORY SUMMARY", input_tokens=100, output_tokens=3)


def tails(p) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(s.role, s.text, s.entry_ids) for s in p.segments[2:]]


def expected_tails(records: list[Record]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The records as pi's next request carries them, written from the session (not the arm's helpers)."""
    role = {"user": "user", "assistant": "assistant", "tool_call": "assistant", "tool_output": "tool"}
    return [(role[r.kind], r.text, (r.entry_id,)) for r in records]


# --------------------------------------------------------------------------- summary call fails: no compaction


@pytest.mark.parametrize("failing", FAILING, ids=list(FAILING))
def test_failed_summary_keeps_the_history_unchanged(failing):
    """The default: compaction.ts:567-568 throws, agent-session.ts:1947-1959 catches it before
    appendCompaction (:1904): the next request is system, tools and every record before the cut."""
    make, reason = FAILING[failing]
    s = long_session()
    p = compact(s, ctx_for(summarizer=make()))
    assert [seg.kind for seg in p.segments[:2]] == ["system", "tools"]
    assert set(seg.kind for seg in p.segments[2:]) == {"tail"}
    assert tails(p) == expected_tails(list(s.records))
    assert p.messages()[1:] == record_messages(s.records)
    assert reason in p.notes["compaction_failed"] and p.notes["compaction_failed"] == p.receipt.error
    assert p.notes["on_failure"] == "upstream" and "skipped" not in p.notes
    assert not compacted(p, s)
    assert p.receipt.fallback and p.receipt.text == ""
    # the request was sent (priced), nothing came back
    assert p.summary_request is not None and p.summary_request.template == pa.TEMPLATE
    assert [(r.request, r.output_tokens) for r in p.requests_sent()] == [(p.summary_request, 0)]


def test_failed_summary_at_the_cut_keeps_what_is_before_it():
    s = long_session()
    cut = len(s.records) - 7
    p = compact(s, ctx_for(summarizer=FakeSummarizer(error=RuntimeError("boom"))), cut=cut)
    assert tails(p) == expected_tails([r for r in s.records if r.source_order < cut])
    assert p.notes["compaction_failed"] == "RuntimeError: boom" and p.cut == cut


def test_failed_summary_after_an_earlier_compaction_sends_its_live_context():
    """buildSessionContext at the pin (session-manager.ts:383-406): the latest compaction's summary in pi's
    wrappers, the entries it kept (e08, e09), then what followed (e11, e12) — unchanged."""
    s = load(TWO)
    prov = FakeSummarizer(error=SummaryUnavailable("endpoint down"))
    p = compact(s, ctx_for(summarizer=prov))
    (req,) = prov.requests  # asked with the previous summary, as pi would
    assert "<previous-summary>\nSUMMARY-TWO\n</previous-summary>" in req.messages[0]["content"]
    texts = {r.entry_id: r.text for r in s.records}
    assert [(seg.kind, seg.text) for seg in p.segments[2:]] == [
        ("header", pa.SUMMARY_OPEN),
        ("summary", "SUMMARY-TWO"),
        ("header", pa.SUMMARY_CLOSE),
        ("tail", texts["e08"]),
        ("tail", texts["e09"]),
        ("tail", texts["e11"]),
        ("tail", texts["e12"]),
    ]
    assert p.notes["compaction_failed"] == "endpoint down" and not compacted(p, s)


# --------------------------------------------------------------------------- a split turn: either call fails


def test_split_turn_prefix_failing_fails_the_compaction():
    """Promise.all (compaction.ts:732-745): the turn-prefix call throwing (:805-806) rejects ``compact``;
    both requests were sent together, the history's answer is billed and thrown away."""
    s = split_session()
    prov = PrefixFails()
    p = compact(s, ctx_for(summarizer=prov))
    hist, prefix = prov.requests
    assert hist.template == pa.TEMPLATE and prefix.template == pa.TURN_PREFIX_TEMPLATE
    assert tails(p) == expected_tails(list(s.records))
    assert p.notes["compaction_failed"] == "RuntimeError: prefix down" and p.notes["is_split_turn"]
    assert p.notes["turn_prefix_request"] == prefix.fingerprint()
    assert [(r.request, r.output_tokens) for r in p.requests_sent()] == [(hist, 3), (prefix, 0)]
    assert p.summary_request is hist and not compacted(p, s)


def test_split_turn_prefix_failing_placeholder_merges_the_empty_template():
    """``placeholder``: the lab's older behaviour — the history's answer, the separator, the empty
    turn-prefix template; the compaction goes on."""
    s = split_session()
    p = compact(s, ctx_for(summarizer=PrefixFails(), on_failure="placeholder"))
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.text.startswith("HISTORY SUMMARY" + pa.SPLIT_TURN_SEPARATOR + empty_template(pa.TURN_PREFIX_TEMPLATE))
    assert "compaction_failed" not in p.notes and compacted(p, s) and p.receipt.fallback


def test_split_turn_without_history_prefix_failing():
    """No history before the turn: only the prefix call is made (:733-743); it failing fails the compaction."""
    s = split_session()
    s = replace(s, records=tuple(replace(r, source_order=i) for i, r in enumerate(s.records[2:])))
    prov = FakeSummarizer(error=RuntimeError("boom"))
    p = compact(s, ctx_for(summarizer=prov))
    (req,) = prov.requests
    assert req.template == pa.TURN_PREFIX_TEMPLATE and p.summary_request is req
    assert tails(p) == expected_tails(list(s.records)) and p.notes["compaction_failed"] == "RuntimeError: boom"


# --------------------------------------------------------------------------- no room for an answer


def test_no_room_for_an_answer_is_a_failed_call():
    """``reserve_tokens: 1`` gives ``maxTokens = floor(0.8 × 1) = 0`` (compaction.ts:529): the provider
    refuses such a request, generateSummary throws, nothing is compacted. ``placeholder``: the template."""
    s = long_session()
    prov = FakeSummarizer()
    p = compact(s, ctx_for(summarizer=prov, reserve_tokens=1))
    assert prov.requests == []  # the lab does not ask a request with no room
    assert p.summary_request is not None and p.summary_request.max_output_tokens == 0
    assert p.notes["compaction_failed"] == "no room left for a summary"
    assert tails(p) == expected_tails(list(s.records)) and not compacted(p, s)
    old = compact(s, ctx_for(summarizer=prov, reserve_tokens=1, on_failure="placeholder"))
    (seg,) = [x for x in old.segments if x.kind == "summary"]
    assert seg.text.startswith(empty_template(pa.TEMPLATE)) and compacted(old, s)


# --------------------------------------------------------------------------- placeholder: today's projection


@pytest.mark.parametrize("failing", FAILING, ids=list(FAILING))
def test_placeholder_compacts_around_the_empty_template(failing):
    """``on_failure: placeholder`` is the projection the lab made before issue 46: the same plan as a
    successful call (same kept entries, same file lists), the summary the empty template."""
    make, reason = FAILING[failing]
    s = long_session()
    p = compact(s, ctx_for(summarizer=make(), on_failure="placeholder"))
    ok = compact(s, ctx_for(summarizer=FakeSummarizer("OK")))
    lists = pa.format_file_operations(ok.notes["read_files"], ok.notes["modified_files"])
    assert [(seg.kind, seg.text) for seg in p.segments] == [
        (seg.kind, empty_template(pa.TEMPLATE) + lists if seg.kind == "summary" else seg.text) for seg in ok.segments
    ]
    (seg,) = [x for x in p.segments if x.kind == "summary"]
    assert seg.label == "empty template (no summary)" and "<modified-files>" in seg.text
    assert p.receipt.fallback and reason in p.receipt.error and p.receipt.text == empty_template(pa.TEMPLATE)
    assert "compaction_failed" not in p.notes and p.notes["on_failure"] == "placeholder" and compacted(p, s)
    assert p.tokens <= p.capacity


# --------------------------------------------------------------------------- the parameter


def test_unknown_on_failure_is_refused_before_any_work():
    prov = FakeSummarizer()
    with pytest.raises(ValueError, match=r"^pi on_failure 'keep': expected one of upstream, placeholder$"):
        strategies.compact(long_session(), "pi", ctx=ctx_for(summarizer=prov, on_failure="keep"))
    assert prov.requests == []


def test_a_successful_or_empty_answer_is_not_a_failure():
    """Only a failed call keeps the history: an empty answer is a summary upstream (no check, :571-576)."""
    s = long_session()
    for text in ("S", ""):
        p = compact(s, ctx_for(summarizer=FakeSummarizer(text)))
        assert "compaction_failed" not in p.notes and not p.receipt.fallback and compacted(p, s)
