"""Calibration: the provider's own input tokens against the report tokenizer's count of the same requests."""

import dataclasses

import pytest

from compaction_lab import strategies
from compaction_lab.core.session import Session
from compaction_lab.strategies import calibration as cal
from compaction_lab.strategies.base import CompactionContext, compacted
from tests.helpers import make_session

CTX = CompactionContext(window=10_000, output_ceiling=1_000)


def _words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def _session(usage_of, *, includes_cached: bool = False, compactions=()) -> Session:
    """Twelve records (user / assistant alternating); `usage_of(cut, size)` gives each assistant's usage row."""
    items = [("user" if i % 2 == 0 else "assistant", _words(f"w{i}x", 40 + 10 * i)) for i in range(12)]
    base = make_session(items, "cal")
    sizes = cal.request_sizes(base, CTX)
    usage = [{"entry_id": r.entry_id, **usage_of(r.source_order, sizes[r.source_order])} for r in base.records[1::2]]
    meta: dict[str, object] = {"usage": usage, "compactions": list(compactions)}
    if includes_cached:
        meta["usage_input_includes_cached"] = True
    return dataclasses.replace(base, metadata=meta)


def test_a_session_whose_provider_counts_thirty_percent_more_calibrates_to_1_3():
    ratios = [1.25, 1.3, 1.3, 1.3, 1.35, 1.3]  # one per assistant record (6), median 1.3, min 1.25, max 1.35
    it = iter(ratios)

    def usage(cut, size):
        total = round(size * next(it))
        return {"input_tokens": total - 300 - 20, "cached_tokens": 300, "cache_write_tokens": 20, "output_tokens": 9}

    s = _session(usage)
    c = cal.calibrate(s, CTX)
    assert c.calibrated and c.n == 6 and c.value == c.factor
    assert c.factor == pytest.approx(1.3, abs=2e-3)
    assert c.low == pytest.approx(1.25, abs=2e-3) and c.high == pytest.approx(1.35, abs=2e-3)
    assert c.q1 <= c.factor <= c.q3
    assert c.label.startswith("×1.30") and "median of 6 requests" in c.label
    assert cal.model_tokens(1000, s, CTX) == round(1000 * c.factor)
    # over the usable capacity W − O = 9,000 in the model's tokens, not in report tokens
    assert cal.over_window(7_000, s, CTX) and not cal.over_window(7_000, make_session([("user", "x")]), CTX)
    assert cal.calibrated_context(s, CTX).calibration == c.factor


def test_input_that_includes_the_cached_tokens_is_read_as_the_whole_request():
    s = _session(lambda cut, size: {"input_tokens": 2 * size, "cached_tokens": size}, includes_cached=True)
    assert cal.calibrate(s, CTX).factor == pytest.approx(2.0)
    row = {"input_tokens": 50, "cached_tokens": 30, "cache_write_tokens": 5}
    assert cal.request_total(row, s) == 50
    assert cal.request_total(row, dataclasses.replace(s, metadata={})) == 85
    assert cal.request_total({"output_tokens": 3}, s) is None


def test_only_requests_before_the_first_recorded_compaction_are_measured():
    """After a compaction the request is no longer the uncompacted history: those calls are left out."""

    def usage(cut, size):
        return {"input_tokens": 2 * size if cut < 6 else 9 * size}

    s = _session(usage, compactions=[{"entry_id": "e6", "source_order": 6}])
    c = cal.calibrate(s, CTX)
    assert c.n == 3 and c.factor == pytest.approx(2.0, abs=1e-2)
    assert cal.first_compaction(s) == 6


def test_a_usage_row_whose_entry_left_no_record_or_no_input_is_skipped():
    s = _session(lambda cut, size: {"input_tokens": 2 * size})
    rows = [*s.metadata["usage"], {"entry_id": "aborted", "input_tokens": 10**6}, {"entry_id": "e3"}]
    s = dataclasses.replace(s, metadata={"usage": rows})
    assert [cut for _, cut, _ in cal.usage_requests(s)] == [1, 3, 5, 7, 9, 11]
    assert cal.calibrate(s, CTX).factor == pytest.approx(2.0, abs=1e-2)


def test_a_session_without_usage_is_uncalibrated():
    s = make_session([("user", _words("a", 200)), ("assistant", _words("b", 200))])
    c = cal.calibrate(s, CTX)
    assert not c.calibrated and c.factor == 1.0 and c.value is None and c.n == 0
    assert c.label == cal.UNCALIBRATED == "uncalibrated (cl100k)" and "no usage" in c.reason
    assert cal.model_tokens(1234, s, CTX) == 1234
    assert cal.calibrated_context(s, CTX) is CTX


def test_the_log_s_own_size_at_a_compaction_is_read():
    s = _session(lambda cut, size: {"input_tokens": size}, compactions=[{"source_order": 6, "tokens_before": 4321}])
    assert cal.tokens_before(s, 6) == 4321 and cal.tokens_before(s, 4) is None
    cc = dataclasses.replace(s, metadata={"compactions": [{"source_order": 6, "pre_tokens": 99}]})
    assert cal.tokens_before(cc, 6) == 99


def test_a_trigger_driven_by_api_usage_reads_the_calibrated_size():
    """At W = 25,000: pi fires over W − 16,384 = 8,616, Codex at 90% (22,500), Claude Code at
    W − min(O, 20,000) − 13,000 = 11,000; each below in report tokens, over once the provider counts 1.3 times
    as many."""
    ctx = CompactionContext(window=25_000, output_ceiling=1_000)
    more = dataclasses.replace(ctx, calibration=1.3)
    assert more.model_tokens(8_000) == 10_400 and ctx.model_tokens(8_000) == 8_000
    for name, tokens in (("pi", 8_000), ("codex", 20_000), ("claude-code", 9_000)):
        arm = strategies.get(name)
        assert not arm.fires(tokens, ctx) and arm.fires(tokens, more), name


def test_an_arm_that_kept_every_record_did_not_compact():
    s = make_session([("user" if i % 2 == 0 else "assistant", _words(f"r{i}x", 60)) for i in range(10)])
    roomy = CompactionContext(window=100_000, output_ceiling=1_000)
    tight = CompactionContext(window=700, output_ceiling=100)
    assert not compacted(strategies.compact(s, "full", 10, tight), s)  # the uncompacted reference never does
    assert not compacted(strategies.compact(s, "truncate-oldest", 10, roomy), s)  # found room: kept it all
    assert compacted(strategies.compact(s, "truncate-oldest", 10, tight), s)


def test_usage_no_tokenizer_explains_leaves_the_session_uncalibrated_and_says_why():
    """A hidden system prompt and tools (Claude Code's ~17k) add a constant: the ratio is no tokenizer's."""
    hidden = cal.calibrate(_session(lambda cut, size: {"input_tokens": size + 17_000}), CTX)
    assert not hidden.calibrated and hidden.factor == 1.0 and hidden.label == cal.UNCALIBRATED
    assert "does not scale" in hidden.reason and hidden.row()["calibration_reason"] == hidden.reason
    # a steady ratio outside what a tokenizer can do is refused too; a drifting one inside it as well
    assert not cal.calibrate(_session(lambda cut, size: {"input_tokens": 3 * size}), CTX).calibrated
    it = iter([1.0, 1.0, 1.0, 1.6, 1.6, 1.6])
    assert not cal.calibrate(_session(lambda cut, size: {"input_tokens": round(size * next(it))}), CTX).calibrated
