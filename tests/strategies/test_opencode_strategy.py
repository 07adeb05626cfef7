"""OpenCode strategy: every rule of docs/strategies.md "OpenCode" (upstream pins: docs/strategies.md "opencode: upstream pins") pinned on hand-built sessions, plus properties."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from compaction_lab import strategies
from compaction_lab.core.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.core.session import Record, Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.ingest import load_sessions, synthetic
from compaction_lab.strategies import labels
from compaction_lab.strategies.arms import opencode as oc
from compaction_lab.strategies.base import COMPACTION_FAILED, CompactionContext, est_chars4, record_messages
from compaction_lab.strategies.trigger import opencode_tail_budget
from compaction_lab.summarize import NoSummarizer
from tests.helpers import FIXTURES, FakeSummarizer, make_session

SHAPE = CallShape("t", "You are the test agent.", ({"type": "function", "function": {"name": "bash"}},))
LOCAL_FIXTURES = FIXTURES


def FixedProvider(text: str = "SUMMARY-TEXT", name: str = "fake", stand_in: bool = False) -> FakeSummarizer:
    return FakeSummarizer(text, name, stand_in, usage=(50, 0, 9))


def BrokenProvider() -> FakeSummarizer:
    return FakeSummarizer(name="broken", error=TimeoutError("slow"))


def ctx(**kw) -> CompactionContext:
    """A context with the test shape and, unless given, a provider that answers (a failed summary keeps
    the history unchanged, which tests about the compacted projection do not want)."""
    kw.setdefault("shape", SHAPE)
    kw.setdefault("summarizer", FixedProvider())
    return CompactionContext(**kw)


def run(session: Session, cut: int | None = None, **kw):
    return strategies.compact(session, "opencode", cut, ctx(**kw))


def toks(n: int, ch: str = "a") -> str:
    """Text whose chars/4 estimate is exactly n."""
    return ch * (4 * n)


def tail_ids(p) -> list[str]:
    return [s.entry_ids[0] for s in p.segments if s.kind in ("tail", "omitted_marker")]


def build(items: list[tuple], session_id: str = "s1") -> Session:
    """Like make_session, with explicit entry ids: (entry_id, kind, text[, fields])."""
    recs = []
    for i, (eid, kind, text, *rest) in enumerate(items):
        recs.append(Record(session_id, eid, i, i, kind, text, **(rest[0] if rest else {})))
    return Session(id=session_id, source_format="test", records=tuple(recs))


# --------------------------------------------------------------------------- registry, trigger, budget


def test_registered_with_version_and_estimator():
    s = strategies.get("opencode")
    assert (s.name, s.algorithm_version, s.estimator) == ("opencode", "opencode-1.18-4", "chars/4")
    assert est_chars4("abcdef") == 2 and est_chars4("abc") == 1


def test_fires_when_usage_reaches_usable():
    c = ctx(window=100_000, output_ceiling=10_000)  # usable = context - maxOutput
    assert not oc.STRATEGY.fires(89_999, c) and oc.STRATEGY.fires(90_000, c)
    c = ctx(window=200_000, output_ceiling=64_000, input_limit=50_000)  # 50,000 - min(20,000, 32,000)
    assert not oc.STRATEGY.fires(29_999, c) and oc.STRATEGY.fires(30_000, c)


@pytest.mark.parametrize(
    "window,output,input_limit,usable,budget",
    [
        (128_000, 32_000, None, 96_000, 15_000),  # capped at 15,000
        (40_000, 8_000, None, 32_000, 8_000),  # usable / 4
        (10_000, 2_000, None, 8_000, 2_000),  # floor of 2,000
        (200_000, 64_000, 50_000, 30_000, 7_500),  # declared input limit
        (30_003, 1_000, None, 29_003, 7_250),  # floor(usable / 4)
    ],
)
def test_tail_budget(window, output, input_limit, usable, budget):
    p = run(make_session([("user", "x")]), window=window, output_ceiling=output, input_limit=input_limit)
    assert p.notes["usable"] == p.capacity == usable
    assert p.notes["tail_budget"] == opencode_tail_budget(usable) == budget


# --------------------------------------------------------------------------- tail


TURNS = [
    ("system", "sys"),
    ("user", toks(10)),
    ("assistant", toks(10)),  # turn 1: JSON estimate 49
    ("user", toks(5)),
    ("assistant", toks(15)),  # turn 2: 49 (from e4 on: 30)
    ("user", toks(3)),
    ("assistant", toks(7)),  # turn 3: 39 (from e6 on: 22)
]


def est(records) -> int:
    return oc.estimate_records(list(records))


def test_turn_sizes_of_the_fixture():
    r = make_session(TURNS).records
    assert [est(r[1:3]), est(r[3:5]), est(r[5:7]), est(r[4:5]), est(r[6:7])] == [49, 49, 39, 30, 22]


def test_tail_is_sized_as_json_of_model_messages_hand_computed():
    """Upstream compaction.ts ``estimate``: Token.estimate(JSON.stringify(toModelMessages(turn))).

    Acceptance 4 (issue 13 item 3): one turn computed by hand. Ported scenario:
    packages/opencode/test/session/compaction.test.ts "summarizes only the head while keeping
    recent tail out of summary input" (the tail is sized per turn and kept out of the request).
    """
    s = make_session(
        [
            ("user", "earlier"),
            ("user", "fix a.py"),
            ("assistant", "running tests"),
            ("tool_call", 'bash {"command": "pytest"}', {"tool": "bash", "call_id": "c1"}),
            ("tool_output", "1 failed", {"tool": "bash", "call_id": "c1"}),
            ("assistant", "done"),
        ]
    )
    by_hand = (
        '[{"role":"user","content":[{"type":"text","text":"fix a.py"}]},'
        '{"role":"assistant","content":[{"type":"text","text":"running tests"},'
        '{"type":"tool-call","toolCallId":"c1","toolName":"bash","input":{"command":"pytest"}}]},'
        '{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"bash",'
        '"output":{"type":"text","value":"1 failed"}}]},'
        '{"role":"assistant","content":[{"type":"text","text":"done"}]}]'
    )
    assert len(by_hand) == 415  # -> Math.round(415 / 4) = Math.round(103.75) = 104
    assert est(s.records[1:]) == 104
    # the record-text rule this replaces: round(8/4) + round(13/4) + round(25/4) + round(8/4) + round(4/4)
    assert sum(est_chars4(r.text) for r in s.records[1:]) == 15
    p = run(s, params={"tail_tokens": 104})
    assert tail_ids(p) == ["e1", "e2", "e3", "e4", "e5"] and p.notes["tail_tokens"] == 104
    p = run(s, params={"tail_tokens": 103})  # the whole turn no longer fits: split at the next message
    assert tail_ids(p) == ["e2", "e3", "e4", "e5"] and p.notes["tail_split"] == {"turn_start": "e1", "split_at": "e2"}
    # the turn from the step message on (prose, call, result; then "done") is 353 characters: 88; below
    # that only "done" (16) fits. (Counting the comma between the step's two model messages twice made
    # it 354 -> 89, and 88 kept only "done".)
    assert tail_ids(run(s, params={"tail_tokens": 88})) == ["e2", "e3", "e4", "e5"]
    assert tail_ids(run(s, params={"tail_tokens": 87})) == ["e5"]


def js_stringify_length(value) -> int:
    """``JSON.stringify(value).length``: compact separators, non-ASCII kept, UTF-16 code units."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-16-le")) // 2


@pytest.mark.parametrize("pad", ["", "x", "xx", "xxx", "\U0001f600", "\U0001f600x", "ü" * 3, "x" * 7])
def test_tail_estimate_is_json_stringify_of_the_model_messages_of_steps_with_tool_results(pad):
    """Upstream compaction.ts ``estimate`` (in ``layer``, @3df4a25 and @31e22f65):
    ``Token.estimate(JSON.stringify(await toModelMessages(messages)))``, ``Token.estimate`` =
    ``Math.round(length / 4)``. Each assistant step with tool results is two model messages (assistant,
    tool): the array holds one comma between any two of them. Issue 27 item 8: the comma inside a step
    was counted twice (+1 character per step), which the hand-computed test above could not see (415
    and 416 both round to 104). `pad` moves the length through every remainder mod 4."""
    out = "3 passed" + pad
    recs = make_session(
        [
            ("user", "run it"),
            ("assistant", "running"),
            ("tool_call", 'bash {"command": "make"}', {"tool": "bash", "call_id": "c1"}),
            ("tool_output", out, {"tool": "bash", "call_id": "c1"}),
            ("tool_call", 'read {"filePath": "a.py"}', {"tool": "read", "call_id": "c2"}),
            ("tool_output", "no such file", {"tool": "read", "call_id": "c2", "is_error": True}),
        ]
    ).records
    # the exact toModelMessages array: a user message, then two steps, each assistant + tool
    to_model_messages = [
        {"role": "user", "content": [{"type": "text", "text": "run it"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "running"},
                {"type": "tool-call", "toolCallId": "c1", "toolName": "bash", "input": {"command": "make"}},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "toolName": "bash",
                    "output": {"type": "text", "value": out},
                }
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "toolCallId": "c2", "toolName": "read", "input": {"filePath": "a.py"}}],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c2",
                    "toolName": "read",
                    "output": {"type": "error-text", "value": "no such file"},
                }
            ],
        },
    ]
    spans = oc.group_messages(recs)
    assert [m for a, b in spans for m in oc.model_messages(recs[a:b])] == to_model_messages
    for first, msgs in ((0, to_model_messages), (1, to_model_messages[1:]), (4, to_model_messages[3:])):
        # the whole turn, and the suffixes splitTurn sizes (from each step on)
        n = js_stringify_length(msgs)
        assert oc.estimate_records(recs[first:]) == math.floor(n / 4 + 0.5), (first, n)
    step = js_stringify_length(to_model_messages[1:3])
    assert oc.estimate_records(recs[1:4]) == math.floor(step / 4 + 0.5)


def test_tail_is_newest_whole_user_turns():
    p = run(make_session(TURNS), params={"tail_tokens": 88})
    assert tail_ids(p) == ["e3", "e4", "e5", "e6"]
    assert p.notes["tail_whole_turns"] == 2 and p.notes["tail_split"] is None
    assert p.notes["head_records"] == 3 and p.notes["tail_tokens"] == 88
    tails = [s for s in p.segments if s.kind == "tail"]
    assert [s.text for s in tails] == [t for _, t in TURNS[3:]]
    assert [(s.role, s.record_kind) for s in tails] == [("user", "user"), ("assistant", "assistant")] * 2


def test_first_turn_that_does_not_fit_is_split_at_a_later_message():
    """Upstream compaction.ts ``splitTurn``: the earliest later message whose suffix fits."""
    p = run(make_session(TURNS), params={"tail_tokens": 69})
    assert tail_ids(p) == ["e4", "e5", "e6"]
    assert p.notes["tail_split"] == {"turn_start": "e3", "split_at": "e4"}
    p = run(make_session(TURNS), params={"tail_tokens": 38})
    assert tail_ids(p) == ["e6"]


def test_no_tail_when_nothing_fits():
    p = run(make_session(TURNS), params={"tail_tokens": 21})
    assert tail_ids(p) == [] and p.notes["head_records"] == 7
    assert [s.kind for s in p.segments] == ["system", "tools", "header", "summary", "continue"]


def test_no_tail_when_it_would_start_at_the_first_message():
    """Upstream compaction.ts ``select``: ``if (!keep || keep.start === 0)`` -> no tail_start_id.

    Issue 13 item 3. Every turn fits, so the tail would be the whole history: upstream keeps
    none and summarises everything (the code at HEAD kept all of it verbatim).
    """
    p = run(make_session(TURNS), params={"tail_tokens": 1_000})
    assert tail_ids(p) == [] and p.notes["tail_at_first_message"] and p.notes["head_records"] == 7
    # a message before the first user turn moves the first turn off index 0: then it is kept
    s = make_session([("assistant", "hello"), ("user", "u"), ("assistant", "a")])
    assert tail_ids(run(s, params={"tail_tokens": 1_000})) == ["e1", "e2"]


def test_tail_turns_limits_the_candidates():
    """Upstream config ``compaction.tail_turns`` (compaction.ts ``select``: ``all.slice(-limit)``)."""
    p = run(make_session(TURNS), params={"tail_tokens": 1_000, "tail_turns": 1})
    assert tail_ids(p) == ["e5", "e6"]
    assert tail_ids(run(make_session(TURNS), params={"tail_tokens": 1_000, "tail_turns": 0})) == []


def test_records_before_the_first_user_are_never_tail():
    p = run(make_session([("assistant", "hello"), ("tool_output", "x")]), params={"tail_tokens": 1000})
    assert tail_ids(p) == []


def test_split_never_at_a_tool_output_nor_between_call_and_output():
    s = make_session(
        [
            ("user", "earlier"),
            ("user", toks(50)),
            ("tool_call", toks(1), {"tool": "bash", "call_id": "c1"}),
            ("tool_output", toks(20), {"tool": "bash", "call_id": "c1"}),
            ("assistant", toks(5)),
        ]
    )
    r = s.records
    assert tail_ids(run(s, params={"tail_tokens": est(r[4:])})) == ["e4"]
    # the call and its output are one OpenCode message: the split is before the call or not there
    assert tail_ids(run(s, params={"tail_tokens": est(r[2:])})) == ["e2", "e3", "e4"]
    assert tail_ids(run(s, params={"tail_tokens": est(r[2:]) - 1})) == ["e4"]
    par = make_session(
        [
            ("user", "earlier"),
            ("user", toks(50)),
            ("tool_call", toks(10), {"tool": "bash", "call_id": "c1"}),
            ("tool_call", toks(1), {"tool": "bash", "call_id": "c2"}),
            ("tool_output", toks(1), {"tool": "bash", "call_id": "c1"}),
            ("tool_output", toks(1), {"tool": "bash", "call_id": "c2"}),
            ("assistant", toks(1)),
        ]
    )
    assert tail_ids(run(par, params={"tail_tokens": est(par.records[3:]) + 5})) == ["e6"]


def test_split_only_at_message_boundaries():
    s = build(
        [
            ("V", "user", "earlier"),
            ("U", "user", toks(50)),
            ("A", "assistant", toks(3)),
            ("A", "tool_call", toks(1), {"tool": "bash", "call_id": "c1"}),
            ("O", "tool_output", toks(1), {"tool": "bash", "call_id": "c1"}),
            ("B", "assistant", toks(2)),
        ]
    )
    r = s.records
    # a suffix from the tool call would be smaller, but the call is a part of message A: split at B instead
    assert tail_ids(run(s, params={"tail_tokens": est(r[3:])})) == ["B"]
    assert tail_ids(run(s, params={"tail_tokens": est(r[2:])})) == ["A", "A", "O", "B"]
    assert [(a, b) for a, b in oc.group_messages(list(r))] == [(0, 1), (1, 2), (2, 5), (5, 6)]


# --------------------------------------------------------------------------- flattening


def rec(kind: str, text: str, **kw) -> Record:
    return Record("s", "e", 0, 0, kind, text, **kw)


def test_flatten_blocks():
    """Upstream compaction.ts ``serialize`` / ``truncate``."""
    assert oc.flatten_record(rec("user", "hi")) == "[User]: hi"
    assert oc.flatten_record(rec("assistant", "ok")) == "[Assistant]: ok"
    assert oc.flatten_record(rec("reasoning", "hmm")) == "[Assistant reasoning]: hmm"
    assert (
        oc.flatten_record(rec("tool_call", 'read_file {"path": "a.py"}', tool="read_file"))
        == '[Assistant tool call]: read_file({"path":"a.py"})'
    )
    assert oc.flatten_record(rec("tool_call", "grep -rn foo", tool="grep")) == "[Assistant tool call]: grep(-rn foo)"
    assert oc.flatten_record(rec("tool_call", "bash", tool="bash")) == "[Assistant tool call]: bash({})"
    assert oc.flatten_record(rec("tool_output", "a.py\nb.py")) == "[Tool result]: a.py\nb.py"
    assert oc.flatten_record(rec("tool_output", "Traceback", is_error=True)) == "[Tool error]: Traceback"
    assert oc.flatten_record(rec("system", "sys")) is None
    text = "x" * 2000 + "y" * 500
    assert oc.flatten_record(rec("tool_output", text)) == "[Tool result]: " + "x" * 2000 + "\n[truncated]"
    assert oc.flatten_record(rec("tool_output", "x" * 2000)) == "[Tool result]: " + "x" * 2000
    assert oc.flatten_record(rec("tool_output", text, is_error=True)) == "[Tool error]: " + text
    assert (
        oc.flatten_record(rec("tool_output", text), pruned=True) == "[Tool result]: [Old tool result content cleared]"
    )
    flat = oc.flatten([rec("user", "a"), rec("system", "s"), rec("assistant", "b")])
    assert flat == oc.CONVERSATION_LEAD + "\n\n<conversation>\n[User]: a\n\n[Assistant]: b\n</conversation>"


def test_serialize_joins_parts_of_a_message_by_newline_and_messages_by_blank_line():
    """Upstream compaction.ts ``serialize``: parts ``.join("\\n")``, messages ``.join("\\n\\n")``;
    a tool's result follows its call."""
    s = make_session(
        [
            ("user", "go"),
            ("assistant", "reading"),
            ("tool_call", 'read {"filePath": "src/index.ts"}', {"tool": "read", "call_id": "r1"}),
            ("tool_call", 'bash {"command": "ls"}', {"tool": "bash", "call_id": "b1"}),
            ("tool_output", "file contents", {"tool": "read", "call_id": "r1"}),
            ("tool_output", "boom", {"tool": "bash", "call_id": "b1", "is_error": True}),
            ("assistant", "next step"),
        ]
    )
    assert oc.serialize(list(s.records)) == (
        "[User]: go\n\n[Assistant]: reading\n"
        '[Assistant tool call]: read({"filePath":"src/index.ts"})\n[Tool result]: file contents\n'
        '[Assistant tool call]: bash({"command":"ls"})\n[Tool error]: boom\n\n[Assistant]: next step'
    )


# --------------------------------------------------------------------------- request, summary, projection


def test_dedicated_request_shape():
    """Upstream compaction.ts ``process`` (prepend): ``tools: {}``, ``system: []`` (the compaction
    agent's prompt), one user message from core ``buildPrompt``; ``serialize`` per message."""
    prov = FixedProvider()
    s = make_session(
        [
            ("system", "You are the test agent."),
            ("user", "fix a.py"),
            ("assistant", "done"),
            ("tool_call", 'bash {"command": "pytest"}', {"tool": "bash", "call_id": "c"}),
            ("tool_output", "1 failed", {"tool": "bash", "call_id": "c", "is_error": True}),
            ("user", "thanks"),
        ]
    )
    p = run(s, summarizer=prov, params={"tail_tokens": 0})
    req = prov.requests[0]
    assert req == p.summary_request
    assert req.shape == "dedicated" and req.template == "opencode-template"
    assert req.system == oc.SYSTEM_PROMPT != SHAPE.system_prompt and req.tools == ()
    assert len(req.messages) == 1 and req.messages[0]["role"] == "user"
    content = req.messages[0]["content"]
    assert content == (
        oc.CONVERSATION_LEAD + "\n\n<conversation>\n[User]: fix a.py\n\n[Assistant]: done\n"
        '[Assistant tool call]: bash({"command":"pytest"})\n[Tool error]: 1 failed\n\n[User]: thanks\n'
        "</conversation>\n\n" + oc.INSTRUCTIONS + "\n\n" + oc.TEMPLATE
    )
    assert req.source_entry_ids == ("e1", "e2", "e3", "e4", "e5")
    assert req.max_output_tokens == 32_000  # no cap upstream: the model's maxOutput (see test_summary_cap_*)
    assert p.notes["request_tokens_est"] == est_chars4(oc.SYSTEM_PROMPT) + est_chars4(content)
    assert not p.notes["request_over_usable"]


@pytest.mark.parametrize("version", ["1.18", "main"])
@pytest.mark.parametrize(
    "output,cap",
    [
        (32_000, 32_000),
        (64_000, 32_000),  # OpenCode's OUTPUT_TOKEN_MAX
        (8_000, 8_000),  # the profile's output ceiling
        (0, 32_000),  # no declared output limit: OUTPUT_TOKEN_MAX
    ],
)
def test_summary_cap_is_the_models_own_output_limit(version, output, cap):
    """Upstream's prepend request sets no ``maxOutputTokens`` (compaction.ts ``processCompaction``
    :425-448 @3df4a25; ``makeProcessor`` legacy branch :546-569 @31e22f65 -- only the suffix request
    sets ``SUMMARY_OUTPUT_TOKENS``, :509-513). The LLM layer then sends
    ``min(ProviderTransform.maxOutputTokens(model), input.maxOutputTokens ?? Infinity)``
    (llm/request.ts:96-99 @31e22f65): the model's ``maxOutput`` = min(limit.output, 32,000). Issue 27
    item 3: ours capped it at 4,096."""
    prov = FixedProvider()
    p = run(
        make_session(TURNS),
        window=200_000,
        output_ceiling=output,
        summarizer=prov,
        params={"opencode_version": version},
    )
    assert prov.requests[0].shape == "dedicated"
    assert prov.requests[0].max_output_tokens == cap == p.notes["max_output"]


def test_summary_tokens_lowers_the_cap_never_raises_it():
    """Param ``summary_tokens`` plays ``input.maxOutputTokens``: ``Math.min`` with the model's limit."""
    for asked, want in ((4_096, 4_096), (100_000, 32_000)):
        p = run(make_session(TURNS), output_ceiling=64_000, params={"summary_tokens": asked})
        assert p.summary_request.max_output_tokens == want
    p = run(
        make_session(TURNS),
        output_ceiling=64_000,
        params={"opencode_version": "main", "compaction_mode": "suffix", "tail_tokens": 39},
    )
    assert (
        p.summary_request.shape == "suffix" and p.summary_request.max_output_tokens == oc.SUFFIX_OUTPUT_TOKENS == 4_096
    )


def test_system_prompt_says_summarise_only():
    low = oc.SYSTEM_PROMPT.lower()
    for phrase in ("summar", "structure", "every section", "do not", "continue the conversation"):
        assert phrase in low


def test_template_sections_and_empty_template():
    for sec in oc.SECTIONS:
        assert sec in oc.TEMPLATE and sec in oc.EMPTY_SUMMARY
    assert oc.EMPTY_SUMMARY.count("(none)") == 7  # every leaf section says (none)
    for sec in oc.SECTIONS:  # each heading is followed by "(none)" (or, for Work State, by its sub-sections)
        nxt = oc.EMPTY_SUMMARY.split(sec + "\n", 1)[1].split("\n", 2)
        assert nxt[0] == "(none)" or (sec == "## Work State" and nxt[1] == "### Completed")
    low = oc.INSTRUCTIONS.lower()
    for phrase in ("every section", "(none)", "terse", "paths", "symbols", "commands", "error strings", "identifiers"):
        assert phrase in low


def test_empty_template_matches_the_extractive_providers_rendering():
    from compaction_lab.summarize import extractive

    assert oc.EMPTY_SUMMARY == extractive.empty_template("opencode-template")


def test_extractive_stand_in_reads_the_request():
    from compaction_lab.summarize import get_summarizer

    prov = get_summarizer("extractive")
    s = make_session(
        [
            ("user", "Fix `parse_id` in app/ids.py"),
            ("summary", "## Objective\n- migrate ORD-123"),
            ("user", "then run pytest"),
            ("assistant", "Edited app/ids.py."),
            ("tool_call", 'bash {"command": "pytest -q"}', {"tool": "bash", "call_id": "c"}),
            ("tool_output", "ValueError: bad id", {"tool": "bash", "call_id": "c", "is_error": True}),
            ("user", "ok"),
        ]
    )
    p = run(s, summarizer=prov, params={"tail_tokens": 0})
    summ = next(seg for seg in p.segments if seg.kind == "summary")
    assert summ.label == STAND_IN_LABEL and not p.receipt.fallback
    assert all(sec in summ.text for sec in oc.SECTIONS)
    assert "then run pytest" in summ.text


def test_placeholder_mode_without_a_provider_gives_the_empty_template():
    """``on_failure="placeholder"``: the lab's earlier, non-upstream behaviour."""
    placeholder = {"tail_tokens": 0, "on_failure": "placeholder"}
    p = run(make_session([("user", "go"), ("assistant", "ok")]), summarizer=NoSummarizer(), params=placeholder)
    summ = next(s for s in p.segments if s.kind == "summary")
    assert summ.text == oc.EMPTY_SUMMARY and summ.role == "assistant" and summ.label == "empty template (no summary)"
    assert p.receipt.fallback and p.receipt.summarizer == "none" and "no summarizer configured" in p.receipt.error
    assert p.receipt.request_fingerprint == p.summary_request.fingerprint()
    assert p.notes["compaction_failed"] is None and p.notes["on_failure"] == "placeholder"


def test_failing_and_stand_in_providers():
    p = run(make_session([("user", "go")]), summarizer=BrokenProvider(), params={"on_failure": "placeholder"})
    assert p.receipt.fallback and p.receipt.error == "TimeoutError: slow"
    assert next(s for s in p.segments if s.kind == "summary").text == oc.EMPTY_SUMMARY
    p = run(make_session([("user", "go")]), summarizer=FixedProvider("## Objective\n- x", "extractive", True))
    summ = next(s for s in p.segments if s.kind == "summary")
    assert summ.text == "## Objective\n- x" and summ.label == STAND_IN_LABEL and not p.receipt.fallback
    assert (p.receipt.input_tokens, p.receipt.output_tokens) == (50, 9)


# --------------------------------------------------------------------------- summary failure


@pytest.mark.parametrize("provider", [NoSummarizer, BrokenProvider])
def test_failed_summary_intent_keeps_the_history_unchanged(provider):
    """``on_failure: intent``. Upstream compaction.ts ``processCompaction``: a summary turn that errs leaves
    ``processor.message.error`` set and the compaction returns ``"stop"`` -- no continue message, the
    summary not completed (``completedCompactions`` skips it), so the history is meant to stay as it was
    (:554 @3df4a25; ``if (processor.message.error)`` :679-682 @31e22f65). Issue 27 item 6: ours
    compacted around the empty template. What the pinned code really sends (the default):
    tests/strategies/test_opencode_failure.py."""
    s = make_session(TURNS)
    p = run(s, summarizer=provider(), params={"tail_tokens": 39, "on_failure": "intent"})
    assert p.receipt.fallback and p.receipt.error and p.notes["compaction_failed"] == p.receipt.error
    assert p.notes["on_failure"] == "intent" and COMPACTION_FAILED == "compaction failed, history unchanged"
    assert p.summary_request is not None and p.summary_request.shape == "dedicated"  # it was asked
    assert not any(seg.kind in ("summary", "header", "continue", "omitted_marker") for seg in p.segments)
    assert [seg.kind for seg in p.segments] == ["system", "tools"] + ["tail"] * 6
    assert [seg.entry_ids[0] for seg in p.segments[2:]] == [r.entry_id for r in s.records[1:]]
    assert p.messages()[1:] == record_messages(s.records)
    assert p.finalize().requests_sent()[0].output_tokens == 0


def test_failed_summary_after_a_compaction_sends_the_previous_summary_before_the_kept_tail():
    """``on_failure: intent``, the live history unchanged after two compactions: "What did we do so far?",
    the latest summary, then the tail compaction 2 kept (from "fix bug ORD-1") and what followed --
    ``filterCompacted``'s order, summary before the retained tail (anomalyco/opencode PR #25851, 811954880e)."""
    s = two_compactions({"tail_start_source_order": 8})
    p = run(s, summarizer=BrokenProvider(), params={"on_failure": "intent"})
    msgs = [dict(m) for m in p.messages()[1:]]
    assert msgs == [dict(m) for m in oc.session_messages(oc.live_history(s, None))]
    assert msgs[:3] == [
        {"role": "user", "content": oc.HEADER},
        {"role": "assistant", "content": "SUMMARY-TWO"},
        {"role": "user", "content": "fix bug ORD-1"},
    ]
    assert msgs[-1] == {"role": "assistant", "content": "shipped"}
    assert not any("SUMMARY-ONE" in m["content"] or "build the parser" in m["content"] for m in msgs)
    prev = next(seg for seg in p.segments if "s2" in seg.entry_ids)
    assert prev.kind == "tail" and prev.record_kind == "summary"  # sent as it was: not a new summary
    assert p.notes["compaction_failed"] == "TimeoutError: slow"


def test_summary_request_the_provider_refuses_is_a_failed_compaction():
    """Upstream compaction.ts: the processor answers ``"compact"`` when the provider reports a context
    overflow; ``processCompaction`` sets ``ContextOverflowError`` ("Session too large to compact") and
    returns ``"stop"`` (:450-459 @3df4a25, :668-678 @31e22f65). The request is sent as upstream sends it;
    past the window with its output cap (or past a declared input limit) the agent's provider refuses it,
    so an answer the lab's provider gives is not used. A provider that fails first names its own error."""
    s = make_session([("user", toks(3_000)), ("assistant", toks(3_000)), ("user", "next")])
    prov = FixedProvider()
    p = run(s, window=10_000, output_ceiling=4_000, summarizer=prov, params={"tail_tokens": 0})
    assert p.summary_request.max_output_tokens == 4_000 and p.notes["request_limit"] == 6_000
    assert p.notes["request_tokens_est"] > 6_000 and p.notes["request_overflow"]
    assert prov.requests == [p.summary_request]  # sent
    assert p.receipt.fallback and p.receipt.error.startswith("context overflow") and p.receipt.text == ""
    assert p.notes["compaction_failed"] == p.receipt.error
    assert not any(seg.kind == "summary" for seg in p.segments)
    # no tail: no tail start persisted, the history then the compaction message (its summary errored)
    assert [seg.text for seg in p.segments[2:]] == [r.text for r in s.records] + [oc.HEADER]
    fits = run(s, window=12_000, output_ceiling=4_000, summarizer=prov, params={"tail_tokens": 0})
    assert not fits.notes["request_overflow"] and fits.notes["compaction_failed"] is None
    limited = run(s, window=200_000, input_limit=6_000, output_ceiling=4_000, params={"tail_tokens": 0})
    assert limited.notes["request_limit"] == 6_000 and limited.notes["compaction_failed"].startswith("context overflow")
    broken = run(s, window=10_000, output_ceiling=4_000, summarizer=BrokenProvider(), params={"tail_tokens": 0})
    assert broken.notes["compaction_failed"] == "TimeoutError: slow"
    # the lab's earlier behaviour compacts around the answer anyway
    old = run(
        s, window=10_000, output_ceiling=4_000, summarizer=prov, params={"tail_tokens": 0, "on_failure": "placeholder"}
    )
    assert next(seg for seg in old.segments if seg.kind == "summary").text == "SUMMARY-TEXT"
    assert old.notes["request_overflow"] and old.notes["compaction_failed"] is None


def test_on_failure_must_be_a_known_value():
    with pytest.raises(ValueError, match="on_failure"):
        run(make_session(TURNS), params={"on_failure": "retry"})


def test_projection_order_and_authored_messages():
    """Upstream message-v2.ts ``toModelMessages``: a compaction part reads "What did we do so far?"."""
    prov = FixedProvider("S")
    p = run(make_session(TURNS), summarizer=prov, params={"tail_tokens": 39})
    assert [(s.kind, s.role) for s in p.segments] == [
        ("system", "system"),
        ("tools", "system"),
        ("header", "user"),
        ("summary", "assistant"),
        ("tail", "user"),
        ("tail", "assistant"),
        ("continue", "user"),
    ]
    assert p.segments[2].text == oc.HEADER == "What did we do so far?"
    assert p.segments[3].text == "S"
    cont = p.segments[-1].text.lower()
    assert "continue" in cont or "carry on" in cont
    assert "clarification" in cont
    assert all(s.label for s in p.segments if s.kind in AUTHORED_KINDS)
    p = run(make_session(TURNS), params={"tail_tokens": 39, "auto": False})
    assert p.segments[-1].kind == "tail"


def test_head_is_summarised_and_tail_is_not():
    """Upstream compaction.test.ts "summarizes only the head while keeping recent tail out of summary input"."""
    prov = FixedProvider()
    run(make_session(TURNS), summarizer=prov, params={"tail_tokens": 39})
    content = prov.requests[0].messages[0]["content"]
    assert f"[User]: {toks(5)}\n\n[Assistant]: {toks(15)}\n</conversation>" in content
    assert f"[User]: {toks(3)}\n" not in content and f"[Assistant]: {toks(7)}\n" not in content
    assert "sys" not in content.split("</conversation>")[0]
    assert oc.HEADER not in content
    assert content.index(f"[User]: {toks(10)}") < content.index(oc.INSTRUCTIONS)
    # upstream scenario: three user turns, tail_turns 2, preserve_recent_tokens 10,000
    prov = FixedProvider()
    s = make_session([("user", "older context"), ("user", "keep this turn"), ("user", "and this one too")])
    run(s, summarizer=prov, params={"tail_turns": 2, "tail_tokens": 10_000})
    content = prov.requests[0].messages[0]["content"]
    assert len(prov.requests[0].messages) == 1 and "<conversation>" in content
    assert "[User]: older context" in content
    assert "keep this turn" not in content and "and this one too" not in content


def test_previous_summary_is_merged():
    """Upstream core compaction.ts ``buildPrompt``: the prior summary follows the conversation as
    ``<prior-summary>`` (issue 13 item 2: at HEAD it sat inside ``<conversation>``)."""
    prov = FixedProvider()
    s = make_session(
        [
            ("user", "OLD-REQUEST"),
            ("assistant", "OLD-PROSE"),
            ("user", "what did we do so far?"),
            ("summary", "PRIOR-SUMMARY"),
            ("user", "NEW-REQUEST"),
            ("assistant", "NEW-PROSE"),
        ]
    )
    p = run(s, summarizer=prov, params={"tail_tokens": 0})
    content = prov.requests[0].messages[0]["content"]
    assert content == (
        oc.CONVERSATION_LEAD + "\n\n<conversation>\n[User]: NEW-REQUEST\n\n[Assistant]: NEW-PROSE\n</conversation>"
        "\n\n"
        + oc.PRIOR_LEAD
        + "\n\n<prior-summary>\nPRIOR-SUMMARY\n</prior-summary>\n\n"
        + oc.MERGE_INSTRUCTIONS
        + "\n\n"
        + oc.TEMPLATE
    )
    assert "OLD-REQUEST" not in content and "OLD-PROSE" not in content
    assert prov.requests[0].source_entry_ids == ("e3", "e4", "e5")
    assert p.notes["previous_summary"] == "e3" and p.notes["already_compacted_records"] == 4
    assert "OLD-REQUEST" not in p.text() and "PRIOR-SUMMARY" not in p.text()
    # every live turn fits: the tail would start at the first live message, so there is none
    p = run(s, params={"tail_tokens": 1000})
    assert tail_ids(p) == [] and p.notes["tail_at_first_message"]


def test_anchors_repeated_compactions_with_the_previous_summary():
    """Upstream compaction.test.ts "anchors repeated compactions with the previous summary"."""
    prov = FixedProvider()
    s = make_session(
        [
            ("user", "older context"),
            ("user", "keep this turn"),
            ("meta", "compaction"),
            ("summary", "summary one"),
            ("meta", "compaction"),
            ("user", "latest turn"),
        ]
    )
    run(s, summarizer=prov)
    captured = prov.requests[0].messages[0]["content"]
    assert "<prior-summary>" in captured and captured.count("summary one") == 1
    assert captured.index("latest turn") < captured.index("<prior-summary>")
    assert "## Important Details" in captured and "## Work State" in captured
    assert "older context" not in captured and "keep this turn" not in captured


# --------------------------------------------------------------------------- sessions compacted before


def two_compactions(tail_start_2: dict) -> Session:
    """An OpenCode session as the importer reads it after two compactions (issue 13 acceptance 3).

    Compaction 1 kept the turn "add tests" verbatim (tail start u2); compaction 2's tail start
    is given. Compaction user messages hold only a ``compaction`` part (-> ``meta``).
    """
    s = build(
        [
            ("u1", "user", "build the parser"),
            ("a1", "assistant", "parser built"),
            ("u2", "user", "add tests"),
            ("a2", "assistant", "tests added"),
            ("c1", "meta", "compaction (auto)"),
            ("s1", "summary", "SUMMARY-ONE"),
            ("k1", "user", oc.CONTINUE, {"injected": True}),
            ("a3", "assistant", "continuing"),
            ("u3", "user", "fix bug ORD-1"),
            ("t1", "tool_call", 'bash {"command": "pytest -k ord"}', {"tool": "bash", "call_id": "x1"}),
            ("t1", "tool_output", "1 passed", {"tool": "bash", "call_id": "x1"}),
            ("a4", "assistant", "fixed"),
            ("c2", "meta", "compaction (auto)"),
            ("s2", "summary", "SUMMARY-TWO"),
            ("u4", "user", "now docs"),
            ("a5", "assistant", "docs written"),
            ("u5", "user", "ship it"),
            ("a6", "assistant", "shipped"),
        ]
    )
    meta = {
        "compactions": [
            {"entry_id": "c1", "source_order": 4, "tail_start_entry_id": "u2"},
            {"entry_id": "c2", "source_order": 12, **tail_start_2},
        ]
    }
    return Session(s.id, "opencode", s.records, metadata=meta)


def test_two_earlier_compactions_live_history_by_hand():
    """Upstream message-v2.ts ``filterCompacted`` + compaction.ts ``completedCompactions``: the live
    history runs back to the latest compaction's ``tail_start_id``; compaction pairs are hidden; the
    latest summary is the prior summary. Issue 13 item 2 / acceptance 3 (expected list built by hand).
    """
    s = two_compactions({"tail_start_source_order": 8})  # compaction 2 kept "fix bug ORD-1" on
    prov = FixedProvider()
    last_turn = est(s.records[16:18])
    p = run(s, summarizer=prov, params={"tail_tokens": last_turn})
    expected = [
        {
            "role": "user",
            "content": (
                oc.CONVERSATION_LEAD + "\n\n<conversation>\n"
                "[User]: fix bug ORD-1\n\n"
                '[Assistant tool call]: bash({"command":"pytest -k ord"})\n[Tool result]: 1 passed\n\n'
                "[Assistant]: fixed\n\n"
                "[User]: now docs\n\n[Assistant]: docs written\n</conversation>\n\n"
                + oc.PRIOR_LEAD
                + "\n\n<prior-summary>\nSUMMARY-TWO\n</prior-summary>\n\n"
                + oc.MERGE_INSTRUCTIONS
                + "\n\n"
                + oc.TEMPLATE
            ),
        }
    ]
    assert [dict(m) for m in prov.requests[0].messages] == expected
    assert tail_ids(p) == ["u5", "a6"]
    assert p.notes["previous_summary"] == "s2" and p.notes["previous_tail_start"] == 8
    assert prov.requests[0].source_entry_ids == ("s2", "u3", "t1", "a4", "u4", "a5")


def test_two_earlier_compactions_tail_start_before_the_first_summary():
    """Upstream compaction.test.ts "keeps recent pre-compaction turns across repeated compactions":
    a retained tail may start before an earlier compaction; that compaction's pair is hidden too."""
    s = two_compactions({"tail_start_entry_id": "u2"})
    prov = FixedProvider()
    run(s, summarizer=prov, params={"tail_tokens": est(s.records[16:18])})
    content = prov.requests[0].messages[0]["content"]
    conversation = content.split("</conversation>")[0]
    assert conversation.index("[User]: add tests") < conversation.index("[User]: " + oc.CONTINUE)
    assert "build the parser" not in content and "SUMMARY-ONE" not in content
    assert content.count("SUMMARY-TWO") == 1 and "SUMMARY-TWO" not in conversation


def test_without_a_recorded_tail_start_nothing_before_the_summary_is_live():
    """Upstream ``filterCompacted``: a compaction without ``tail_start_id`` ends the live history."""
    s = two_compactions({})
    prov = FixedProvider()
    run(s, summarizer=prov, params={"tail_tokens": est(s.records[16:18])})
    conversation = prov.requests[0].messages[0]["content"].split("</conversation>")[0]
    assert "ORD-1" not in conversation and "[User]: now docs" in conversation


def test_repeated_compaction_history_serialised_as_one_user_message():
    """Upstream compaction.test.ts "serializes repeated compaction history as one user message"
    (tail_turns 0; the previous compaction's tail starts at an assistant message)."""
    s = build(
        [
            ("m1", "user", "original request"),
            ("m2", "tool_call", 'read {"filePath": "src/index.ts"}', {"tool": "read", "call_id": "read-call"}),
            ("m2", "tool_output", "file contents", {"tool": "read", "call_id": "read-call"}),
            ("c1", "meta", "compaction"),
            ("s1", "summary", "summary one"),
            ("c2", "meta", "compaction"),
        ]
    )
    s = Session(
        s.id,
        "opencode",
        s.records,
        metadata={"compactions": [{"entry_id": "c1", "source_order": 3, "tail_start_entry_id": "m2"}]},
    )
    prov = FixedProvider()
    run(s, summarizer=prov, params={"tail_turns": 0})
    msgs = prov.requests[0].messages
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    assert '[Assistant tool call]: read({"filePath":"src/index.ts"})' in msgs[0]["content"]
    assert "[Tool result]: file contents" in msgs[0]["content"]
    assert "original request" not in msgs[0]["content"]


# --------------------------------------------------------------------------- opencode_version: main


def test_version_main_is_pinned_and_labelled():
    p = run(make_session(TURNS), window=200_000, output_ceiling=64_000, params={"opencode_version": "main"})
    assert p.algorithm_version == "opencode-main-4" and p.strategy == "opencode"
    assert p.notes["opencode_version"] == "main" and p.notes["version_label"] == "opencode main @31e22f6"
    assert p.notes["upstream_commit"] == oc.UPSTREAM_COMMITS["main"]
    assert p.notes["label_tag"] == "main @31e22f6"

    assert labels.strategy_label(p) == "opencode (main @31e22f6)"
    assert labels.strategy_label(run(make_session(TURNS))) == "opencode"  # the default version is not tagged
    assert p.capacity == 200_000 - 32_000 - 20_000  # reserved subtracted without an input limit
    d = run(make_session(TURNS), window=200_000, output_ceiling=64_000)
    assert d.algorithm_version == "opencode-1.18-4" and d.capacity == 168_000
    assert d.notes["version_label"] == "opencode 1.18 @3df4a25" and "label_tag" not in d.notes
    with pytest.raises(ValueError, match="opencode_version"):
        run(make_session(TURNS), params={"opencode_version": "2.0"})


@pytest.mark.parametrize(
    "window,output,input_limit,tokens,fires",
    [
        (100_000, 32_000, None, 80_000, True),  # "returns true when token count exceeds usable context"
        (200_000, 32_000, None, 110_000, False),  # "returns false when token count within usable context"
        (100_000, 32_000, None, 80_000, True),  # "includes cache.read in token count" (60k + 10k + 10k)
        (400_000, 128_000, 272_000, 274_000, True),  # "respects input limit for input caps"
        (400_000, 128_000, 272_000, 230_000, False),  # "returns false when input/output are within input caps"
        (200_000, 10_000, 120_000, 59_999, False),  # "returns false when output within limit with input caps"
    ],
)
def test_main_overflow_scenarios(window, output, input_limit, tokens, fires):
    """Upstream packages/opencode/test/session/compaction.test.ts "session.compaction.isOverflow"."""
    c = ctx(window=window, output_ceiling=output, input_limit=input_limit, params={"opencode_version": "main"})
    assert oc.STRATEGY.fires(tokens, c) is fires


def test_suffix_mode_shares_the_session_prefix():
    """Upstream compaction.test.ts "appends only uncaptured history and the suffix instruction to a
    captured request" / "uses a rebuilt live request when no capture is available": the session's own
    system, tools and messages, one instruction appended, 4,096 output tokens."""
    from compaction_lab.cost import cache as cache_mod
    from compaction_lab.cost import model as cost_model

    s = make_session(TURNS)
    prov = FixedProvider()
    p = run(s, summarizer=prov, params={"opencode_version": "main", "compaction_mode": "suffix", "tail_tokens": 39})
    req = prov.requests[0]
    assert req.shape == "suffix" and req.max_output_tokens == 4096
    assert req.system == SHAPE.for_session(s).system_prompt and req.tools == SHAPE.tools
    own = record_messages([r for r in s.records])
    assert [dict(m) for m in req.messages[:-1]] == own
    last = req.messages[-1]
    assert last["role"] == "user" and last["content"].endswith(oc.TEMPLATE)
    assert f"<first-retained-item>[User]: {toks(3)}</first-retained-item>" in last["content"]
    assert "2 messages and 1 turn." in last["content"]
    assert p.notes["compaction_mode"] == "suffix" and p.notes["suffix_fallback"] is None
    assert p.notes["version_label"] == "opencode main @31e22f6 suffix"
    # priced by the cache simulator like any request: it repeats the session's request token for token
    full, _ = cost_model.uncompacted_request(s, len(s.records), SHAPE, "cl100k_base")
    mine = cache_mod.request_tokens_from_summary_request(req, "cl100k_base")
    assert cache_mod.shared_prefix(full, mine) == len(full) < len(mine)


def test_suffix_mode_after_a_compaction_sends_the_live_request():
    s = two_compactions({"tail_start_source_order": 8})
    prov = FixedProvider()
    run(
        s,
        summarizer=prov,
        params={"opencode_version": "main", "compaction_mode": "suffix", "tail_tokens": est(s.records[16:18])},
    )
    msgs = [dict(m) for m in prov.requests[0].messages]
    assert msgs[:3] == [
        {"role": "user", "content": oc.HEADER},
        {"role": "assistant", "content": "SUMMARY-TWO"},
        {"role": "user", "content": "fix bug ORD-1"},
    ]
    assert not any("SUMMARY-ONE" in m["content"] or "build the parser" in m["content"] for m in msgs)


def test_suffix_mode_falls_back_to_prepend_when_it_does_not_fit():
    """Upstream compaction.test.ts "falls back before sending a suffix when uncaptured additions exceed
    its context" and "uses the bounded suffix output cap when a normal output reservation would not fit"."""
    small = make_session([("user", "captured prefix"), ("user", "more")])
    p = run(
        small, window=10_000, output_ceiling=32_000, params={"opencode_version": "main", "compaction_mode": "suffix"}
    )
    assert p.capacity == 0 and p.summary_request.shape == "suffix"  # 10,000 - 4,096 - 4,096 fits it
    big = make_session([("user", "captured prefix"), ("user", "uncaptured addition " * 3_000)])
    p = run(big, window=10_000, output_ceiling=32_000, params={"opencode_version": "main", "compaction_mode": "suffix"})
    assert p.summary_request.shape == "dedicated" and p.notes["suffix_fallback"] == "context"
    with pytest.raises(ValueError, match="suffix"):
        run(small, params={"compaction_mode": "suffix"})  # 1.18 has no suffix mode


def test_prompt_files_override(tmp_path):
    (tmp_path / "sys.txt").write_text("EXACT SYSTEM", encoding="utf-8")
    (tmp_path / "tpl.txt").write_text("EXACT TEMPLATE", encoding="utf-8")
    prov = FixedProvider()
    run(
        make_session([("user", "go")]),
        summarizer=prov,
        params={"system_prompt_file": tmp_path / "sys.txt", "prompt_file": tmp_path / "tpl.txt", "tail_tokens": 0},
    )
    req = prov.requests[0]
    assert req.system == "EXACT SYSTEM" and req.messages[0]["content"].endswith("</conversation>\n\nEXACT TEMPLATE")
    assert oc.STRATEGY.prompts(ctx())["system"] == oc.SYSTEM_PROMPT


# --------------------------------------------------------------------------- prune


def prune_session(o1: int = 30_000, o2: int = 30_000, o3: int = 25_000) -> Session:
    items: list[tuple] = [("user", "u1")]
    for i, n in enumerate((o1, o2, o3)):
        if n:
            items += [
                ("tool_call", "bash {}", {"tool": "bash", "call_id": f"p{i}"}),
                ("tool_output", f"OUT{i}" + toks(n)[4:], {"tool": "bash", "call_id": f"p{i}"}),
            ]
    items += [
        ("user", "u2"),
        ("tool_call", "bash {}", {"tool": "bash", "call_id": "q"}),
        ("tool_output", "RECENT" + toks(1_000)[6:], {"tool": "bash", "call_id": "q"}),
        ("user", "u3"),
        ("tool_call", "bash {}", {"tool": "bash", "call_id": "r"}),
        ("tool_output", "LATEST" + toks(50_000)[6:], {"tool": "bash", "call_id": "r"}),
    ]
    return make_session(items)


def test_prune_clears_old_outputs_beyond_the_protected_40000():
    s = prune_session()
    live = list(s.records)
    pruned = oc.prune_set(live)
    # newest first, skipping the last two user turns: OUT2 (25k) protected, OUT1 (30k) and OUT0 beyond 40k
    assert {s.records[i].text[:4] for i in pruned} == {"OUT0", "OUT1"}
    prov = FixedProvider()
    p = run(s, summarizer=prov, params={"prune": True, "tail_tokens": 0})
    content = prov.requests[0].messages[0]["content"]
    assert content.count("[Tool result]: " + oc.PRUNED_TEXT) == 2
    assert "[Tool result]: OUT2" in content and "OUT0" not in content and "OUT1" not in content
    assert p.notes["pruned_outputs"] == 2 and p.notes["pruned_tokens"] == 60_000
    # off by default
    prov = FixedProvider()
    p = run(s, summarizer=prov, params={"tail_tokens": 0})
    assert oc.PRUNED_TEXT not in prov.requests[0].messages[0]["content"] and p.notes["pruned_outputs"] == 0


def test_prune_needs_more_than_20000_beyond_the_protected_part():
    s = prune_session(o1=0, o2=16_000)  # 25k + 16k: 1k over the protection... but 16k <= 20k -> nothing
    assert oc.prune_set(list(s.records)) == frozenset()
    s = prune_session(o1=0, o2=21_000)
    assert len(oc.prune_set(list(s.records))) == 1


def test_prune_skips_errors_skill_and_the_last_two_turns_and_stops_at_a_summary():
    recs = list(prune_session().records)
    as_err = [
        Record(
            r.session_id,
            r.entry_id,
            0,
            r.source_order,
            r.kind,
            r.text,
            r.tool,
            None,
            r.call_id,
            is_error=r.text.startswith("OUT"),
        )
        for r in recs
    ]
    assert oc.prune_set(as_err) == frozenset()
    skill = [
        Record(
            r.session_id,
            r.entry_id,
            0,
            r.source_order,
            r.kind,
            r.text,
            "skill" if r.text.startswith("OUT") else r.tool,
            None,
            r.call_id,
        )
        for r in recs
    ]
    assert oc.prune_set(skill) == frozenset()
    # LATEST (50k) and RECENT sit in the last two user turns: never counted
    assert all(not recs[i].text.startswith(("LATEST", "RECENT")) for i in oc.prune_set(recs))
    stop = recs[:1] + [Record("s1", "sx", 0, 0, "summary", "S")] + recs[1:]
    assert oc.prune_set(stop) == oc.prune_set(recs)
    cut_early = [Record("s1", "sx", 0, 0, "summary", "S") if i == 5 else r for i, r in enumerate(recs)]
    assert oc.prune_set(cut_early) == frozenset()  # walk stops at the summary before reaching OUT0/OUT1


def test_pruned_outputs_in_the_tail_render_as_placeholder():
    # a message before the first turn, so that a tail holding every turn does not start at message 0
    s = make_session(
        [("assistant", "hello")]
        + [
            (r.kind, r.text, {"tool": r.tool, "call_id": r.call_id}) if r.tool else (r.kind, r.text)
            for r in prune_session().records
        ]
    )
    p = run(s, params={"prune": True, "tail_tokens": 200_000})
    markers = [seg for seg in p.segments if seg.kind == "omitted_marker"]
    assert [m.text for m in markers] == [oc.PRUNED_TEXT] * 2
    assert all(m.label and m.record_kind == "tool_output" and m.role == "tool" for m in markers)
    assert "OUT0" not in p.text() and "OUT2" in p.text()
    # the placeholder is what the tail's size counts
    tail = [r for r in s.records if r.source_order >= 1]
    pruned = frozenset(r.source_order for r in tail if r.text.startswith(("OUT0", "OUT1")))
    assert [r.kind for r in tail[:7]].count("user") == 1 and tail[7].kind == tail[10].kind == "user"
    assert p.notes["tail_tokens"] == oc.estimate_records(tail[:7], pruned) + oc.estimate_records(
        tail[7:10]
    ) + oc.estimate_records(tail[10:])
    assert p.notes["tail_tokens"] < oc.estimate_records(tail[:7]) + oc.estimate_records(
        tail[7:10]
    ) + oc.estimate_records(tail[10:])


# --------------------------------------------------------------------------- properties

TEXT = st.text(alphabet=st.sampled_from(list('ab xyz\n{}"é€😀')), min_size=0, max_size=12)


@st.composite
def sessions(draw):
    items: list[tuple] = []
    call = 0
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(
            st.sampled_from(
                ["user", "user", "user", "assistant", "reasoning", "tool", "tool", "tool", "system", "meta"]
            )
        )
        text = draw(TEXT) * draw(st.sampled_from([1, 3, 10, 40, 400, 3000]))
        if kind == "tool":
            call += 1
            items.append(
                (
                    "tool_call",
                    f"bash {text[:30]}",
                    {"tool": draw(st.sampled_from(["bash", "skill"])), "call_id": f"c{call}"},
                )
            )
            items.append(
                ("tool_output", text, {"tool": "bash", "call_id": f"c{call}", "is_error": draw(st.booleans())})
            )
        elif kind == "system":
            items.append((kind, text[:12]))
        else:
            items.append((kind, text, {"injected": kind == "user" and draw(st.booleans())}))
    if items and draw(st.sampled_from([True, False, False])):  # sometimes an earlier compaction's summary
        items.insert(draw(st.integers(0, len(items))), ("summary", "EARLIER SUMMARY"))
    return make_session(items)


@settings(max_examples=50, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.sampled_from([8_000, 16_000, 128_000]), st.booleans(), st.data())
def test_property_projection_fits_and_is_verbatim(session, window, prune, data):
    cut = data.draw(st.one_of(st.just(len(session.records)), st.integers(0, len(session.records))))
    prov = data.draw(st.sampled_from([None, FixedProvider("summary " * 50), BrokenProvider()]))
    params = {
        "prune": prune,
        "prune_protect": data.draw(st.sampled_from([0, 10, 40_000])),
        "prune_minimum": data.draw(st.sampled_from([0, 10, 20_000])),
    }
    tail_tokens = data.draw(st.sampled_from([None, 0, 20, 200]))
    if tail_tokens is not None:
        params["tail_tokens"] = tail_tokens
    kw = {"summarizer": prov} if prov else {}
    p = run(session, cut, window=window, output_ceiling=4_096, params=params, **kw)
    event(f"tail split={p.notes['tail_split'] is not None}")
    event(f"tail records={min(p.notes['tail_records'], 1)}")
    event(f"pruned={p.notes['pruned_outputs'] > 0}")
    event(f"previous summary={p.notes['previous_summary'] is not None}")
    event(f"summary failed={p.notes['summary_failed'] is not None}")
    shape = SHAPE.for_session(session)
    hist = [r for r in session.records if r.source_order < cut and r.kind != "meta"]
    by_id = {r.entry_id: r for r in hist}
    req = p.summary_request
    assert req.shape == "dedicated" and req.tools == () and len(req.messages) == 1
    failed = (isinstance(prov, FakeSummarizer) and prov.name == "broken") or p.notes["request_overflow"]
    assert (p.notes["summary_failed"] is not None) == failed
    if failed:  # no summary, no continue message (processCompaction returns "stop")
        assert not any(seg.kind in ("summary", "continue") for seg in p.segments)
        assert p.receipt.fallback and p.notes["summary_failed"] == p.receipt.error
        sent = [seg.entry_ids[0] for seg in p.segments if seg.entry_ids]
        # 1.18 persists the tail start unless the provider refused the request (it returns before the write)
        if p.notes["tail_records"] and not p.notes["request_overflow"]:  # the compaction message, the tail on
            assert p.notes["failure_outcome"] == oc.HEAD_DROPPED and p.notes["compaction_failed"] is None
            assert p.segments[2].kind == "header" and p.segments[2].text == oc.HEADER
            convo = [r.entry_id for r in hist if r.kind != "system"]
            assert sent and sent == convo[len(convo) - len(sent) :] and len(sent) <= p.notes["tail_records"]
        else:  # none persisted: the live history as it was, then the compaction message
            lh = oc.live_history(session, cut)
            assert sent == ([lh.previous.entry_id] if lh.previous is not None else []) + [
                r.entry_id for r in lh.live if r.kind != "system"
            ]
            assert p.segments[-1].kind == "header" and p.notes["compaction_failed"] == p.receipt.error
        return
    assert sum(est_chars4(s.text) for s in p.segments) <= p.capacity
    tail = []
    for seg in p.segments:
        assert set(seg.entry_ids) <= set(by_id)
        if seg.kind == "system":
            assert seg.text == shape.system_prompt
        elif seg.kind == "tools":
            assert seg.text == shape.tools_text()
        elif seg.kind in AUTHORED_KINDS:
            assert seg.label
        else:
            assert seg.kind == "tail" and seg.text == by_id[seg.entry_ids[0]].text
        if seg.kind == "omitted_marker":
            assert seg.text == oc.PRUNED_TEXT and by_id[seg.entry_ids[0]].kind == "tool_output"
        if seg.kind in ("tail", "omitted_marker"):
            tail.append(seg.entry_ids[0])
    # the tail is a contiguous suffix of the history, within its budget, starting at a user turn or a split point
    assert tail == [r.entry_id for r in hist[len(hist) - len(tail) :]] if tail else True
    assert sum(est_chars4(s.text) for s in p.segments if s.kind in ("tail", "omitted_marker")) <= p.notes["tail_budget"]
    assert p.notes["tail_tokens"] <= p.notes["tail_budget"]
    if tail:  # never the first live message (upstream ``keep.start === 0``)
        live = [r for r in hist if r.kind not in ("system", "summary")]
        assert live and live[0].entry_id != tail[0]
    if tail:
        first = by_id[tail[0]]
        assert first.kind != "tool_output"
        assert first.kind == "user" or p.notes["tail_split"] is not None
        in_tail = {by_id[e].call_id for e in tail if by_id[e].kind == "tool_call"}
        calls = {r.call_id for r in hist if r.kind == "tool_call"}
        for e in tail:  # never a tool output whose call was left out of the tail
            r = by_id[e]
            if r.kind == "tool_output" and r.call_id in calls:
                assert r.call_id in in_tail
        assert all(by_id[e].kind != "summary" for e in tail)
    assert set(req.source_entry_ids) <= set(by_id) and not set(req.source_entry_ids) & set(tail)


# --------------------------------------------------------------------------- real and synthetic sessions


def _real_sessions() -> list[Session]:
    out: list[Session] = []
    out.extend(load_sessions(LOCAL_FIXTURES))  # tests/fixtures, the real public sessions included
    return out


@pytest.fixture(scope="module")
def chain() -> Session:
    return synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1))[0].session


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_096)])
@pytest.mark.parametrize("prune", [False, True])
def test_real_and_synthetic_sessions(chain, window, output, prune):
    sessions_ = _real_sessions() + [chain]
    assert len(sessions_) > 1
    compacted = 0
    for s in sessions_:
        c = ctx(window=window, output_ceiling=output, params={"prune": prune})
        for cut in (len(s.records), len(s.records) // 2):
            p = strategies.compact(s, "opencode", cut, c)
            if p.notes["compaction_failed"]:  # the provider answers, so only a request it refuses fails
                assert p.notes["request_overflow"] and p.notes["compaction_failed"].startswith("context overflow")
                assert not any(seg.kind == "summary" for seg in p.segments)
                continue
            compacted += 1
            assert p.segments[0].kind == "system" and p.segments[3].kind == "summary"
            assert 0 < p.tokens < window
            assert sum(est_chars4(seg.text) for seg in p.segments) <= p.capacity
    assert compacted >= len(sessions_)


def test_synthetic_chain_tail_is_split_or_whole(chain):
    p = strategies.compact(chain, "opencode", None, ctx())
    assert p.notes["tail_tokens"] <= 15_000 and p.notes["tail_records"] > 0 and p.notes["head_records"] > 0


def test_default_chain_tail_is_sized_by_the_json_rule(chain):
    """Acceptance 4 (issue 13 item 3): on a default chain the tail's size is the sum, per kept turn,
    of the JSON-of-model-messages estimate -- more than the record text / 4 the code at HEAD used,
    so fewer records fit the same budget."""
    p = strategies.compact(chain, "opencode", None, ctx())
    ids = [seg.entry_ids[0] for seg in p.segments if seg.kind == "tail"]
    recs = [r for r in chain.records if r.entry_id in set(ids) and r.kind != "meta"]
    assert [r.entry_id for r in recs] == ids
    starts = [i for i, r in enumerate(recs) if r.kind == "user"]
    if p.notes["tail_split"] is not None:
        starts = [0] + starts
    bounds = list(zip(starts, starts[1:] + [len(recs)], strict=False))
    by_turn = sum(oc.estimate_records(recs[a:b]) for a, b in bounds)
    assert p.notes["tail_tokens"] == by_turn
    assert by_turn > sum(est_chars4(r.text) for r in recs)
    assert by_turn <= p.notes["tail_budget"]


def test_large_session_is_fast():
    items = [("system", "s")]
    for i in range(600):
        items += [
            ("user", "request " * 200),
            ("assistant", "prose " * 300),
            ("tool_call", "bash {}", {"tool": "bash", "call_id": f"c{i}"}),
            ("tool_output", "output line\n" * 300, {"tool": "bash", "call_id": f"c{i}"}),
        ]
    s = make_session(items)
    assert sum(est_chars4(r.text) for r in s.records) > 1_000_000
    for prune in (False, True):  # how fast: `make bench BENCH=strategies`
        p = oc.STRATEGY.compact(s, len(s.records), CompactionContext(window=1_000_000, params={"prune": prune}))
        assert p.notes["prune"] is prune and p.summary_request is not None


@settings(max_examples=50, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.sampled_from([0, 10, 100]), st.sampled_from([0, 10, 100]))
@example(prune_session(), oc.PRUNE_PROTECT, oc.PRUNE_MINIMUM)  # must prune OUT0 and OUT1 (upstream's defaults)
@example(prune_session(o1=0, o2=21_000), oc.PRUNE_PROTECT, oc.PRUNE_MINIMUM)  # must prune one output
@example(prune_session(o1=0, o2=16_000), oc.PRUNE_PROTECT, oc.PRUNE_MINIMUM)  # 16k beyond the 40k: too little
def test_property_prune_rule(session, protect, minimum):
    """Upstream compaction.ts ``prune`` (:32-35 and ``prune`` in ``layer`` @31e22f65): newest first, the last
    two user turns skipped, errors and ``skill`` skipped; past ``protect`` tokens every further output is a
    candidate; pruned only if the candidates total more than ``minimum``. Issue 46 item 7b: the property
    returned before any assertion when nothing was pruned (a rule that never prunes passed); now whether
    it prunes is checked on every input, and the explicit examples always include inputs that must prune."""
    live = [r for r in session.records if r.kind != "meta"]
    if any(r.kind == "summary" for r in live):
        live = live[max(i for i, r in enumerate(live) if r.kind == "summary") + 1 :]
    pruned = oc.prune_set(live, protect, minimum)
    event(f"pruned={bool(pruned)}")
    users = [i for i, r in enumerate(live) if r.kind == "user"]
    eligible = [
        r
        for r in (live[: users[-2]] if len(users) >= 2 else [])
        if r.kind == "tool_output" and not r.is_error and r.tool != "skill"
    ]
    # the candidates: walking the eligible outputs newest first, every one once the running total passes protect
    running, beyond = 0, 0
    for r in reversed(eligible):
        running += est_chars4(r.text)
        beyond += est_chars4(r.text) if running > protect else 0
    assert bool(pruned) == (beyond > minimum)  # prunes exactly when the candidates total more than minimum
    if not pruned:
        return
    by_order = {r.source_order: r for r in live}
    assert pruned <= {r.source_order for r in eligible}  # never in the last two user turns, errors or skill
    kept = [r for r in eligible if r.source_order not in pruned]
    # the newest outputs are protected up to `protect` tokens; the one that crosses it is the newest pruned
    assert kept == [r for r in eligible if r.source_order > max(pruned)]
    assert sum(est_chars4(r.text) for r in kept) <= protect
    assert sum(est_chars4(r.text) for r in kept) + est_chars4(by_order[max(pruned)].text) > protect
    assert sum(est_chars4(by_order[o].text) for o in pruned) > minimum
    assert min(pruned) == min(r.source_order for r in eligible)  # the oldest outputs go first
    p = run(session, params={"prune": True, "prune_protect": protect, "prune_minimum": minimum, "tail_tokens": 0})
    assert p.notes["pruned_outputs"] == len(pruned)
    assert p.summary_request.messages[0]["content"].count("[Tool result]: " + oc.PRUNED_TEXT) >= len(pruned)


def test_suffix_request_keeps_the_sessions_message_boundaries():
    """Two consecutive user entries (and two assistant ones) are two messages in the session's own request
    (`projection.chat_messages`); the suffix request merged them, so it no longer repeated that request."""

    s = make_session(
        [
            ("user", "first ask " + toks(30)),
            ("user", "second ask " + toks(30)),
            ("assistant", "answer one " + toks(30)),
            ("assistant", "answer two " + toks(30)),
            ("user", "third ask " + toks(30)),
            ("assistant", "answer three " + toks(30)),
        ]
    )
    prov = FixedProvider()
    run(s, summarizer=prov, params={"opencode_version": "main", "compaction_mode": "suffix", "tail_tokens": 39})
    req = prov.requests[0]
    own = record_messages(list(s.records))
    assert len(own) == 6 and [dict(m) for m in req.messages[:-1]] == own


# --------------------------------------------------------------------------- hostile nesting (issue 25, item 14)


def test_tool_args_nested_past_the_bound_are_kept_as_text():
    """Was: `RecursionError` from `json.loads`. Up to `bounded_json.MAX_DEPTH` levels the arguments are
    parsed; deeper ones are the recorded text, which `tool_call_text` then shows as it was recorded."""
    import json

    from compaction_lab.core.bounded_json import MAX_DEPTH
    from tests.deep_json import HOSTILE_DEPTH, deep_object

    def rec(args: str) -> Record:
        return Record("s", "e", 0, 0, "tool_call", f"bash {args}", tool="bash")

    assert oc.tool_args(rec(deep_object(MAX_DEPTH))) == json.loads(deep_object(MAX_DEPTH))
    for depth in (MAX_DEPTH + 1, HOSTILE_DEPTH):
        assert oc.tool_args(rec(deep_object(depth))) == deep_object(depth)
        assert oc.tool_call_text(rec(deep_object(depth))) == f"bash({deep_object(depth)})"
