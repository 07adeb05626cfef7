"""Baselines: full, truncate-oldest, observation-masking — every rule on hand-built
sessions, properties on random sessions, and runs on the real fixtures and synthetic chains."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction_lab import strategies
from compaction_lab.core.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.core.session import Record, Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import count_tokens
from compaction_lab.strategies import calibration
from compaction_lab.strategies.arms import baselines as bl
from compaction_lab.strategies.base import CompactionContext, history, role_of
from compaction_lab.summarize import NoSummarizer
from compaction_lab.summarize.extractive import ExtractiveSummarizer
from tests.helpers import FIXTURES, PUBLIC_FIXTURES, make_session
from tests.helpers import FakeSummarizer as SharedFakeProvider

SHAPE = CallShape(
    "test",
    "You are a test agent.",
    ({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},),
)
NAMES = ("full", "truncate-oldest", "observation-masking")  # claude-code: test_claude_code_strategy.py
FRAME = count_tokens(SHAPE.system_prompt) + count_tokens(SHAPE.tools_text())


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
    )


def words(tag: str, n: int) -> str:
    """About n (+2) tokens of text, distinct per tag."""
    return f"{tag}:" + " word" * n


def pair(cid: str, out: str, error: bool = False, target: str = "ls") -> list[tuple]:
    extra = {"tool": "bash", "target": target, "call_id": cid}
    return [("tool_call", f'bash {{"command": "{target}"}}', extra), ("tool_output", out, {**extra, "is_error": error})]


def turn(i: int, out_tokens: int = 50, prose: int = 10) -> list[tuple]:
    """One user turn: user, assistant, a call and its output."""
    return [
        ("user", words(f"u{i}", prose)),
        ("assistant", words(f"a{i}", prose)),
        *pair(f"c{i}", words(f"o{i}", out_tokens)),
    ]


def FakeSummarizer(text: str = "SUMMARY TEXT", error: Exception | None = None) -> SharedFakeProvider:
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
    # W − O in the model's tokens: over the session's calibration in report tokens (1.0 uncalibrated)
    factor = calibration.calibrate(session, ctx).factor
    assert p.estimator == "tiktoken" and p.capacity == int((ctx.window - ctx.output_ceiling) / factor)


# =========================================================================== registry


def test_registered_with_versions():
    for name, version in zip(NAMES, ("full-1", "truncate-oldest-1", "observation-masking-2"), strict=False):
        s = strategies.get(name)
        assert s.name == name and s.algorithm_version == version and s.estimator == "tiktoken"
    assert {n for n, s in strategies.registry().items() if type(s).__module__ == bl.__name__} == set(NAMES)


# =========================================================================== full


def test_full_keeps_every_record_verbatim():
    sess = make_session(
        [
            ("system", SHAPE.system_prompt),
            *turn(0),
            ("meta", "model_change x"),
            *turn(1),
            ("system", "A later system note."),
            ("summary", "An earlier summary."),
        ]
    )
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
    sess = make_session(
        [("user", words("u", 500)), ("tool_output", "stray output", {"call_id": "nope"}), ("assistant", "ok")]
    )
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

PLACEHOLDER_1 = "Old environment output: (1 lines omitted)"


def test_masking_replaces_old_outputs_only():
    sess = make_session([("system", SHAPE.system_prompt)] + [x for i in range(4) for x in turn(i)])
    ctx = ctx_for(mask_after_turns=2)
    p = compact(sess, "observation-masking", ctx=ctx)
    markers = segs(p, "omitted_marker")
    assert [m.entry_ids for m in markers] == [("e4",), ("e8",)]  # outputs of steps 0 and 1
    for m in markers:
        assert m.text == PLACEHOLDER_1  # upstream's placeholder: the line count only
        assert m.role == "tool" and m.record_kind == "tool_output"
    # prose and calls of old steps stay verbatim; the last two steps are the tail
    old = [s for s in p.segments[2:] if s.kind not in ("omitted_marker", "tail")]
    assert [(s.kind, s.record_kind) for s in old] == [
        ("user_original", "user"),
        ("assistant_original", "assistant"),
        ("assistant_original", "tool_call"),
    ] * 2
    assert [s.entry_ids[0] for s in segs(p, "tail")] == [f"e{i}" for i in range(9, 17)]
    assert p.notes["masked"] == 2 and p.notes["dropped"] == 0 and "header" not in kinds(p)
    assert p.notes["mask_unit"] == "agent_step" and p.notes["placeholder"] == "upstream"
    check_invariants(sess, p, ctx)


def test_masking_placeholder_is_upstreams_line_count():
    """Upstream: the-complexity-trap @ 1b07decf4ca4, sweagent/agent/history_processors.py:143 — a masked
    observation becomes ``Old environment output: (N lines omitted)``, N = ``len(text.splitlines())``;
    observation-masking-1 wrote its own marker naming the entry (now ``placeholder="archive"``)."""
    out = "line one\nline two\nline three"
    sess = make_session(
        [("user", "task"), ("assistant", "look"), *pair("c1", out), ("assistant", "again"), *pair("c2", "x")]
    )
    p = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=1))
    (m,) = segs(p, "omitted_marker")
    assert m.entry_ids == ("e3",) and m.text == "Old environment output: (3 lines omitted)"
    q = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=1, placeholder="archive"))
    (m,) = segs(q, "omitted_marker")
    assert (
        m.text == f"[tool output omitted — entry e3, {count_tokens(out)} tokens; retrievable from the session archive]"
    )
    with pytest.raises(ValueError, match="placeholder"):
        compact(sess, "observation-masking", ctx=ctx_for(placeholder="bogus"))


def swe_agent_session(steps: int, out_tokens: int = 30) -> Session:
    """SWE-agent's shape: one task message, then steps of thought + one tool call + its observation."""
    items = [("system", SHAPE.system_prompt), ("user", "ISSUE: fix the bug")]
    for k in range(steps):
        items += [("assistant", words(f"thought{k}", 5)), *pair(f"c{k}", words(f"obs{k}", out_tokens))]
    return make_session(items)


def test_masking_default_is_ten_agent_steps():
    """The paper's configuration: the-complexity-trap @ 1b07decf4ca4, config/default_no_demo_N=1_M=10.yaml:114-116
    (``last_n_observations``, ``n: 10``). One task message and 12 agent steps: the outputs of the two oldest
    steps are masked (observation-masking-1 counted user messages and masked nothing here)."""
    sess = swe_agent_session(12)
    p = compact(sess, "observation-masking")
    assert p.notes["mask_after_turns"] == 10 and p.notes["mask_unit"] == "agent_step"
    assert p.notes["turns"] == 12 and p.notes["masked"] == 2
    assert [m.entry_ids[0] for m in segs(p, "omitted_marker")] == ["e4", "e7"]


def _upstream_omitted(history: list[dict], n: int) -> list[str]:
    """SWE-agent's LastNObservations._get_omit_indices (history_processors.py:114-122 @ 1b07decf4ca4), written
    out for a .traj history: every non-demo observation (``message_type`` ``observation``; in the older format
    without it, every non-demo user or tool message after the system prompt), polling 1, the first (the
    instance template) never omitted. Returned as our importer's entry ids (``h<index>``)."""

    def is_observation(i: int, e: dict) -> bool:
        if "message_type" in e:
            return e["message_type"] == "observation"
        return i > 0 and e["role"] in ("user", "tool")

    obs = [i for i, e in enumerate(history) if not e.get("is_demo", False) and is_observation(i, e)]
    return [f"h{i}" for i in obs[1 : max(0, len(obs) - n)]]


@pytest.mark.parametrize(
    "traj",
    [
        FIXTURES / "swe_agent" / "function_calling.traj",
        PUBLIC_FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj",
    ],
)
@pytest.mark.parametrize("n", [1, 3, 5, 10])
def test_masking_matches_upstream_last_n_observations(traj, n):
    """Port of upstream's ``test_last_n_observations`` (SWE-agent tests/test_history_processors.py, as in
    the-complexity-trap @ 1b07decf4ca4): on a real trajectory, ``n`` observations are kept and
    ``total - n - 1`` are elided (the instance template is never elided). Ours, on the imported trajectory,
    masks exactly the outputs upstream elides."""
    import json

    from compaction_lab.ingest import load_sessions

    history_ = json.loads(traj.read_text())["history"]
    (sess,) = list(load_sessions(traj))
    expected = _upstream_omitted(history_, n)
    p = compact(sess, "observation-masking", ctx=ctx_for(window=1_000_000, output=1_000, mask_after_turns=n))
    assert [m.entry_ids[0] for m in segs(p, "omitted_marker")] == expected
    total = len(
        [
            e
            for e in history_
            if not e.get("is_demo")
            and e.get("message_type", "observation") == "observation"
            and e["role"] in ("user", "tool")
        ]
    )
    assert p.notes["masked"] == max(0, total - n - 1)
    # upstream keeps every action (thought + tool call) untouched: so do we
    kept = {s.entry_ids[0] for s in p.segments if s.record_kind in ("assistant", "reasoning", "tool_call")}
    assert kept == {r.entry_id for r in sess.records if r.kind in ("assistant", "reasoning", "tool_call")}


def test_masking_agent_steps_in_an_interactive_session():
    """Issue #13 item 4: counting user turns kept ~1.5-1.8x the paper's tokens. Three user turns of five
    agent steps each with M = 10: the outputs of the five oldest steps are masked; the old unit (user
    turns, now ``mask_unit="user_turn"``) masked nothing."""
    items: list[tuple] = []
    for u in range(3):
        items.append(("user", words(f"u{u}", 5)))
        for k in range(5):
            items += [("assistant", words(f"a{u}.{k}", 5)), *pair(f"c{u}.{k}", words(f"o{u}.{k}", 200))]
        items.append(("assistant", words(f"answer{u}", 5)))  # the final answer of the turn: no observation
    sess = make_session(items)
    p = compact(sess, "observation-masking")
    outputs = [r.entry_id for r in sess.records if r.kind == "tool_output"]
    assert p.notes["turns"] == 18 and [m.entry_ids[0] for m in segs(p, "omitted_marker")] == outputs[:5]
    old = compact(sess, "observation-masking", ctx=ctx_for(mask_unit="user_turn"))
    assert old.notes["masked"] == 0 and old.tokens > p.tokens
    check_invariants(sess, p, ctx_for())


def test_masking_agent_step_boundaries():
    """One model call is one step: its reasoning, prose and (parallel) tool calls, and all their outputs; a
    block of the same entry recorded after an output continues the call; user text between steps belongs to
    the step that answers it."""
    items = [
        ("user", "go"),  # e0 -> step 0
        ("reasoning", "think"),
        ("assistant", "two calls"),  # e1 e2: step 0
        ("tool_call", "bash a", {"tool": "bash", "call_id": "p1"}),  # e3
        ("tool_call", "bash b", {"tool": "bash", "call_id": "p2"}),  # e4
        ("tool_output", "out a", {"tool": "bash", "call_id": "p1"}),  # e5
        ("tool_output", "out b", {"tool": "bash", "call_id": "p2"}),  # e6
        ("tool_call", "bash c", {"tool": "bash", "call_id": "p3"}),  # e7: a new call -> step 1
        ("tool_output", "out c", {"tool": "bash", "call_id": "p3"}),  # e8
        ("tool_call", "bash d", {"tool": "bash", "call_id": "p4"}),  # e9: same entry as e7 -> step 1
        ("tool_output", "out d", {"tool": "bash", "call_id": "p4"}),  # e10
        ("user", "AGENTS.md", {"injected": True}),
        ("user", "next"),  # e11 e12 -> step 2
        ("assistant", "step two"),
        *pair("c9", "out e"),
    ]  # e13 e14 e15
    sess = make_session(items)
    recs = list(sess.records)
    recs[9] = dataclasses.replace(recs[9], entry_id="e7", block_index=1)
    sess = dataclasses.replace(sess, records=tuple(recs))
    assert bl._turns(sess.records, "agent_step") == [0] * 7 + [1] * 4 + [2] * 5
    p = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=2))
    assert [m.entry_ids[0] for m in segs(p, "omitted_marker")] == ["e5", "e6"]
    q = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=1))
    assert [m.entry_ids[0] for m in segs(q, "omitted_marker")] == ["e5", "e6", "e8", "e10"]
    check_invariants(sess, q, ctx_for())
    with pytest.raises(ValueError, match="mask_unit"):
        compact(sess, "observation-masking", ctx=ctx_for(mask_unit="bogus"))


def test_masking_user_turn_unit_is_the_old_behaviour():
    items = [
        ("assistant", "preamble"),
        *pair("c0", "pre output"),  # before the first user: turn 0
        ("user", "first"),
        *pair("c1", "out one"),
        ("user", "AGENTS.md injected", {"injected": True}),
        *pair("c2", "out two"),  # same turn
        ("user", "second"),
        *pair("c3", "out three"),
    ]
    sess = make_session(items)
    for params in ({"mask_unit": "user_turn"}, {"turn_unit": "user"}):
        p = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=1, **params))
        assert p.notes["turns"] == 2 and p.notes["mask_unit"] == "user_turn"
        assert [m.entry_ids[0] for m in segs(p, "omitted_marker")] == ["e2", "e5", "e8"]
    legacy = compact(sess, "observation-masking", ctx=ctx_for(mask_after_turns=1, turn_unit="step"))
    assert legacy.notes["mask_unit"] == "agent_step"


def test_masking_fallback_drops_oldest_masked_turns():
    sess = make_session([x for i in range(8) for x in turn(i, out_tokens=300, prose=100)])
    ctx = ctx_for(window=FRAME + 1900 + 1000, output=1000, mask_after_turns=2)
    p = compact(sess, "observation-masking", ctx=ctx)
    assert p.notes["fallback_steps"] == ["drop-masked-turns"]
    assert p.notes["dropped_turns"] >= 1
    (header,) = segs(p, "header")
    assert f"{p.notes['dropped_turns']} oldest agent steps" in header.text and header.entry_ids == ()
    kept_users = [s.text for s in p.segments if s.record_kind == "user"]
    assert kept_users == [words(f"u{i}", 100) for i in range(p.notes["dropped_turns"], 8)]
    assert [s.entry_ids[0] for s in segs(p, "tail")][0] == "e24"  # the last two steps stay verbatim
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


# =========================================================================== properties

TEXT = st.builds(
    lambda w, n: " ".join([w] * n),
    st.sampled_from(["alpha", "Error: x", "ORD-1-AB", "app/x.py", "日本", "`k`", "I chose"]),
    st.integers(0, 400),
)


@st.composite
def random_sessions(draw):
    n = draw(st.integers(0, 45))
    items: list[tuple] = []
    if draw(st.booleans()):
        items.append(("system", SHAPE.system_prompt))
    calls: list[str] = []
    for _ in range(n):
        k = draw(
            st.sampled_from(
                [
                    "user",
                    "user",
                    "injected",
                    "assistant",
                    "assistant",
                    "reasoning",
                    "call",
                    "call",
                    "output",
                    "output",
                    "stray",
                    "meta",
                    "summary",
                    "system",
                ]
            )
        )
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
@given(
    sess=random_sessions(),
    window=st.integers(1_500, 40_000),
    frac=st.sampled_from([0.05, 0.25, 0.5]),
    m=st.integers(0, 4),
    tail=st.integers(0, 4_000),
    cut_frac=st.floats(0, 1),
    extractive=st.booleans(),
)
def test_properties_on_random_sessions(sess, window, frac, m, tail, cut_frac, extractive):
    cut = round(len(sess.records) * cut_frac)
    ctx = ctx_for(
        window=window,
        output=int(window * frac),
        summarizer=ExtractiveSummarizer() if extractive else None,
        mask_after_turns=m,
        tail_tokens=tail,
        summary_tokens=2_000,
    )
    for name in NAMES:
        p = compact(sess, name, cut=cut, ctx=ctx)
        check_invariants(sess, p, ctx, cut)
        for s in p.segments:
            if s.kind == "summary":
                assert s.label == (STAND_IN_LABEL if extractive else "")
        if name == "observation-masking" and p.notes["dropped"] == 0:
            prose = [r for r in history(sess, cut) if r.kind in ("user", "assistant", "reasoning", "tool_call")]
            kept = {
                s.entry_ids[0] for s in p.segments if s.record_kind in ("user", "assistant", "reasoning", "tool_call")
            }
            assert {r.entry_id for r in prose} <= kept  # prose and calls are never masked
        if name == "truncate-oldest" and p.notes["dropped"] == 0:
            assert len(segs(p, "tail")) == len(
                bl._records(sess, cut, dataclasses.replace(ctx, shape=ctx.shape.for_session(sess)))
            )


# =========================================================================== real and synthetic sessions


def _sessions():
    from compaction_lab.ingest import load_sessions, synthetic

    out = list(load_sessions(PUBLIC_FIXTURES))
    out.append(synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=128_000))[0].session)
    return out


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_000)])
@pytest.mark.parametrize("provider", ["none", "extractive"])
def test_real_and_synthetic_sessions(window, output, provider):
    summarizer = ExtractiveSummarizer() if provider == "extractive" else NoSummarizer()
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

    base = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=128_000))[0].session
    recs = []
    for k in range(8):  # ~1M tokens: the chain eight times over, ids and call ids made unique
        for r in base.records:
            if k and r.kind == "system":
                continue
            recs.append(
                dataclasses.replace(
                    r,
                    entry_id=f"{k}-{r.entry_id}",
                    source_order=len(recs),
                    call_id=f"{k}-{r.call_id}" if r.call_id else None,
                )
            )
    sess = Session(id=base.id, source_format="synthetic", records=tuple(recs))
    ctx = CompactionContext(window=1_000_000, output_ceiling=32_000, summarizer=ExtractiveSummarizer())
    strategies.compact(sess, "full", ctx=ctx)  # warm the token cache once
    for name in NAMES:  # how fast: `make bench BENCH=strategies`
        p = strategies.compact(sess, name, ctx=ctx)
        assert p.tokens > 0
