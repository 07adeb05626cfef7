"""``gemini-cli`` when a summary call fails: the pinned agent does not compress (issue 46).

At google-gemini/gemini-cli@5411f113 ``ChatCompressionService.compress`` awaits both calls with no
try/catch (packages/core/src/context/chatCompressionService.ts:361-379, 384-407); ``BaseLlmClient``
rethrows once its retries are spent (core/baseLlmClient.ts:396-421); ``tryCompressChat`` (core/client.ts:
1196-1214) and ``sendMessageStream`` (client.ts:1036-1041) let it through, before the turn adds the prompt
(client.ts:689 runs before ``turn.run`` at :803). The chat's history is never replaced: the next request
carries it as it was. A failed *probe* loses the first snapshot too. ``on_failure: placeholder`` is the
lab's older behaviour (the empty template, or the first snapshot when only the probe failed).
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.core.projection import SentRequest
from compaction_lab.exam.exams.closed import projection_row
from compaction_lab.strategies.arms import gemini_cli as g
from compaction_lab.strategies.base import COMPACTION_FAILED, compacted
from compaction_lab.summarize import NoSummarizer, SummaryResult
from compaction_lab.summarize.extractive import empty_template
from tests.helpers import FakeSummarizer, make_session
from tests.strategies.test_gemini_cli_strategy import NAME, SHAPE, ctx_for, session


class FailsAt(FakeSummarizer):
    """Answers `text`, except request number `at` (1: the snapshot, 2: the probe), which raises."""

    def __init__(self, at: int, text: str = "<state_snapshot>S</state_snapshot>"):
        super().__init__(text)
        self.at = at

    def summarize(self, request):
        if len(self.requests) + 1 == self.at:
            self.requests.append(request)
            raise RuntimeError("endpoint down")
        return super().summarize(request)


def unchanged(sess) -> list[tuple[str, tuple[str, ...]]]:
    """The next request with the history as it was: system prompt, tools, every record but the system
    prompt (the leading environment context, then from the latest summary record on), text and entry."""
    recs = [r for r in sess.records if not (r.kind == "system" and r.text == SHAPE.system_prompt)]
    lead = 0
    while recs[lead].kind == "user" and recs[lead].injected:
        lead += 1
    summaries = [i for i, r in enumerate(recs) if r.kind == "summary"]
    kept = recs if not summaries else recs[:lead] + recs[summaries[-1] :]
    return [(SHAPE.system_prompt, ()), (SHAPE.tools_text(), ())] + [(r.text, (r.entry_id,)) for r in kept]


def shown(p) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.text, tuple(s.entry_ids)) for s in p.segments]


def with_earlier_summary():
    return make_session(
        [
            ("system", SHAPE.system_prompt),
            ("user", "ENV context: cwd /repo", {"injected": True}),
            ("user", "u0: gone after the snapshot"),
            ("assistant", "a0: gone too"),
            ("summary", "<state_snapshot>old</state_snapshot>"),
            ("assistant", "Got it."),
        ]
        + [(k, f"{k}{i}:" + " word" * 40) for i in range(4) for k in ("user", "assistant")]
    )


@pytest.mark.parametrize("make_sess", [session, with_earlier_summary], ids=["plain", "earlier-summary"])
@pytest.mark.parametrize(
    "summarizer",
    [NoSummarizer, lambda: FakeSummarizer(error=RuntimeError("HTTP 503")), lambda: FailsAt(1)],
    ids=["none", "raises", "fails-first"],
)
def test_a_failed_snapshot_call_keeps_the_history(summarizer, make_sess):
    sess, prov = make_sess(), summarizer()
    p = strategies.compact(sess, NAME, None, ctx_for(summarizer=prov))
    assert unchanged(sess)[2][0] == "ENV context: cwd /repo" and len(unchanged(sess)) > 4  # the expectation is real
    assert shown(p) == unchanged(sess)
    assert "summary" not in [s.kind for s in p.segments] and g.ACK not in [s.text for s in p.segments]
    assert p.receipt.fallback and p.receipt.error and p.notes["compaction_failed"] == p.receipt.error
    assert p.notes["compaction_failed"] != COMPACTION_FAILED or not p.receipt.error
    assert not compacted(p, sess) and p.notes["on_failure"] == "upstream" and p.notes["failed_call"] == "snapshot"
    assert p.summary_request is not None and p.summary_request.messages[-1]["content"].endswith(g.INSTRUCTION_TAIL)
    assert p.requests_sent() == (SentRequest(p.summary_request, 0),)  # no probe: the first call threw
    if isinstance(prov, FakeSummarizer):
        assert len(prov.requests) == 1
    row = projection_row("c", p, ctx_for(), sess)
    assert row["compaction_failed"] == p.receipt.error and not row["compacted"] and row["summary_failed"]


def test_a_failed_probe_loses_the_first_snapshot():
    """The probe's await (:384-407) throws as the first one would: the first snapshot is never used."""
    sess, prov = session(), FailsAt(2)
    p = strategies.compact(sess, NAME, None, ctx_for(summarizer=prov))
    assert len(prov.requests) == 2 and prov.requests[1].messages[-1]["content"] == g.VERIFY_INSTRUCTION
    assert shown(p) == unchanged(sess) and not compacted(p, sess)
    assert p.notes["failed_call"] == "verify" and "endpoint down" in p.notes["compaction_failed"]
    assert p.notes["compaction_failed"] == p.receipt.error and p.receipt.fallback
    assert p.notes["verify"]["fallback"] and not p.notes["verify"]["used"]
    sent = p.requests_sent()
    assert [r.request for r in sent] == prov.requests and sent[1].output_tokens == 0 and sent[0].output_tokens > 0


def test_placeholder_compacts_around_the_empty_template_as_before():
    """``on_failure: placeholder``: the empty template stands in for the snapshot, no probe (the old default)."""
    sess = session()
    p = strategies.compact(sess, NAME, None, ctx_for(on_failure="placeholder"))
    (summ,) = [s for s in p.segments if s.kind == "summary"]
    assert summ.text == empty_template(g.TEMPLATE) and summ.label == "empty template (no summary)"
    assert p.receipt.fallback and not p.notes.get("compaction_failed") and compacted(p, sess)
    assert p.notes["compression_status"] == "COMPRESSED" and "verify" not in p.notes
    # the very projection the arm makes around an answer that is the template, probe off
    same = strategies.compact(
        sess, NAME, None, ctx_for(summarizer=FakeSummarizer(empty_template(g.TEMPLATE)), verify_probe=False)
    )
    assert [s.text for s in p.segments] == [s.text for s in same.segments]


def test_placeholder_keeps_the_first_snapshot_when_the_probe_fails():
    p = strategies.compact(session(), NAME, None, ctx_for(summarizer=FailsAt(2), on_failure="placeholder"))
    assert [s.text for s in p.segments if s.kind == "summary"] == ["<state_snapshot>S</state_snapshot>"]
    assert not p.receipt.fallback and p.notes["verify"]["fallback"] and not p.notes.get("compaction_failed")


def test_no_room_is_not_a_failed_call():
    """No room in W − O for the snapshot (``fit_window`` off): upstream sends no output cap, so it would ask;
    whatever came back is cut to no room here. Both modes keep the old projection (nothing asked)."""
    sess = session()
    outs = []
    for mode in ("upstream", "placeholder"):
        prov = FakeSummarizer("SNAP")
        p = strategies.compact(sess, NAME, None, ctx_for(600, 400, prov, fit_window=False, on_failure=mode))
        assert prov.requests == [] and p.receipt.error == "no room left for a summary"
        assert not p.notes.get("compaction_failed") and compacted(p, sess)
        outs.append([s.text for s in p.segments])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("bad", ["intent", "", "Upstream"])
def test_an_unknown_on_failure_is_refused_before_any_work(bad):
    prov = FakeSummarizer()
    with pytest.raises(ValueError, match=r"^gemini-cli on_failure .*expected one of upstream, placeholder$"):
        g.GeminiCli().compact(session(), 10, ctx_for(summarizer=prov, on_failure=bad))
    assert prov.requests == []


def test_the_version_moved():
    assert strategies.get(NAME).algorithm_version == "gemini-cli-2"


def test_a_successful_call_is_unaffected():
    """The default changes only failed calls: an answer still compresses, the probe's answer used."""

    class Two(FakeSummarizer):
        def summarize(self, request):
            super().summarize(request)
            return SummaryResult("FIRST" if len(self.requests) == 1 else "FINAL", 100, 0, 5)

    sess = session()
    p = strategies.compact(sess, NAME, None, ctx_for(summarizer=Two()))
    assert [s.text for s in p.segments if s.kind == "summary"] == ["FINAL"] and compacted(p, sess)
    assert not p.receipt.fallback and "compaction_failed" not in p.notes
