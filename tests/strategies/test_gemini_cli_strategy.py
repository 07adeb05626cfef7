"""``gemini-cli``: Gemini CLI's chat compression at google-gemini/gemini-cli@5411f113 (rule by rule).

Ports of upstream tests name their source: packages/core/src/context/chatCompressionService.test.ts @ 5411f113.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from compaction_lab import strategies
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.text import js_json
from compaction_lab.ingest import ImportAudit, load_sessions, synthetic
from compaction_lab.strategies.arms import gemini_cli as g
from compaction_lab.strategies.base import CompactionContext
from compaction_lab.summarize import NoSummarizer
from compaction_lab.summarize.extractive import ExtractiveSummarizer, empty_template
from tests.helpers import FIXTURES, FakeSummarizer, make_session

NAME = "gemini-cli"
SHAPE = CallShape(
    "test",
    "You are a test agent.",
    ({"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},),
)
LOCAL = FIXTURES


def ctx_for(window=128_000, output=32_000, summarizer=None, **params):
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
    )


def C(role, text=None, fc=None, fr=None):
    part = {"text": text} if text is not None else ({"functionCall": fc} if fc else {"functionResponse": fr})
    return {"role": role, "parts": [part]}


def session(n=6, body=40):
    items = [("system", SHAPE.system_prompt), ("user", "ENV context: cwd /repo", {"injected": True})]
    for i in range(n):
        extra = {"tool": "read_file", "target": f"f{i}.py", "call_id": f"c{i}"}
        items += [
            ("user", f"u{i}:" + " word" * body),
            ("assistant", f"a{i}:" + " word" * body),
            ("tool_call", f'read_file {{"path": "f{i}.py"}}', extra),
            ("tool_output", f"OUT{i}" + " x" * body, extra),
            ("assistant", f"done{i}"),
        ]
    return make_session(items)


# --------------------------------------------------------------------------- findCompressSplitPoint (ported)

FIVE = [
    C("user", "This is the first message."),
    C("model", "This is the second message."),
    C("user", "This is the third message."),
    C("model", "This is the fourth message."),
    C("user", "This is the fifth message."),
]


def test_split_point_ported_cases():
    """chatCompressionService.test.ts describe('findCompressSplitPoint'): every case."""
    for bad in (0, 1):  # 'should throw an error for non-positive numbers' / '>= 1'
        with pytest.raises(ValueError, match="Fraction must be between 0 and 1"):
            g.find_compress_split_point([], bad)
    assert g.find_compress_split_point([], 0.5) == 0  # empty history
    assert g.find_compress_split_point(FIVE, 0.5) == 4  # fraction in the middle
    assert g.find_compress_split_point(FIVE, 0.9) == 4  # fraction of last index
    assert g.find_compress_split_point(FIVE[:4], 0.8) == 4  # after last index
    fc = FIVE[:3] + [C("model", fc={"name": "foo", "args": {}})]
    assert g.find_compress_split_point(fc, 0.99) == 2  # earlier splitpoint if none valid after threshold
    assert g.find_compress_split_point([C("user", "Message 1")], 0.5) == 0  # only one item
    weird = [
        C("user", "Message 1"),
        {"role": "model", "parts": [{"fileData": {"fileUri": "derp", "mimeType": "text/plain"}}]},
        C("user", "Message 2"),
    ]
    assert g.find_compress_split_point(weird, 0.5) == 2  # weird parts


def test_json_lengths_are_js_stringify_lengths():
    """JSON.stringify(content).length (upstream's test comments say 66/68; JSON.stringify gives 63/65)."""
    assert len(js_json(FIVE[0])) == 63 and len(js_json(FIVE[1])) == 65


def test_split_never_at_a_function_response():
    items = [
        C("user", "go"),
        C("model", fc={"name": "ls", "args": {}}),
        C("user", fr={"name": "ls", "response": {"output": "a" * 500}}),
        C("model", "ok"),
    ]
    assert g.find_compress_split_point(items, 0.5) == 4  # last is model text: compress everything
    assert g.find_compress_split_point(items[:3], 0.5) == 0


# --------------------------------------------------------------------------- estimator, truncation


def test_estimator_is_upstream_heuristic():
    """tokenCalculation.ts estimateTokenCountSync: ASCII 1/4 per char, other 1.5 per UTF-16 unit
    (``NON_ASCII_TOKENS_PER_CHAR = 1.5``, tokenCalculation.ts:17 @ 5411f113), floor of the sum."""
    assert g.est_gemini([{"text": "a" * 10}]) == 2
    assert g.est_gemini([{"text": "é" * 10}]) == 15  # was 13 with the old 1.3
    assert g.est_gemini([{"text": "é"}]) == 1 and g.est_gemini([{"text": "éé"}]) == 3
    assert g.est_gemini([{"text": "😀"}]) == 3  # one code point, two UTF-16 units: 2 × 1.5
    assert g.est_gemini([{"text": "\ud800"}]) == 1  # a lone surrogate is one unit (was a UnicodeEncodeError)
    assert g.est_gemini([{"text": "é" * 100_000}]) == 150_000  # 100,000 units: still the per-char rule
    assert g.est_gemini([{"text": "é" * 100_001}]) == 25_000  # past 100,000: length / 4
    assert g.est_gemini([{"text": "a" * 200_000}]) == 50_000
    fr = {"functionResponse": {"name": "grep", "response": {"output": "x"}}}
    assert g.est_gemini([fr]) == int(4 / 4 + len('{"output":"x"}') / 4)
    # a missing or null response adds nothing (tokenCalculation.ts:94-99), not len("null") / 4
    assert g.est_gemini([{"functionResponse": {"name": "abcd", "response": None}}]) == 1
    assert g.est_gemini([{"functionResponse": {"name": "abcd"}}]) == 1


# tokenCalculation.test.ts @ 5411f113 (packages/core/src/utils/). The `calculateRequestTokenCount` cases without
# media call `estimateTokenCountSync(parts, 0, 4)` (tokenCalculation.ts:185); the countTokens-API cases do not
# apply (we never send media). Upstream's comments still say 1.3; its assertions hold at 1.5.


def test_ported_calculate_request_token_count_local_cases():
    """describe('calculateRequestTokenCount'): the locally estimated cases."""
    assert g.est_gemini([{"functionCall": {"name": "foo", "args": {"bar": "baz"}}}]) > 0  # tool calls
    assert g.est_gemini([{"text": "Hello world!"}]) == 3  # simple ASCII text
    assert g.est_gemini([{"text": "你好"}]) >= 2  # CJK text with higher weight
    assert g.est_gemini([{"text": "你好"}]) == 3  # exactly: 2 × 1.5 (1.3 gave 2)
    assert g.est_gemini([{"text": "Hi你好"}]) == 3  # mixed content: 0.5 + 3.0
    assert g.est_gemini([{"text": ""}]) == 0  # empty text


def test_ported_estimate_token_count_sync():
    """describe('estimateTokenCountSync'): every case."""
    assert g.est_gemini([{"text": "a" * 200_000}]) == 50_000  # fast heuristic for massive strings
    tool = {"functionResponse": {"name": "my_tool", "id": "123", "response": {"output": "result" * 1000}}}
    assert 1500 < g.est_gemini([tool]) < 1600  # functionResponse without full stringification
    assert g.est_gemini([tool]) == 1505  # 7/4 + 6013/4 = 1505.0: the id is not counted
    multimodal = {
        "functionResponse": {
            "name": "multimodal_tool",
            "id": "456",
            "response": {"status": "success"},
            "parts": [{"inlineData": {"mimeType": "image/png", "data": "base64..."}}, {"text": "Look at this image"}],
        }
    }
    assert 3000 < g.est_gemini([multimodal]) < 3100  # Gemini 3 nested parts
    assert g.est_gemini([multimodal]) == 3012  # 15/4 + 20/4 + floor(3000 + 18/4)

    def nest(depth: int) -> dict:
        fr = {"name": f"d{depth}", "response": {"val": "a"}}
        return {"functionResponse": fr if depth == 4 else {**fr, "parts": [nest(depth + 1)]}}

    assert 10 < g.est_gemini([nest(0)]) < 30  # maximum recursion depth
    assert g.est_gemini([nest(0)]) == 12  # d0..d3 counted, each level floored: 3, 6, 9, 12 (with d4: 15)
    text = [{"text": "abcdefghijkl"}]  # the user supplied charsPerToken argument
    assert g.est_gemini(text) == 3 and g.est_gemini(text, 0, 3) == 4 and g.est_gemini(text, 0, 2) == 6
    massive = [{"text": "a" * 120_000}]
    assert g.est_gemini(massive, 0, 4) == 30_000 and g.est_gemini(massive, 0, 3) == 40_000
    assert g.est_gemini([]) == 0 and g.est_gemini([{"text": ""}]) == 0 and g.est_gemini([{}]) == 0  # nullish


def test_estimator_media_estimates():
    """tokenCalculation.ts:62-77: images 3,000, PDFs 25,800; other file parts fall back to JSON / 4."""
    assert g.est_gemini([{"inlineData": {"mimeType": "image/png", "data": "large_data"}}]) == 3000
    assert g.est_gemini([{"fileData": {"mimeType": "application/pdf", "fileUri": "x"}}]) == 25_800
    other = {"fileData": {"fileUri": "derp", "mimeType": "text/plain"}}
    assert g.est_gemini([other]) == len(js_json(other)) // 4


def test_format_truncated_tool_output():
    """fileUtils.ts formatTruncatedToolOutput: 20% head, 80% tail, counts with thousands separators."""
    assert g.format_truncated("short", "f", 40_000) == "short"
    out = g.format_truncated("a" * 50_000, "/t/grep_1.txt", 40_000)
    assert out.startswith(
        "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: /t/grep_1.txt\n"
    )
    assert "... [10,000 characters omitted] ..." in out


def test_format_truncated_at_a_non_positive_threshold_is_upstream_slicing():
    """fileUtils.ts:709-716 has no guard: ``Math.floor(maxChars * 0.2)`` and ``slice`` with negative bounds."""
    content = "0123456789" * 10
    zero = g.format_truncated(content, "f", 0)  # head slice(0, 0) = "", tail slice(-0) = the whole text
    assert zero == (
        "Output too large. Showing first 0 and last 0 characters. For full output see: f\n"
        f"\n\n... [100 characters omitted] ...\n\n{content}"
    )
    neg = g.format_truncated(content, "f", -7)  # head floor(-1.4) = -2, tail -5
    assert neg == (
        "Output too large. Showing first -2 and last -5 characters. For full output see: f\n"
        f"{content[:-2]}\n\n... [107 characters omitted] ...\n\n{content[5:]}"
    )


def test_truncate_threshold_ported_config_cases():
    """config.test.ts describe('getTruncateToolOutputThreshold') @ 5411f113: min(4 × (limit − last), setting)."""
    assert g.truncate_threshold(32_000, 1_000) == 40_000  # calculated 124,000 > the default 40,000
    assert g.truncate_threshold(2_000_000, 500_000) == 40_000  # calculated 6,000,000
    assert g.truncate_threshold(8_000, 2_000, 50_000) == 24_000  # custom setting 50,000: 4 × 6,000 binds
    assert g.truncate_threshold(32_000, 1_000, 50_000) == 50_000
    assert g.truncate_threshold(10_000, 10_000) == 0 and g.truncate_threshold(10_000, 10_500) == -2_000  # no clamp


def _near_window_session():
    """Two ~60,000-char grep outputs: ~24,000 tiktoken tokens, ~30,000 estimated (a budget of 20,000 truncates
    the older one)."""
    recs = [("system", SHAPE.system_prompt), ("user", "look at the logs")]
    for i in range(2):
        extra = {"tool": "grep", "call_id": f"c{i}"}
        recs += [("tool_call", 'grep {"pattern": "x"}', extra), ("tool_output", f"log{i}:" + " word" * 12_000, extra)]
    return make_session(recs + [("assistant", "done")])


def test_truncation_threshold_binds_near_the_window():
    """config.ts:3794-3801: near the window the threshold is 4 × (tokenLimit − lastPromptTokenCount), below
    40,000 (the old code always cut to 8,000 + 32,000 characters)."""
    prov = FakeSummarizer("<state_snapshot>S</state_snapshot>")
    window = 30_000
    ctx = ctx_for(window=window, output=2_000, summarizer=prov, function_response_budget=20_000, verify_probe=False)
    p = strategies.compact(_near_window_session(), NAME, None, ctx)
    last = p.notes["original_tokens"]  # the stand-in for the previous request's promptTokenCount
    threshold = 4 * (window - last)
    assert 0 < threshold < 40_000
    assert p.notes["summary_from"] == "truncated" and p.notes["truncated_responses"] == 1
    (msg,) = [m["content"] for m in p.summary_request.messages if m["content"].startswith("Output too large.")]
    head, tail = threshold * 2 // 10, threshold - threshold * 2 // 10
    assert msg.startswith(f"Output too large. Showing first {head:,} and last {tail:,} characters. ")
    body = "log0:" + " word" * 12_000
    assert msg.endswith(f"\n{body[:head]}\n\n... [{len(body) - threshold:,} characters omitted] ...\n\n{body[-tail:]}")
    assert p.notes["truncate_threshold"] == threshold
    # an explicit setting is upstream's `truncateToolOutputThreshold`: it caps, the remaining window still binds
    assert strategies.compact(
        _near_window_session(),
        NAME,
        None,
        replace(ctx, params={**ctx.params, "truncate_tool_output_threshold": 10_000}),
    ).notes["truncate_threshold"] == min(10_000, threshold)
    far = strategies.compact(_near_window_session(), NAME, None, replace(ctx, window=200_000))
    assert far.notes["truncate_threshold"] == 40_000  # far from the window: the setting binds


def test_a_previous_request_past_the_window_counts_as_one_that_left_room_for_the_reply():
    """A forced cut past the window: the stand-in for lastPromptTokenCount is capped at W − O (a served
    request left room for its reply), so the threshold is 4 × O (bounded by the setting), never the ≤ 0
    that made "truncated" texts longer than their originals."""
    prov = FakeSummarizer("<state_snapshot>S</state_snapshot>")
    window, output = 20_000, 2_000
    ctx = ctx_for(window=window, output=output, summarizer=prov, function_response_budget=20_000, verify_probe=False)
    p = strategies.compact(_near_window_session(), NAME, None, ctx)
    assert p.notes["original_tokens"] > window - output == p.notes["last_prompt_tokens"]
    assert p.notes["truncate_threshold"] == 4 * output
    body = "log0:" + " word" * 12_000
    (msg,) = [m["content"] for m in p.summary_request.messages if m["content"].startswith("Output too large.")]
    assert msg == g.format_truncated(body, ".gemini/tmp/tool-outputs/grep_1.txt", 4 * output)
    assert len(msg) < len(body)
    # upstream's own formula, unclamped, on a count past the window (what the cap keeps out of projections)
    assert g.truncate_threshold(window, p.notes["original_tokens"]) < 0


def test_reverse_budget_truncates_older_function_responses():
    """chatCompressionService.test.ts 'should truncate older function responses when budget is exceeded'."""
    big = "a" * 170_000
    sess = make_session(
        [
            ("user", "old msg"),
            ("assistant", "old resp"),
            ("user", "msg 1"),
            ("tool_output", big, {"tool": "grep", "call_id": "1"}),
            ("assistant", "resp 2"),
            ("tool_output", big, {"tool": "grep", "call_id": "2"}),
        ]
    )
    items = g.truncate_to_budget(g.contents(list(sess.records)))
    outs = [c for c in items if c.kind == "response"]
    assert outs[1].truncated == [False] and outs[1].parts[0]["functionResponse"]["response"]["output"] == big
    assert outs[0].truncated == [True]
    assert "Output too large." in outs[0].parts[0]["functionResponse"]["response"]["output"]


# --------------------------------------------------------------------------- trigger


def test_fires_at_half_the_token_limit():
    s = strategies.get(NAME)
    assert s.algorithm_version == "gemini-cli-2" and s.estimator == "tiktoken"
    assert s.fires(64_000, ctx_for()) and not s.fires(63_999, ctx_for())
    assert s.fires(89_600, ctx_for(compression_threshold=0.7)) and not s.fires(
        89_599, ctx_for(compression_threshold=0.7)
    )


# --------------------------------------------------------------------------- request shape and the probe


def test_summary_request_shape_and_verification_probe():
    """'should compress if over token threshold with verification turn': two calls, the second's answer used."""
    prov = FakeSummarizer("<state_snapshot>S</state_snapshot>")
    p = strategies.compact(session(), NAME, None, ctx_for(summarizer=prov))
    assert len(prov.requests) == 2
    req, vreq = prov.requests
    assert req is p.summary_request and req.shape == "own-system+history" and req.tools == ()
    assert req.system == g.COMPRESSION_PROMPT and req.template == "gemini-state-snapshot"
    assert req.messages[-1] == {"role": "user", "content": f"{g.ANCHOR_NEW}\n\n{g.INSTRUCTION_TAIL}"}
    assert req.messages[0]["content"] == "ENV context: cwd /repo"
    assert vreq.messages[:-2] == req.messages[:-1]
    assert vreq.messages[-2] == {"role": "assistant", "content": "<state_snapshot>S</state_snapshot>"}
    assert vreq.messages[-1]["content"] == g.VERIFY_INSTRUCTION
    assert p.notes["compression_status"] == "COMPRESSED" and p.notes["verify"]["used"]
    for tag in (
        "<overall_goal>",
        "<active_constraints>",
        "<key_knowledge>",
        "<artifact_trail>",
        "<file_system_state>",
        "<recent_actions>",
        "<task_state>",
        "### CRITICAL SECURITY RULE",
        "### GOAL",
    ):
        assert tag in g.COMPRESSION_PROMPT
    assert set(strategies.get(NAME).prompts(ctx_for())) >= {"system", "instruction", "verify", "ack"}


def test_anchored_instruction_with_previous_snapshot():
    """'should use anchored instruction when a previous snapshot is present'."""
    sess = make_session(
        [
            ("summary", "<state_snapshot>old</state_snapshot>"),
            ("assistant", "msg2"),
            ("user", "msg3"),
            ("assistant", "msg4"),
        ]
    )
    prov = FakeSummarizer()
    strategies.compact(sess, NAME, None, ctx_for(summarizer=prov))
    assert prov.requests[0].messages[-1]["content"].startswith("A previous <state_snapshot> exists")


def test_next_request_layout():
    p = strategies.compact(session(), NAME, None, ctx_for(summarizer=FakeSummarizer("SNAP")))
    kinds = [s.kind for s in p.segments]
    assert kinds[:5] == ["system", "tools", "user_original", "summary", "header"]
    assert p.segments[3].text == "SNAP" and p.segments[3].role == "user"
    assert p.segments[4].text == g.ACK and p.segments[4].role == "assistant"
    tail = p.segments[5:]
    assert tail and all(s.kind == "tail" for s in tail) and tail[0].role == "user" and tail[0].record_kind == "user"
    kept = p.notes["kept_entries"]
    assert kept == [r.entry_id for r in session().records if r.entry_id in kept]  # order kept


def test_empty_verification_falls_back_to_first_summary():
    """'should fall back to initial summary if verification response is empty' -- upstream's test mocks the
    client; through the real one an empty answer is retried, then thrown (the default: test_empty_answer_arms.py),
    so the port runs under ``on_failure: placeholder``."""

    class Two(FakeSummarizer):
        def summarize(self, request):
            super().summarize(request)
            from compaction_lab.summarize import SummaryResult

            return SummaryResult("Initial Summary" if len(self.requests) == 1 else "   ")

    p = strategies.compact(session(), NAME, None, ctx_for(summarizer=Two(), on_failure="placeholder"))
    assert [s.text for s in p.segments if s.kind == "summary"] == ["Initial Summary"]


def test_inflated_count_rejected_keeps_history():
    """'should return FAILED if new token count is inflated': upstream keeps the history unchanged."""
    sess = make_session([("user", "msg1"), ("assistant", "msg2"), ("user", "msg3"), ("assistant", "msg4")])
    p = strategies.compact(sess, NAME, None, ctx_for(summarizer=FakeSummarizer("a " * 5000)))
    assert p.notes["compression_status"] == "COMPRESSION_FAILED_INFLATED_TOKEN_COUNT"
    assert "summary" not in [s.kind for s in p.segments]
    assert p.notes["compaction_failed"] == "COMPRESSION_FAILED_INFLATED_TOKEN_COUNT: history kept"


def test_a_rejection_keeps_the_history_even_over_the_window():
    """chatCompressionService.ts:413-460 return ``newHistory: null`` whatever the size: the next request overflows
    (client.ts:709-715). ``on_rejection: compress`` is the lab's older decision: compress anyway past W − O.
    (Empty answers reach the rejection only with a client that does not retry: ``on_failure: placeholder``.)"""
    sess = session(n=6, body=400)
    kw = {"window": 6000, "output": 1000, "on_failure": "placeholder"}
    p = strategies.compact(sess, NAME, None, ctx_for(summarizer=FakeSummarizer(""), **kw))
    assert p.notes["compression_status"] == "COMPRESSION_FAILED_EMPTY_SUMMARY" and not p.notes["fits"]
    assert p.notes["compaction_failed"] == "COMPRESSION_FAILED_EMPTY_SUMMARY: history kept"
    assert [s.text for s in p.segments[2:]] == [r.text for r in sess.records if r.kind != "system"]
    forced = strategies.compact(sess, NAME, None, ctx_for(summarizer=FakeSummarizer(""), on_rejection="compress", **kw))
    assert forced.notes["rejection_overridden"] == "COMPRESSION_FAILED_EMPTY_SUMMARY" and forced.notes["fits"]
    assert "summary" in [s.kind for s in forced.segments]
    with pytest.raises(ValueError, match="gemini-cli on_rejection 'x'"):
        strategies.compact(sess, NAME, None, ctx_for(on_rejection="x"))


def test_no_provider_gives_empty_template():
    """``on_failure: placeholder`` (the default keeps the history: test_failure_gemini_cli.py)."""
    p = strategies.compact(session(), NAME, None, ctx_for(on_failure="placeholder"))
    (s,) = [x for x in p.segments if x.kind == "summary"]
    assert s.text == empty_template("gemini-state-snapshot") and p.receipt.fallback


# --------------------------------------------------------------------------- live history


def test_live_history_starts_at_latest_summary():
    path = LOCAL / "pi" / "two-compactions.jsonl"
    (s,) = load_sessions(path)
    ctx = ctx_for()
    lh = g.live_history(s, len(s.records), ctx)
    summaries = [r for r in s.records if r.kind == "summary"]
    assert summaries and lh[0].kind in ("summary", "user") and summaries[-1] in lh
    assert all(r not in lh for r in summaries[:-1])


# --------------------------------------------------------------------------- every session, within capacity


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_000)])
def test_all_sessions_fit(window, output):
    sessions = []
    sessions += list(load_sessions(LOCAL, ImportAudit()))  # tests/fixtures, the real public sessions included
    sessions += [c.session for c in synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=2))]
    ctx = CompactionContext(window=window, output_ceiling=output, summarizer=ExtractiveSummarizer())
    for s in sessions:
        for cut in (len(s.records), len(s.records) // 2):
            p = strategies.compact(s, NAME, cut, ctx)
            assert p.tokens <= p.capacity, (s.id, cut, p.notes)


# --------------------------------------------------------------------------- hostile nesting (issue 25, item 14)


def test_call_arguments_nested_past_the_bound_are_kept_as_text():
    """Was: `RecursionError` from `json.loads`. Arguments deeper than `bounded_json.MAX_DEPTH` become
    ``{"input": <the recorded text>}``, as any arguments that are not JSON do."""
    import json

    from compaction_lab.core.bounded_json import MAX_DEPTH
    from compaction_lab.core.session import Record
    from tests.deep_json import HOSTILE_DEPTH, deep_array

    def call(args: str) -> dict:
        return g._call_part(Record("s", "e", 0, 0, "tool_call", f"bash {args}", tool="bash"))["functionCall"]

    assert call(deep_array(MAX_DEPTH))["args"] == {"input": json.loads(deep_array(MAX_DEPTH))}
    for depth in (MAX_DEPTH + 1, HOSTILE_DEPTH):
        assert call(deep_array(depth))["args"] == {"input": f"bash {deep_array(depth)}"}
