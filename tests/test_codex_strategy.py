"""Codex strategy: every rule of STRATEGIES.md "Codex" pinned on hand-built sessions, plus properties."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compaction_lab import strategies
from compaction_lab.ingest import load_sessions, synthetic
from compaction_lab.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.session import Session
from compaction_lab.strategies import codex
from compaction_lab.strategies.base import CallShape, CompactionContext, est_bytes4

from conftest import SHARED_FIXTURES, make_session, FakeProvider

SHAPE = CallShape("t", "You are the test agent.", ({"type": "function", "function": {"name": "bash"}},))
LOCAL_FIXTURES = Path(__file__).parent / "fixtures"


def FixedProvider(text: str = "SUMMARY-TEXT", name: str = "fake", stand_in: bool = False) -> FakeProvider:
    """Returns a fixed summary and remembers the requests it saw."""
    return FakeProvider(text, name, stand_in, usage=(100, 40, 7))


def BrokenProvider() -> FakeProvider:
    return FakeProvider(name="broken", error=ConnectionError("endpoint down"))


def ctx(**kw) -> CompactionContext:
    kw.setdefault("shape", SHAPE)
    return CompactionContext(**kw)


def run(session: Session, cut: int | None = None, **kw):
    return strategies.compact(session, "codex", cut, ctx(**kw))


def toks(n: int, ch: str = "a") -> str:
    """Text whose bytes/4 estimate is exactly n."""
    return ch * (4 * n)


def kinds(p):
    return [s.kind for s in p.segments]


# --------------------------------------------------------------------------- registry, trigger


def test_registered_with_version_and_estimator():
    s = strategies.get("codex")
    assert s.name == "codex" and s.algorithm_version == codex.ALGORITHM_VERSION == "codex-local-1"
    assert s.estimator == "bytes/4"


def test_fires_at_90_percent_of_window():
    c = ctx(window=100_000)
    assert not codex.STRATEGY.fires(89_999, c)
    assert codex.STRATEGY.fires(90_000, c)
    p = run(make_session([("user", "hi")]), window=100_000)
    assert (p.notes["auto_compact"], p.notes["hard_cap"], p.capacity) == (90_000, 95_000, 90_000)


def test_estimator_is_ceil_utf8_bytes_over_4():
    assert est_bytes4("abcde") == 2
    assert est_bytes4("é" * 3) == 2  # 6 bytes


# --------------------------------------------------------------------------- user messages


def test_only_real_user_messages_are_kept_in_order():
    s = make_session([
        ("system", "You are the test agent."),
        ("user", "first request"),
        ("user", "# AGENTS.md instructions for /repo\nbe nice"),
        ("user", "<environment_context>cwd=/repo</environment_context>"),
        ("user", "<user_instructions>terse</user_instructions>"),
        ("user", "flagged by the importer", {"injected": True}),
        ("assistant", "ASSISTANT-PROSE"),
        ("reasoning", "HIDDEN-REASONING"),
        ("tool_call", 'bash {"command": "ls"}', {"tool": "bash", "call_id": "c1"}),
        ("tool_output", "TOOL-OUTPUT-TEXT", {"tool": "bash", "call_id": "c1"}),
        ("summary", "EARLIER-SUMMARY"),
        ("user", codex.SUMMARY_PREFIX + "\nold summary as a user message"),
        ("user", "second request"),
        ("meta", "model change"),
    ])
    p = run(s)
    users = [seg for seg in p.segments if seg.kind == "user_original"]
    assert [u.text for u in users] == ["first request", "second request"]
    assert [u.entry_ids for u in users] == [("e1",), ("e12",)]
    assert all(u.role == "user" and u.record_kind == "user" for u in users)
    assert p.notes["skipped_user_messages"] == 5
    text = p.text()
    for dropped in ("ASSISTANT-PROSE", "HIDDEN-REASONING", "TOOL-OUTPUT-TEXT", "EARLIER-SUMMARY", "AGENTS.md",
                    "environment_context", "user_instructions", "flagged by the importer", "command"):
        assert dropped not in text


def test_segment_order_system_tools_users_summary():
    s = make_session([("user", "a"), ("assistant", "b"), ("user", "c")])
    p = run(s)
    assert kinds(p) == ["system", "tools", "user_original", "user_original", "summary"]
    assert p.segments[0].text == SHAPE.system_prompt and p.segments[0].role == "system"
    assert p.segments[1].text == SHAPE.tools_text() and p.segments[1].role == "system"


def test_newest_first_within_budget_then_middle_truncation():
    u1 = "h" * 60 + "m" * 40 + "t" * 60  # 160 bytes = 40 tokens
    s = make_session([
        ("user", u1), ("assistant", "x"), ("user", toks(30, "b")), ("assistant", "y"), ("user", toks(50, "c")),
    ])
    p = run(s, params={"user_budget_tokens": 100})
    # newest (50) and next (30) whole; the oldest (40) does not fit the remaining 20 -> middle-truncated
    assert kinds(p)[2:] == ["user_original", "omitted_marker", "user_original", "user_original", "user_original",
                            "summary"]
    head, marker, tail = p.segments[2:5]
    assert head.text == "h" * 40 and tail.text == "t" * 40  # 20 tokens -> 80 bytes: 40 head + 40 tail
    assert marker.text == "…20 tokens truncated…"  # the 80-byte middle
    assert head.entry_ids == marker.entry_ids == tail.entry_ids == ("e0",)
    assert marker.label and marker.role == "user"
    assert [seg.text for seg in p.segments[5:7]] == [toks(30, "b"), toks(50, "c")]
    assert p.notes["truncated"] == {"entry_id": "e0", "tokens": 40, "kept_tokens": 20, "removed_tokens": 20}
    assert p.notes["kept_user_entries"] == ["e0", "e2", "e4"]


def test_walk_stops_after_the_truncated_message():
    s = make_session([("user", "oldest"), ("user", toks(40, "x")), ("user", toks(30, "y"))])
    p = run(s, params={"user_budget_tokens": 50})
    texts = [seg.text for seg in p.segments if seg.kind == "user_original"]
    assert "oldest" not in texts
    assert texts == ["x" * 40, "x" * 40, toks(30, "y")]


def test_walk_stops_when_budget_is_used_exactly():
    s = make_session([("user", "older"), ("user", toks(20, "x")), ("user", toks(30, "y"))])
    p = run(s, params={"user_budget_tokens": 50})
    assert [seg.text for seg in p.segments if seg.kind == "user_original"] == [toks(20, "x"), toks(30, "y")]
    assert "omitted_marker" not in kinds(p) and p.notes["truncated"] is None


def test_middle_truncation_keeps_verbatim_prefix_and_suffix_on_char_boundaries():
    text = "é" * 30 + "MIDDLE" + "ü" * 30  # multibyte on both ends
    head, tail, removed = codex.middle_truncate(text, 5)  # 20 bytes: 10 head, 10 tail
    assert text.startswith(head) and text.endswith(tail)
    assert head == "é" * 5 and tail == "ü" * 5
    assert removed == est_bytes4(text[len(head):len(text) - len(tail)])
    h, t, r = codex.middle_truncate("€" * 10, 1)  # 4 bytes: 2 head / 2 tail -> no whole 3-byte char
    assert (h, t) == ("", "") and r == est_bytes4("€" * 10)
    assert codex.truncation_marker(7) == "…7 tokens truncated…"


def test_message_larger_than_whole_budget_is_truncated_alone():
    s = make_session([("user", "a" * 1000 + "Z" * 1000)])
    p = run(s, params={"user_budget_tokens": 10})
    head, marker, tail = p.segments[2:5]
    assert head.text == "a" * 20 and tail.text == "Z" * 20
    assert marker.text == f"…{est_bytes4('a' * 980 + 'Z' * 980)} tokens truncated…"


# --------------------------------------------------------------------------- summary


def test_summary_is_a_user_message_after_its_prefix():
    prov = FixedProvider("did X, next Y")
    s = make_session([("user", "go"), ("assistant", "ASSISTANT-PROSE")])
    p = run(s, summarizer=prov)
    summ = p.segments[-1]
    assert summ.kind == "summary" and summ.role == "user"
    assert summ.text == codex.SUMMARY_PREFIX + "\ndid X, next Y"
    assert summ.label == "summary (fake)" and summ.entry_ids == ()
    assert p.receipt.provider == "fake" and not p.receipt.fallback and p.receipt.error is None
    assert (p.receipt.input_tokens, p.receipt.cached_tokens, p.receipt.output_tokens) == (100, 40, 7)
    assert p.receipt.request_fingerprint == p.summary_request.fingerprint()
    # assistant text only ever reaches the projection through the summary
    assert "ASSISTANT-PROSE" not in p.text()


def test_no_provider_gives_no_summary_available():
    p = run(make_session([("user", "go")]))
    assert p.segments[-1].text == codex.SUMMARY_PREFIX + "\n(no summary available)"
    assert p.receipt.provider == "none" and p.receipt.fallback and "no summary provider" in p.receipt.error
    assert p.segments[-1].label


def test_failing_provider_and_empty_answer():
    p = run(make_session([("user", "go")]), summarizer=BrokenProvider())
    assert p.segments[-1].text.endswith("\n(no summary available)")
    assert p.receipt.fallback and "ConnectionError: endpoint down" == p.receipt.error
    p = run(make_session([("user", "go")]), summarizer=FixedProvider("   "))
    assert p.segments[-1].text.endswith("\n(no summary available)") and not p.receipt.fallback


def test_stand_in_summary_is_labelled():
    p = run(make_session([("user", "go")]), summarizer=FixedProvider("s", name="extractive", stand_in=True))
    assert p.segments[-1].label == STAND_IN_LABEL and p.receipt.stand_in


# --------------------------------------------------------------------------- summary request


def test_request_is_history_plus_instruction_with_base_instructions_and_no_tools():
    prov = FixedProvider()
    s = make_session([
        ("system", "You are the test agent."),
        ("user", "<environment_context>cwd</environment_context>"),
        ("user", "go"),
        ("assistant", "prose"),
        ("reasoning", "think"),
        ("tool_call", 'bash {"command": "ls"}', {"tool": "bash", "call_id": "c1"}),
        ("tool_output", "a.py", {"tool": "bash", "call_id": "c1"}),
        ("summary", "old summary"),
        ("meta", "m"),
        ("user", "after cut"),
    ])
    p = run(s, cut=9, summarizer=prov)
    req = prov.requests[0]
    assert req is p.summary_request or req == p.summary_request
    assert req.shape == "history+instruction" and req.template == "codex-handoff"
    assert req.system == SHAPE.system_prompt and req.tools == ()
    # consecutive same-role records form one message (as Projection.messages renders them); instruction last
    assert list(req.messages) == [
        {"role": "user", "content": "<environment_context>cwd</environment_context>\n\ngo"},
        {"role": "assistant", "content": 'prose\n\nthink\n\nbash {"command": "ls"}'},
        {"role": "tool", "content": "a.py"},
        {"role": "user", "content": "old summary"},
        {"role": "user", "content": codex.COMPACT_INSTRUCTION},
    ]
    assert req.source_entry_ids == ("e1", "e2", "e3", "e4", "e5", "e6", "e7")
    assert "tools" not in req.to_openai()
    assert p.notes["request_dropped_items"] == 0
    assert "after cut" not in p.text()


def test_summary_tools_param_keeps_the_session_tools_and_nothing_else():
    s = make_session([("user", "go"), ("assistant", "ok"), ("user", "next")])
    plain, kept = FixedProvider(), FixedProvider()
    p0 = run(s, summarizer=plain)
    p1 = strategies.compact(s, "codex", None, ctx(summarizer=kept, params={"summary_tools": True}))
    r0, r1 = plain.requests[0], kept.requests[0]
    assert r0.tools == () and r1.tools == SHAPE.tools
    assert (r0.system, r0.messages, r0.template) == (r1.system, r1.messages, r1.template)
    assert r0.fingerprint() != r1.fingerprint()
    assert [seg.text for seg in p0.segments] == [seg.text for seg in p1.segments]
    assert p1.notes["request_tokens_est"] == p0.notes["request_tokens_est"] + est_bytes4(SHAPE.tools_text())


def test_instruction_asks_for_a_handoff_summary():
    low = codex.COMPACT_INSTRUCTION.lower()
    for phrase in ("checkpoint", "handoff", "another language model", "progress", "decisions", "constraints",
                   "preferences", "next steps", "references", "concise", "structured"):
        assert phrase in low


def test_overflowing_request_drops_oldest_items_with_their_partners():
    prov = FixedProvider()
    s = make_session([
        ("user", toks(300, "u")),
        ("tool_call", "bash {}", {"tool": "bash", "call_id": "c1"}),
        ("assistant", toks(300, "a")),
        ("tool_output", toks(10, "o"), {"tool": "bash", "call_id": "c1"}),
        ("user", toks(100, "v")),
    ])
    # window - summary cap = limit; make the limit hold the newest ~100-token user + instruction only
    cap = 100
    fixed = est_bytes4(SHAPE.system_prompt) + est_bytes4(codex.COMPACT_INSTRUCTION)
    window = cap + fixed + 100 + 20
    p = run(s, window=window, output_ceiling=cap, summarizer=prov)
    req = prov.requests[0]
    assert [m["content"] for m in req.messages] == [toks(100, "v"), codex.COMPACT_INSTRUCTION]
    assert p.notes["request_dropped_items"] == 4 and p.notes["request_fits"]
    # dropping the oldest three leaves an orphan output of the dropped call: it goes too
    assert p.notes["request_tokens_est"] <= p.notes["request_limit"] == window - cap


def test_request_that_cannot_fit_skips_the_call():
    prov = FixedProvider()
    p = run(make_session([("user", "go")]), window=50, output_ceiling=10, summarizer=prov)
    assert prov.requests == [] and p.receipt.fallback and "does not fit" in p.receipt.error


def test_prompt_files_override_the_paraphrases(tmp_path):
    (tmp_path / "i.md").write_text("EXACT INSTRUCTION", encoding="utf-8")
    (tmp_path / "p.md").write_text("EXACT PREFIX", encoding="utf-8")
    prov = FixedProvider("S")
    p = run(make_session([("user", "go"), ("user", "EXACT PREFIX\nold")]), summarizer=prov,
            params={"prompt_file": tmp_path / "i.md", "summary_prefix_file": tmp_path / "p.md"})
    assert prov.requests[0].messages[-1]["content"] == "EXACT INSTRUCTION"
    assert p.segments[-1].text == "EXACT PREFIX\nS"
    assert [s.text for s in p.segments if s.kind == "user_original"] == ["go"]
    assert codex.STRATEGY.prompts(ctx()) == {"instruction": codex.COMPACT_INSTRUCTION,
                                             "summary_prefix": codex.SUMMARY_PREFIX}


def test_small_window_clamps_user_budget_unless_disabled():
    s = make_session([("user", toks(20_000, "x"))])
    p = run(s, window=16_000, output_ceiling=4_000)
    assert p.notes["user_budget_clamped"] and p.notes["user_budget"] < 20_000
    assert sum(est_bytes4(seg.text) for seg in p.segments) <= p.capacity
    p = run(s, window=16_000, output_ceiling=4_000, params={"fit_window": False})
    assert p.notes["user_budget"] == 20_000 and p.notes["truncated"] is None


def test_default_budget_is_20000():
    s = make_session([("user", toks(15_000, "a")), ("user", toks(6_000, "b"))])
    p = run(s)
    assert p.notes["user_budget"] == codex.USER_BUDGET_TOKENS == 20_000
    assert p.notes["truncated"]["kept_tokens"] == 14_000


# --------------------------------------------------------------------------- properties

TEXT = st.text(alphabet=st.sampled_from(list("ab xyz\n{}\"é€😀")), min_size=0, max_size=12)


@st.composite
def sessions(draw):
    items: list[tuple] = []
    n = draw(st.integers(0, 25))
    call = 0
    for _ in range(n):
        kind = draw(st.sampled_from(["user", "user", "inj", "assistant", "reasoning", "tool", "summary", "system",
                                     "meta"]))
        text = draw(TEXT) * draw(st.sampled_from([1, 3, 40, 400, 3000]))
        if kind == "tool":
            call += 1
            items.append(("tool_call", f"bash {text[:20]}", {"tool": "bash", "call_id": f"c{call}"}))
            items.append(("tool_output", text, {"tool": "bash", "call_id": f"c{call}",
                                                "is_error": draw(st.booleans())}))
        elif kind == "inj":
            items.append(("user", draw(st.sampled_from(["<environment_context>", "# AGENTS.md instructions", ""]))
                          + text, {"injected": draw(st.booleans())}))
        elif kind == "system":  # keep the call shape small: a shape alone over the window is out of scope
            items.append((kind, text[:12]))
        else:
            items.append((kind, text))
    return make_session(items)


def check_projection(p, session: Session, cut: int) -> None:
    before = {r.entry_id: r for r in session.records if r.source_order < cut and r.kind != "meta"}
    shape = SHAPE.for_session(session)
    assert sum(est_bytes4(s.text) for s in p.segments) <= p.capacity
    for seg in p.segments:
        assert set(seg.entry_ids) <= set(before)
        if seg.kind == "system":
            assert seg.text == shape.system_prompt
        elif seg.kind == "tools":
            assert seg.text == shape.tools_text()
        elif seg.kind in AUTHORED_KINDS:
            assert seg.label
        else:
            assert seg.kind == "user_original" and len(seg.entry_ids) == 1
            src = before[seg.entry_ids[0]].text
            assert seg.text == src or (p.notes["truncated"] and (src.startswith(seg.text) or src.endswith(seg.text)))
            assert codex.is_real_user(before[seg.entry_ids[0]])


@settings(max_examples=50, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(1, 3000), st.sampled_from([8_000, 16_000, 128_000]), st.data())
def test_property_projection_fits_and_is_verbatim(session, budget, window, data):
    cut = data.draw(st.one_of(st.just(len(session.records)), st.integers(0, len(session.records))))
    prov = data.draw(st.sampled_from([None, FixedProvider("summary " * 50), BrokenProvider()]))
    kw = {"summarizer": prov} if prov else {}
    p = run(session, cut, window=window, output_ceiling=2_000, params={"user_budget_tokens": budget}, **kw)
    check_projection(p, session, cut)
    event(f"truncated={p.notes['truncated'] is not None}")
    event(f"request dropped items={p.notes['request_dropped_items'] > 0}")
    # chronological order restored
    orders = [int(s.entry_ids[0][1:]) for s in p.segments if s.kind == "user_original"]
    assert orders == sorted(orders)
    # the kept users are the newest real ones
    real = [r.entry_id for r in session.records if r.source_order < cut and codex.is_real_user(r)]
    kept = p.notes["kept_user_entries"]
    assert kept == real[len(real) - len(kept):]
    if p.summary_request is not None and p.notes["request_fits"]:
        assert p.notes["request_tokens_est"] <= window - p.summary_request.max_output_tokens


# --------------------------------------------------------------------------- real and synthetic sessions


def _real_sessions() -> list[Session]:
    out = []
    for root in (SHARED_FIXTURES, LOCAL_FIXTURES):
        if root.exists():
            out.extend(load_sessions(root))
    return out


@pytest.fixture(scope="module")
def chain() -> Session:
    return synthetic.generate_chains(synthetic.SyntheticProfile(n_chains=1))[0].session


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_096)])
def test_real_and_synthetic_sessions(chain, window, output):
    sessions_ = _real_sessions() + [chain]
    assert len(sessions_) > 1
    for s in sessions_:
        c = CompactionContext(window=window, output_ceiling=output)
        for cut in (len(s.records), len(s.records) // 2):
            p = strategies.compact(s, "codex", cut, c)
            assert p.segments[0].kind == "system" and p.segments[-1].kind == "summary"
            assert 0 < p.tokens < window
            assert sum(est_bytes4(seg.text) for seg in p.segments) <= p.capacity


def test_large_session_is_fast():
    items = [("system", "s")]
    for i in range(600):
        items += [("user", "request " * 200), ("assistant", "prose " * 300),
                  ("tool_call", "bash {}", {"tool": "bash", "call_id": f"c{i}"}),
                  ("tool_output", "output line\n" * 300, {"tool": "bash", "call_id": f"c{i}"})]
    s = make_session(items)  # ~1.0M bytes/4 tokens
    assert sum(est_bytes4(r.text) for r in s.records) > 1_000_000
    t = time.perf_counter()
    p = codex.STRATEGY.compact(s, len(s.records), CompactionContext(window=1_000_000))
    assert time.perf_counter() - t < 1.0
    assert p.notes["request_dropped_items"] > 0


def test_cut_limits_what_is_seen():
    s = make_session([("user", "early"), ("user", "late")])
    p = run(s, cut=1)
    assert [seg.text for seg in p.segments if seg.kind == "user_original"] == ["early"] and p.cut == 1
