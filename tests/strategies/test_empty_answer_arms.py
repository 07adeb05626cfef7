"""An empty summary answer, arm by arm, as each pinned agent reads it (issue 46).

The model summarizer now returns an answer with no text as ``""`` (it was billed), so each arm decides
what an empty summary means, as its upstream does. Claude Code's rule (it does not compact) is in
``test_empty_answer_claude_code.py``; Codex's (``no_answer``) in ``test_codex_no_answer.py``; OpenCode's
(an empty summary kept) in ``test_opencode_failure.py``. These pin the other arms:

- pi: ``generateSummary`` returns the joined text parts with no emptiness check (only ``stopReason ===
  "error"`` throws), ``compact`` appends the file lists and the entry is appended (badlogic/pi-mono @ 83378aad,
  packages/coding-agent/src/core/compaction/compaction.ts:567-576, 750-763; agent-session.ts:1904).
- gemini-cli: ``BaseLlmClient.generateContent`` retries a response empty after trimming, then throws
  (baseLlmClient.ts:269-272; retry.ts:314-328, 528 @ 5411f113): an empty snapshot or probe is a failed call,
  the history kept. Under ``on_failure: placeholder`` (a client that does not retry, as upstream's own tests
  mock it) the probe runs whatever the first answer and ``(probe.trim() || summary).trim()`` empty →
  ``COMPRESSION_FAILED_EMPTY_SUMMARY`` (chatCompressionService.ts:382-429).
- aider: ``if summary is not None`` — ``""`` is a summary: the prefix alone (aider/history.py:114-119 @ 5dc9490b).
- futureos-summarized (the lab's design): a blank or empty answer is a missing summary → deterministic.
"""

from __future__ import annotations

import pytest

from compaction_lab import strategies
from compaction_lab.strategies.arms import aider as ad
from compaction_lab.strategies.arms import gemini_cli as gem
from compaction_lab.strategies.arms import pi as pa
from compaction_lab.strategies.base import compacted
from compaction_lab.summarize import SummaryResult
from tests.helpers import FakeSummarizer
from tests.strategies import test_aider_strategy as t_aider
from tests.strategies import test_futureos as t_fos
from tests.strategies import test_gemini_cli_strategy as t_gem
from tests.strategies import test_pi_strategy as t_pi


class Answers(FakeSummarizer):
    """Answers each request in turn with the next of `texts` (the last one repeated)."""

    def __init__(self, *texts: str):
        super().__init__()
        self.texts = texts

    def summarize(self, request):
        super().summarize(request)
        return SummaryResult(self.texts[min(len(self.requests), len(self.texts)) - 1], 1000, 0, 10)


# --------------------------------------------------------------------------- pi


@pytest.mark.parametrize("answer", ["", "  \n"], ids=["empty", "blank"])
def test_pi_compacts_around_the_answer_as_it_is(answer):
    sess = t_pi.long_session()
    p = t_pi.compact(sess, t_pi.ctx_for(summarizer=FakeSummarizer(answer)))
    ref = t_pi.compact(sess, t_pi.ctx_for(summarizer=FakeSummarizer("THE SUMMARY")))
    (summ,) = [s for s in p.segments if s.kind == "summary"]
    lists = pa.format_file_operations(list(p.notes["read_files"]), list(p.notes["modified_files"]))
    assert lists and summ.text == answer + lists  # no check upstream: the text as it came, then the lists
    assert not p.receipt.fallback and summ.label == "summary (fake)" and not p.notes.get("compaction_failed")
    assert p.notes["first_kept_entry_id"] == ref.notes["first_kept_entry_id"] and compacted(p, sess)


# --------------------------------------------------------------------------- gemini-cli


@pytest.mark.parametrize("answer", ["", " \n "], ids=["empty", "blank"])
def test_gemini_an_empty_snapshot_is_retried_then_thrown_the_history_kept(answer):
    """baseLlmClient.ts:269-272 retries a response empty after trimming, retry.ts:528 throws once the attempts
    run out: through ``compress`` as any failed call -- no probe, the history kept (``on_failure: upstream``)."""
    prov = FakeSummarizer(answer)
    sess = t_gem.session()
    p = strategies.compact(sess, t_gem.NAME, None, t_gem.ctx_for(summarizer=prov))
    assert len(prov.requests) == 1  # the probe is never sent: the first call threw
    assert p.notes["compression_status"] == gem.CALL_FAILED and p.notes["failed_call"] == "snapshot"
    assert p.notes["compaction_failed"] == gem.EMPTY_RETRIED and not compacted(p, sess)
    assert not p.receipt.fallback  # answered and billed, then retried upstream
    assert "summary" not in [s.kind for s in p.segments]
    assert [s.text for s in p.segments[2:]] == [r.text for r in sess.records if r.kind != "system"]


@pytest.mark.parametrize("answer", ["", " \n "], ids=["empty", "blank"])
def test_gemini_an_empty_probe_is_retried_then_thrown_the_history_kept(answer):
    sess = t_gem.session()
    p = strategies.compact(sess, t_gem.NAME, None, t_gem.ctx_for(summarizer=Answers("FIRST", answer)))
    assert p.notes["failed_call"] == "verify" and gem.EMPTY_RETRIED in p.notes["compaction_failed"]
    assert "FIRST" not in p.text() and not compacted(p, sess) and len(p.requests_sent()) == 2


@pytest.mark.parametrize("answer", ["", " \n "], ids=["empty", "blank"])
def test_gemini_empty_snapshot_and_probe_under_placeholder(answer):
    """``on_failure: placeholder`` reads the answers as upstream's compression service does with a client that
    does not retry (its own tests mock the client): the probe is sent after an empty snapshot (:382-411), and
    both empty reject the compression."""
    prov = FakeSummarizer(answer)
    sess = t_gem.session()
    p = strategies.compact(sess, t_gem.NAME, None, t_gem.ctx_for(summarizer=prov, on_failure="placeholder"))
    assert len(prov.requests) == 2
    assert prov.requests[1].messages[-2] == {"role": "assistant", "content": answer}
    assert p.notes["compression_status"] == "COMPRESSION_FAILED_EMPTY_SUMMARY" and not compacted(p, sess)
    assert "summary" not in [s.kind for s in p.segments] and len(p.requests_sent()) == 2


def test_gemini_probe_answer_replaces_an_empty_snapshot_under_placeholder():
    ctx = t_gem.ctx_for(summarizer=Answers("", " FINAL "), on_failure="placeholder")
    p = strategies.compact(t_gem.session(), t_gem.NAME, None, ctx)
    assert p.notes["compression_status"] == "COMPRESSED"
    assert [s.text for s in p.segments if s.kind == "summary"] == ["FINAL"]


# --------------------------------------------------------------------------- aider


def test_aider_an_empty_answer_is_a_summary_of_the_prefix_alone():
    prov = FakeSummarizer("")
    p = t_aider.compact(t_aider.chat(40), t_aider.ctx_for(summarizer=prov, aider_summary="applied"))
    msgs = p.messages()
    assert msgs[1] == {"role": "user", "content": ad.SUMMARY_PREFIX}
    assert p.notes["summary_applied"] and not p.notes["summary_failed"] and not p.receipt.fallback
    assert len(prov.requests) == p.notes["summary_calls"]  # not retried on another model: "" is not None


# --------------------------------------------------------------------------- futureos-summarized


@pytest.mark.parametrize("answer", ["", "\n\t"], ids=["empty", "blank"])
def test_futureos_falls_back_to_deterministic_on_an_empty_answer(answer):
    s = t_fos._session_for_summary()
    p = t_fos.compact(s, "futureos-summarized", ctx=t_fos.ctx_for(summarizer=t_fos.FakeSummarizer(text=answer)))
    assert p.algorithm_version == "deterministic-2" and p.receipt.fallback
    assert p.receipt.error == "the summarizer returned an empty summary" and p.notes["fallback"] is True
