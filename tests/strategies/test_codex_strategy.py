"""Codex strategy: every rule of docs/strategies.md "Codex" (upstream pins: docs/strategies.md "codex: upstream pins") pinned on hand-built sessions, plus properties."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compaction_lab import strategies
from compaction_lab.core.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.ingest import load_sessions, synthetic
from compaction_lab.strategies.arms import codex
from compaction_lab.strategies.base import CompactionContext, est_bytes4
from compaction_lab.summarize import NoSummarizer
from tests.helpers import FIXTURES, FakeSummarizer, make_session

SHAPE = CallShape("t", "You are the test agent.", ({"type": "function", "function": {"name": "bash"}},))
LOCAL_FIXTURES = FIXTURES


def FixedProvider(text: str = "SUMMARY-TEXT", name: str = "fake", stand_in: bool = False) -> FakeSummarizer:
    """Returns a fixed summary and remembers the requests it saw."""
    return FakeSummarizer(text, name, stand_in, usage=(100, 40, 7))


def BrokenProvider() -> FakeSummarizer:
    return FakeSummarizer(name="broken", error=ConnectionError("endpoint down"))


def ctx(**kw) -> CompactionContext:
    """A context with the test shape and, unless told otherwise, a provider that answers (``SUMMARY-TEXT``):
    without one Codex does not compact (see the on_failure tests)."""
    kw.setdefault("shape", SHAPE)
    kw.setdefault("summarizer", FixedProvider())
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
    assert s.name == "codex" and s.algorithm_version == codex.ALGORITHM_VERSION == "codex-local-4"
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
    s = make_session(
        [
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
            ("user", codex.SUMMARY_PREFIX + "\nold summary as a user message"),
            ("user", "second request"),
            ("meta", "model change"),
        ]
    )
    p = run(s)
    users = [seg for seg in p.segments if seg.kind == "user_original"]
    assert [u.text for u in users] == ["first request", "second request"]
    assert [u.entry_ids for u in users] == [("e1",), ("e11",)]
    assert all(u.role == "user" and u.record_kind == "user" for u in users)
    assert p.notes["skipped_user_messages"] == 5
    text = p.text()
    for dropped in (
        "ASSISTANT-PROSE",
        "HIDDEN-REASONING",
        "TOOL-OUTPUT-TEXT",
        "AGENTS.md",
        "environment_context",
        "user_instructions",
        "flagged by the importer",
        "command",
    ):
        assert dropped not in text


def test_segment_order_system_tools_users_summary():
    s = make_session([("user", "a"), ("assistant", "b"), ("user", "c")])
    p = run(s)
    assert kinds(p) == ["system", "tools", "user_original", "user_original", "summary"]
    assert p.segments[0].text == SHAPE.system_prompt and p.segments[0].role == "system"
    assert p.segments[1].text == SHAPE.tools_text() and p.segments[1].role == "system"


def test_newest_first_within_budget_then_middle_truncation():
    u1 = "h" * 60 + "m" * 40 + "t" * 60  # 160 bytes = 40 tokens
    s = make_session(
        [
            ("user", u1),
            ("assistant", "x"),
            ("user", toks(30, "b")),
            ("assistant", "y"),
            ("user", toks(50, "c")),
        ]
    )
    p = run(s, params={"user_budget_tokens": 100})
    # newest (50) and next (30) whole; the oldest (40) does not fit the remaining 20 -> middle-truncated,
    # one item with the marker inline (20 tokens -> 80 bytes: 40 head + 40 tail; 80 bytes over -> 20 tokens)
    assert kinds(p)[2:] == ["omitted_marker", "user_original", "user_original", "summary"]
    cut_msg = p.segments[2]
    assert cut_msg.text == "h" * 40 + "…20 tokens truncated…" + "t" * 40
    assert cut_msg.entry_ids == ("e0",) and cut_msg.label and cut_msg.role == "user"
    assert [seg.text for seg in p.segments[3:5]] == [toks(30, "b"), toks(50, "c")]
    assert p.notes["truncated"] == {"entry_id": "e0", "tokens": 40, "kept_tokens": 20, "removed_tokens": 20}
    assert p.notes["kept_user_entries"] == ["e0", "e2", "e4"]


def test_walk_stops_after_the_truncated_message():
    s = make_session([("user", "oldest"), ("user", toks(40, "x")), ("user", toks(30, "y"))])
    p = run(s, params={"user_budget_tokens": 50})
    texts = [seg.text for seg in p.segments if seg.kind in ("user_original", "omitted_marker")]
    assert "oldest" not in texts
    assert texts == ["x" * 40 + "…20 tokens truncated…" + "x" * 40, toks(30, "y")]


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
    # upstream counts the bytes over budget, not the middle actually cut: ceil((120 + 6 - 20) / 4)
    assert removed == -(-(len(text.encode()) - 20) // 4) == 27
    h, t, r = codex.middle_truncate("€" * 10, 1)  # 4 bytes: 2 head / 2 tail -> no whole 3-byte char
    assert (h, t) == ("", "") and r == -(-(30 - 4) // 4)
    assert codex.truncation_marker(7) == "…7 tokens truncated…"
    assert codex.truncation_marker(7, "chars") == "…7 chars truncated…"


def test_message_larger_than_whole_budget_is_truncated_alone():
    s = make_session([("user", "a" * 1000 + "Z" * 1000)])
    p = run(s, params={"user_budget_tokens": 10})
    (msg,) = [seg for seg in p.segments if seg.role == "user" and seg.kind != "summary"]
    assert msg.text == "a" * 20 + f"…{est_bytes4('a' * 980 + 'Z' * 980)} tokens truncated…" + "Z" * 20


# --------------------------------------------------------------------------- summary


def test_summary_is_a_user_message_after_its_prefix():
    prov = FixedProvider("did X, next Y")
    s = make_session([("user", "go"), ("assistant", "ASSISTANT-PROSE")])
    p = run(s, summarizer=prov)
    summ = p.segments[-1]
    assert summ.kind == "summary" and summ.role == "user"
    assert summ.text == codex.SUMMARY_PREFIX + "\ndid X, next Y"
    assert summ.label == "summary (fake)" and summ.entry_ids == ()
    assert p.receipt.summarizer == "fake" and not p.receipt.fallback and p.receipt.error is None
    assert (p.receipt.input_tokens, p.receipt.cached_tokens, p.receipt.output_tokens) == (100, 40, 7)
    assert p.receipt.request_fingerprint == p.summary_request.fingerprint()
    # assistant text only ever reaches the projection through the summary
    assert "ASSISTANT-PROSE" not in p.text()


# Issue 27 item 6: compact.rs `run_compact_task_inner` returns the error (`return Err(e)`, lines 205-208 and
# 223-225 @ e06dd0e5) before `replace_history` (262): a failed summary call leaves the history as it was.

FAILING_SESSION = [
    ("system", "You are the test agent."),
    ("user", "<environment_context>cwd=/repo</environment_context>", {"injected": True}),
    ("user", "go"),
    ("assistant", "ASSISTANT-PROSE"),
    ("tool_call", "bash ls", {"tool": "bash", "call_id": "c1"}),
    ("tool_output", "H" * 15_000 + "T" * 15_000, {"tool": "bash", "call_id": "c1"}),
    ("user", "and then?"),
]


@pytest.mark.parametrize("provider", [NoSummarizer(), BrokenProvider()], ids=["none", "broken"])
def test_failed_summary_leaves_the_history_unchanged(provider):
    s = make_session(FAILING_SESSION)
    p = run(s, summarizer=provider)
    live = codex.STRATEGY.live_history(s, len(s.records), ctx())
    # the next request Codex sends without compacting: system, tools, the live history (record-time truncation)
    assert [(seg.kind, seg.role, seg.text) for seg in p.segments] == [
        ("system", "system", SHAPE.system_prompt),
        ("tools", "system", SHAPE.tools_text()),
        ("tail", "user", "<environment_context>cwd=/repo</environment_context>"),
        ("tail", "user", "go"),
        ("tail", "assistant", "ASSISTANT-PROSE"),
        ("tail", "assistant", "bash ls"),
        ("omitted_marker", "tool", "H" * 6_000 + "…18000 chars truncated…" + "T" * 6_000),
        ("tail", "user", "and then?"),
    ]
    assert [seg.text for seg in p.segments[2:]] == [i.text for i in live]
    assert p.segments[6].label == "codex record-time truncation" and p.segments[6].entry_ids == ("e5",)
    assert p.receipt.fallback and p.receipt.error and p.notes["compaction_failed"] == p.receipt.error
    assert p.summary_request is not None and p.summary_request.fingerprint() == p.receipt.request_fingerprint
    assert p.notes["on_failure"] == "upstream" and "kept_user_entries" not in p.notes
    assert [(r.request, r.output_tokens) for r in p.requests_sent()] == [(p.summary_request, 0)]
    assert codex.COMPACTION_FAILED == "compaction failed, history unchanged"


def test_request_that_cannot_fit_leaves_the_history_unchanged():
    """compact.rs:194-208 @ e06dd0e5: the context window is exceeded with one item left (the prompt) -> error."""
    prov = FixedProvider()
    p = run(make_session([("user", "go")]), window=50, output_ceiling=10, summarizer=prov)
    assert prov.requests == [] and p.receipt.fallback and p.receipt.error == codex.REQUEST_DOES_NOT_FIT
    assert p.notes["compaction_failed"] == codex.REQUEST_DOES_NOT_FIT and not p.notes["request_fits"]
    assert kinds(p) == ["system", "tools", "tail"] and p.segments[-1].text == "go"


def test_on_failure_placeholder_is_the_labs_older_behaviour():
    s = make_session([("user", "go"), ("assistant", "ok")])
    p = run(s, summarizer=NoSummarizer(), params={"on_failure": "placeholder"})
    assert kinds(p) == ["system", "tools", "user_original", "summary"]
    assert p.segments[-1].text == codex.SUMMARY_PREFIX + "\n" + codex.NO_SUMMARY
    assert p.segments[-1].label == codex.NO_SUMMARY_LABEL == "no summary available"
    assert p.receipt.fallback and "compaction_failed" not in p.notes
    p = run(s, summarizer=BrokenProvider(), params={"on_failure": "placeholder"})
    assert p.segments[-1].text.endswith("\n(no summary available)") and "endpoint down" in p.receipt.error
    with pytest.raises(ValueError, match="on_failure"):
        run(s, params={"on_failure": "retry"})


@pytest.mark.parametrize(
    "answer,label", [("", "summary (no answer)"), ("   ", "summary (empty answer)")], ids=["no-text", "blank"]
)
def test_empty_answer_is_the_prefix_and_a_newline(answer, label):
    """Issue 27 item 7. compact.rs:233-234 @ e06dd0e5: `summary_suffix = ...unwrap_or_default()`,
    `summary_text = format!("{SUMMARY_PREFIX}\\n{summary_suffix}")` -- never empty, so `(no summary available)`
    (449-453, only for an empty `summary_text`) is never what the compact task writes. With no assistant
    message anywhere in the history (issue 46: test_codex_no_answer.py) or a blank one, the suffix is blank."""
    p = run(make_session([("user", "go")]), summarizer=FixedProvider(answer))
    summ = p.segments[-1]
    assert summ.kind == "summary" and summ.text == codex.SUMMARY_PREFIX + "\n" + answer
    assert codex.NO_SUMMARY not in p.text()
    assert summ.label == label and codex.EMPTY_SUMMARY_LABEL == "summary (empty answer)"
    assert not p.receipt.fallback and "compaction_failed" not in p.notes


def test_stand_in_summary_is_labelled():
    p = run(make_session([("user", "go")]), summarizer=FixedProvider("s", name="extractive", stand_in=True))
    assert p.segments[-1].label == STAND_IN_LABEL and p.receipt.stand_in


# --------------------------------------------------------------------------- summary request


def test_request_is_history_plus_instruction_with_base_instructions_and_no_tools():
    prov = FixedProvider()
    s = make_session(
        [
            ("system", "You are the test agent."),
            ("user", "<environment_context>cwd</environment_context>"),
            ("user", "go"),
            ("assistant", "prose"),
            ("reasoning", "think"),
            ("tool_call", 'bash {"command": "ls"}', {"tool": "bash", "call_id": "c1"}),
            ("tool_output", "a.py", {"tool": "bash", "call_id": "c1"}),
            ("meta", "m"),
            ("user", "after cut"),
        ]
    )
    p = run(s, cut=8, summarizer=prov)
    req = prov.requests[0]
    assert req is p.summary_request or req == p.summary_request
    assert req.shape == "history+instruction" and req.template == "codex-handoff"
    assert req.system == SHAPE.system_prompt and req.tools == ()
    # one message per upstream item (Codex sends each history item as its own input item); instruction last
    assert list(req.messages) == [
        {"role": "user", "content": "<environment_context>cwd</environment_context>"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "prose"},
        {"role": "assistant", "content": "think"},
        {"role": "assistant", "content": 'bash {"command": "ls"}'},
        {"role": "tool", "content": "a.py"},
        {"role": "user", "content": codex.COMPACT_INSTRUCTION},
    ]
    assert req.source_entry_ids == ("e1", "e2", "e3", "e4", "e5", "e6")
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
    for phrase in (
        "checkpoint",
        "handoff",
        "another language model",
        "progress",
        "decisions",
        "constraints",
        "preferences",
        "next steps",
        "references",
        "concise",
        "structured",
    ):
        assert phrase in low


def test_overflowing_request_drops_oldest_items_with_their_partners():
    prov = FixedProvider()
    s = make_session(
        [
            ("user", toks(300, "u")),
            ("tool_call", "bash {}", {"tool": "bash", "call_id": "c1"}),
            ("assistant", toks(300, "a")),
            ("tool_output", toks(10, "o"), {"tool": "bash", "call_id": "c1"}),
            ("user", toks(100, "v")),
        ]
    )
    # the input must fit the window (leaving the answer a token): make it hold the newest ~100-token user + instruction
    fixed = est_bytes4(SHAPE.system_prompt) + est_bytes4(codex.COMPACT_INSTRUCTION)
    window = fixed + 100 + 20 + 1
    p = run(s, window=window, output_ceiling=100, summarizer=prov)
    req = prov.requests[0]
    assert [m["content"] for m in req.messages] == [toks(100, "v"), codex.COMPACT_INSTRUCTION]
    assert p.notes["request_dropped_items"] == 4 and p.notes["request_fits"]
    # dropping the oldest three leaves an orphan output of the dropped call: it goes too
    assert p.notes["request_tokens_est"] == fixed + 100 <= p.notes["request_limit"] == window - 1
    # the answer gets what the window leaves (21 tokens), below the model's output limit (100)
    assert req.max_output_tokens == window - (fixed + 100) == 21 == p.notes["request_answer_room"]


# Issue 27 item 3: Codex sets no cap on the summary (compact.rs `Prompt` @ e06dd0e5, lines 162-167, has no output
# limit); the server's `ContextWindowExceeded` (194-204) is about the input, so items are dropped only then.


def test_summary_cap_is_the_models_output_limit_unless_overridden():
    s = make_session([("user", "go"), ("assistant", "ok")])
    prov = FixedProvider()
    run(s, summarizer=prov)  # W 128,000, O 32,000
    assert prov.requests[0].max_output_tokens == 32_000 == codex.summary_cap(ctx())
    prov = FixedProvider()
    run(s, summarizer=prov, output_ceiling=8_192)
    assert prov.requests[0].max_output_tokens == 8_192
    prov = FixedProvider()
    run(s, summarizer=prov, params={"summary_tokens": 2_000})  # the explicit override
    assert prov.requests[0].max_output_tokens == 2_000
    assert codex.summary_cap(ctx(params={"summary_tokens": 99_999})) == 32_000  # never above the model's limit


def test_request_between_w_minus_o_and_w_is_sent_whole():
    """The input fits the window: nothing is dropped (the lab used to drop down to W - cap); the answer's room shrinks."""
    fixed = est_bytes4(SHAPE.system_prompt) + est_bytes4(codex.COMPACT_INSTRUCTION)
    s = make_session([("user", toks(5_000, "u")), ("assistant", toks(5_000, "a")), ("user", toks(1_000, "v"))])
    window, out = fixed + 11_000 + 3_000, 8_000  # input over W - O, under W
    prov = FixedProvider()
    p = run(s, window=window, output_ceiling=out, summarizer=prov)
    assert p.notes["request_dropped_items"] == 0 and p.notes["request_fits"]
    assert prov.requests[0].max_output_tokens == 3_000 == window - p.notes["request_tokens_est"]
    limited = run(s, window=window, output_ceiling=out, input_limit=fixed + 6_500, summarizer=FixedProvider())
    assert limited.notes["request_dropped_items"] == 1 and limited.notes["request_limit"] == fixed + 6_500


def test_prompt_files_override_the_paraphrases(tmp_path):
    (tmp_path / "i.md").write_text("EXACT INSTRUCTION", encoding="utf-8")
    (tmp_path / "p.md").write_text("EXACT PREFIX", encoding="utf-8")
    prov = FixedProvider("S")
    p = run(
        make_session([("user", "go"), ("user", "EXACT PREFIX\nold")]),
        summarizer=prov,
        params={"prompt_file": tmp_path / "i.md", "summary_prefix_file": tmp_path / "p.md"},
    )
    assert prov.requests[0].messages[-1]["content"] == "EXACT INSTRUCTION"
    assert p.segments[-1].text == "EXACT PREFIX\nS"
    assert [s.text for s in p.segments if s.kind == "user_original"] == ["go"]
    assert codex.STRATEGY.prompts(ctx()) == {
        "instruction": codex.COMPACT_INSTRUCTION,
        "summary_prefix": codex.SUMMARY_PREFIX,
    }


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

TEXT = st.text(alphabet=st.sampled_from(list('ab xyz\n{}"é€😀')), min_size=0, max_size=12)


@st.composite
def sessions(draw):
    items: list[tuple] = []
    n = draw(st.integers(0, 25))
    call = 0
    for _ in range(n):
        kind = draw(
            st.sampled_from(["user", "user", "inj", "assistant", "reasoning", "tool", "summary", "system", "meta"])
        )
        text = draw(TEXT) * draw(st.sampled_from([1, 3, 40, 400, 3000]))
        if kind == "tool":
            call += 1
            items.append(("tool_call", f"bash {text[:20]}", {"tool": "bash", "call_id": f"c{call}"}))
            items.append(
                ("tool_output", text, {"tool": "bash", "call_id": f"c{call}", "is_error": draw(st.booleans())})
            )
        elif kind == "inj":
            items.append(
                (
                    "user",
                    draw(st.sampled_from(["<environment_context>", "# AGENTS.md instructions", ""])) + text,
                    {"injected": draw(st.booleans())},
                )
            )
        elif kind == "system":  # keep the call shape small: a shape alone over the window is out of scope
            items.append((kind, text[:12]))
        else:
            items.append((kind, text))
    return make_session(items)


def check_projection(p, session: Session, cut: int) -> None:
    before = {r.entry_id: r for r in session.records if r.source_order < cut and r.kind != "meta"}
    shape = SHAPE.for_session(session)
    users = [s for s in p.segments if s.role == "user" and s.kind in ("user_original", "omitted_marker")]
    fixed = sum(est_bytes4(s.text) for s in p.segments if s not in users)
    if fixed + codex.MARKER_SLACK <= p.capacity:  # a call shape + initial context alone over the limit: out of scope
        assert sum(est_bytes4(s.text) for s in p.segments) <= p.capacity
    for seg in p.segments:
        assert set(seg.entry_ids) <= set(before)
        if seg.kind == "system" and not seg.entry_ids:
            assert seg.text == shape.system_prompt
        elif seg.kind == "system":  # re-injected initial context: verbatim context records
            assert seg.label == codex.INITIAL_CONTEXT_LABEL and len(seg.entry_ids) == 1
            assert seg.text == before[seg.entry_ids[0]].text
            assert not codex.is_real_user(before[seg.entry_ids[0]])
        elif seg.kind == "tools":
            assert seg.text == shape.tools_text()
        elif seg.kind in AUTHORED_KINDS:
            assert seg.label
        else:
            assert seg.kind == "user_original" and len(seg.entry_ids) == 1
            assert seg.text == before[seg.entry_ids[0]].text
            assert codex.is_real_user(before[seg.entry_ids[0]])


ROLE_OF = {"system": "system", "user": "user", "assistant": "assistant", "reasoning": "assistant"}
ROLE_OF |= {"tool_call": "assistant", "tool_output": "tool"}


def recorded_as(text: str) -> tuple[str, str]:
    """A tool output as Codex records it (bytes:10000 x 1.2 = 12,000 bytes): its segment kind and text.

    truncate.rs: over budget, the first 6,000 and the last 6,000 bytes (whole characters only) around
    ``…N chars truncated…``, N the characters removed."""
    raw = text.encode("utf-8")
    if len(raw) <= 12_000:
        return "tail", text
    head, tail = raw[:6_000].decode("utf-8", "ignore"), raw[-6_000:].decode("utf-8", "ignore")
    return "omitted_marker", f"{head}…{len(text) - len(head) - len(tail)} chars truncated…{tail}"


def check_unchanged_history(p, session: Session, cut: int) -> None:
    """Issue 46 item 7a: the projection of a failed compaction, expected from the session's records alone.

    System and tools, then the live history: the records before the cut (``meta`` and the base
    instructions left out, empty texts send nothing), tool outputs as recorded. An earlier compaction (a
    ``summary`` record of this non-Codex session) rebuilt the history: before the records that follow the
    last one stand the summary as a Codex summary message and, before it, records of the history it
    replaced (initial context and kept user messages, verbatim unless truncated)."""
    system = SHAPE.for_session(session).system_prompt
    recs = [r for r in session.records if r.source_order < cut and r.kind != "meta"]
    recs = [r for r in recs if not (r.kind == "system" and r.text == system)]
    last = max((n for n, r in enumerate(recs) if r.kind == "summary"), default=None)
    after = recs if last is None else recs[last + 1 :]
    expected = []
    for r in after:
        if r.text:
            kind, text = recorded_as(r.text) if r.kind == "tool_output" else ("tail", r.text)
            expected.append((kind, ROLE_OF[r.kind], text, (r.entry_id,)))
    segs = [(g.kind, g.role, g.text, g.entry_ids) for g in p.segments]
    assert segs[:2] == [("system", "system", system, ()), ("tools", "system", SHAPE.tools_text(), ())]
    assert segs[len(segs) - len(expected) :] == expected
    rebuilt = segs[2 : len(segs) - len(expected)]
    event(f"failed: earlier compaction={last is not None}")
    event(f"failed: tool output truncated={any(e[0] == 'omitted_marker' for e in expected)}")
    if last is None:
        assert rebuilt == []
        return
    summary = recs[last]
    assert rebuilt[-1] == ("summary", "user", f"{codex.SUMMARY_PREFIX}\n{summary.text}", (summary.entry_id,))
    before = {r.entry_id: r for r in recs[:last]}
    for kind, role, text, (entry,) in rebuilt[:-1]:
        assert entry in before and role == ROLE_OF[before[entry].kind] and role in ("system", "user")
        assert kind == "tail" and text == before[entry].text or kind == "omitted_marker" and "tokens truncated" in text


def check_no_answer(p, session: Session, cut: int) -> None:
    """Issue 46 item 4: an answer with no text gives the last assistant record after the last earlier compaction
    (which rebuilt the history without assistant messages), else nothing; an answer is kept as it came."""
    (summ,) = [g for g in p.segments if g.kind == "summary"]
    if p.receipt.text:
        assert summ.text == f"{codex.SUMMARY_PREFIX}\n{p.receipt.text}" and summ.entry_ids == ()
        return
    recs = [r for r in session.records if r.source_order < cut and r.kind != "meta"]
    last = max((n for n, r in enumerate(recs) if r.kind == "summary"), default=-1)
    reply = next((r for r in reversed(recs[last + 1 :]) if r.kind == "assistant"), None)
    event(f"no answer: previous reply={reply is not None}")
    if reply is None:
        assert (summ.text, summ.entry_ids, summ.label) == (codex.SUMMARY_PREFIX + "\n", (), "summary (no answer)")
    else:
        assert (summ.text, summ.entry_ids) == (f"{codex.SUMMARY_PREFIX}\n{reply.text}", (reply.entry_id,))
        assert summ.label == "summary (previous reply: no answer)"


@settings(max_examples=50, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(1, 3000), st.sampled_from([8_000, 16_000, 128_000]), st.data())
def test_property_projection_fits_and_is_verbatim(session, budget, window, data):
    cut = data.draw(st.one_of(st.just(len(session.records)), st.integers(0, len(session.records))))
    answers = [NoSummarizer(), FixedProvider(""), FixedProvider("summary " * 50), BrokenProvider()]
    prov = data.draw(st.sampled_from(answers))
    c = ctx(window=window, output_ceiling=2_000, params={"user_budget_tokens": budget}, summarizer=prov)
    p = strategies.compact(session, "codex", cut, c)
    if p.receipt.fallback:  # no summary: Codex did not compact, the next request is the live history
        event("compaction failed")
        assert p.notes["compaction_failed"] == p.receipt.error
        check_unchanged_history(p, session, cut)
        return
    check_projection(p, session, cut)
    check_no_answer(p, session, cut)
    event(f"truncated={p.notes['truncated'] is not None}")
    event(f"request dropped items={p.notes['request_dropped_items'] > 0}")
    # chronological order restored
    orders = [int(s.entry_ids[0][1:]) for s in p.segments if s.kind == "user_original"]
    assert orders == sorted(orders)
    # the kept users are the newest real ones
    real = [r.entry_id for r in session.records if r.source_order < cut and codex.is_real_user(r)]
    kept = p.notes["kept_user_entries"]
    assert kept == real[len(real) - len(kept) :]
    if p.summary_request is not None and p.notes["request_fits"]:
        assert p.notes["request_tokens_est"] <= window - p.summary_request.max_output_tokens


# --------------------------------------------------------------------------- real and synthetic sessions


def _real_sessions() -> list[Session]:
    out: list[Session] = []
    out.extend(load_sessions(LOCAL_FIXTURES))  # tests/fixtures, the real public sessions included
    return out


@pytest.fixture(scope="module")
def chain() -> Session:
    return synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1))[0].session


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_096)])
def test_real_and_synthetic_sessions(chain, window, output):
    sessions_ = _real_sessions() + [chain]
    assert len(sessions_) > 1
    for s in sessions_:
        c = CompactionContext(window=window, output_ceiling=output, summarizer=FixedProvider("S"))
        for cut in (len(s.records), len(s.records) // 2):
            failed = strategies.compact(s, "codex", cut, CompactionContext(window=window, output_ceiling=output))
            assert failed.notes["compaction_failed"] and failed.segments[0].kind == "system"
            assert failed.notes["live_history_items"] >= len(failed.segments) - 2  # no new summary, nothing added
            p = strategies.compact(s, "codex", cut, c)
            assert p.segments[0].kind == "system" and "summary" in kinds(p)
            after = kinds(p)[kinds(p).index("summary") + 1 :]
            assert all(k == "system" for k in after)  # only re-injected initial context follows the summary
            assert 0 < p.tokens < window
            assert sum(est_bytes4(seg.text) for seg in p.segments) <= p.capacity


def test_large_session_is_fast():
    items = [("system", "s")]
    for i in range(600):
        items += [
            ("user", "request " * 200),
            ("assistant", "prose " * 300),
            ("tool_call", "bash {}", {"tool": "bash", "call_id": f"c{i}"}),
            ("tool_output", "output line\n" * 300, {"tool": "bash", "call_id": f"c{i}"}),
        ]
    s = make_session(items)  # ~1.0M bytes/4 tokens
    assert sum(est_bytes4(r.text) for r in s.records) > 1_000_000
    p = codex.STRATEGY.compact(s, len(s.records), CompactionContext(window=1_000_000))  # speed: make bench
    assert p.notes["request_dropped_items"] > 0


def test_cut_limits_what_is_seen():
    s = make_session([("user", "early"), ("user", "late")])
    p = run(s, cut=1)
    assert [seg.text for seg in p.segments if seg.kind == "user_original"] == ["early"] and p.cut == 1


# --------------------------------------------------------------------------- issue 13: Codex as upstream builds it
#
# Upstream pinned: openai/codex codex-rs/core/src/compact.rs and context_manager/history.rs @ e06dd0e5d5694c24968bf49b62466cdedae04aaa,
# utils/string/src/truncate.rs @ b24d7f3c9a1acadc145019747224f7312bc9b3b4, codex/rollout_reconstruction.rs @
# 023cedaa25c056edf87e8be2c04190c84c67f966. Each test below fails on codex-local-1.

INITIAL_CONTEXT = "re-injected initial context"  # codex.INITIAL_CONTEXT_LABEL
PERMS = "<permissions instructions>sandboxed, ask before network</permissions instructions>"
ENV = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"


def user_items(p):
    """The user-role items of a projection other than re-injected context, as (kind, text)."""
    return [(s.kind, s.text) for s in p.segments if s.role == "user" and s.label != INITIAL_CONTEXT]


def test_truncated_user_message_is_one_item_with_the_marker_inline():
    """Port of compact.rs `build_token_limited_compacted_history_truncates_overlong_user_messages`: a 16-token
    limit and "word " x 200 give two user items -- the truncated message (marker inline) and the summary."""
    big = "word " * 200
    p = run(make_session([("user", big)]), summarizer=FixedProvider("SUMMARY"), params={"user_budget_tokens": 16})
    items = user_items(p)
    assert len(items) == 2
    (_, truncated), (kind, summary) = items
    assert "tokens truncated" in truncated and big not in truncated
    assert truncated == big[:32] + "…234 tokens truncated…" + big[-32:]  # 64 bytes kept, ceil(936 / 4) over
    assert kind == "summary" and summary == codex.SUMMARY_PREFIX + "\nSUMMARY"


def test_each_kept_user_message_and_the_summary_are_separate_items():
    """Port of compact.rs `build_token_limited_compacted_history_appends_summary_message`: one user item per kept
    message (the truncated one included), the summary last, each its own segment (and, once `Projection.messages`
    keeps message boundaries, its own message)."""
    s = make_session(
        [
            ("user", toks(40, "o")),
            ("assistant", "a"),
            ("user", "first user message"),
            ("assistant", "b"),
            ("user", "second user message"),
            ("assistant", "c"),
            ("user", "third user message"),
        ]
    )
    p = run(s, summarizer=FixedProvider("summary text"), params={"user_budget_tokens": 25})
    items = user_items(p)
    assert [k for k, _ in items] == ["omitted_marker", "user_original", "user_original", "user_original", "summary"]
    assert [t for _, t in items[1:4]] == ["first user message", "second user message", "third user message"]
    assert items[-1][1] == codex.SUMMARY_PREFIX + "\nsummary text"
    # one chat message per upstream item: four kept user messages and the summary, none joined
    msgs = [m["content"] for m in p.messages() if m["role"] == "user"]
    assert len(msgs) == 5 and msgs == [t for _, t in items]


def test_collect_user_messages_filters_session_prefix_entries():
    """Port of compact.rs `collect_user_messages_filters_session_prefix_entries` (AGENTS.md block, an upper-case
    `<ENVIRONMENT_CONTEXT>`, a real message: only the real one is a user message)."""
    s = make_session(
        [
            ("user", "# AGENTS.md instructions for project\n\n<INSTRUCTIONS>\ndo things\n</INSTRUCTIONS>"),
            ("user", "<ENVIRONMENT_CONTEXT>cwd=/tmp</ENVIRONMENT_CONTEXT>"),
            ("user", "real user message"),
        ]
    )
    p = run(s, cut=3, params={"compaction_phase": "pre_turn"})
    assert [t for k, t in user_items(p) if k == "user_original"] == ["real user message"]


def test_collect_user_messages_extracts_user_text_only():
    """Port of compact.rs `collect_user_messages_extracts_user_text_only`."""
    p = run(make_session([("assistant", "ignored"), ("user", "first")]))
    assert [t for k, t in user_items(p) if k == "user_original"] == ["first"]


def _ctx_session(tail: list[tuple]) -> Session:
    return make_session(
        [
            ("system", SHAPE.system_prompt),
            ("system", PERMS),
            ("user", ENV),
            ("user", "older user"),
            ("assistant", "on it"),
            ("user", "latest user"),
        ]
        + tail
    )


def test_mid_turn_compaction_reinjects_initial_context_before_the_last_real_user():
    """compact.rs `InitialContextInjection::BeforeLastUserMessage` and its test
    `insert_initial_context_before_last_real_user_or_summary_keeps_summary_last`: mid-turn (the agent loop
    goes on after the cut), the developer / environment items go just above the last real user message and
    the summary stays last."""
    s = _ctx_session(
        [
            ("tool_call", "bash ls", {"tool": "bash", "call_id": "c1"}),
            ("tool_output", "a.py", {"tool": "bash", "call_id": "c1"}),
            ("assistant", "next step"),
        ]
    )
    p = run(s, cut=8, summarizer=FixedProvider("S"))
    assert [(s.kind, s.role, s.text) for s in p.segments[2:]] == [
        ("user_original", "user", "older user"),
        ("system", "system", PERMS),
        ("system", "user", ENV),
        ("user_original", "user", "latest user"),
        ("summary", "user", codex.SUMMARY_PREFIX + "\nS"),
    ]
    assert [s.entry_ids for s in p.segments[3:5]] == [("e1",), ("e2",)]
    assert all(s.label == codex.INITIAL_CONTEXT_LABEL == INITIAL_CONTEXT for s in p.segments[3:5])
    assert p.notes["compaction_phase"] == "mid_turn"


def test_mid_turn_without_user_messages_puts_context_before_the_summary():
    """compact.rs `insert_initial_context_before_last_real_user_or_summary`: no real user message left ->
    the context goes before the summary so the summary stays last."""
    s = make_session(
        [
            ("system", SHAPE.system_prompt),
            ("system", PERMS),
            ("assistant", "a"),
            ("tool_call", "bash", {"call_id": "c"}),
            ("tool_output", "o", {"call_id": "c"}),
        ]
    )
    p = run(s, cut=4, summarizer=FixedProvider("S"), params={"compaction_phase": "mid_turn"})
    assert kinds(p)[2:] == ["system", "summary"] and p.segments[2].text == PERMS


def test_pre_turn_compaction_reinjects_initial_context_after_the_summary():
    """compact.rs `InitialContextInjection::DoNotInject` (pre-turn / manual compaction): the replacement
    history is users + summary; the next regular turn re-injects the full initial context after it."""
    s = _ctx_session([("assistant", "done"), ("user", "next turn")])
    p = run(s, cut=7, summarizer=FixedProvider("S"))  # the record at the cut opens a new turn
    assert [(s.kind, s.text) for s in p.segments[2:]] == [
        ("user_original", "older user"),
        ("user_original", "latest user"),
        ("summary", codex.SUMMARY_PREFIX + "\nS"),
        ("system", PERMS),
        ("system", ENV),
    ]
    assert p.notes["compaction_phase"] == "pre_turn"
    assert run(s, cut=7, params={"compaction_phase": "mid_turn"}).notes["compaction_phase"] == "mid_turn"
    with pytest.raises(ValueError, match="compaction_phase"):
        run(s, params={"compaction_phase": "sometimes"})


def test_tool_outputs_reach_the_summary_request_truncated_as_recorded():
    """context_manager/history.rs `process_item`: a tool output enters the history middle-truncated to the
    model's truncation policy x 1.2 -- 10,000 bytes -> 12,000 (utils/string truncate.rs `truncate_middle_chars`,
    marker `…N chars truncated…`); tokens 10,000 -> 48,000 bytes (`…N tokens truncated…`)."""
    out = "H" * 15_000 + "T" * 15_000
    s = make_session(
        [("user", "go"), ("tool_call", "bash", {"call_id": "c1"}), ("tool_output", out, {"call_id": "c1"})]
    )
    prov = FixedProvider()
    p = run(s, summarizer=prov)
    (tool,) = [m["content"] for m in prov.requests[0].messages if m["role"] == "tool"]
    assert tool == "H" * 6_000 + "…18000 chars truncated…" + "T" * 6_000
    assert p.notes["tool_outputs_truncated"] == 1
    big = "x" * 30_000 + "y" * 30_000
    assert codex.truncate_tool_output(big, "tokens:10000") == "x" * 24_000 + "…3000 tokens truncated…" + "y" * 24_000
    assert codex.truncate_tool_output(big, "none") == big
    assert codex.truncate_tool_output("short", "bytes:10000") == "short"
    prov = FixedProvider()
    run(s, summarizer=prov, params={"truncation_policy": "none"})
    assert [m["content"] for m in prov.requests[0].messages if m["role"] == "tool"] == [out]
    with pytest.raises(ValueError, match="truncation_policy"):
        codex.parse_policy("lines:3")


# Two earlier Codex compactions, hand-built as the importer records them (a `summary` record per `compacted`
# line, `metadata["compactions"]` with the replacement history as {type, role, text, injected}).

UPSTREAM_SUMMARY_1 = "Another language model started to solve this problem and wrote:\nSUMMARY-ONE"
UPSTREAM_SUMMARY_2 = "Another language model started to solve this problem and wrote:\nSUMMARY-TWO"


def _msg(role, text):
    return {"type": "message", "role": role, "text": text, "injected": role == "user" and text.startswith("<")}


def _two_compactions(
    fmt: str = "codex", replacement: bool = True, s1: str = UPSTREAM_SUMMARY_1, s2: str = UPSTREAM_SUMMARY_2
) -> Session:
    items = [
        ("system", SHAPE.system_prompt),  # e0 base instructions
        ("system", PERMS),  # e1 developer
        ("user", ENV, {"injected": True}),  # e2
        ("user", "fix the flaky test"),  # e3
        ("assistant", "looking"),  # e4
        ("tool_call", "bash ls", {"tool": "bash", "call_id": "c1"}),  # e5
        ("tool_output", "ci.yml", {"tool": "bash", "call_id": "c1"}),  # e6
        ("summary", s1),  # e7 compaction 1
        ("user", "also update the README"),  # e8
        ("assistant", "done with ci"),  # e9
        ("tool_call", "bash cat README", {"tool": "bash", "call_id": "c2"}),  # e10
        ("tool_output", "R" * 20_000, {"tool": "bash", "call_id": "c2"}),  # e11
        ("summary", s2),  # e12 compaction 2
        ("system", PERMS),  # e13 next turn re-injects context
        ("user", ENV, {"injected": True}),  # e14
        ("user", "now run the tests"),  # e15
        ("assistant", "running"),  # e16
        ("tool_call", "bash pytest", {"tool": "bash", "call_id": "c3"}),  # e17
        ("tool_output", "1 failed", {"tool": "bash", "call_id": "c3"}),  # e18
    ]
    s = make_session(items, source_format=fmt)
    if fmt != "codex":
        return s
    b1 = {"entry_id": "e7", "source_order": 7}
    b2 = {"entry_id": "e12", "source_order": 12}
    if replacement:  # compaction 1 mid-turn (context before the last real user), compaction 2 pre-turn
        b1["replacement_history"] = [
            _msg("developer", PERMS),
            _msg("user", ENV),
            _msg("user", "fix the flaky test"),
            _msg("user", s1),
            {"type": "compaction"},
        ]
        b2["replacement_history"] = [
            _msg("user", "fix the flaky test"),
            _msg("user", "also update the README"),
            _msg("user", s2),
        ]
    return Session(s.id, s.source_format, s.records, metadata={"compactions": [b1, b2]})


def msgs(*parts):
    """The expected summary-request messages: one per upstream item, the instruction last."""
    return [{"role": r, "content": t} for r, t in parts] + [{"role": "user", "content": codex.COMPACT_INSTRUCTION}]


R_CUT = "R" * 6_000 + "…8000 chars truncated…" + "R" * 6_000


def _request(session, cut=None, **params):
    prov = FixedProvider()
    p = run(session, cut, summarizer=prov, params=params)
    return p, prov.requests[0]


def test_two_recorded_compactions_summarise_the_replacement_history():
    """rollout_reconstruction.rs: the newest `compacted` item's `replacement_history` replaces the history, the
    items after it are recorded on top (tool outputs truncated); compact.rs then summarises that live history."""
    s = _two_compactions()
    p, req = _request(s)
    assert list(req.messages) == msgs(
        ("user", "fix the flaky test"),
        ("user", "also update the README"),
        ("user", UPSTREAM_SUMMARY_2),
        ("system", PERMS),
        ("user", ENV),
        ("user", "now run the tests"),
        ("assistant", "running"),
        ("assistant", "bash pytest"),
        ("tool", "1 failed"),
    )
    live = codex.STRATEGY.live_history(s, 19, ctx())
    assert [(i.role, i.text) for i in live][:3] == [
        ("user", "fix the flaky test"),
        ("user", "also update the README"),
        ("user", UPSTREAM_SUMMARY_2),
    ]
    # kept: the real users of the live history (not the summary, not the context), then summary, then context
    assert [(k, t) for k, t in user_items(p)] == [
        ("user_original", "fix the flaky test"),
        ("user_original", "also update the README"),
        ("user_original", "now run the tests"),
        ("summary", codex.SUMMARY_PREFIX + "\nSUMMARY-TEXT"),
    ]
    assert p.notes["kept_user_entries"] == ["e3", "e8", "e15"]
    # between the two compactions: replacement history 1 (its opaque compaction item has no text) + what followed
    _, req = _request(s, 12)
    assert list(req.messages) == msgs(
        ("system", PERMS),
        ("user", ENV),
        ("user", "fix the flaky test"),
        ("user", UPSTREAM_SUMMARY_1),
        ("user", "also update the README"),
        ("assistant", "done with ci"),
        ("assistant", "bash cat README"),
        ("tool", R_CUT),
    )


def test_two_compactions_without_replacement_history_are_rebuilt():
    """rollout_reconstruction.rs, `compacted` without `replacement_history` (older rollouts): the history is
    rebuilt by compact.rs `build_compacted_history(initial_context, collect_user_messages(history), message)`."""
    _, req = _request(_two_compactions(replacement=False))
    assert list(req.messages) == msgs(
        ("system", PERMS),
        ("user", ENV),
        ("user", "fix the flaky test"),
        ("user", "also update the README"),
        ("user", UPSTREAM_SUMMARY_2),
        ("system", PERMS),
        ("user", ENV),
        ("user", "now run the tests"),
        ("assistant", "running"),
        ("assistant", "bash pytest"),
        ("tool", "1 failed"),
    )


def test_another_agents_compactions_are_codex_summary_messages():
    """Our rule for sessions from another agent: each recorded compaction is a Codex summary message (our prefix
    + the recorded summary), the history rebuilt around it as compact.rs `build_compacted_history` does."""
    s = _two_compactions(fmt="claude-code", s1="SUMMARY-ONE", s2="SUMMARY-TWO")
    _, req = _request(s)
    assert list(req.messages) == msgs(
        ("system", PERMS),
        ("user", ENV),
        ("user", "fix the flaky test"),
        ("user", "also update the README"),
        ("user", f"{codex.SUMMARY_PREFIX}\nSUMMARY-TWO"),
        ("system", PERMS),
        ("user", ENV),
        ("user", "now run the tests"),
        ("assistant", "running"),
        ("assistant", "bash pytest"),
        ("tool", "1 failed"),
    )


def test_rollout_with_two_compactions_end_to_end(tmp_path):
    """A hand-built rollout (two `compacted` lines with `replacement_history`, as compact.rs
    `run_compact_task_inner` persists them), imported and compacted: the summary request carries the live
    history rollout_reconstruction.rs rebuilds -- the newest replacement history plus what followed."""
    import json

    from compaction_lab.ingest.import_audit import ImportAudit

    def item(role, text):
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}

    def line(kind, payload):
        return json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload})

    lines = [
        line("session_meta", {"id": "rollout-2c", "base_instructions": {"text": "BASE INSTRUCTIONS"}}),
        line("response_item", item("developer", PERMS)),
        line("response_item", item("user", ENV)),
        line("response_item", item("user", "fix the flaky test")),
        line("response_item", item("assistant", "looking")),
        line(
            "compacted",
            {
                "message": UPSTREAM_SUMMARY_1,
                "replacement_history": [
                    item("developer", PERMS),
                    item("user", ENV),
                    item("user", "fix the flaky test"),
                    item("user", UPSTREAM_SUMMARY_1),
                ],
            },
        ),
        line("response_item", item("user", "also update the README")),
        line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "c2",
                "arguments": json.dumps({"command": ["bash", "-lc", "cat README"]}),
            },
        ),
        line("response_item", {"type": "function_call_output", "call_id": "c2", "output": "R" * 20_000}),
        line(
            "compacted",
            {
                "message": UPSTREAM_SUMMARY_2,
                "replacement_history": [
                    item("user", "fix the flaky test"),
                    item("user", "also update the README"),
                    item("user", UPSTREAM_SUMMARY_2),
                ],
            },
        ),
        line("response_item", item("developer", PERMS)),
        line("response_item", item("user", ENV)),
        line("response_item", item("user", "now run the tests")),
        line("response_item", item("assistant", "running")),
    ]
    path = tmp_path / "rollout-2026-01-01T00-00-00-rollout-2c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (s,) = list(load_sessions(tmp_path, ImportAudit()))
    # Issue 46 item 7c: the importer must keep each `replacement_history` (as role + text), never a silent skip.
    assert [b.get("replacement_history") for b in s.metadata.get("compactions", [])] == [
        [
            {"type": "message", "role": "developer", "text": PERMS, "injected": False},
            {"type": "message", "role": "user", "text": ENV, "injected": True},
            {"type": "message", "role": "user", "text": "fix the flaky test", "injected": False},
            {"type": "message", "role": "user", "text": UPSTREAM_SUMMARY_1, "injected": False},
        ],
        [
            {"type": "message", "role": "user", "text": "fix the flaky test", "injected": False},
            {"type": "message", "role": "user", "text": "also update the README", "injected": False},
            {"type": "message", "role": "user", "text": UPSTREAM_SUMMARY_2, "injected": False},
        ],
    ]
    prov = FixedProvider()
    p = strategies.compact(s, "codex", None, ctx(summarizer=prov))
    req = prov.requests[0]
    assert req.system == "BASE INSTRUCTIONS"
    assert list(req.messages) == msgs(
        ("user", "fix the flaky test"),
        ("user", "also update the README"),
        ("user", UPSTREAM_SUMMARY_2),
        ("system", PERMS),
        ("user", ENV),
        ("user", "now run the tests"),
        ("assistant", "running"),
    )
    assert [t for k, t in user_items(p) if k == "user_original"] == [
        "fix the flaky test",
        "also update the README",
        "now run the tests",
    ]
    assert [seg.text for seg in p.segments if seg.label == INITIAL_CONTEXT] == [PERMS, ENV]


def test_summarize_context_three_requests_and_instructions():
    """Port of codex-rs/core/tests/suite/compact.rs `summarize_context_three_requests_and_instructions`: turn 1
    "hello world" -> FIRST_REPLY; the compact request is that history with the compaction prompt last; the next
    request keeps "hello world" and the prefixed summary, not FIRST_REPLY, and (pre-turn) the initial context
    after them, then the next turn's message."""
    s = make_session(
        [
            ("system", SHAPE.system_prompt),
            ("user", ENV, {"injected": True}),
            ("user", "hello world"),
            ("assistant", "FIRST_REPLY"),
            ("user", "next turn"),
        ]
    )
    prov = FixedProvider("SUMMARY_ONLY_CONTEXT")
    p = run(s, cut=4, summarizer=prov)
    assert list(prov.requests[0].messages) == msgs(("user", ENV), ("user", "hello world"), ("assistant", "FIRST_REPLY"))
    assert [(seg.kind, seg.text) for seg in p.segments[2:]] == [
        ("user_original", "hello world"),
        ("summary", codex.SUMMARY_PREFIX + "\nSUMMARY_ONLY_CONTEXT"),
        ("system", ENV),
    ]
    assert "FIRST_REPLY" not in p.text()


def test_kept_user_items_that_share_an_entry_stay_separate_messages():
    """compact.rs sends one user item per kept message. Replacement-history items that are not in the
    journal all point at the compaction's entry, and text typed twice maps to one entry: the projection
    joined such items into one message (`Projection.messages` joins segments of one entry)."""
    items = [
        ("user", "typed earlier A"),
        ("assistant", "ok"),
        ("user", "same text twice"),
        ("assistant", "ok"),
        ("user", "same text twice"),
        ("assistant", "ok"),
        ("summary", "S1"),
        ("user", "next"),
    ]
    s = make_session(items, source_format="codex")
    s = Session(
        s.id,
        s.source_format,
        s.records,
        metadata={
            "compactions": [
                {
                    "entry_id": "e6",
                    "source_order": 6,
                    "replacement_history": [
                        _msg("user", "only in the replacement A"),
                        _msg("user", "only in the replacement B"),
                        _msg("user", "S1"),
                    ],
                }
            ]
        },
    )
    p = run(s, summarizer=FixedProvider())
    users = [m["content"] for m in p.messages() if m["role"] == "user"]
    assert "only in the replacement A" in users and "only in the replacement B" in users
    assert not any("\n\n" in u and "only in the replacement" in u for u in users)


# --------------------------------------------------------------------------- issue 27 item 2: remote compaction
#
# Codex with an OpenAI provider compacts remotely (compact_remote.rs @ 683f0a6897c3835f32556f3ddf6542f94689f401):
# the rollout's `compacted` item has an empty message and a replacement history holding an encrypted
# `compaction` item. The fixture is upstream's own test data (tests/fixtures/SOURCES.md).

REMOTE = FIXTURES / "codex" / "rollout-2026-01-20T09-00-00-0199c0de-0000-7000-8000-00000000e0c1.jsonl"
PAYLOAD = "QUJD" * 1_000  # 4,000 bytes of base64: a summary of ~3 KB decoded


def _remote(tmp_path=None, payload: str | None = None) -> Session:
    """The fixture, or the fixture with the test's 28-byte payload replaced by a realistic one."""
    path = REMOTE
    if payload is not None:
        path = tmp_path / REMOTE.name
        path.write_text(REMOTE.read_text("utf-8").replace("ENCRYPTED_COMPACTION_SUMMARY", payload), "utf-8")
    (s,) = load_sessions(path)
    return s


def test_encrypted_item_estimate_is_codexs_own():
    """context_manager/history.rs:405-411 (`estimate_reasoning_length`: len x 3/4 - 650, saturating) and
    424-433 (the `Compaction` arm) @ e06dd0e5; tokens = ceil(bytes / 4) (`approx_tokens_from_byte_count`)."""
    assert codex.encrypted_item_tokens(0) == 0
    assert codex.encrypted_item_tokens(len("ENCRYPTED_COMPACTION_SUMMARY")) == 0  # upstream's test payload
    assert codex.encrypted_item_tokens(867) == 0  # 650 bytes: all overhead
    assert codex.encrypted_item_tokens(868) == 1  # 651 bytes
    assert codex.encrypted_item_tokens(len(PAYLOAD)) == 588  # 3,000 - 650 = 2,350 bytes


def test_resuming_a_remote_compaction_keeps_its_opaque_summary(tmp_path):
    """rollout_reconstruction.rs @ 023cedaa: the replacement history comes back whole, its `compaction` item
    included (the model reads it decrypted); the lab used to drop it."""
    s = _remote()
    live = codex.STRATEGY.live_history(s, len(s.records), ctx())
    assert [(i.role, i.text, i.opaque) for i in live] == [
        ("user", "COMPACTED_USER_SUMMARY", False),
        ("assistant", "", True),
        ("assistant", "COMPACTED_ASSISTANT_NOTE", False),
        ("user", "after compact", False),
        ("assistant", "AFTER_COMPACT_REPLY", False),
    ]
    assert live[1].summary and live[1].opaque_tokens == 0 and live[1].entry_id == "L4"
    big = _remote(tmp_path, PAYLOAD)
    (opaque,) = [i for i in codex.STRATEGY.live_history(big, len(big.records), ctx()) if i.opaque]
    assert opaque.opaque_tokens == opaque.size() == 588


def test_remote_compaction_in_the_summary_request_and_the_projection(tmp_path):
    s = _remote(tmp_path, PAYLOAD)
    prov = FixedProvider("S")
    p = run(s, summarizer=prov)
    req = prov.requests[0]
    # the opaque item sends no text (upstream sends the encrypted item; our provider could not read it) ...
    assert list(req.messages) == msgs(
        ("user", "COMPACTED_USER_SUMMARY"),
        ("assistant", "COMPACTED_ASSISTANT_NOTE"),
        ("user", "after compact"),
        ("assistant", "AFTER_COMPACT_REPLY"),
    )
    # ... but its size counts in the request's fit
    fixed = est_bytes4(SHAPE.system_prompt) + est_bytes4(codex.COMPACT_INSTRUCTION)
    readable = sum(est_bytes4(t) for t in ("COMPACTED_USER_SUMMARY", "COMPACTED_ASSISTANT_NOTE", "after compact"))
    assert p.notes["request_tokens_est"] == fixed + readable + est_bytes4("AFTER_COMPACT_REPLY") + 588
    assert p.notes["request_opaque_items"] == 1
    # a local compaction keeps user messages and its own summary: the encrypted one is gone (compact.rs 233-237)
    assert not any(seg.opaque for seg in p.segments) and p.notes["dropped_opaque_summaries"] == 1
    assert [t for k, t in user_items(p) if k != "summary"] == ["COMPACTED_USER_SUMMARY", "after compact"]


def test_failed_compaction_of_a_remote_session_keeps_the_opaque_summary(tmp_path):
    s = _remote(tmp_path, PAYLOAD)
    p = run(s, summarizer=NoSummarizer())
    assert p.notes["compaction_failed"]
    (seg,) = [g for g in p.segments if g.opaque]
    assert (seg.kind, seg.label, seg.tokens, seg.entry_ids) == ("summary", "summary opaque (encrypted)", 588, ("L4",))
    assert seg.label == codex.OPAQUE_SUMMARY_LABEL and "588 tokens" in seg.text and "QUJD" not in seg.text
    assert [g.kind for g in p.segments] == ["system", "tools", "omitted_marker", "summary", "omitted_marker"] + [
        "tail",
        "tail",
    ]
    assert p.tokens == sum(g.tokens for g in p.segments) and p.tokens > 588
