"""FutureOS strategies: trigger, budgets, tail, head (user / assistant originals, demotions),
evidence, the prefix-shared summary request, the fallback, and properties on random sessions."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab import strategies
from compaction_lab.core.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import count_tokens
from compaction_lab.strategies.arms import futureos as fo
from compaction_lab.strategies.base import CompactionContext, history, role_of
from compaction_lab.strategies.evidence import INDEX_HEADER
from compaction_lab.strategies.trigger import (
    EVIDENCE_TOKENS,
    HISTORY_MAX,
    HISTORY_TARGET,
    TAIL_TOKENS,
    futureos_budgets,
    futureos_trigger,
)
from compaction_lab.summarize import NoSummarizer, SummaryUnavailable
from tests.helpers import PUBLIC_FIXTURES, make_session
from tests.helpers import FakeSummarizer as SharedFakeProvider

SHAPE = CallShape(
    "test",
    "You are a test agent.",
    ({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},),
)
NAMES = ("futureos-deterministic", "futureos-summarized")


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
    )


def words(tag: str, n: int) -> str:
    """About n (+3) tokens of text, distinct per tag."""
    return f"{tag}:" + " word" * n


def pair(target: str, out: str, cid: str, error: bool = False) -> list[tuple]:
    extra = {"tool": "bash", "target": target, "call_id": cid}
    return [("tool_call", f'bash {{"command": "{target}"}}', extra), ("tool_output", out, {**extra, "is_error": error})]


def FakeSummarizer(text: str = "GOAL: ship it. NEXT: run tests.", error: Exception | None = None) -> SharedFakeProvider:
    """Records every request; answers with a fixed text (or raises)."""
    return SharedFakeProvider(text, error=error, usage=(1000, 990, 12))


def compact(session, name="futureos-deterministic", cut=None, ctx=None):
    return strategies.compact(session, name, cut=cut, ctx=ctx or ctx_for())


def kinds(p) -> list[str]:
    return [s.kind for s in p.segments]


def segs(p, kind) -> list:
    return [s for s in p.segments if s.kind == kind]


# =========================================================================== trigger


def test_trigger_one_million_window():
    t = futureos_trigger(1_000_000, 32_000)
    assert (t.economic, t.margin, t.hard, t.effective) == (800_000, 2_048, 965_952, 800_000)
    assert t.bound == "economic"


def test_trigger_small_window_where_output_binds():
    t = futureos_trigger(16_000, 8_000)
    assert (t.economic, t.margin, t.hard, t.effective) == (12_800, 1_000, 7_000, 7_000)
    assert t.bound == "output"


def test_trigger_floor_and_fires():
    t = futureos_trigger(1_001, 0)
    assert t.economic == 800 and t.margin == 62
    ctx = ctx_for(1_000_000, 32_000)
    for name in NAMES:
        strat = strategies.get(name)
        assert not strat.fires(800_000, ctx) and strat.fires(800_001, ctx)
        assert strategies.get(name).fires(7_001, ctx_for(16_000, 8_000))
        assert not strategies.get(name).fires(7_000, ctx_for(16_000, 8_000))


def test_budgets_defaults_and_capacity_formula():
    b = futureos_budgets(futureos_trigger(1_000_000, 32_000), 3_000, 5_000)
    assert (b.tail, b.evidence, b.summary, b.history_target, b.history_max) == (
        TAIL_TOKENS,
        EVIDENCE_TOKENS,
        0,
        HISTORY_TARGET,
        HISTORY_MAX,
    )
    assert b.capacity == 800_000 - 3_000 - 5_000 - 8_192 - 2_048 - 0 - 2_048
    assert b.history == 32_768
    raised = futureos_budgets(futureos_trigger(1_000_000, 32_000), 0, 0, history_target=500_000)
    assert raised.history == HISTORY_MAX  # raised up to history_max, never past
    tight = futureos_budgets(futureos_trigger(60_000, 30_000), 1_000, 1_000)
    assert tight.history == max(0, tight.capacity) < HISTORY_TARGET  # never past real capacity


def test_resolve_budgets_scales_down_in_small_windows():
    big = fo.resolve_budgets(ctx_for(128_000, 32_000), with_summary=True)
    assert big.scale == 1.0 and big.budgets.tail == TAIL_TOKENS and big.budgets.summary == 4_096
    assert fo.resolve_budgets(ctx_for(), with_summary=False).budgets.summary == 0
    small = fo.resolve_budgets(ctx_for(16_000, 8_000), with_summary=True)
    b = small.budgets
    assert 0 < small.scale < 1
    assert b.tail < TAIL_TOKENS and b.evidence < EVIDENCE_TOKENS
    assert b.system + b.tools + b.tail + b.evidence + b.summary + b.margin + b.history <= b.effective == 7_000


def test_registry_names_versions_estimator():
    det, summ = (strategies.get(n) for n in NAMES)
    assert (det.algorithm_version, summ.algorithm_version) == ("deterministic-2", "summarized-2")
    assert det.estimator == summ.estimator == "tiktoken"


# =========================================================================== tail


def test_tail_is_verbatim_whole_records_about_tail_tokens():
    items = [("user", words("u", 30))] + [("assistant", words(f"a{i}", 100)) for i in range(10)]
    s = make_session(items)
    p = compact(s, ctx=ctx_for(tail_tokens=350))
    tail = segs(p, "tail")
    assert [t.entry_ids[0] for t in tail] == ["e8", "e9", "e10"]  # three 100-token records fit 350
    for t in tail:
        rec = s.records[int(t.entry_ids[0][1:])]
        assert t.text == rec.text and t.record_kind == rec.kind and t.role == role_of(rec)
    assert p.notes["tail_start"] == 8


def test_tail_never_splits_a_call_from_its_output():
    s = make_session(
        [
            ("user", "run it"),
            ("assistant", words("a", 50)),
            *pair("make", words("out", 300), "c1"),
            ("assistant", words("z", 20)),
        ]
    )
    call, out, last = (count_tokens(s.records[i].text) for i in (2, 3, 4))
    # the output and the last message fit, but the call would be left behind: neither goes in
    p = compact(s, ctx=ctx_for(tail_tokens=out + last + call - 1))
    assert [t.entry_ids[0] for t in segs(p, "tail")] == ["e4"]
    assert [x.entry_ids for x in segs(p, "evidence_index")] == [("e2", "e3")]
    p = compact(s, ctx=ctx_for(tail_tokens=out + last + call))
    assert [t.entry_ids[0] for t in segs(p, "tail")] == ["e2", "e3", "e4"]


def test_tail_never_splits_parallel_calls():
    s = make_session(
        [
            ("user", "go"),
            ("assistant", "three at once"),
            ("tool_call", "bash a", {"tool": "bash", "target": "a", "call_id": "c1"}),
            ("tool_call", "bash b", {"tool": "bash", "target": "b", "call_id": "c2"}),
            ("tool_output", words("x", 100), {"tool": "bash", "call_id": "c1"}),
            ("tool_output", words("y", 100), {"tool": "bash", "call_id": "c2"}),
        ]
    )
    assert fo.tail_boundaries(s.records) == [True, True, True, False, False, False, True]
    for budget in range(0, 300, 10):
        p = compact(s, ctx=ctx_for(tail_tokens=budget))
        tail_ids = {
            t.entry_ids[0]
            for t in p.segments
            if t.kind in ("tail", "omitted_marker") and t.record_kind in ("tool_call", "tool_output")
        }
        assert tail_ids in (set(), {"e2", "e3", "e4", "e5"})


def test_oversize_single_tail_record_is_excerpted_with_marker():
    big = "HEAD-START " + words("mid", 3000) + " TAIL-END"
    s = make_session([("user", "summarise the log"), ("assistant", big)])
    p = compact(s, ctx=ctx_for(tail_tokens=400))
    assert not segs(p, "tail")
    ex = [x for x in p.segments if x.kind == "omitted_marker" and x.entry_ids == ("e1",)]
    assert len(ex) == 1
    seg = ex[0]
    assert seg.text.startswith("HEAD-START") and seg.text.endswith("TAIL-END")
    assert "tokens omitted from entry e1 — retrievable with history get e1" in seg.text
    assert seg.tokens <= 400 and seg.record_kind == "assistant" and seg.role == "assistant"
    assert seg.label and p.notes["tail_excerpted"] == ["e1"]
    assert p.segments[-1] is seg  # still the tail position


def test_oversize_call_output_unit_keeps_call_verbatim_and_excerpts_output():
    s = make_session([("user", "go"), *pair("cat big.log", words("log", 2000), "c1")])
    p = compact(s, ctx=ctx_for(tail_tokens=300))
    last_two = p.segments[-2:]
    assert last_two[0].kind == "tail" and last_two[0].entry_ids == ("e1",)
    assert last_two[1].kind == "omitted_marker" and last_two[1].entry_ids == ("e2",)
    assert last_two[1].role == "tool" and "tokens omitted from entry e2" in last_two[1].text
    assert last_two[0].tokens + last_two[1].tokens <= 300


# =========================================================================== head


def test_user_text_always_kept_even_past_the_history_target():
    items = []
    for i in range(8):
        items += [("user", words(f"u{i}", 80)), ("assistant", words(f"a{i}", 200))]
    items.append(("assistant", "ok"))
    s = make_session(items)
    p = compact(s, ctx=ctx_for(tail_tokens=5, history_target=300, history_max=300))  # no raise
    users = [x.entry_ids[0] for x in segs(p, "user_original")]
    assert users == [f"e{2 * i}" for i in range(8)]  # all 8 users (640 tokens) despite a 300 target
    for x in segs(p, "user_original"):
        assert x.text == s.records[int(x.entry_ids[0][1:])].text and x.role == "user"
    assert not segs(p, "assistant_original")
    assert p.notes["user_demoted"] == []


def test_assistant_originals_newest_first_and_demotions_labelled():
    items = [("user", "do the thing")] + [("assistant", words(f"a{i}", 150)) for i in range(6)] + [("user", "and?")]
    s = make_session(items)
    p = compact(s, ctx=ctx_for(tail_tokens=5, history_target=700, history_max=700))  # no raise
    kept = [x.entry_ids[0] for x in segs(p, "assistant_original")]
    assert kept and kept == [f"e{i}" for i in range(7 - len(kept), 7)]  # a newest suffix
    assert len(kept) < 6
    markers = [x for x in segs(p, "omitted_marker")]
    assert len(markers) == 1
    m = markers[0]
    assert "omitted / not summarised" in m.text and "summary" not in m.text.replace("summarised", "")
    demoted = [f"e{i}" for i in range(1, 7 - len(kept))]
    assert list(m.entry_ids) == demoted
    assert p.notes["assistant_demoted"] == demoted
    # head items stay chronological: user, marker, kept assistants
    head = [x for x in p.segments if x.kind in ("user_original", "assistant_original", "omitted_marker")]
    assert head[0].entry_ids == ("e0",) and head[1] is m and head[2].entry_ids[0] == kept[0]


def test_single_demotion_marker_text_has_entry_id_and_size():
    text = fo.demotion_marker([("assistant", "E17", 412)])
    assert text == "[assistant output omitted / not summarised — entry E17, 412 tokens; retrievable: history get E17]"
    multi = fo.demotion_marker(
        [
            ("assistant", "a", 1),
            ("assistant", "b", 2),
            ("assistant", "b", 3),
            ("assistant", "c", 4),
            ("assistant", "d", 5),
        ]
    )
    assert multi == (
        "[4 assistant outputs omitted / not summarised — 15 tokens; "
        "retrievable: history get <entry>; entries: a, b, c, d]"
    )
    mixed = fo.demotion_marker([("user", "u1", 10), ("assistant", "a1", 5)])
    assert "1 assistant output and 1 user message omitted / not summarised — 15 tokens" in mixed
    assert mixed.endswith("; entries: u1, a1]")
    assert fo.marker_entry_ids(text) == ["E17"] and fo.marker_entry_ids(multi) == ["a", "b", "c", "d"]
    assert fo.marker_entry_ids(mixed) == ["u1", "a1"] and fo.marker_entry_ids("plain text") == []


def test_select_head_newest_first_with_marker_runs():
    items = [(0, "user", 10), (1, "assistant", 100), (2, "assistant", 100), (3, "assistant", 100), (4, "user", 10)]
    ch = fo.select_head(items, history_room=250, hard_room=1000, marker_cost=20)
    assert ch.kept == {0, 2, 3, 4} and ch.demoted_assistants == (1,) and ch.demoted_users == ()


def test_select_head_skips_a_large_one_and_tries_older():
    items = [(0, "assistant", 50), (1, "assistant", 300), (2, "assistant", 100)]
    ch = fo.select_head(items, history_room=200, hard_room=1000, marker_cost=20)
    assert ch.kept == {0, 2} and ch.demoted_assistants == (1,)


def test_select_head_keeps_a_record_smaller_than_its_marker():
    items = [(0, "user", 10), (1, "assistant", 5), (2, "user", 10)]
    ch = fo.select_head(items, history_room=0, hard_room=100, marker_cost=20)
    assert ch.kept == {0, 1, 2}


def test_select_head_demotes_oldest_users_only_past_real_capacity():
    items = [(0, "user", 50), (1, "user", 50), (2, "user", 50), (3, "assistant", 30)]
    ch = fo.select_head(items, history_room=10, hard_room=150, marker_cost=20)
    assert ch.demoted_users == (0,)  # 100 kept + one marker covering u0 and the assistant
    assert ch.kept == {1, 2} and ch.demoted_assistants == (3,)
    ch = fo.select_head(items, history_room=10, hard_room=10_000, marker_cost=20)
    assert ch.demoted_users == () and {0, 1, 2} <= ch.kept


def test_pathological_user_text_demotes_oldest_with_labelled_markers():
    s = make_session([("user", words(f"u{i}", 400)) for i in range(6)] + [("assistant", "ok")])
    ctx = ctx_for(window=3_000, output=500)  # effective 2,313: user text alone (2,418) cannot all stay
    p = compact(s, ctx=ctx)
    assert p.tokens <= p.capacity
    demoted = p.notes["user_demoted"]
    assert demoted and demoted == [f"e{i}" for i in range(len(demoted))]  # the oldest
    m = segs(p, "omitted_marker")[0]
    assert "user message" in m.text and "omitted / not summarised" in m.text and demoted[0] in m.text


def test_injected_and_system_records_are_left_out_and_noted():
    s = make_session(
        [
            ("system", "You are a test agent."),
            ("user", "<env>cwd=/x</env>", {"injected": True}),
            ("user", "real request"),
            ("system", "mid-session harness note"),
            ("assistant", "answer"),
            ("assistant", words("t", 40)),
        ]
    )
    p = compact(s, ctx=ctx_for(tail_tokens=43))
    texts = [x.text for x in p.segments if x.kind not in ("system", "tools")]
    assert "<env>cwd=/x</env>" not in texts and "mid-session harness note" not in texts
    assert [x.entry_ids for x in segs(p, "user_original")] == [("e2",)]
    assert p.notes["left_out"] == ["e0", "e1", "e3"]
    assert segs(p, "system")[0].text == "You are a test agent."


def test_earlier_summary_records_are_treated_like_assistant_originals():
    s = make_session(
        [
            ("summary", "PRIOR SUMMARY: goal X"),
            ("user", "continue"),
            ("assistant", "working"),
            ("assistant", words("t", 40)),
        ]
    )
    p = compact(s, ctx=ctx_for(tail_tokens=45))
    prior = [x for x in segs(p, "assistant_original") if x.record_kind == "summary"]
    assert len(prior) == 1 and prior[0].text == "PRIOR SUMMARY: goal X" and prior[0].role == "user"


def test_tools_before_the_tail_become_the_evidence_index():
    s = make_session(
        [
            ("user", "fix it"),
            *pair("pytest -q", "FAILED test_x", "c1", True),
            *pair("ls", "a b c", "c2"),
            ("assistant", "fixed"),
            *pair("git diff", words("d", 30), "c3"),
        ]
    )
    p = compact(s, ctx=ctx_for(tail_tokens=45))
    ev = segs(p, "evidence_index")
    assert len(ev) == 1
    lines = ev[0].text.split("\n")
    assert lines[0] == INDEX_HEADER
    rows = [json.loads(x) for x in lines[1:]]
    assert [r["entryId"] for r in rows] == ["e2", "e4"] and rows[0]["error"] is True
    assert set(ev[0].entry_ids) == {"e1", "e2", "e3", "e4"}
    assert [x.entry_ids[0] for x in segs(p, "tail")] == ["e5", "e6", "e7"]  # tail tools stay verbatim
    assert ev[0].tokens <= EVIDENCE_TOKENS


def test_projection_order_and_header():
    s = make_session(
        [
            ("user", "u1"),
            ("assistant", "a1"),
            *pair("ls", "x", "c1"),
            ("user", "u2"),
            ("assistant", "a2"),
            ("assistant", words("t", 40)),
        ]
    )
    p = compact(s, "futureos-summarized", ctx=ctx_for(tail_tokens=43, summarizer=FakeSummarizer()))
    assert kinds(p) == [
        "system",
        "tools",
        "header",
        "user_original",
        "assistant_original",
        "user_original",
        "assistant_original",
        "evidence_index",
        "summary",
        "tail",
    ]
    assert [x.entry_ids for x in p.segments[3:7]] == [("e0",), ("e1",), ("e4",), ("e5",)]
    header = p.segments[2].text
    assert "summarized-2" in header and "2 user messages kept verbatim" in header
    assert "2 of 2 assistant outputs kept verbatim, 0 omitted / not summarised" in header
    assert "2 tool calls/results replaced by an evidence index of 1 rows" in header
    assert p.segments[1].text == SHAPE.tools_text() and p.segments[0].text == SHAPE.system_prompt


# =========================================================================== summarized


def _session_for_summary() -> Session:
    return make_session(
        [
            ("system", "You are a test agent."),
            ("user", "Build ORD-58213-QX export"),
            ("assistant", "Reading"),
            *pair("cat cfg.yaml", "port: 8443", "c1"),
            ("assistant", "Port is 8443"),
            ("user", "use csv"),
            ("assistant", "ok csv"),
            ("meta", "model change"),
        ]
    )


def test_summarized_makes_one_prefix_shared_request():
    s = _session_for_summary()
    prov = FakeSummarizer()
    p = compact(s, "futureos-summarized", ctx=ctx_for(summarizer=prov))
    assert len(prov.requests) == 1
    req = prov.requests[0]
    assert req is p.summary_request
    assert req.shape == "prefix-shared" and req.template == "futureos-handoff"
    assert req.system == SHAPE.system_prompt and req.tools == SHAPE.tools
    assert req.messages[:-1] == (
        {"role": "user", "content": "Build ORD-58213-QX export"},
        # Distinct entries stay distinct messages (`projection.chat_messages`), as the session sent them.
        {"role": "assistant", "content": "Reading"},
        {"role": "assistant", "content": 'bash {"command": "cat cfg.yaml"}'},
        {"role": "tool", "content": "port: 8443"},
        {"role": "assistant", "content": "Port is 8443"},
        {"role": "user", "content": "use csv"},
        {"role": "assistant", "content": "ok csv"},
    )
    assert req.messages[-1] == {"role": "user", "content": fo.HANDOFF_INSTRUCTION}
    b = fo.resolve_budgets(ctx_for(), with_summary=True).budgets
    assert req.max_output_tokens == b.summary - count_tokens(fo.SUMMARY_PREFIX)
    assert req.source_entry_ids == tuple(f"e{i}" for i in range(8))
    # the projection
    assert p.algorithm_version == "summarized-2" and p.strategy == "futureos-summarized"
    summ = segs(p, "summary")
    assert len(summ) == 1 and summ[0].text == fo.SUMMARY_PREFIX + prov.text and summ[0].label
    r = p.receipt
    assert (r.summarizer, r.fallback, r.error, r.text) == ("fake", False, None, prov.text)
    assert (r.input_tokens, r.cached_tokens, r.output_tokens) == (1000, 990, 12)
    assert r.request_fingerprint == req.fingerprint()
    assert p.notes["fallback"] is False


def test_summary_request_messages_match_history_of_the_cut():
    s = _session_for_summary()
    req = fo.summary_request(s, 4, ctx_for(), 100)
    assert [m["content"] for m in req.messages[:-1]] == [
        "Build ORD-58213-QX export",
        "Reading",
        'bash {"command": "cat cfg.yaml"}',
    ]
    assert req.source_entry_ids == ("e0", "e1", "e2", "e3")


def test_summarized_with_the_extractive_provider():
    from compaction_lab.summarize import extractive

    prov = extractive.ExtractiveSummarizer()
    calls = []

    class Counting:
        name, stand_in = prov.name, prov.stand_in

        def summarize(self, request):
            calls.append(request)
            return prov.summarize(request)

    s = _session_for_summary()
    p = compact(s, "futureos-summarized", ctx=ctx_for(summarizer=Counting()))
    assert len(calls) == 1 and calls[0].shape == "prefix-shared"
    assert calls[0].system == SHAPE.system_prompt and calls[0].tools == SHAPE.tools
    assert list(calls[0].messages[:-1]) == list(fo.summary_request(s, len(s.records), ctx_for(), 1).messages[:-1])
    assert p.algorithm_version == "summarized-2" and p.receipt.stand_in and not p.receipt.fallback
    summ = segs(p, "summary")
    assert len(summ) == 1 and summ[0].label == STAND_IN_LABEL
    assert summ[0].tokens <= fo.resolve_budgets(ctx_for(), True).budgets.summary


@pytest.mark.parametrize(
    "prov, needle",
    [
        (NoSummarizer(), "summarizer 'none'"),
        (FakeSummarizer(error=SummaryUnavailable("endpoint unreachable")), "endpoint unreachable"),
        (FakeSummarizer(error=RuntimeError("HTTP 500")), "RuntimeError: HTTP 500"),
        (FakeSummarizer(text="   "), "empty summary"),
    ],
)
def test_fallback_commits_the_deterministic_projection(prov, needle):
    s = _session_for_summary()
    p = compact(s, "futureos-summarized", ctx=ctx_for(summarizer=prov))
    det = compact(s, "futureos-deterministic", ctx=ctx_for())
    assert p.algorithm_version == "deterministic-2" and p.strategy == "futureos-summarized"
    assert p.receipt.fallback is True and needle in p.receipt.error and p.receipt.text == ""
    assert p.receipt.request_fingerprint == p.summary_request.fingerprint()
    assert p.notes["fallback"] is True and not segs(p, "summary")
    assert "fallback" in p.segments[2].text
    strip = lambda proj: [(x.kind, x.text, x.entry_ids) for x in proj.segments if x.kind != "header"]
    assert strip(p) == strip(det)
    assert p.notes["budgets"] == det.notes["budgets"]


def test_overlong_summary_is_cut_to_its_budget():
    prov = FakeSummarizer(text=words("s", 5000))
    p = compact(_session_for_summary(), "futureos-summarized", ctx=ctx_for(summarizer=prov, summary_tokens=300))
    summ = segs(p, "summary")[0]
    assert summ.tokens <= 300 and p.notes["summary_truncated"] is True


def test_prompt_file_overrides_the_instruction(tmp_path):
    f = tmp_path / "prompt.txt"
    f.write_text("EXACT UPSTREAM TEXT", encoding="utf-8")
    req = fo.summary_request(_session_for_summary(), 3, ctx_for(prompt_file=str(f)), 10)
    assert req.messages[-1] == {"role": "user", "content": "EXACT UPSTREAM TEXT"}
    assert fo.handoff_instruction(ctx_for()) == fo.HANDOFF_INSTRUCTION


# =========================================================================== whole sessions


def _check(p, session: Session, cut: int, shape: CallShape) -> None:
    assert p.tokens <= p.capacity, (p.tokens, p.capacity)
    assert p.algorithm_version in ("deterministic-2", "summarized-2") and p.estimator == "tiktoken"
    before = [r for r in session.records if r.source_order < cut]
    ids = {r.entry_id for r in before}
    by_id: dict[str, list] = {}
    for r in before:
        by_id.setdefault(r.entry_id, []).append(r)
    for seg in p.segments:
        assert set(seg.entry_ids) <= ids
        if seg.kind == "system":
            assert seg.text == shape.system_prompt
        elif seg.kind == "tools":
            assert seg.text == shape.tools_text()
        elif seg.kind in AUTHORED_KINDS:
            assert seg.label, seg.kind
        else:
            (eid,) = seg.entry_ids
            assert any(r.text == seg.text and r.kind == seg.record_kind for r in by_id[eid]), seg
    # the tail: every record from tail_start on (system records aside) in order, pairs never split
    start = p.notes["tail_start"]
    hist = history(session, cut)
    tail_recs = [r for r in hist if r.source_order >= start and r.kind != "system"]
    tail_segs = [
        s for s in p.segments if s.kind == "tail" or (s.kind == "omitted_marker" and s.label.startswith("excerpt"))
    ]
    assert [(s.entry_ids[0], s.record_kind) for s in tail_segs] == [(r.entry_id, r.kind) for r in tail_recs]
    pos = next((i for i, r in enumerate(hist) if r.source_order >= start), len(hist))
    assert fo.tail_boundaries(hist)[pos]
    # user text: kept verbatim unless noted as demoted
    demoted = set(p.notes["user_demoted"])
    users = [r.entry_id for r in hist if r.source_order < start and r.kind == "user" and not r.injected]
    kept = [s.entry_ids[0] for s in p.segments if s.kind == "user_original"]
    assert kept == [u for u in users if u not in demoted]
    # every demoted entry id is named in a marker's text (issue 13 item 7), and the raise stays in bounds
    named = [
        e
        for m in p.segments
        if m.kind == "omitted_marker" and m.label == "omitted / not summarised"
        for e in fo.marker_entry_ids(m.text)
    ]
    assert set(named) == set(p.notes["assistant_demoted"]) | demoted
    b = p.notes["budgets"]
    assert b["history"] <= max(
        0, min(b["history_target"], b["history_max"], b["capacity"]), min(b["history_max"], b["capacity"])
    )


_VOCAB = [
    "alpha",
    "beta",
    "config.yaml",
    "ORD-1234",
    "error:",
    "pytest",
    "ünïcode",
    "日本",
    "{",
    "}",
    "\n",
    "path/to/file.py",
    "42",
    "  ",
    "retry",
]


def _text(seed: int, n: int) -> str:
    return " ".join(_VOCAB[(seed * 31 + i * 7) % len(_VOCAB)] for i in range(n))


@st.composite
def random_sessions(draw):
    n = draw(st.integers(1, 45))
    items: list[tuple] = []
    k = 0
    for i in range(n):
        what = draw(
            st.sampled_from(
                [
                    "user",
                    "user",
                    "injected",
                    "assistant",
                    "assistant",
                    "reasoning",
                    "tool",
                    "tool",
                    "parallel",
                    "orphan_call",
                    "system",
                    "summary",
                    "meta",
                ]
            )
        )
        size = draw(st.one_of(st.integers(0, 120), st.integers(0, 120), st.integers(300, 3000)))
        text = _text(i, size)
        if what == "injected":
            items.append(("user", text, {"injected": True}))
        elif what in ("tool", "parallel", "orphan_call"):
            m = 1 if what != "parallel" else draw(st.integers(2, 3))
            ids = [f"c{k + j}" for j in range(m)]
            k += m
            target = draw(st.sampled_from(["ls", "config.yaml", "pytest -q", "src/app.py"]))
            for cid in ids:
                items.append(("tool_call", f"bash {target}", {"tool": "bash", "target": target, "call_id": cid}))
            if what != "orphan_call":
                for cid in draw(st.permutations(ids)):
                    items.append(
                        ("tool_output", text, {"tool": "bash", "call_id": cid, "is_error": draw(st.booleans())})
                    )
        else:
            items.append((what, text))
    session = make_session(items)
    cut = draw(st.integers(0, len(session.records)))
    return session, cut


@settings(max_examples=50, derandomize=True, deadline=None)
@given(
    random_sessions(),
    st.sampled_from([(128_000, 32_000), (16_000, 8_000), (8_000, 2_000), (6_000, 1_000)]),
    st.sampled_from(
        [
            {},
            {"tail_tokens": 60, "history_target": 300, "evidence_tokens": 200},
            {"tail_tokens": 0, "history_target": 0, "evidence_tokens": 0, "summary_tokens": 50},
            {"tail_tokens": 2_000, "history_target": 500},
        ]
    ),
    st.sampled_from(["none", "fake", "extractive"]),
)
def test_property_random_sessions(sc, window, params, provider):
    session, cut = sc
    if provider == "extractive":
        try:
            from compaction_lab.summarize.extractive import ExtractiveSummarizer

            prov = ExtractiveSummarizer()
        except ImportError:
            prov = FakeSummarizer()
    else:
        prov = FakeSummarizer() if provider == "fake" else NoSummarizer()
    ctx = ctx_for(*window, summarizer=prov, **params)
    for name in NAMES:
        p = strategies.compact(session, name, cut=cut, ctx=ctx)
        _check(p, session, cut, SHAPE.for_session(session))
        assert not p.notes["overflow"]


@pytest.fixture(scope="module")
def chain128() -> Session:
    from compaction_lab.ingest import synthetic

    return synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1))[0].session


def _fixture_sessions() -> list[Session]:
    from compaction_lab.ingest import load_sessions

    return list(load_sessions(PUBLIC_FIXTURES))


@pytest.mark.parametrize("window", [(128_000, 32_000), (16_000, 8_000)])
@pytest.mark.parametrize("name", NAMES)
def test_synthetic_chain_and_real_fixtures(chain128, window, name):
    sessions = [chain128, *_fixture_sessions()]
    ctx_sum = FakeSummarizer() if name.endswith("summarized") else NoSummarizer()
    for s in sessions:
        ctx = CompactionContext(window=window[0], output_ceiling=window[1], summarizer=ctx_sum)
        shape = ctx.shape.for_session(s)
        for cut in (len(s.records), len(s.records) // 2):
            p = strategies.compact(s, name, cut=cut, ctx=ctx)
            _check(p, s, cut, shape)
            assert not p.notes["overflow"]
            assert p.tokens >= count_tokens(shape.system_prompt)
    assert _fixture_sessions(), "the real public sessions (tests/fixtures/public) are missing"


def test_synthetic_chain_keeps_users_assistants_and_evidence(chain128):
    p = strategies.compact(chain128, "futureos-deterministic", ctx=CompactionContext())
    assert p.notes["evidence_rows"] > 0 and segs(p, "evidence_index")[0].tokens <= EVIDENCE_TOKENS
    assert p.notes["user_demoted"] == []
    n_users = sum(
        1 for r in chain128.records if r.kind == "user" and not r.injected and r.source_order < p.notes["tail_start"]
    )
    assert len(segs(p, "user_original")) == n_users


def test_speed_long_session(chain128):
    # ~8x the 128k chain (about 1M tokens) with unique entry ids
    recs = []
    for rep in range(8):
        for r in chain128.records:
            recs.append(
                dataclasses.replace(
                    r,
                    entry_id=f"{r.entry_id}-{rep}",
                    source_order=len(recs),
                    call_id=f"{r.call_id}-{rep}" if r.call_id else None,
                )
            )
    big = Session(id=chain128.id, source_format="synthetic", records=tuple(recs))
    ctx = CompactionContext(window=1_000_000, output_ceiling=32_000, summarizer=FakeSummarizer())
    for name in NAMES:
        strategies.compact(big, name, ctx=ctx)  # warm the count cache
        p = strategies.compact(big, name, ctx=ctx)  # how fast: `make bench BENCH=strategies`
        assert p.tokens <= p.capacity


def test_defensive_overflow_guard_demotes_oldest_kept_assistants(monkeypatch):
    # If the selection ever over-commits, the oldest kept assistants are demoted until it fits.
    monkeypatch.setattr(fo, "select_head", lambda items, **kw: fo.HeadChoice(frozenset(p for p, _, _ in items), (), ()))
    s = make_session([("user", "go")] + [("assistant", words(f"a{i}", 500)) for i in range(20)] + [("user", "end")])
    p = compact(s, ctx=ctx_for(window=8_000, output=1_000))
    assert p.tokens <= p.capacity and not p.notes["overflow"]
    kept = [x.entry_ids[0] for x in segs(p, "assistant_original")]
    demoted = p.notes["assistant_demoted"]
    assert demoted and kept and max(int(d[1:]) for d in demoted) < min(int(k[1:]) for k in kept)


def test_head_classes():
    s = make_session(
        [
            ("user", "u"),
            ("user", "i", {"injected": True}),
            ("assistant", "a"),
            ("reasoning", "r"),
            ("summary", "s"),
            ("tool_call", "c"),
            ("tool_output", "o"),
            ("system", "x"),
        ]
    )
    assert [fo.head_class(r) for r in s.records] == [
        "user",
        "left_out",
        "assistant",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "left_out",
    ]


# =========================================================================== issue 13 item 7
# FutureOS has no upstream repository: these tests pin the design (docs/strategies.md "FutureOS") and the
# seed report ("How our compaction works"), the design's only sources.


def _head_markers(p) -> list:
    return [x for x in p.segments if x.kind == "omitted_marker" and x.label == "omitted / not summarised"]


def _assistants(n: int, size: int, users: int = 1) -> Session:
    """`users` short requests, then n assistant outputs of about `size` tokens, then a closing request."""
    items = [("user", f"request {k}: keep going") for k in range(users)]
    items += [("assistant", words(f"a{i}", size)) for i in range(n)] + [("user", "and now?")]
    return make_session(items)


def test_merged_marker_names_every_demoted_entry_id():
    """Spec "FutureOS" (what goes in, 2.): a demoted output is replaced by a marker "with its entry id";
    seed report: "its original stays queryable". A merged run of 12 demotions names all 12 ids
    (the -1 marker elided everything between the first and the last of more than three)."""
    ids = [f"msg_{k:03d}" for k in range(12)]
    text = fo.demotion_marker([("assistant", e, 10) for e in ids])
    for e in ids:
        assert e in text
    # in a projection: one run of many demotions, every id in the marker text
    s = _assistants(30, 150)
    p = compact(s, ctx=ctx_for(tail_tokens=5, history_target=600, history_max=600))
    demoted = p.notes["assistant_demoted"]
    assert len(demoted) > 10
    texts = " ".join(m.text for m in _head_markers(p))
    named = set(re.findall(r"\be\d+\b", texts))
    assert set(demoted) <= named
    for m in _head_markers(p):
        assert fo.marker_entry_ids(m.text) == list(m.entry_ids)  # the text and the provenance agree


@pytest.mark.slow
def test_every_demoted_id_in_the_projection_resolves_with_history_get(tmp_path, capsys):
    """Issue 13 acceptance 6 (spec "FutureOS": "The original stays queryable"; seed report: "A demoted
    assistant output is labelled 'omitted / not summarised' ... and its original stays queryable"):
    a default synthetic chain in an archive, compacted so that many assistant outputs are demoted;
    every demoted id found in the projection's text is fetched with `Archive.get` and `history get`."""
    from compaction_lab import cli
    from compaction_lab.ingest import synthetic
    from compaction_lab.store.archive import Archive

    s = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1))[0].session
    db = tmp_path / "archive.sqlite"
    with Archive(db) as arch:
        arch.add_session(s)
    by_id: dict[str, list] = {}
    for r in s.records:
        by_id.setdefault(r.entry_id, []).append(r)
    id_pattern = re.compile(re.escape(s.id) + r"-e\d+")
    walked = 0
    for name in NAMES:
        # the history target (and its ceiling) held low, so the chain's assistant prose cannot all stay
        ctx = CompactionContext(
            window=128_000,
            output_ceiling=32_000,
            summarizer=FakeSummarizer(),
            params={"history_target": 3_000, "history_max": 3_000},
        )
        p = strategies.compact(s, name, ctx=ctx)
        demoted = p.notes["assistant_demoted"]
        assert len(demoted) > 50 and len(_head_markers(p)) > 1
        found = [e for m in _head_markers(p) for e in id_pattern.findall(m.text)]
        assert set(demoted) <= set(found), sorted(set(demoted) - set(found))[:5]
        assert set(found) == set(demoted) | set(p.notes["user_demoted"])
        with Archive(db, readonly=True) as arch:
            for eid in dict.fromkeys(found):
                got = arch.get(eid, session=s.id)
                assert [(r.block_index, r.kind, r.text) for r in got] == [
                    (r.block_index, r.kind, r.text) for r in by_id[eid]
                ], eid
                assert {r.kind for r in got} & {"assistant", "reasoning", "summary", "user"}  # + its other blocks
        for eid in dict.fromkeys(found):
            assert cli.main(["history", "get", eid, "--session", s.id, "--archive", str(db), "--json"]) == 0
            out = json.loads(capsys.readouterr().out)
            assert [x["text"] for x in out] == [r.text for r in by_id[eid]]
            walked += 1
    assert walked > 100


def test_listed_ids_are_counted_in_the_budget():
    """Spec "FutureOS" budgets ("never past real capacity") with every demoted id listed: 600 outputs with
    long opaque ids (≈54k tokens, their ids ≈13k) in a 40k window: the ids are planned into the history
    room in effect (no overflow, no last-minute demotion needed), and all demoted ids are named."""
    items = [("user", "start")]
    items += [("assistant", words(f"a{i}", 90)) for i in range(600)] + [("user", "go on")]
    base = make_session(items)
    recs = tuple(
        dataclasses.replace(r, entry_id=f"0f9c{r.source_order:04d}-7b1e-4d2a-9e55-{r.source_order:012x}")
        for r in base.records
    )
    s = Session(id=base.id, source_format="test", records=recs)
    uuid_re = r"0f9c[0-9a-f]{4}-7b1e-4d2a-9e55-[0-9a-f]{12}"
    for name in NAMES:
        p = strategies.compact(s, name, ctx=ctx_for(window=40_000, output=4_000, summarizer=FakeSummarizer()))
        assert p.tokens <= p.capacity and not p.notes["overflow"]
        assert p.notes["history_used"] <= p.notes["budgets"]["history"] <= p.notes["budgets"]["capacity"]
        named = [e for m in _head_markers(p) for e in re.findall(uuid_re, m.text)]
        assert len(p.notes["assistant_demoted"]) > 300 and p.notes["assistant_kept"] > 50
        assert named == p.notes["assistant_demoted"]


def test_history_target_is_raised_to_keep_assistant_originals():
    """Spec "FutureOS": "history target ≈ 32,768 tokens, may be raised up to 131,072, never past real
    capacity"; seed report: "the history target is about 32K (up to 128K, never past real capacity)".
    60 assistant outputs of ~1,000 tokens (≈60k) in a 128k window (capacity ≈80k): all are kept;
    the -1 code held the history at 32,768 and demoted about half of them."""
    s = _assistants(60, 1_000)
    for name in NAMES:
        p = strategies.compact(s, name, ctx=ctx_for(tail_tokens=5, summarizer=FakeSummarizer()))
        b = p.notes["budgets"]
        assert p.notes["assistant_demoted"] == [] and p.notes["assistant_kept"] == 60
        assert p.notes["history_raised"] is True
        assert b["history"] == min(HISTORY_MAX, b["capacity"]) and b["history_target"] == HISTORY_TARGET
        assert HISTORY_TARGET < p.notes["history_used"] <= b["history"]
        assert p.tokens <= p.capacity


def test_raise_never_goes_past_real_capacity():
    """Spec "FutureOS": capacity = effective − system − tools − tail − evidence − summary − margin bounds
    the raise. 120 outputs of ~1,000 tokens (≈120k) against a capacity of ≈80k: the kept history fills
    the capacity (well past the 32,768 target), the rest is demoted, the projection fits."""
    s = _assistants(120, 1_000)
    for name in NAMES:
        p = strategies.compact(s, name, ctx=ctx_for(tail_tokens=5, summarizer=FakeSummarizer()))
        b = p.notes["budgets"]
        assert b["capacity"] < HISTORY_MAX and b["history"] == b["capacity"]
        assert b["capacity"] == (
            b["effective"] - b["system"] - b["tools"] - b["tail"] - b["evidence"] - b["summary"] - b["margin"]
        )
        assert b["capacity"] - 2_000 < p.notes["history_used"] <= b["capacity"]
        kept = [x.entry_ids[0] for x in segs(p, "assistant_original")]
        assert len(kept) > 70 and kept == [f"e{i}" for i in range(121 - len(kept), 121)]  # newest first
        assert p.tokens <= p.capacity and not p.notes["overflow"]


def test_raise_stops_at_history_max():
    """Spec "FutureOS": raised "up to 131,072" even when a 1M window leaves far more capacity."""
    s = _assistants(170, 1_000)
    p = compact(s, ctx=ctx_for(window=1_000_000, output=32_000, tail_tokens=5))
    b = p.notes["budgets"]
    assert b["capacity"] > HISTORY_MAX and b["history"] == HISTORY_MAX and p.notes["history_raised"]
    assert HISTORY_MAX - 2_000 < p.notes["history_used"] <= HISTORY_MAX
    assert 120 <= p.notes["assistant_kept"] < 170


def test_no_raise_when_the_target_demotes_nothing_and_max_equal_to_target_turns_it_off():
    """Spec "FutureOS": the target is the default; the raise applies only when it would keep assistant
    originals that the target demotes. ``history_max = history_target`` is the -1 behaviour."""
    small = _assistants(5, 100)
    p = compact(small, ctx=ctx_for(tail_tokens=5))
    assert p.notes["history_raised"] is False and p.notes["budgets"]["history"] == HISTORY_TARGET
    s = _assistants(60, 1_000)
    off = compact(s, ctx=ctx_for(tail_tokens=5, history_max=HISTORY_TARGET))
    assert off.notes["history_raised"] is False and off.notes["budgets"]["history"] == HISTORY_TARGET
    assert off.notes["history_used"] <= HISTORY_TARGET and len(off.notes["assistant_demoted"]) > 20


def test_figure_8_shows_the_raised_history_room():
    """anatomy.budgets_table recomputed the budgets itself, so figure 8 showed the 32,768 target even
    where the projection had raised its history room."""
    from compaction_lab.strategies import anatomy

    s = _assistants(60, 1_000)
    ctx = ctx_for(tail_tokens=5)
    p = strategies.compact(s, "futureos-deterministic", ctx=ctx)
    assert p.notes["history_raised"] is True
    table = anatomy.budgets_table(ctx, s, p).set_index("part")
    assert table.loc["history", "budget"] == p.notes["budgets"]["history"] > HISTORY_TARGET
    assert table.loc["history", "used"] <= table.loc["history", "budget"]
