"""``aider``: Aider's chat-history summarisation (``ChatSummary``), rule by rule.

Pinned to Aider-AI/aider @ 5dc9490bb35f9729ef2c95d00a19ccd30c26339c. Each test names the upstream
file:line it pins (docs/strategies.md, "aider: upstream pins"). Tests marked "port" reproduce upstream's own
``tests/basic/test_history.py`` (``TestChatSummary``) on our port of ``ChatSummary``.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from compaction_lab import strategies
from compaction_lab.core.fingerprints import sha256_text
from compaction_lab.core.projection import AUTHORED_KINDS, STAND_IN_LABEL
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import counter
from compaction_lab.exam.exams import closed
from compaction_lab.ingest import load_sessions, synthetic
from compaction_lab.strategies.arms import aider as ad
from compaction_lab.strategies.base import CompactionContext, compacted
from compaction_lab.summarize import NoSummarizer, SummaryUnavailable
from compaction_lab.summarize.extractive import ExtractiveSummarizer, conversation, empty_template
from tests.helpers import FIXTURES, FakeSummarizer, make_session

NAME = "aider"
SHAPE = CallShape(
    "test",
    "You are a test agent.",
    ({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},),
)
LOCAL_FIXTURES = FIXTURES


def ctx_for(window=128_000, output=32_000, summarizer=None, input_limit=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window,
        output_ceiling=output,
        shape=SHAPE,
        input_limit=input_limit,
        summarizer=summarizer or FakeSummarizer(),
        params=params,
    )


def words(tag: str, n: int) -> str:
    return f"{tag}:" + " word" * n


def bash(cid: str, cmd: str, out: str, **kw) -> list[tuple]:
    extra = {"tool": "bash", "target": cmd, "call_id": cid}
    return [("tool_call", f'bash {{"command": "{cmd}"}}', extra), ("tool_output", out, {**extra, **kw})]


def chat(turns: int = 40, size: int = 100, tools: bool = False, last: str = "final question"):
    """`turns` user/assistant exchanges, then a current exchange (a user message and a reply)."""
    items = [("system", SHAPE.system_prompt)]
    for i in range(turns):
        items += [("user", words(f"u{i}", size)), ("assistant", words(f"a{i}", size))]
        if tools:
            items += bash(f"c{i}", f"pytest -k t{i}", f"OUT{i} " + words("o", size))
    items += [("user", last), ("assistant", "working on it")]
    return make_session(items)


def compact(sess, ctx=None, cut=None):
    return strategies.compact(sess, NAME, cut=cut, ctx=ctx or ctx_for())


def kinds(p):
    return [s.kind for s in p.segments]


# =========================================================================== upstream tests, ported
# tests/basic/test_history.py @ 5dc9490b: a mock model whose token_count is the number of words.


def count(msg):
    if isinstance(msg, list):
        return sum(count(m) for m in msg)
    return len(msg["content"].split())


def msgs_of(dicts):
    return [ad.Msg(d["role"], [("tail", d["content"], None, None)]) for d in dicts]


def as_dicts(msgs):
    return [m.as_dict() for m in msgs]


def chat_summary(models=None, max_tokens=100, max_input=4096):
    return ad.ChatSummary(max_tokens, count, count, models or [lambda c, h: "This is a summary"], max_input)


def test_port_initialization():
    """test_history.py::test_initialization."""
    s = chat_summary()
    assert isinstance(s, ad.ChatSummary) and s.max_tokens == 100


def test_port_too_big():
    """test_history.py::test_too_big (history.py:15-18: strictly greater than max_tokens)."""
    s = chat_summary()
    assert not s.too_big(
        msgs_of(
            [
                {"role": "user", "content": "This is a short message"},
                {"role": "assistant", "content": "This is also a short message"},
            ]
        )
    )
    assert s.too_big(msgs_of([{"role": "user", "content": " ".join(["word"] * 101)}]))
    assert not s.too_big(msgs_of([{"role": "user", "content": " ".join(["word"] * 100)}]))


def test_port_tokenize():
    """test_history.py::test_tokenize."""
    m = msgs_of([{"role": "user", "content": "Hello world"}, {"role": "assistant", "content": "Hi there"}])
    assert chat_summary().tokenize(m) == [(2, m[0]), (2, m[1])]


def test_port_summarize_all():
    """test_history.py::test_summarize_all: the answer, prefixed, as one user message."""
    m = msgs_of([{"role": "user", "content": "Hello world"}, {"role": "assistant", "content": "Hi there"}])
    assert as_dicts(chat_summary().summarize_all(m)) == [
        {"role": "user", "content": "I spoke to you previously about a number of things.\nThis is a summary"}
    ]


def test_port_summarize():
    """test_history.py::test_summarize: 200 messages, max_tokens 100 → shorter, summary first."""
    m = msgs_of(
        [
            d
            for i in range(100)
            for d in ({"role": "user", "content": f"Message {i}"}, {"role": "assistant", "content": f"Response {i}"})
        ]
    )
    s = chat_summary()
    s.summarize_all = lambda messages, depth=0, lost=(): (
        s.log.append({}),
        [ad.Msg("user", [("summary", "Summary", None, None)])],
    )[1]
    result = s.summarize(m)
    assert isinstance(result, list) and 0 < len(result) < len(m)
    assert result[0].content == "Summary"


def test_port_fallback_to_second_model():
    """test_history.py::test_fallback_to_second_model: the first model raises, the second answers."""
    calls = []

    def model1(c, h):
        calls.append(1)
        raise RuntimeError("Model 1 failed")

    def model2(c, h):
        calls.append(2)
        return "Summary from Model 2"

    m = msgs_of([{"role": "user", "content": "Hello world"}, {"role": "assistant", "content": "Hi there"}])
    out = chat_summary([model1, model2]).summarize_all(m)
    assert calls == [1, 2]
    assert as_dicts(out) == [
        {"role": "user", "content": "I spoke to you previously about a number of things.\nSummary from Model 2"}
    ]


def test_all_models_fail_raises():
    """history.py:123: ``ValueError("summarizer unexpectedly failed for all models")``."""
    with pytest.raises(ValueError, match="failed for all models"):
        chat_summary([lambda c, h: None]).summarize_all(msgs_of([{"role": "user", "content": "x"}]))


# =========================================================================== ChatSummary's rules


def test_split_keeps_under_half_and_head_ends_with_an_assistant_message():
    """history.py:46-64: tail while ``tail + tokens < max_tokens // 2``; split moved back until the head
    ends with an assistant message; ``summary + tail`` returned when under max_tokens."""
    m = msgs_of(
        [
            d
            for i in range(20)
            for d in ({"role": "user", "content": "u " * 9}, {"role": "assistant", "content": "a " * 9})
        ]
    )
    heads = []
    s = chat_summary([lambda c, h: heads.append(h) or "S"])
    out = s.summarize(m)
    (head,) = heads
    assert head[-1].role == "assistant"
    # 9 tokens each: the tail takes 5 messages (45 < 50, split 35, a user message before it); the split
    # moves back one, to after an assistant message (34): the tail holds 6
    assert len(out) == 1 + 6 and out[0].summary and len(head) == 34
    assert s.log[0]["split_index"] == 34


def test_short_history_or_deep_recursion_summarises_everything():
    """history.py:42-44, 63-64: at most 4 messages (or a split at index ≤ 4) → summarize_all; history.py:27-31
    appends an assistant "Ok." when the result does not end with one."""
    m = msgs_of([{"role": "user", "content": "w " * 60}, {"role": "assistant", "content": "w " * 60}])
    out = chat_summary().summarize(m)
    assert [x.role for x in out] == ["user", "assistant"] and out[1].content == "Ok."


def test_recursion_when_summary_and_tail_still_too_big():
    """history.py:89-96: a summary that with the tail reaches max_tokens is summarised again, depth + 1;
    depth > 3 summarises everything."""
    m = msgs_of(
        [
            d
            for i in range(20)
            for d in ({"role": "user", "content": "u " * 9}, {"role": "assistant", "content": "a " * 9})
        ]
    )
    s = chat_summary([lambda c, h: "long " * 80])
    s.summarize(m)
    assert [e["depth"] for e in s.log][:2] == [0, 1]


def test_head_cut_to_the_summary_models_input_limit():
    """history.py:72-87: the head is kept oldest first up to the model's max_input_tokens − 512; the rest of
    the head is lost (neither summarised nor kept)."""
    m = msgs_of(
        [
            d
            for i in range(20)
            for d in ({"role": "user", "content": f"u{i} " * 9}, {"role": "assistant", "content": f"a{i} " * 9})
        ]
    )
    heads = []
    s = chat_summary([lambda c, h: heads.append(h) or "S"], max_input=512 + 50)
    out = s.summarize(m)
    assert len(heads[0]) == 5 and s.log[0]["lost_messages"] == 34 - 5
    assert len(out) == 7  # summary + 6 tail messages: the lost head is gone


def test_transcript_headings_and_skipped_roles():
    """history.py:99-107: ``# USER`` / ``# ASSISTANT`` then the content, newline-terminated; other roles skipped."""
    m = msgs_of(
        [
            {"role": "system", "content": "SYS"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo\n"},
        ]
    )
    assert ad.transcript(m) == "# USER\nhi\n# ASSISTANT\nyo\n"


# =========================================================================== trigger and estimator


def test_max_chat_history_tokens_from_the_input_limit():
    """models.py:356-358: ``min(max(max_input_tokens / 16, 1024), 8192)``; main.py:950-953 override."""
    assert ad.max_chat_history_tokens(ctx_for(128_000)) == 8000
    assert ad.max_chat_history_tokens(ctx_for(200_000)) == 8192
    assert ad.max_chat_history_tokens(ctx_for(8_000, 1_000)) == 1024
    assert ad.max_chat_history_tokens(ctx_for(1_000_000, input_limit=32_000)) == 2000
    assert ad.max_chat_history_tokens(ctx_for(max_chat_history_tokens=3000)) == 3000


def test_fires_above_the_soft_limit():
    """history.py:15-18 (``total > max_tokens``), base_coder.py:1002-1004 (summarize_start)."""
    s, c = strategies.get(NAME), ctx_for(128_000)
    assert s.fires(8001, c) and not s.fires(8000, c)
    assert ad.too_big(chat(40), 84, c) and not ad.too_big(chat(3), 8, c)


def test_estimator_is_the_tokenizer_over_the_message_json():
    """models.py:650-670: ``token_count(dict)`` = tokenizer over ``json.dumps(msg)`` (ASCII-escaped);
    a list goes to ``litellm.token_counter`` (role + content + 3 per message, + 3)."""
    c = ctx_for()
    msg = {"role": "user", "content": "héllo wörld"}
    cnt = counter(c.encoding)
    assert ad.message_tokens(msg, c) == cnt.count('{"role": "user", "content": "h\\u00e9llo w\\u00f6rld"}')
    assert ad.messages_tokens([msg], c) == cnt.count("user") + cnt.count("héllo wörld") + 6
    assert strategies.get(NAME).estimator == "tiktoken"


# =========================================================================== the summary request


def test_summary_request_is_a_dedicated_system_prompt_and_one_transcript_message():
    """history.py:98-112: ``[system: prompts.summarize, user: transcript]``, no tools; the current exchange
    (cur_messages) is never summarised (base_coder.py:1014-1017 summarises done_messages only)."""
    prov = FakeSummarizer("I asked you things.")
    c = ctx_for(summarizer=prov)
    p = compact(chat(40), c)
    (req,) = prov.requests
    assert req is p.summary_request and req.shape == "dedicated-system" and req.tools == ()
    assert req.system == ad.SUMMARIZE_PROMPT == strategies.get(NAME).prompts(c)["system"]
    assert [m["role"] for m in req.messages] == ["user"]
    text = req.messages[0]["content"]
    assert text.startswith("# USER\n" + words("u0", 100) + "\n# ASSISTANT\n" + words("a0", 100) + "\n")
    assert "final question" not in text and "working on it" not in text
    assert req.template == ad.TEMPLATE and req.max_output_tokens == 4000


def test_prompt_structure_and_fixed_strings():
    """prompts.py:46-61: the summarize prompt's lines (our words), the exact summary prefix; prompt_file
    points at the exact upstream text."""
    lines = ad.SUMMARIZE_PROMPT.strip().splitlines()
    assert lines[0].startswith("*Briefly*") and lines[-1] == 'Begin the summary with "I asked you...".'
    assert sum("*MUST" in ln for ln in lines) == 3
    assert ad.SUMMARY_PREFIX == "I spoke to you previously about a number of things.\n"
    assert ad.RUN_OUTPUT.format(command="ls", output="x") == "I ran this command:\n\nls\n\nAnd got this output:\n\nx\n"


def test_prompt_file_overrides(tmp_path):
    f = tmp_path / "summarize.txt"
    f.write_text("EXACT UPSTREAM PROMPT")
    prov = FakeSummarizer()
    compact(chat(40), ctx_for(summarizer=prov, prompt_file=str(f)))
    assert prov.requests[0].system == "EXACT UPSTREAM PROMPT"


# =========================================================================== the next request


def test_next_request_summary_then_done_tail_then_current_exchange():
    """history.py:93 (``summary + tail``), prompts.py:61 (prefix), chat_chunks.py:16-26 (done before cur);
    the summary applied (``aider_summary="applied"``, the intent)."""
    p = compact(chat(40), ctx_for(summarizer=FakeSummarizer("I asked you to do X."), aider_summary="applied"))
    msgs = p.messages() if callable(p.messages) else p.messages
    assert [m["role"] for m in msgs[:2]] == ["system", "user"]
    assert msgs[1]["content"] == "I spoke to you previously about a number of things.\nI asked you to do X."
    assert msgs[-2:] == [
        {"role": "user", "content": "final question"},
        {"role": "assistant", "content": "working on it"},
    ]
    tail = [s for s in p.segments if s.kind == "tail"]
    assert tail and tail[0].role == "user"  # the head ended with an assistant message
    log = p.notes["summary_log"][0]
    assert log["tail_tokens"] + log["summary_tokens"] < p.notes["max_chat_history_tokens"]  # history.py:92
    assert p.notes["fits"] and p.tokens <= p.capacity
    for s in p.segments:
        assert s.kind in AUTHORED_KINDS or s.kind in ("system", "tools", "tail")


def test_under_the_soft_limit_nothing_is_summarised():
    """history.py:39-40: total ≤ max_tokens at depth 0 → unchanged (summarize_start does not even start)."""
    prov = FakeSummarizer()
    p = compact(chat(3), ctx_for(summarizer=prov))
    assert prov.requests == [] and p.summary_request is None and "summary" not in kinds(p)
    assert p.notes["too_big"] is False


def test_switch_mode_summarises_everything_done():
    """base_coder.py:155-168: switching edit format summarises all done_messages (summarize_all) even
    below the soft limit; the result is one user message."""
    prov = FakeSummarizer("S")
    p = compact(chat(3), ctx_for(summarizer=prov, mode="switch"))
    (req,) = prov.requests
    assert "u0:" in req.messages[0]["content"] and "u2:" in req.messages[0]["content"]
    assert kinds(p)[2] == "summary" and [s.text for s in p.segments if s.kind == "tail"] == [
        "final question",
        "working on it",
    ]


def test_failure_drops_the_done_history_when_applied():
    """base_coder.py:1014-1034: summarize raises ValueError, the worker only warns, summarize_end then sets
    done_messages to the empty result when it applies it (``aider_summary="applied"``): the done history is gone."""
    for prov in (NoSummarizer(), FakeSummarizer(error=SummaryUnavailable("down"))):
        p = compact(chat(40), ctx_for(summarizer=prov, aider_summary="applied"))
        assert p.receipt is not None and p.receipt.fallback
        assert p.notes["summary_failed"] and p.notes["done_dropped"]
        assert [s.text for s in p.segments[2:]] == ["final question", "working on it"]


def test_failure_alternatives_are_parameters():
    keep = compact(chat(40), ctx_for(summarizer=NoSummarizer(), on_failure="keep"))
    assert sum(s.kind == "tail" for s in keep.segments) == 82
    empty = compact(chat(40), ctx_for(summarizer=NoSummarizer(), on_failure="empty_template", aider_summary="applied"))
    (summ,) = [s for s in empty.segments if s.kind == "summary"]
    assert summ.text == ad.SUMMARY_PREFIX + empty_template(ad.TEMPLATE)
    switch = compact(chat(40), ctx_for(summarizer=NoSummarizer(), mode="switch"))
    assert sum(s.kind == "tail" for s in switch.segments) == 82  # "continuing with full history"


# =========================================================================== record mapping


def test_tool_records_as_run_output():
    """commands.py:1013-1044 (``/run``): a user message in ``prompts.run_output`` form and an assistant "Ok.";
    the tool call is text of the assistant reply."""
    items = [
        ("user", "run it"),
        ("assistant", "running"),
        *bash("c1", "pytest -q", "1 failed: AssertionError"),
        ("user", "now?"),
        ("assistant", "ok"),
    ]
    p = compact(make_session(items), ctx_for(summarizer=FakeSummarizer(), mode="switch"))
    text = p.summary_request.messages[0]["content"]
    assert (
        "# USER\nI ran this command:\n\npytest -q\n\nAnd got this output:\n\n1 failed: AssertionError\n"
        "# ASSISTANT\nOk.\n"
    ) in text
    assert '# ASSISTANT\nbash {"command": "pytest -q"}\n' in text
    drop = compact(make_session(items), ctx_for(summarizer=FakeSummarizer(), mode="switch", tool_records="drop"))
    assert "pytest" not in drop.summary_request.messages[0]["content"]


def test_reasoning_dropped_unless_inline():
    items = [("user", "q"), ("reasoning", "SECRET THOUGHT"), ("assistant", "a"), ("user", "q2")]
    p = compact(make_session(items), ctx_for(summarizer=FakeSummarizer(), mode="switch"))
    assert "SECRET" not in p.summary_request.messages[0]["content"]
    p = compact(make_session(items), ctx_for(summarizer=FakeSummarizer(), mode="switch", reasoning="inline"))
    assert "SECRET THOUGHT" in p.summary_request.messages[0]["content"]


def test_extractive_reader_reads_the_aider_transcript():
    """The stand-in reads ``# USER`` / ``# ASSISTANT`` blocks, run outputs as tool results, an earlier summary."""
    req = ad.Aider().summary_request(
        "# USER\nI spoke to you previously about a number of things.\nOLD\n# USER\nfix a.py\n# ASSISTANT\nok\n\n"
        'bash {"command": "ls"}\n# USER\nI ran this command:\n\nls\n\nAnd got this output:\n\nError: boom\n'
        "# ASSISTANT\nOk.\n",
        [],
        ctx_for(),
        500,
    )
    blocks = [(b.role, b.text) for b in conversation(req)]
    assert blocks == [
        ("summary", "OLD"),
        ("user", "fix a.py"),
        ("assistant", "ok"),
        ("tool_call", 'bash {"command": "ls"}'),
        ("tool_call", "ls"),
        ("tool_result", "Error: boom"),
    ]
    p = compact(chat(40, tools=True), ctx_for(summarizer=ExtractiveSummarizer(), aider_summary="applied"))
    (summ,) = [s for s in p.segments if s.kind == "summary"]
    assert summ.label == STAND_IN_LABEL and summ.text.startswith(ad.SUMMARY_PREFIX + "I asked you:")


# =========================================================================== earlier compactions


def test_live_history_starts_at_the_latest_summary(tmp_path):
    """A recorded compaction (pi's two-compactions fixture) stands for Aider's summary message: the history
    restarts there, with the summary prefix."""
    (s,) = load_sessions(LOCAL_FIXTURES / "pi" / "two-compactions.jsonl")
    c = ctx_for(summarizer=FakeSummarizer(), mode="switch", cur_from="none")
    live = ad.live_history(s, len(s.records), c)
    assert live[0].kind == "summary" and "SUMMARY-TWO" in live[0].text
    p = compact(s, c)
    sent = p.summary_request.messages[0]["content"]
    assert sent.startswith("# USER\n" + ad.SUMMARY_PREFIX) and "SUMMARY-TWO" in sent and "SUMMARY-ONE" not in sent
    kept = compact(s, ctx_for(summarizer=FakeSummarizer()))  # under the soft limit: kept verbatim
    assert kept.segments[2].text == ad.SUMMARY_PREFIX.rstrip("\n")
    assert "SUMMARY-TWO" in kept.segments[3].text and kept.segments[3].record_kind == "summary"


# =========================================================================== capacity and real sessions


def test_capacity_guard_on_a_small_window():
    """Ours (Aider warns and sends anyway, base_coder.py:1396-1415): the oldest kept messages go first."""
    items = [("user", "start"), ("assistant", "a"), ("user", "go")]
    for i in range(30):
        items += bash(f"c{i}", f"cmd{i}", words(f"out{i}", 400))
    s = make_session(items)
    p = compact(s, ctx_for(16_000, 4_096, summarizer=ExtractiveSummarizer()))
    assert p.tokens <= p.capacity and p.notes["capacity_dropped"]
    assert any(x.kind == "omitted_marker" for x in p.segments)


def _real_sessions():
    out = []
    out.extend(load_sessions(LOCAL_FIXTURES))  # tests/fixtures, the real public sessions included
    return out


@pytest.fixture(scope="module")
def chain():
    return synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1))[0].session


@pytest.mark.parametrize("window,output", [(128_000, 32_000), (16_000, 4_096)])
def test_real_and_synthetic_sessions_fit_when_applied(chain, window, output):
    """The applied summary and the capacity guard (ours) keep every projection under W − O."""
    sessions_ = _real_sessions() + [chain]
    assert len(sessions_) > 1
    for s in sessions_:
        c = CompactionContext(
            window=window,
            output_ceiling=output,
            summarizer=ExtractiveSummarizer(),
            params={"aider_summary": "applied"},
        )
        for cut in (len(s.records), len(s.records) // 2):
            p = strategies.compact(s, NAME, cut, c)
            assert p.segments[0].kind == "system"
            assert p.tokens <= p.capacity and p.notes["fits"], (s.id, cut)


def test_synthetic_chain_is_summarised_when_applied(chain):
    c = CompactionContext(summarizer=ExtractiveSummarizer(), params={"aider_summary": "applied"})
    p = strategies.compact(chain, NAME, None, c)
    assert p.notes["too_big"] and p.summary_request is not None and "summary" in kinds(p)
    assert json.dumps(p.notes, default=str)


def test_registered():
    s = strategies.get(NAME)
    assert s.algorithm_version == "aider-2" and NAME in strategies.names()
    assert set(s.prompts(ctx_for())) == {"system", "summary_prefix", "run_output", "ok"}


@pytest.mark.parametrize("setting", ("upstream", "applied"))
def test_every_request_of_the_recursion_is_billed(setting):
    """The recursion sends one request per level: `requests_sent` lists them all, in order, the last being
    `summary_request`; the cost model bills each (upstream sends each, and pays for a discarded summary)."""
    from compaction_lab.verify import requests as verify

    p = strategies.compact(
        verify.canonical_session(),
        NAME,
        None,
        CompactionContext(
            summarizer=ExtractiveSummarizer(), params={"max_chat_history_tokens": 64, "aider_summary": setting}
        ),
    )
    sent = p.requests_sent()
    assert p.notes["summary_calls"] == len(sent) >= 2
    assert sent[-1].request is p.summary_request
    assert [r.request.fingerprint() for r in sent[:-1]] == p.notes["earlier_summary_requests"]
    assert all(r.output_tokens > 0 for r in sent)


# =========================================================================== the pinned lifecycle (issue 46)
# base_coder.py:1014-1017, 1024-1034, 1036-1046 @ 5dc9490b: the background summary is discarded
# (tests/strategies/test_aider_race.py replicates the race and ties it to these projections).


def test_upstream_default_sends_the_unsummarised_history(chain):
    """Mode "auto", the default ``aider_summary="upstream"``: the summary request is sent and billed, its
    answer thrown away; the next request is the whole done history and the exchange in progress, with no
    capacity guard (Aider warns and sends, base_coder.py:1396-1415): over W − O on the default chain."""
    c = CompactionContext(summarizer=ExtractiveSummarizer())
    p = strategies.compact(chain, NAME, None, c).finalize()
    own = replace(c, shape=c.shape.for_session(chain))  # as strategies.compact prepares it
    done, cur = ad.split_current(ad.to_messages(ad.live_history(chain, len(chain.records), own), own), own)
    assert p.tokens > p.capacity and p.notes["fits"] is False
    assert "summary" not in kinds(p) and "omitted_marker" not in kinds(p) and p.notes["capacity_dropped"] == []
    assert [s.text for s in p.segments[2:]] == [part[1] for m in done + cur for part in m.parts]
    assert p.notes["too_big"] and p.notes["aider_summary"] == "upstream"
    assert p.notes["compaction_failed"] == ad.SUMMARY_DISCARDED and p.notes["summary_applied"] is False
    assert closed.sizes(p, None, c)["over_window"] and not closed.sizes(p, chain, c)["compacted"]
    assert not compacted(p, chain)
    (sent,) = p.requests_sent()
    assert sent.request is p.summary_request and p.receipt is not None and sent.output_tokens > 0
    applied = strategies.compact(chain, NAME, None, replace(c, params={"aider_summary": "applied"})).finalize()
    assert applied.tokens < applied.capacity < p.tokens and "summary" in kinds(applied)
    assert applied.summary_request.fingerprint() == p.summary_request.fingerprint()


def test_upstream_default_keeps_the_history_when_the_summary_fails():
    """The worker only warns (base_coder.py:1018-1019) and summarize_end keeps the changed done history
    (:1031): a failed summary is discarded like an answered one, nothing is dropped."""
    p = compact(chat(40), ctx_for(summarizer=NoSummarizer()))
    assert p.notes["summary_failed"] and not p.notes["done_dropped"] and not p.notes["summary_applied"]
    assert p.notes["compaction_failed"] == ad.SUMMARY_DISCARDED
    assert sum(s.kind == "tail" for s in p.segments) == 82 and p.receipt is not None and p.receipt.fallback


def test_upstream_default_changes_nothing_under_the_soft_limit_or_when_switching():
    """Not ``too_big``: no summary is started (base_coder.py:1003-1004); the edit-format switch summarises in
    the calling thread (:155-168): applied in both settings."""
    for sess, params in ((chat(3), {}), (chat(40), {"mode": "switch"}), (chat(3), {"mode": "switch"})):
        up = compact(sess, ctx_for(summarizer=FakeSummarizer("S"), **params))
        applied = compact(sess, ctx_for(summarizer=FakeSummarizer("S"), aider_summary="applied", **params))
        assert up.segments == applied.segments and "compaction_failed" not in up.notes
        assert up.notes["summary_applied"] is (params.get("mode") == "switch")


def test_unknown_aider_summary_is_an_error_before_any_work():
    prov = FakeSummarizer()
    with pytest.raises(ValueError, match=r"^aider aider_summary 'intent': expected one of upstream, applied$"):
        compact(chat(40), ctx_for(summarizer=prov, aider_summary="intent"))
    assert prov.requests == []


def _fingerprint(p) -> str:
    """The projection as the lab saw it before issue 46: segments, notes of then, requests, capacity."""
    segs = [(s.kind, s.role, s.text, list(s.entry_ids), s.record_kind, s.label, s.message) for s in p.segments]
    notes = {k: p.notes.get(k) for k in NOTES_BEFORE_46}
    req = p.summary_request.fingerprint() if p.summary_request else None
    sent = [(r.request.fingerprint(), r.output_tokens) for r in p.sent_requests]
    return sha256_text(json.dumps([segs, notes, req, sent, p.capacity], sort_keys=True, default=str))[:16]


NOTES_BEFORE_46 = (
    "capacity_dropped",
    "cur_messages",
    "done_dropped",
    "done_messages",
    "done_tokens",
    "fits",
    "instruction_sha256",
    "max_chat_history_tokens",
    "mode",
    "summary_calls",
    "summary_cap",
    "summary_failed",
    "summary_log",
    "tokens",
    "too_big",
    "upstream_commit",
)


def _capacity_session():
    items = [("user", "start"), ("assistant", "a"), ("user", "go")]
    for i in range(30):
        items += bash(f"c{i}", f"cmd{i}", words(f"out{i}", 400))
    return make_session(items)


#: `_fingerprint` of each case's projection by the default of aider-1 (before issue 46), computed on it.
BEFORE_46 = {
    "fake": "524962dcc469427a",
    "extractive_tools": "c02e1cc367bb07b8",
    "capacity": "6c6aa85974aa2f0b",
    "recursion": "8176d772f96fab05",
    "failure": "79f7336204327b80",
    "switch": "452c37d9a9896268",
}


def test_applied_reproduces_the_projections_before_issue_46():
    from compaction_lab.verify import requests as verify

    applied = {"aider_summary": "applied"}
    cases = {
        "fake": (chat(40), ctx_for(summarizer=FakeSummarizer("I asked you to do X."), **applied)),
        "extractive_tools": (chat(40, tools=True), ctx_for(summarizer=ExtractiveSummarizer(), **applied)),
        "capacity": (_capacity_session(), ctx_for(16_000, 4_096, summarizer=ExtractiveSummarizer(), **applied)),
        "recursion": (
            verify.canonical_session(),
            CompactionContext(summarizer=ExtractiveSummarizer(), params={"max_chat_history_tokens": 64, **applied}),
        ),
        "failure": (chat(40), ctx_for(summarizer=NoSummarizer(), **applied)),
        "switch": (chat(3), ctx_for(summarizer=FakeSummarizer("S"), mode="switch", **applied)),
    }
    got = {k: _fingerprint(strategies.compact(s, NAME, None, c)) for k, (s, c) in cases.items()}
    assert got == BEFORE_46
