"""Baselines: full, truncate-oldest, observation-masking, claude-code-style — every rule on hand-built
sessions, properties on random sessions, and runs on the real fixtures and synthetic chains."""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from compaction_lab import strategies
from compaction_lab.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.session import Record, Session
from compaction_lab.strategies import baselines as bl
from compaction_lab.strategies.base import CallShape, CompactionContext, history, role_of
from compaction_lab.summarize import NoneProvider, SummaryUnavailable
from compaction_lab.summarize.extractive import ExtractiveProvider, empty_template, request_text
from compaction_lab.tokens import count_tokens

from conftest import SHARED_FIXTURES, make_session, FakeProvider as SharedFakeProvider

SHAPE = CallShape("test", "You are a test agent.",
                  ({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},))
NAMES = ("full", "truncate-oldest", "observation-masking", "claude-code-style")
FRAME = count_tokens(SHAPE.system_prompt) + count_tokens(SHAPE.tools_text())


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(window=window, output_ceiling=output, shape=SHAPE,
                             summarizer=summarizer or NoneProvider(), params=params)


def words(tag: str, n: int) -> str:
    """About n (+2) tokens of text, distinct per tag."""
    return f"{tag}:" + " word" * n


def pair(cid: str, out: str, error: bool = False, target: str = "ls") -> list[tuple]:
    extra = {"tool": "bash", "target": target, "call_id": cid}
    return [("tool_call", f'bash {{"command": "{target}"}}', extra),
            ("tool_output", out, {**extra, "is_error": error})]


def turn(i: int, out_tokens: int = 50, prose: int = 10) -> list[tuple]:
    """One user turn: user, assistant, a call and its output."""
    return [("user", words(f"u{i}", prose)), ("assistant", words(f"a{i}", prose)),
            *pair(f"c{i}", words(f"o{i}", out_tokens))]


def FakeProvider(text: str = "SUMMARY TEXT", error: Exception | None = None) -> SharedFakeProvider:
    return SharedFakeProvider(text, error=error, usage=(1234, 5, 42))


def compact(session, name, cut=None, ctx=None):
    return strategies.compact(session, name, cut=cut, ctx=ctx or ctx_for())


def kinds(p) -> list[str]:
    return [s.kind for s in p.segments]


def segs(p, kind) -> list:
    return [s for s in p.segments if s.kind == kind]


def check_invariants(session: Session, p, ctx: CompactionContext, cut: int | None = None) -> None:
    """Provenance, verbatim text, labels, no orphan outputs, capacity (when the strategy fits)."""
    cut = len(session.records) if cut is None else cut
    before: dict[str, list[Record]] = {}  # an entry may hold several blocks (prose + tool calls)
    for r in history(session, cut):
        before.setdefault(r.entry_id, []).append(r)

    def record_of(s) -> Record:
        (eid,) = s.entry_ids
        cands = [r for r in before[eid] if r.kind == s.record_kind]
        if s.kind != "omitted_marker":
            cands = [r for r in cands if r.text == s.text]
        assert len(cands) >= 1, (s.kind, s.entry_ids, s.text[:80])
        return cands[0]

    shape = ctx.shape.for_session(session)
    assert kinds(p)[:2] == ["system", "tools"]
    assert p.segments[0].text == shape.system_prompt and p.segments[1].text == shape.tools_text()
    for s in p.segments:
        assert set(s.entry_ids) <= set(before), (s.kind, s.entry_ids)
        if s.kind in ("system", "tools"):
            continue
        if s.kind in AUTHORED_KINDS and s.kind != "omitted_marker":
            assert s.text or s.kind == "summary"
            continue
        rec = record_of(s)  # verbatim: the text of a record with that entry id and kind
        assert s.role == role_of(rec)
    # a kept tool output (verbatim or masked) never lacks its call when the call existed
    kept = [s for s in p.segments if s.record_kind in ("tool_call", "tool_output")]
    kept_calls = {record_of(s).call_id for s in kept if s.record_kind == "tool_call"}
    all_calls = {r.call_id for rs in before.values() for r in rs if r.kind == "tool_call"}
    for s in kept:
        if s.record_kind == "tool_output":
            cid = record_of(s).call_id
            if cid in all_calls:
                assert cid in kept_calls, f"orphan output {s.entry_ids}"
    if p.strategy != "full" or p.notes["fits"]:
        assert p.tokens <= p.capacity, (p.strategy, p.tokens, p.capacity)
    assert p.notes["fits"] == (p.tokens <= p.capacity)
    assert p.estimator == "tiktoken" and p.capacity == ctx.window - ctx.output_ceiling


# =========================================================================== registry


def test_registered_with_versions():
    for name, version in zip(NAMES, ("full-1", "truncate-oldest-1", "observation-masking-1", "claude-code-style-1")):
        s = strategies.get(name)
        assert s.name == name and s.algorithm_version == version and s.estimator == "tiktoken"
    assert set(bl.STRATEGIES) == set(NAMES)


# =========================================================================== full


def test_full_keeps_every_record_verbatim():
    sess = make_session([("system", SHAPE.system_prompt), *turn(0), ("meta", "model_change x"), *turn(1),
                         ("system", "A later system note."), ("summary", "An earlier summary.")])
    p = compact(sess, "full")
    body = p.segments[2:]
    recs = [r for r in sess.records if r.kind != "meta"][1:]  # the system prompt record is the system segment
    assert [s.entry_ids for s in body] == [(r.entry_id,) for r in recs]
    assert all(s.kind == "tail" for s in body)
    assert [(s.text, s.record_kind, s.role) for s in body] == [(r.text, r.kind, role_of(r)) for r in recs]
    assert p.notes["fits"] and p.notes["records"] == len(recs)
    check_invariants(sess, p, ctx_for())


def test_full_respects_the_cut():
    sess = make_session([*turn(0), *turn(1)])
    p = compact(sess, "full", cut=3)
    assert [s.entry_ids[0] for s in p.segments[2:]] == ["e0", "e1", "e2"]


def test_full_over_capacity_is_returned_but_flagged():
    sess = make_session([x for i in range(10) for x in turn(i, out_tokens=400)])
    ctx = ctx_for(window=3000, output=1000)
    p = compact(sess, "full", ctx=ctx)
    assert len(p.segments) == 2 + len(sess.records)
    assert p.notes["fits"] is False and p.tokens > p.capacity == 2000
    check_invariants(sess, p, ctx)


def test_full_never_fires():
    assert not strategies.get("full").fires(10**9, ctx_for())


# =========================================================================== truncate-oldest


def test_truncate_keeps_the_newest_records_that_fit():
    items = [("user", words(f"r{i}", 100)) for i in range(20)]
    sess = make_session(items)
    size = count_tokens(items[0][1])
    ctx = ctx_for(window=FRAME + 7 * size + 60 + 1000, output=1000)  # room for 7 records and the header
    p = compact(sess, "truncate-oldest", ctx=ctx)
    kept = [s.entry_ids[0] for s in segs(p, "tail")]
    assert kept == [f"e{i}" for i in range(13, 20)]
    (header,) = segs(p, "header")
    assert kinds(p)[:3] == ["system", "tools", "header"] and header.role == "user"
    assert "the 13 oldest records" in header.text and "truncate-oldest-1" in header.text
    assert header.entry_ids == ()
    assert p.notes["dropped"] == 13 and p.notes["orphans_dropped"] == 0
    # minimal: one more record would not have fitted
    assert p.tokens + size > p.capacity
    check_invariants(sess, p, ctx)


def test_truncate_no_header_when_everything_fits():
    sess = make_session([*turn(0), *turn(1)])
    p = compact(sess, "truncate-oldest")
    assert "header" not in kinds(p) and len(segs(p, "tail")) == 8 and p.notes["dropped"] == 0


def test_truncate_drops_outputs_whose_call_was_dropped():
    big = words("out", 300)
    sess = make_session([("user", words("u", 200)), *pair("c1", big), ("assistant", words("a", 20))])
    # room for the output and the assistant but not the call before it
    strat = strategies.get("truncate-oldest")
    total = sum(count_tokens(r.text) for r in sess.records)
    reserve = count_tokens(strat.header(len(sess.records), total))
    room = count_tokens(big) + count_tokens(sess.records[-1].text) + reserve
    ctx = ctx_for(window=FRAME + room + 1000, output=1000)
    p = compact(sess, "truncate-oldest", ctx=ctx)
    assert [s.record_kind for s in segs(p, "tail")] == ["assistant"]
    assert p.notes["orphans_dropped"] == 1 and p.notes["dropped"] == 3
    assert "the 3 oldest records" in segs(p, "header")[0].text
    check_invariants(sess, p, ctx)


def test_truncate_keeps_outputs_that_never_had_a_call():
    sess = make_session([("user", words("u", 500)), ("tool_output", "stray output", {"call_id": "nope"}),
                         ("assistant", "ok")])
    ctx = ctx_for(window=FRAME + 200 + 1000, output=1000)
    p = compact(sess, "truncate-oldest", ctx=ctx)
    assert [s.record_kind for s in segs(p, "tail")] == ["tool_output", "assistant"]


def test_truncate_drops_everything_when_nothing_fits():
    sess = make_session([("user", words("u", 50))])
    ctx = ctx_for(window=FRAME + 10, output=0)
    p = compact(sess, "truncate-oldest", ctx=ctx)
    assert segs(p, "tail") == [] and p.notes["dropped"] == 1 and p.notes["fits"] is False


def test_truncate_fires_at_capacity():
    s, ctx = strategies.get("truncate-oldest"), ctx_for(100_000, 20_000)
    assert s.fires(80_000, ctx) and not s.fires(79_999, ctx)


# =========================================================================== observation-masking


def test_masking_replaces_old_outputs_only():
    sess = make_session([("system", SHAPE.system_prompt)] + [x for i in range(4) for x in turn(i)])
    ctx = ctx_for(mask_after_turns=2)
    p = compact(sess, "observation-masking", ctx=ctx)
    markers = segs(p, "omitted_marker")
    assert [m.entry_ids for m in markers] == [("e4",), ("e8",)]  # outputs of turns 0 and 1
    for m in markers:
        rec = next(r for r in sess.records if r.entry_id == m.entry_ids[0])
        assert m.text == f"[tool output omitted — entry {rec.entry_id}, {count_tokens(rec.text)} tokens; " \
                         "retrievable from the session archive]"
        assert m.role == "tool" and m.record_kind == "tool_output"
    # prose and calls of old turns stay verbatim; the last two turns are the tail
    old = [s for s in p.segments[2:] if s.kind not in ("omitted_marker", "tail")]
    assert [(s.kind, s.record_kind) for s in old] == [
        ("user_original", "user"), ("assistant_original", "assistant"), ("assistant_original", "tool_call"),
    ] * 2
    assert [s.entry_ids[0] for s in segs(p, "tail")] == [f"e{i}" for i in range(9, 17)]
    assert p.notes["masked"] == 2 and p.notes["dropped"] == 0 and "header" not in kinds(p)
    check_invariants(sess, p, ctx)


def test_masking_default_is_ten_turns():
    sess = make_session([x for i in range(12) for x in turn(i)])
    p = compact(sess, "observation-masking")
    assert p.notes["mask_after_turns"] == 10 and p.notes["masked"] == 2 and p.notes["turns"] == 12


def test_masking_turns_start_at_real_user_messages():
    items = [("assistant", "preamble"), *pair("c0", "pre output"),   # before the first user: turn 0
             ("user", "first"), *pair("c1", "out one"),
             ("user", "AGENTS.md injected", {"injected": True}), *pair("c2", "out two"),  # same turn
             ("user", "second"), *pair("c3", "out three")]
    sess = make_session(items)
    p = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=1))
    assert p.notes["turns"] == 2
    assert [m.entry_ids[0] for m in segs(p, "omitted_marker")] == ["e2", "e5", "e8"]


def test_masking_step_unit():
    items = [("user", "go"), ("assistant", "step one"), *pair("c1", "o1"), ("reasoning", "think"),
             ("assistant", "step two"), *pair("c2", "o2"), ("assistant", "step three"), *pair("c3", "o3")]
    sess = make_session(items)
    p = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=2, turn_unit="step"))
    assert p.notes["turns"] == 4  # user, then three assistant steps (reasoning + prose is one step)
    assert [m.entry_ids[0] for m in segs(p, "omitted_marker")] == ["e3"]


def test_masking_fallback_drops_oldest_masked_turns():
    sess = make_session([x for i in range(8) for x in turn(i, out_tokens=300, prose=100)])
    ctx = ctx_for(window=FRAME + 1900 + 1000, output=1000, mask_after_turns=2)
    p = compact(sess, "observation-masking", ctx=ctx)
    assert p.notes["fallback_steps"] == ["drop-masked-turns"]
    assert p.notes["dropped_turns"] >= 1
    (header,) = segs(p, "header")
    assert f"{p.notes['dropped_turns']} oldest turns" in header.text and header.entry_ids == ()
    kept_users = [s.text for s in p.segments if s.record_kind == "user"]
    assert kept_users == [words(f"u{i}", 100) for i in range(p.notes["dropped_turns"], 8)]
    assert [s.entry_ids[0] for s in segs(p, "tail")][0] == "e24"  # the last two turns stay verbatim
    check_invariants(sess, p, ctx)


def test_masking_fallback_masks_recent_then_drops_records():
    sess = make_session([x for i in range(3) for x in turn(i, out_tokens=600, prose=50)])
    ctx = ctx_for(window=FRAME + 400 + 1000, output=1000, mask_after_turns=3)
    p = compact(sess, "observation-masking", ctx=ctx)
    assert p.notes["fallback_steps"][:1] == ["mask-recent-outputs"]
    assert p.tokens <= p.capacity
    check_invariants(sess, p, ctx)
    tiny = ctx_for(window=FRAME + 120 + 1000, output=1000, mask_after_turns=3)
    q = compact(sess, "observation-masking", ctx=tiny)
    assert q.notes["fallback_steps"] == ["mask-recent-outputs", "drop-oldest-records"]
    check_invariants(sess, q, tiny)


def test_masking_fires_at_capacity():
    s, ctx = strategies.get("observation-masking"), ctx_for(100_000, 20_000)
    assert s.fires(80_000, ctx) and not s.fires(79_999, ctx)


# =========================================================================== claude-code-style


def long_session() -> Session:
    items = [("system", SHAPE.system_prompt)]
    for i in range(12):
        items += turn(i, out_tokens=800, prose=40)
    items.append(("user", "Injected note", {"injected": True}))
    return make_session(items)


def test_claude_projection_layout_and_tail():
    sess = long_session()
    ctx = ctx_for(tail_tokens=2000)
    p = compact(sess, "claude-code-style", ctx=ctx)
    assert kinds(p)[:5] == ["system", "tools", "header", "summary", "continue"]
    assert set(kinds(p)[5:]) == {"tail"}
    tail = segs(p, "tail")
    assert sum(s.tokens for s in tail) <= 2000
    # whole records, newest first, and a call never split from its output
    first = next(r for r in sess.records if r.entry_id == tail[0].entry_ids[0])
    assert first.kind != "tool_output"
    assert [s.entry_ids[0] for s in tail] == [r.entry_id for r in sess.records[first.source_order:]]
    # the next older record would have broken the budget or split a pair
    prev = sess.records[first.source_order - 1]
    assert sum(s.tokens for s in tail) + count_tokens(prev.text) > 2000 or first.kind == "tool_output"
    header = segs(p, "header")[0].text
    assert "claude-code-style-1" in header and "continues an earlier conversation" in header
    assert segs(p, "continue")[0].text == bl.CLAUDE_CONTINUE
    check_invariants(sess, p, ctx)


def test_claude_tail_never_splits_a_call_from_its_output():
    out = words("out", 500)
    sess = make_session([("user", words("u", 50)), *pair("c1", out), ("assistant", "done")])
    ctx = ctx_for(tail_tokens=count_tokens(out) + count_tokens("done") + 2)  # output fits, its call does not
    p = compact(sess, "claude-code-style", ctx=ctx)
    assert [s.record_kind for s in segs(p, "tail")] == ["assistant"]


def test_claude_summary_request_is_dedicated_with_cleared_results():
    sess = long_session()
    prov = FakeProvider()
    ctx = ctx_for(summarizer=prov, tail_tokens=2000, summary_tokens=3000)
    p = compact(sess, "claude-code-style", ctx=ctx)
    (req,) = prov.requests
    assert req is p.summary_request
    assert req.shape == "dedicated" and req.tools == () and req.system == bl.CLAUDE_SUMMARY_SYSTEM
    assert req.template == "claude-code-9" and 0 < req.max_output_tokens <= 3000
    (msg,) = req.messages
    assert msg["role"] == "user"
    content = msg["content"]
    assert content.startswith("<conversation>\n[User]: ") and content.endswith(bl.CLAUDE_NINE_SECTION_INSTRUCTION)
    head_ids = {e for e in req.source_entry_ids}
    head = [r for r in sess.records if r.entry_id in head_ids]
    outs = [r for r in head if r.kind == "tool_output"]
    assert outs and all(r.text not in content for r in outs)
    assert content.count("[Tool result]: [Old tool result content cleared]") == len(outs)
    assert all(r.text in content for r in head if r.kind in ("user", "assistant"))
    assert "[Assistant tool call]: bash" in content
    assert p.notes["cleared_tool_results"] == len(outs) and f"{len(outs)} old tool results cleared" in \
        segs(p, "header")[0].text
    assert segs(p, "summary")[0].entry_ids == tuple(dict.fromkeys(r.entry_id for r in head))
    assert p.receipt.provider == "fake" and p.receipt.input_tokens == 1234 and p.receipt.output_tokens == 42
    assert p.receipt.request_fingerprint == req.fingerprint() and not p.receipt.fallback
    assert segs(p, "summary")[0].text == "SUMMARY TEXT" and segs(p, "summary")[0].label == ""


def test_claude_clearing_can_be_turned_off_and_injected_text_is_labelled():
    sess = long_session()
    prov = FakeProvider()
    ctx = ctx_for(summarizer=prov, tail_tokens=500, clear_tool_results=False)
    compact(sess, "claude-code-style", ctx=ctx)
    content = prov.requests[0].messages[0]["content"]
    assert words("o0", 800) in content and bl.CLEARED_TOOL_RESULT not in content
    transcript, cleared = bl.flatten_head([r for r in sess.records if r.injected], clear=True)
    assert transcript == "[Injected context]: Injected note" and cleared == 0


def test_claude_no_provider_gives_the_empty_template():
    sess = long_session()
    p = compact(sess, "claude-code-style", ctx=ctx_for(tail_tokens=2000))
    (summary,) = segs(p, "summary")
    assert summary.text == empty_template("claude-code-9") and summary.label == ""
    assert p.receipt.fallback and "no summary provider" in p.receipt.error and p.receipt.provider == "none"
    assert p.receipt.text == summary.text and p.summary_request is not None


def test_claude_failing_provider_is_recorded():
    sess = long_session()
    for err, expect in ((RuntimeError("boom"), "RuntimeError: boom"), (SummaryUnavailable("down"), "down")):
        p = compact(sess, "claude-code-style", ctx=ctx_for(summarizer=FakeProvider(error=err)))
        assert p.receipt.fallback and p.receipt.error == expect
        assert segs(p, "summary")[0].text == empty_template("claude-code-9")


def test_claude_extractive_is_labelled_stand_in():
    sess = long_session()
    ctx = ctx_for(summarizer=ExtractiveProvider(), tail_tokens=2000)
    p = compact(sess, "claude-code-style", ctx=ctx)
    (summary,) = segs(p, "summary")
    assert summary.label == STAND_IN_LABEL and p.receipt.stand_in and not p.receipt.fallback
    for name in ("Primary Request and Intent", "All User Messages", "Optional Next Step"):
        assert name in summary.text
    assert words("u0", 40) in summary.text  # the first user message
    # the stand-in only copies request text
    corpus = " ".join(request_text(p.summary_request).split())
    for line in summary.text.split("\n"):
        if line.startswith("- "):
            assert " ".join(line[2:].rstrip("…").split()) in corpus
    check_invariants(sess, p, ctx)


def test_claude_strips_the_analysis_block():
    sess = long_session()
    prov = FakeProvider("<analysis>thinking aloud</analysis>\n<summary>\n1. Primary Request and Intent: X\n</summary>")
    p = compact(sess, "claude-code-style", ctx=ctx_for(summarizer=prov))
    assert segs(p, "summary")[0].text == "1. Primary Request and Intent: X"
    assert bl.strip_analysis("<analysis>a</analysis> plain") == "plain"


def test_claude_overshooting_provider_still_fits():
    sess = long_session()
    ctx = ctx_for(window=9000, output=2000, summarizer=FakeProvider("word " * 9000), tail_tokens=3000)
    p = compact(sess, "claude-code-style", ctx=ctx)
    assert p.tokens <= p.capacity and p.notes["fits"]
    assert p.notes.get("summary_truncated") and segs(p, "tail") == []
    assert p.notes["unsummarised_dropped"]  # records given up are named
    assert "dropped unsummarised" in segs(p, "header")[0].text


def test_claude_nothing_to_summarise_when_the_history_fits_the_tail():
    sess = make_session([*turn(0), *turn(1)])
    prov = FakeProvider()
    p = compact(sess, "claude-code-style", ctx=ctx_for(summarizer=prov))
    assert prov.requests == [] and p.summary_request is None and p.receipt is None
    assert set(kinds(p)[2:]) == {"tail"} and p.notes["summarised"] == 0


def test_claude_small_window_leaves_room_for_the_summary():
    sess = long_session()
    ctx = ctx_for(window=6000, output=1000, summarizer=ExtractiveProvider())
    p = compact(sess, "claude-code-style", ctx=ctx)
    assert p.notes["tail_tokens_used"] <= (5000 - FRAME) // 2
    assert p.summary_request.max_output_tokens > 0 and segs(p, "summary")[0].text
    check_invariants(sess, p, ctx)


def test_claude_prompt_files_override(tmp_path):
    sess = long_session()
    ins, sysf = tmp_path / "ins.txt", tmp_path / "sys.txt"
    ins.write_text("EXACT UPSTREAM INSTRUCTION", encoding="utf-8")
    sysf.write_text("EXACT UPSTREAM SYSTEM", encoding="utf-8")
    prov = FakeProvider()
    p = compact(sess, "claude-code-style", ctx=ctx_for(summarizer=prov, prompt_file=str(ins),
                                                       system_prompt_file=str(sysf)))
    req = prov.requests[0]
    assert req.system == "EXACT UPSTREAM SYSTEM"
    assert req.messages[0]["content"].endswith("</conversation>\n\nEXACT UPSTREAM INSTRUCTION")
    assert p.notes["instruction_sha256"] == bl._sha("EXACT UPSTREAM INSTRUCTION")
    default = compact(sess, "claude-code-style")
    assert default.notes["instruction_sha256"] == bl._sha(bl.CLAUDE_NINE_SECTION_INSTRUCTION)
    assert default.notes["system_prompt_sha256"] == bl._sha(bl.CLAUDE_SUMMARY_SYSTEM)


def test_claude_fires_at_claude_codes_threshold():
    s = strategies.get("claude-code-style")
    ctx = ctx_for(200_000, 32_000)  # reserved output min(32k, 20k) = 20k, buffer 13k
    assert s.fires(167_000, ctx) and not s.fires(166_999, ctx)
    small_out = ctx_for(200_000, 8_000)
    assert s.fires(179_000, small_out) and not s.fires(178_999, small_out)
    tuned = ctx_for(200_000, 32_000, autocompact_buffer=0, reserved_output_cap=0)
    assert s.fires(200_000, tuned) and not s.fires(199_999, tuned)


# =========================================================================== properties

TEXT = st.builds(lambda w, n: " ".join([w] * n),
                 st.sampled_from(["alpha", "Error: x", "ORD-1-AB", "app/x.py", "日本", "`k`", "I chose"]),
                 st.integers(0, 400))


@st.composite
def random_sessions(draw):
    n = draw(st.integers(0, 45))
    items: list[tuple] = []
    if draw(st.booleans()):
        items.append(("system", SHAPE.system_prompt))
    calls: list[str] = []
    for _ in range(n):
        k = draw(st.sampled_from(["user", "user", "injected", "assistant", "assistant", "reasoning", "call",
                                  "call", "output", "output", "stray", "meta", "summary", "system"]))
        text = draw(TEXT)
        if k == "injected":
            items.append(("user", text, {"injected": True}))
        elif k == "call":
            cid = f"c{len(calls)}"
            calls.append(cid)
            items.append(("tool_call", f"bash {text}", {"tool": "bash", "call_id": cid}))
        elif k == "output" and calls:
            cid = draw(st.sampled_from(calls))
            items.append(("tool_output", text, {"tool": "bash", "call_id": cid, "is_error": draw(st.booleans())}))
        elif k == "stray":
            items.append(("tool_output", text, {"call_id": draw(st.sampled_from([None, "missing"]))}))
        elif k in ("user", "assistant", "reasoning", "meta", "summary", "system"):
            items.append((k, text))
    return make_session(items)


@settings(max_examples=50, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sess=random_sessions(), window=st.integers(1_500, 40_000), frac=st.sampled_from([0.05, 0.25, 0.5]),
       m=st.integers(0, 4), tail=st.integers(0, 4_000), cut_frac=st.floats(0, 1),
       extractive=st.booleans())
def test_properties_on_random_sessions(sess, window, frac, m, tail, cut_frac, extractive):
    cut = round(len(sess.records) * cut_frac)
    ctx = ctx_for(window=window, output=int(window * frac), summarizer=ExtractiveProvider() if extractive else None,
                  mask_after_turns=m, tail_tokens=tail, summary_tokens=2_000)
    for name in NAMES:
        p = compact(sess, name, cut=cut, ctx=ctx)
        check_invariants(sess, p, ctx, cut)
        for s in p.segments:
            if s.kind == "summary":
                assert s.label == (STAND_IN_LABEL if extractive else "")
        if name == "observation-masking" and p.notes["dropped"] == 0:
            prose = [r for r in history(sess, cut) if r.kind in ("user", "assistant", "reasoning", "tool_call")]
            kept = {s.entry_ids[0] for s in p.segments if s.record_kind in ("user", "assistant", "reasoning",
                                                                             "tool_call")}
            assert {r.entry_id for r in prose} <= kept  # prose and calls are never masked
        if name == "truncate-oldest" and p.notes["dropped"] == 0:
            assert len(segs(p, "tail")) == len(bl._records(sess, cut, dataclasses.replace(
                ctx, shape=ctx.shape.for_session(sess))))


# =========================================================================== real and synthetic sessions


def _sessions():
    from compaction_lab.ingest import load_sessions, synthetic

    out = list(load_sessions(SHARED_FIXTURES)) if SHARED_FIXTURES.exists() else []
    out.append(synthetic.generate_chains(synthetic.SyntheticProfile(n_chains=1, window_tokens=128_000))[0].session)
    return out


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_000)])
@pytest.mark.parametrize("provider", ["none", "extractive"])
def test_real_and_synthetic_sessions(window, output, provider):
    summarizer = ExtractiveProvider() if provider == "extractive" else NoneProvider()
    ctx = CompactionContext(window=window, output_ceiling=output, summarizer=summarizer)
    for sess in _sessions():
        for name in NAMES:
            p = strategies.compact(sess, name, ctx=ctx)
            check_invariants(sess, p, dataclasses.replace(ctx, shape=ctx.shape.for_session(sess)))
            assert p.tokens > 0
            if name != "full":
                assert p.notes["fits"]


def test_one_million_token_session_is_fast():
    from compaction_lab.ingest import synthetic

    base = synthetic.generate_chains(synthetic.SyntheticProfile(n_chains=1, window_tokens=128_000))[0].session
    recs = []
    for k in range(8):  # ~1M tokens: the chain eight times over, ids and call ids made unique
        for r in base.records:
            if k and r.kind == "system":
                continue
            recs.append(dataclasses.replace(r, entry_id=f"{k}-{r.entry_id}", source_order=len(recs),
                                            call_id=f"{k}-{r.call_id}" if r.call_id else None))
    sess = Session(id=base.id, source_format="synthetic", records=tuple(recs))
    ctx = CompactionContext(window=1_000_000, output_ceiling=32_000, summarizer=ExtractiveProvider())
    strategies.compact(sess, "full", ctx=ctx)  # warm the token cache once
    for name in NAMES:
        t = time.perf_counter()
        p = strategies.compact(sess, name, ctx=ctx)
        assert time.perf_counter() - t < 1.0, name
        assert p.tokens > 0
