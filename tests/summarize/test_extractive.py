"""The extractive stand-in summarizer: templates, extraction rules, the cap, provenance, determinism,
every request shape built by hand, and properties on random requests."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.core.projection import SummaryRequest
from compaction_lab.core.tokens import counter
from compaction_lab.ingest import load_sessions, synthetic
from compaction_lab.strategies.base import role_of
from compaction_lab.summarize import Summarizer, get_summarizer
from compaction_lab.summarize.extractive import (
    BULLET,
    GENERIC_TEMPLATE,
    NONE_TEXT,
    TRUNCATION_MARK,
    ExtractiveSummarizer,
    conversation,
    empty_template,
    request_text,
    template_for,
)
from tests.helpers import PUBLIC_FIXTURES

COUNT = counter().count
TEMPLATE_NAMES = ("futureos-handoff", "codex-handoff", "opencode-template", "claude-code-9", "no-such-template")
REQUEST_SHAPES = ("prefix-shared", "history+instruction", "dedicated", "dedicated-unwrapped")
INSTRUCTION = "INSTRUCTION zqxinstr: write the summary. Mention docs/instructions_only.md and INS-99999-ZZ."

TOOLS = (
    {
        "type": "function",
        "function": {"name": "bash", "description": "Run a command.", "parameters": {"type": "object"}},
    },
)

#: A small session: (kind, text[, tool name]).
CONV = [
    (
        "user",
        "Please add retries to the payments client in app/payments/client.py. Never touch "
        "migrations/versions/0042_init.py; the order ORD-58213-QX must keep working.",
    ),
    (
        "assistant",
        "I chose exponential backoff because the upstream returns 503 under load. I'll read the client first.",
    ),
    ("tool_call", '{"path": "app/payments/client.py"}', "read_file"),
    ("tool_result", "import httpx\n\nclass PaymentsClient:\n    def charge(self):\n        raise ValueError('bad')\n"),
    ("tool_call", '{"command": "pytest tests/test_payments.py -x"}', "bash"),
    (
        "tool_result",
        "collected 12 items\nFAILED tests/test_payments.py::test_retry - AssertionError: expected 3 "
        "attempts\n1 failed, 11 passed in 0.42s",
    ),
    (
        "assistant",
        "The retry test fails because the loop exits early. Next I will fix the loop in "
        "`charge_with_retry` and rerun the tests.",
    ),
    ("user", "Also keep p95 latency under 250 ms."),
]

LABEL = {
    "user": "User",
    "assistant": "Assistant",
    "reasoning": "Assistant reasoning",
    "tool_call": "Assistant tool call",
    "tool_result": "Tool result",
    "tool_error": "Tool error",
    "injected": "Injected context",
    "summary": "Previous summary",
}


def build(
    conv, request_shape="prefix-shared", template="claude-code-9", cap=4000, calls_as_text=False
) -> SummaryRequest:
    """A SummaryRequest of the given shape, built by hand from (kind, text[, tool]) items."""
    if request_shape.startswith("dedicated"):
        blocks = []
        for item in conv:
            kind, text = item[0], item[1]
            body = f"{item[2]}({text})" if kind == "tool_call" else text
            blocks.append(f"[{LABEL[kind]}]: {body}")
        transcript = "\n\n".join(blocks)
        if request_shape == "dedicated":
            content = f"<conversation>\n{transcript}\n</conversation>\n\n{INSTRUCTION}"
        else:
            content = transcript
        return SummaryRequest(
            "test", "dedicated", "You summarise.", (), ({"role": "user", "content": content},), template, cap
        )
    msgs: list[dict] = []
    for i, item in enumerate(conv):
        kind, text = item[0], item[1]
        if kind in ("user", "injected"):
            msgs.append({"role": "user", "content": text})
        elif kind in ("assistant", "reasoning", "summary"):
            msgs.append({"role": "assistant", "content": text})
        elif kind == "tool_call":
            if calls_as_text:
                msgs.append({"role": "assistant", "content": f"{item[2]} {text}"})
            else:
                msgs.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": f"c{i}", "type": "function", "function": {"name": item[2], "arguments": text}}
                        ],
                    }
                )
        else:
            msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    msgs.append({"role": "user", "content": INSTRUCTION})
    tools = TOOLS if request_shape == "prefix-shared" else ()
    return SummaryRequest("test", request_shape, "You are a coding agent.", tools, tuple(msgs), template, cap)


def summarize(req: SummaryRequest) -> str:
    return ExtractiveSummarizer().summarize(req).text


def sections(text: str, template: str) -> dict[str, list[str]]:
    """Heading -> its non-empty lines (bullets or "(none)")."""
    heads = set(template_for(template).headings())
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.split("\n"):
        if line in heads:
            cur = line
            out[cur] = []
        elif line.strip():
            assert cur is not None, f"text before the first heading: {line!r}"
            out[cur].append(line)
    return out


def items(text: str, template: str = "claude-code-9") -> list[str]:
    """The item texts of a summary (scaffolding removed)."""
    heads = set(template_for(template).headings())
    out = []
    for line in text.split("\n"):
        if not line.strip() or line in heads or line == NONE_TEXT:
            continue
        assert line.startswith(BULLET), f"line is neither heading, bullet nor (none): {line!r}"
        body = line[len(BULLET) :]
        if body.endswith(TRUNCATION_MARK):
            body = body[: -len(TRUNCATION_MARK)]
        out.append(body)
    return out


def collapse(text: str) -> str:
    return " ".join(text.split())


def assert_only_request_text(text: str, req: SummaryRequest) -> None:
    corpus = collapse(request_text(req))
    for it in items(text, req.template):
        assert collapse(it) in corpus, f"item not found in the request: {it!r}"


# =========================================================================== the summarizer


def test_summarizer_identity():
    p = get_summarizer("extractive")
    assert isinstance(p, ExtractiveSummarizer) and isinstance(p, Summarizer)
    assert p.name == "extractive" and p.stand_in is True


def test_template_shapes():
    assert template_for("opencode-template").headings() == (
        "## Objective",
        "## Important Details",
        "## Work State",
        "### Completed",
        "### Active",
        "### Blocked",
        "## Next Move",
        "## Relevant Files",
    )
    nine = [h for h in template_for("claude-code-9").headings()]
    assert nine == [
        f"## {i}. {name}"
        for i, name in enumerate(
            (
                "Primary Request and Intent",
                "Key Technical Concepts",
                "Files and Code Sections",
                "Errors and Fixes",
                "Problem Solving",
                "All User Messages",
                "Pending Tasks",
                "Current Work",
                "Optional Next Step",
            ),
            1,
        )
    ]
    for name in ("codex-handoff", "futureos-handoff"):
        heads = " ".join(template_for(name).headings()).lower()
        for part in (
            "progress and key decisions",
            "constraints",
            "user preferences",
            "next steps",
            "critical data and references",
        ):
            assert part in heads
    assert template_for("whatever") is GENERIC_TEMPLATE


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
@pytest.mark.parametrize("request_shape", REQUEST_SHAPES)
def test_every_section_present_in_order(request_shape, template):
    text = summarize(build(CONV, request_shape, template))
    heads = template_for(template).headings()
    positions = [text.index(h) for h in heads]
    assert positions == sorted(positions)
    for head, lines in sections(text, template).items():
        sec = next(s for s in template_for(template).sections if s.heading == head)
        if sec.source is None:
            assert lines == []  # a grouping heading carries no items
        else:
            assert lines == [NONE_TEXT] or all(ln.startswith(BULLET) for ln in lines)


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
def test_empty_sections_say_none(template):
    text = summarize(build([("user", "hello there, nothing else to say")], "prefix-shared", template))
    secs = sections(text, template)
    leaf = [s for s in template_for(template).sections if s.source is not None]
    assert all(secs[s.heading] for s in leaf)  # every section has a line
    for s in leaf:
        if s.source in ("files", "errors", "decisions", "completed", "state", "identifiers", "concepts"):
            assert secs[s.heading] == [NONE_TEXT], s.heading


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
def test_empty_template_is_all_none(template):
    text = empty_template(template)
    for head, lines in sections(text, template).items():
        sec = next(s for s in template_for(template).sections if s.heading == head)
        assert lines == ([] if sec.source is None else [NONE_TEXT])


@pytest.mark.parametrize("request_shape", REQUEST_SHAPES)
def test_extracts_each_category(request_shape):
    text = summarize(build(CONV, request_shape, "claude-code-9"))
    s = sections(text, "claude-code-9")
    joined = {k: "\n".join(v) for k, v in s.items()}
    assert "Please add retries to the payments client" in joined["## 1. Primary Request and Intent"]
    assert "Also keep p95 latency under 250 ms." in joined["## 1. Primary Request and Intent"]
    assert "- ORD-58213-QX" in s["## 2. Key Technical Concepts"]
    assert "- charge_with_retry" in s["## 2. Key Technical Concepts"]
    assert "- 250 ms" in s["## 2. Key Technical Concepts"]
    files = s["## 3. Files and Code Sections"]
    assert "- app/payments/client.py" in files and "- tests/test_payments.py" in files
    assert files[0] == "- app/payments/client.py"  # acted on by a tool and mentioned most
    assert "- migrations/versions/0042_init.py" in files
    errs = joined["## 4. Errors and Fixes"]
    assert "FAILED tests/test_payments.py::test_retry - AssertionError: expected 3 attempts" in errs
    assert "raise ValueError" not in errs  # a source line naming an error type is not an error
    probs = joined["## 5. Problem Solving"]
    assert "I chose exponential backoff because the upstream returns 503 under load." in probs
    users = s["## 6. All User Messages"]
    assert len(users) == 2 and users[1] == "- Also keep p95 latency under 250 ms."
    # the user spoke after the assistant's last message: that is the pending task and the next step
    assert s["## 7. Pending Tasks"][0] == "- Also keep p95 latency under 250 ms."
    assert s["## 9. Optional Next Step"] == ["- Also keep p95 latency under 250 ms."]
    assert "Next I will fix the loop" in joined["## 8. Current Work"]
    assert "zqxinstr" not in text and "INS-99999-ZZ" not in text and "instructions_only" not in text


def test_opencode_and_handoff_sections_filled():
    oc = sections(summarize(build(CONV, "dedicated", "opencode-template")), "opencode-template")
    assert "Please add retries" in oc["## Objective"][0]
    assert "- app/payments/client.py" in oc["## Relevant Files"]
    assert any("FAILED tests/test_payments.py::test_retry" in ln for ln in oc["### Blocked"])
    assert any("Next I will fix the loop" in ln for ln in oc["### Active"])
    assert "- ORD-58213-QX" in oc["## Important Details"]
    assert oc["## Next Move"][0] == "- Also keep p95 latency under 250 ms."
    for name in ("codex-handoff", "futureos-handoff"):
        h = sections(summarize(build(CONV, "history+instruction", name)), name)
        assert any("Please add retries" in ln for ln in h["## Context, constraints and user preferences"])
        assert any("I chose exponential backoff" in ln for ln in h["### Decisions"])
        assert "- ORD-58213-QX" in h["### Identifiers and values"]
        assert "- app/payments/client.py" in h["### Files"]
        assert h["## Remaining work and next steps"][0] == "- Also keep p95 latency under 250 ms."


def test_completed_sentences():
    conv = [
        ("user", "Rename the helper."),
        ("assistant", "Done: I renamed `old_helper` to `new_helper` and the tests pass."),
    ]
    oc = sections(summarize(build(conv, "dedicated", "opencode-template")), "opencode-template")
    assert oc["### Completed"] == ["- Done: I renamed `old_helper` to `new_helper` and the tests pass."]


def test_error_rules():
    conv = [
        ("user", "Check the build."),
        ("tool_call", '{"command": "make"}', "bash"),
        ("tool_result", "Found 0 errors in 3 files\nno failures\n    raise KeyError(name)\nall good"),
        ("tool_call", '{"command": "make test"}', "bash"),
        ("tool_error", "exit status 2\nsomething odd happened"),
        ("tool_call", '{"command": "cargo build"}', "bash"),
        ("tool_result", "\n".join(f"error[E0{i}]: mismatched types in src/m{i}.rs" for i in range(10, 16))),
    ]
    s = sections(summarize(build(conv, "dedicated", "claude-code-9")), "claude-code-9")
    errs = s["## 4. Errors and Fixes"]
    assert "- exit status 2" in errs  # a tool error with no error word: its first line
    cargo = [e for e in errs if "mismatched types" in e]
    assert len(cargo) == 3  # at most three lines per result: first two and the last
    assert {
        "- error[E010]: mismatched types in src/m10.rs",
        "- error[E011]: mismatched types in src/m11.rs",
        "- error[E015]: mismatched types in src/m15.rs",
    } == set(cargo)
    assert not any("0 errors" in e or "KeyError" in e for e in errs)


def test_placeholders_and_injected_context_are_skipped():
    conv = [
        ("injected", "# AGENTS.md\nAlways use tabs. Ticket AGT-11111-XX."),
        ("user", "<environment_context>cwd=/repo</environment_context>"),
        ("user", "Fix the flaky test in tests/test_flaky.py."),
        ("tool_call", '{"command": "pytest"}', "bash"),
        ("tool_result", "[Old tool result content cleared]"),
        ("tool_error", "[Old tool result content cleared]"),
    ]
    for request_shape in ("dedicated", "dedicated-unwrapped"):
        text = summarize(build(conv, request_shape, "claude-code-9"))
        s = sections(text, "claude-code-9")
        assert s["## 6. All User Messages"] == ["- Fix the flaky test in tests/test_flaky.py."]
        assert s["## 4. Errors and Fixes"] == [NONE_TEXT]
        assert "cleared" not in text and "AGENTS" not in text


def test_text_outside_the_conversation_tag_is_not_read():
    req = build(CONV, "dedicated", "claude-code-9")
    blocks = conversation(req)
    assert [b.role for b in blocks] == [
        "user",
        "assistant",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "assistant",
        "user",
    ]
    assert "zqxinstr" not in blocks[-1].text
    # without a tag every block is read, the instruction sticking to the last one
    unwrapped = conversation(build(CONV, "dedicated-unwrapped", "claude-code-9"))
    assert len(unwrapped) == 8


def test_the_instruction_message_is_not_read():
    req = build(CONV, "prefix-shared", "futureos-handoff")
    blocks = conversation(req)
    assert not any("zqxinstr" in b.text for b in blocks)
    assert sum(b.role == "tool_call" for b in blocks) == 2 and sum(b.role == "tool_result" for b in blocks) == 2


def test_call_shaped_paragraphs_count_as_tool_calls():
    conv = [
        ("user", "Look at the config."),
        ("assistant", 'Reading it now.\n\nread_file {"path": "conf/app_settings.toml"}'),
    ]
    req = build(conv, "history+instruction", "opencode-template")
    roles = [b.role for b in conversation(req)]
    assert roles == ["user", "assistant", "tool_call"]
    s = sections(summarize(req), "opencode-template")
    assert s["## Relevant Files"] == ["- conf/app_settings.toml"]


def test_list_parts_content_and_urls_are_not_files():
    req = SummaryRequest(
        "t",
        "history+instruction",
        "s",
        (),
        (
            {
                "role": "user",
                "content": [{"type": "text", "text": "Call http://localhost:8000/v1/orders and s3://bkt/key.json"}],
            },
            {"role": "user", "content": "go"},
        ),
        "claude-code-9",
        500,
    )
    s = sections(summarize(req), "claude-code-9")
    assert s["## 3. Files and Code Sections"] == [NONE_TEXT]
    assert "- http://localhost:8000/v1/orders" in s["## 2. Key Technical Concepts"]


# =========================================================================== the cap


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
@pytest.mark.parametrize("cap", [0, 1, 3, 10, 30, 60, 120, 250, 500, 1000, 4000])
def test_never_exceeds_the_cap(template, cap):
    big = CONV * 6 + [("user", "word " * 3000), ("tool_result", "Error: " + "x" * 5000)]
    req = build(big, "dedicated", template, cap=cap)
    text = summarize(req)
    assert COUNT(text) <= cap
    if cap == 0:
        assert text == ""
    if COUNT(empty_template(template)) <= cap:
        for h in template_for(template).headings():
            assert h in text  # sections are never cut, items are
    assert_only_request_text(text, req)


def test_headings_that_fit_when_the_cap_is_tiny():
    cap = COUNT("## 1. Primary Request and Intent\n(none)") + 1
    text = summarize(build(CONV, "dedicated", "claude-code-9", cap=cap))
    assert text.startswith("## 1. Primary Request and Intent") and COUNT(text) <= cap


def test_items_are_truncated_not_sections():
    long = "Please migrate " + " ".join(f"module_{i}" for i in range(600)) + " to the new API."
    req = build([("user", long), ("user", "Second request.")], "prefix-shared", "claude-code-9", cap=4000)
    s = sections(summarize(req), "claude-code-9")
    first = s["## 6. All User Messages"][0]
    assert first.endswith(TRUNCATION_MARK)
    body = first[len(BULLET) : -len(TRUNCATION_MARK)]
    assert long.startswith(body) and COUNT(body) <= 100  # the section's per-item cap
    assert s["## 6. All User Messages"][1] == "- Second request."


def test_round_robin_serves_every_section_before_seconds():
    conv = [("user", f"Request number {i} about the cache layer.") for i in range(40)]
    conv += [
        ("tool_call", '{"path": "lib/cache/store.py"}', "read_file"),
        ("tool_result", "Traceback (most recent call last):\nKeyError: 'k'"),
        ("assistant", "I decided to keep the LRU cache because hits repeat."),
    ]
    req = build(conv, "dedicated", "claude-code-9", cap=COUNT(empty_template("claude-code-9")) + 120)
    s = sections(summarize(req), "claude-code-9")
    assert s["## 3. Files and Code Sections"] == ["- lib/cache/store.py"]
    assert s["## 4. Errors and Fixes"] != [NONE_TEXT]
    assert len(s["## 6. All User Messages"]) < 40


def test_deterministic():
    for request_shape in REQUEST_SHAPES:
        req = build(CONV * 3, request_shape, "opencode-template", cap=300)
        texts = {ExtractiveSummarizer().summarize(req).text for _ in range(3)}
        assert len(texts) == 1


def test_usage_is_sizes_not_a_bill():
    req = build(CONV, "prefix-shared", "codex-handoff")
    res = ExtractiveSummarizer().summarize(req)
    pieces = [req.system, json.dumps([dict(t) for t in req.tools], sort_keys=True, ensure_ascii=False, indent=1)]
    for m in req.messages:
        pieces.append(m.get("content") or "")
        pieces += [c["function"]["arguments"] for c in m.get("tool_calls") or ()]
    assert res.input_tokens == sum(counter().count_many(pieces))
    assert res.output_tokens == COUNT(res.text) and res.cached_tokens == 0


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
@pytest.mark.parametrize("request_shape", REQUEST_SHAPES)
def test_only_request_text(request_shape, template):
    req = build(CONV * 2, request_shape, template, cap=2000)
    text = summarize(req)
    assert items(text, template)  # there is something to check
    assert_only_request_text(text, req)


# =========================================================================== properties

WORDS = [
    "alpha",
    "ORD-12345-AB",
    "app/core/x.py",
    "FAILED",
    "Error: boom",
    "`flag_a1`",
    "I chose",
    "because",
    "12.5 ms",
    "deadbeef42",
    "next",
    "\n",
    "[User]: fake",
    "<tag>",
    "naïve",
    "日本語",
    "…",
    "  ",
    "will",
]


@st.composite
def conversations(draw):
    n = draw(st.integers(0, 14))
    conv = []
    for _ in range(n):
        kind = draw(
            st.sampled_from(["user", "assistant", "reasoning", "tool_call", "tool_result", "tool_error", "injected"])
        )
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=40)))
        if kind == "tool_call":
            conv.append((kind, json.dumps({"command": text}), "bash"))
        else:
            conv.append((kind, text))
    return conv


@settings(max_examples=50, derandomize=True, deadline=None)
@given(
    conv=conversations(),
    request_shape=st.sampled_from(REQUEST_SHAPES),
    template=st.sampled_from(TEMPLATE_NAMES),
    cap=st.integers(0, 700),
)
def test_properties_on_random_requests(conv, request_shape, template, cap):
    req = build(conv, request_shape, template, cap=cap)
    a, b = ExtractiveSummarizer().summarize(req), ExtractiveSummarizer().summarize(req)
    assert a == b
    assert COUNT(a.text) <= cap
    assert_only_request_text(a.text, req)


# =========================================================================== real and synthetic sessions


def _session_requests(session, template: str, cap: int) -> list[SummaryRequest]:
    recs = [r for r in session.records if r.kind not in ("meta", "system")]
    msgs: list[dict] = []
    for r in recs:
        role = role_of(r)
        if msgs and msgs[-1]["role"] == role and role != "tool":
            msgs[-1]["content"] += "\n\n" + r.text
        else:
            msgs.append({"role": role, "content": r.text})
    msgs.append({"role": "user", "content": INSTRUCTION})
    prefix = SummaryRequest("t", "prefix-shared", "sys", TOOLS, tuple(msgs), template, cap)
    transcript = "\n\n".join(f"[{r.kind}]: {r.text}" for r in recs)  # a dedicated request's whole transcript
    dedicated = SummaryRequest(
        "t",
        "dedicated",
        "sum",
        (),
        ({"role": "user", "content": f"<conversation>\n{transcript}\n</conversation>\n\n{INSTRUCTION}"},),
        template,
        cap,
    )
    return [prefix, dedicated]


def _real_sessions():
    return list(load_sessions(PUBLIC_FIXTURES))


@pytest.mark.slow
@pytest.mark.parametrize("template", ["futureos-handoff", "opencode-template", "claude-code-9"])
def test_real_fixture_sessions(template):
    sessions = _real_sessions()
    assert sessions
    for s in sessions:
        for cap in (200, 4096):
            for req in _session_requests(s, template, cap):
                text = summarize(req)
                assert 0 < COUNT(text) <= cap
                assert_only_request_text(text, req)


def test_synthetic_chain_fast_and_sane():
    s = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=128_000))[0].session
    for req in _session_requests(s, "futureos-handoff", 4096):
        res = ExtractiveSummarizer().summarize(req)  # how fast: `make bench BENCH=strategies`
        assert 1000 < res.output_tokens <= 4096
        assert res.input_tokens > 100_000
        assert_only_request_text(res.text, req)


def test_a_prior_summary_after_the_conversation_is_read_first():
    """OpenCode's dedicated request carries an earlier compaction's summary after the conversation as
    <prior-summary> (issue 13 item 2); the stand-in read only the <conversation> block and lost it."""
    text = (
        "<conversation>\n[User]: add retries to billing/client.py\n</conversation>\n\n"
        "<prior-summary>\nDecided: keep ORD-58213 in the export.\n</prior-summary>\n\nSummarise."
    )
    req = SummaryRequest(
        "opencode", "dedicated", "sum", (), ({"role": "user", "content": text},), "opencode-template", 800
    )
    blocks = conversation(req)
    assert [b.role for b in blocks] == ["summary", "user"] and [b.pos for b in blocks] == [0, 1]
    assert "ORD-58213" in blocks[0].text and "prior-summary" not in blocks[1].text
